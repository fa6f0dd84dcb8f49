"""Steps to solve CartPole-v1 and Pendulum-v1 with each objective, over several seeds, against SB3's PPO.

Each run uses rl-zoo3's tuned hyperparameters (the same as tests/test_learning.py), evaluates 10 deterministic
episodes every 5k steps and stops at the threshold (CartPole 475, Pendulum -250) or at the zoo budget (100k).
Prints a Markdown table: per variant, how many seeds solved the task, the median steps to solve, and the best
evaluation means.

    python benchmarks/bench_learning.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch as th
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env

from sb3_ppo_ext import PPO

#: Task -> (envs, step budget, the score that counts as solved, rl-zoo3's PPO settings).
ZOO: dict[str, tuple[int, int, float, dict[str, Any]]] = {
    "CartPole-v1": (
        8,
        100_000,
        475.0,
        dict(
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            learning_rate=lambda p: p * 1e-3,
            clip_range=lambda p: p * 0.2,
        ),
    ),
    "Pendulum-v1": (
        4,
        100_000,
        -250.0,
        dict(
            n_steps=1024,
            gae_lambda=0.95,
            gamma=0.9,
            n_epochs=10,
            learning_rate=1e-3,
            clip_range=0.2,
            use_sde=True,
            sde_sample_freq=4,
        ),
    ),
}
#: Variant -> (algorithm class, its extra settings).
VARIANTS: dict[str, tuple[type, dict[str, Any]]] = {
    "SB3 PPO": (SB3PPO, {}),
    "ours, clip": (PPO, {"objective": "clip"}),
    "ours, kl_penalty": (PPO, {"objective": "kl_penalty"}),
    "ours, clip_kl_penalty": (PPO, {"objective": "clip_kl_penalty"}),
    "ours, clip + adaptive lr": (PPO, {"lr_kl_target": 0.01}),
}


def run(algorithm: type, env_id: str, seed: int, extra: dict[str, Any]) -> tuple[float, int, bool]:
    """Train one variant on one task and seed until it is solved or the budget ends.

    :returns: the best evaluation mean, the steps taken, whether it reached the task's score.
    """
    n_envs, budget, threshold, kwargs = ZOO[env_id]
    model = algorithm("MlpPolicy", make_vec_env(env_id, n_envs=n_envs, seed=seed), seed=seed, **kwargs, **extra)
    evaluation = EvalCallback(
        make_vec_env(env_id, n_envs=1, seed=seed + 1000),
        n_eval_episodes=10,
        eval_freq=5000 // n_envs,
        verbose=0,
        callback_on_new_best=StopTrainingOnRewardThreshold(threshold, verbose=0),
    )
    model.learn(budget, callback=evaluation)
    return evaluation.best_mean_reward, model.num_timesteps, evaluation.best_mean_reward >= threshold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--envs", nargs="+", default=list(ZOO))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args = parser.parse_args()
    th.set_num_threads(1)
    print("| task | variant | solved | median steps to solve | best eval means |")
    print("|---|---|---|---|---|")
    for env_id in args.envs:
        for name in args.variants:
            algorithm, extra = VARIANTS[name]
            results = [run(algorithm, env_id, seed, extra) for seed in args.seeds]
            solved = [steps for _, steps, ok in results if ok]
            median = f"{statistics.median(solved) / 1000:.0f}k" if solved else "-"
            means = ", ".join(f"{best:.0f}" for best, _, _ in results)
            print(f"| {env_id} | {name} | {len(solved)}/{len(results)} | {median} | {means} |", flush=True)


if __name__ == "__main__":
    main()

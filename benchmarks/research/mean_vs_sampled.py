"""One checkpoint of a run played twice on the same env seeds: with the policy's mean action (what ``enjoy``, the
periodic evaluations and packing play) and with actions sampled from its Gaussian (what training collects). Where the
first falls far more often, the deterministic policy is one the updates never tried.

    python benchmarks/research/mean_vs_sampled.py \\
        ~/runs/walker_final/sb3_ppo_ext-Walker2D-v0/kl_t002/seed_9/ppo_ext/sb3_ppo_ext-Walker2D-v0_1 \\
        --steps 1204224 --env sb3_ppo_ext/Walker2D-v0 --episodes 10 --env-seed 10000

The checkpoint is a ``--save-freq`` pair (``rl_model_<steps>_steps.zip`` and the plain-data statistics
``rl_model_vecnormalize_<steps>_steps.npz``), loaded without unpickling. Episode ``i`` starts from env seed
``env_seed + i`` in both modes; a fall is an episode that ends before the env's step limit.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import sb3_ppo_ext.envs  # noqa: F401  (registers the bundled tasks)
from sb3_ppo_ext.pretrained.playing import play
from sb3_ppo_ext.safe_loading import load_vecnormalize_without_pickles, load_without_pickles


def play_from_seeds(
    model: Any, env: VecNormalize, episodes: int, env_seed: int, *, deterministic: bool
) -> tuple[list[float], int]:
    """Play episode ``i`` from env seed ``env_seed + i`` (:func:`sb3_ppo_ext.pretrained.playing.play`, one episode
    each); returns the unnormalised return of each episode and the number of falls (episodes ended before the time
    limit)."""
    played = []
    for episode in range(episodes):
        env.seed(env_seed + episode)
        played += play(model, env, 1 << 62, deterministic=deterministic, n_episodes=1)
    return [episode["return"] for episode in played], sum(not episode["truncated"] for episode in played)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_folder", help="the run folder holding the --save-freq checkpoints")
    parser.add_argument("--steps", type=int, required=True, help="the checkpoint's step count")
    parser.add_argument("--env", default="sb3_ppo_ext/Walker2D-v0", help="the task the run trained on")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--env-seed", type=int, default=10000)
    args = parser.parse_args(argv)
    th.set_num_threads(1)
    stem = os.path.join(args.run_folder, f"rl_model_{{}}{args.steps}_steps")
    env = load_vecnormalize_without_pickles(stem.format("vecnormalize_") + ".npz", DummyVecEnv([lambda: gym.make(args.env)]))
    env.training, env.norm_reward = False, False
    model = load_without_pickles(stem.format("") + ".zip", env, device="cpu")
    for deterministic in (True, False):
        returns, falls = play_from_seeds(model, env, args.episodes, args.env_seed, deterministic=deterministic)
        mode = "mean action" if deterministic else "sampled actions"
        print(
            f"{args.steps} steps, {mode}: {np.mean(returns):.0f} +- {np.std(returns):.0f} over {args.episodes} "
            f"episodes from env seed {args.env_seed}, falls {falls}"
        )


if __name__ == "__main__":
    main()

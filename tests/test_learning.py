"""Learning: every objective solves CartPole-v1 and Pendulum-v1 within the zoo budgets; ours matches SB3's PPO."""

from typing import Any

import numpy as np
import pytest
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_ppo_ext import PPO

# rl-zoo3's tuned PPO settings (hyperparams/ppo.yml): env id -> (n_envs, n_timesteps, constructor kwargs)
ZOO: dict[str, tuple[int, int, dict[str, Any]]] = {
    "CartPole-v1": (
        8,
        100_000,
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
THRESHOLDS = {"CartPole-v1": 475.0, "Pendulum-v1": -250.0}


def train_until_solved(algorithm, env_id: str, seed: int, **extra) -> tuple[float, int]:
    """Train with the zoo budget, evaluating 10 deterministic episodes every 5k steps; stop once the threshold is met.

    :return: the best evaluation mean (10 deterministic episodes) and the steps used.
    """
    n_envs, budget, kwargs = ZOO[env_id]
    model = algorithm("MlpPolicy", make_vec_env(env_id, n_envs=n_envs, seed=seed), seed=seed, **kwargs, **extra)
    stop = StopTrainingOnRewardThreshold(THRESHOLDS[env_id], verbose=0)
    evaluation = EvalCallback(
        make_vec_env(env_id, n_envs=1, seed=seed + 1000),
        n_eval_episodes=10,
        eval_freq=5000 // n_envs,
        callback_on_new_best=stop,
        verbose=0,
    )
    model.learn(budget, callback=evaluation)
    return evaluation.best_mean_reward, model.num_timesteps


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("objective", ["clip", "kl_penalty", "clip_kl_penalty"])
def test_each_objective_solves_the_task_within_the_zoo_budget(env_id, objective):
    best, steps = train_until_solved(PPO, env_id, seed=0, objective=objective)
    assert best >= THRESHOLDS[env_id], f"{objective} on {env_id}: best mean {best:.1f} after {steps} steps"


@pytest.mark.slow
def test_kl_adaptive_learning_rate_solves_cartpole():
    best, steps = train_until_solved(PPO, "CartPole-v1", seed=0, lr_kl_target=0.01)
    assert best >= THRESHOLDS["CartPole-v1"], f"best mean {best:.1f} after {steps} steps"


@pytest.mark.slow
def test_same_returns_as_sb3_ppo_over_seeds():
    """Penalty off, same settings: final returns after a fixed budget are statistically indistinguishable."""
    scipy_stats = pytest.importorskip("scipy.stats")
    n_envs, _, kwargs = ZOO["CartPole-v1"]
    returns = {}
    for name, algorithm in (("ours", PPO), ("sb3", SB3PPO)):
        returns[name] = []
        for seed in range(5):
            model = algorithm("MlpPolicy", make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed), seed=seed, **kwargs)
            model.learn(12_000)
            mean, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=100 + seed), n_eval_episodes=10)
            returns[name].append(mean)
    ours, sb3 = np.array(returns["ours"]), np.array(returns["sb3"])
    test = scipy_stats.ttest_ind(ours, sb3, equal_var=False)
    assert test.pvalue > 0.01, f"ours {ours} vs SB3 {sb3}: Welch p = {test.pvalue:.4f}"
    assert abs(ours.mean() - sb3.mean()) < 150, f"ours {ours.mean():.0f} vs SB3 {sb3.mean():.0f}"

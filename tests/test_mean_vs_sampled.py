"""benchmarks/research/mean_vs_sampled.py: one checkpoint played with its mean action and with sampled actions."""

import gymnasium as gym
import mean_vs_sampled
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.safe_loading import save_vecnormalize_statistics


def test_a_checkpoint_is_played_both_ways_on_the_same_env_seeds(tmp_path, capsys):
    env = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu")
    model.save(tmp_path / "rl_model_32_steps.zip")
    save_vecnormalize_statistics(env, str(tmp_path / "rl_model_vecnormalize_32_steps.npz"))

    mean_vs_sampled.main([str(tmp_path), "--steps", "32", "--env", "Pendulum-v1", "--episodes", "2", "--env-seed", "5"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["32 steps, mean action", "32 steps, sampled actions"]
    # Pendulum never ends before its 200-step limit: no fall either way.
    assert all(line.endswith("falls 0") for line in lines)


def test_the_mean_action_replays_exactly_and_sampling_differs(tmp_path):
    env = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), training=False, norm_reward=False)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu")
    first, falls = mean_vs_sampled.play_from_seeds(model, env, 2, 5, deterministic=True)
    again, _ = mean_vs_sampled.play_from_seeds(model, env, 2, 5, deterministic=True)
    sampled, _ = mean_vs_sampled.play_from_seeds(model, env, 2, 5, deterministic=False)
    assert first == again and falls == 0
    assert not np.allclose(first, sampled)

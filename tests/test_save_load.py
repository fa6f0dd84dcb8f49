"""Saved models cross both ways between SB3's PPO and ours; the adaptive state survives save/load and resumes."""

import numpy as np
import pytest
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.env_util import make_vec_env

from sb3_ppo_ext import PPO

TINY = dict(net_arch=[16])


def _observations(env_id: str, n: int = 20) -> np.ndarray:
    env = make_vec_env(env_id, n_envs=1, seed=5)
    env.observation_space.seed(5)
    return np.stack([env.observation_space.sample() for _ in range(n)])


@pytest.mark.parametrize("env_id, kwargs", [("CartPole-v1", {}), ("Pendulum-v1", {}), ("Pendulum-v1", {"use_sde": True})])
def test_sb3_zip_loads_into_ours_and_trains_on(tmp_path, env_id, kwargs):
    theirs = SB3PPO("MlpPolicy", env_id, n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=TINY, seed=0, **kwargs)
    theirs.learn(64)
    theirs.save(tmp_path / "sb3")
    ours = PPO.load(tmp_path / "sb3", env=make_vec_env(env_id, n_envs=1, seed=0))
    assert type(ours) is PPO and ours.objective == "clip" and ours.kl_coef == ours.kl_penalty.coef == 1.0
    obs = _observations(env_id)
    np.testing.assert_allclose(ours.predict(obs, deterministic=True)[0], theirs.predict(obs, deterministic=True)[0], atol=1e-6)
    ours.learn(128, reset_num_timesteps=False)
    assert ours.num_timesteps == 64 + 128


@pytest.mark.parametrize("env_id, kwargs", [("CartPole-v1", {}), ("Pendulum-v1", {"use_sde": True})])
def test_our_zip_loads_into_sb3_and_predicts_the_same(tmp_path, env_id, kwargs):
    ours = PPO(
        "MlpPolicy",
        env_id,
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        objective="clip_kl_penalty",
        lr_kl_target=0.01,
        policy_kwargs=TINY,
        seed=0,
        **kwargs,
    )
    ours.learn(128)
    ours.save(tmp_path / "ours")
    theirs = SB3PPO.load(tmp_path / "ours")
    obs = _observations(env_id)
    np.testing.assert_allclose(theirs.predict(obs, deterministic=True)[0], ours.predict(obs, deterministic=True)[0], atol=1e-6)
    theirs.set_env(make_vec_env(env_id, n_envs=1))
    theirs.learn(64)  # and SB3 can train it on


def test_adaptive_state_survives_save_load_and_continued_training(tmp_path):
    model = PPO(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64,
        batch_size=32,
        n_epochs=3,
        learning_rate=1e-3,
        objective="kl_penalty",
        kl_penalty_target=1e-9,
        lr_kl_target=1e-9,
        policy_kwargs=TINY,
        seed=0,
    )
    model.learn(128)
    kl_coef, learning_rate = model.kl_penalty.coef, model.adaptive_lr.learning_rate
    assert kl_coef != 1.0 and learning_rate != 1e-3
    model.save(tmp_path / "adaptive")

    loaded = PPO.load(tmp_path / "adaptive", env=make_vec_env("Pendulum-v1", n_envs=1))
    assert loaded.kl_penalty.coef == kl_coef
    assert loaded.kl_coef == model.kl_coef == 1.0  # the setting as given
    assert loaded.adaptive_lr.learning_rate == loaded.adaptive_learning_rate == learning_rate
    assert not hasattr(loaded, "adaptive_state")
    assert loaded.kl_estimator == "analytic"
    assert loaded.num_timesteps == 128
    assert loaded.policy.optimizer.param_groups[0]["lr"] == pytest.approx(learning_rate)

    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.num_timesteps == 192
    # It continued from the saved state: one more update doubles beta again and lowers the lr further.
    assert loaded.kl_penalty.coef == pytest.approx(min(kl_coef * 2.0, loaded.kl_coef_max))
    assert loaded.adaptive_lr.learning_rate < learning_rate

    model.learn(64, reset_num_timesteps=False)  # the same in-process, without a save in between
    assert model.kl_penalty.coef == pytest.approx(loaded.kl_penalty.coef)
    assert model.num_timesteps == 192


def test_parameters_and_settings_round_trip(tmp_path):
    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=64,
        batch_size=32,
        objective="kl_penalty",
        kl_coef=0.3,
        kl_penalty_target=None,
        lr_kl_target=0.02,
        lr_kl_cadence="epoch",
        policy_kwargs=TINY,
        seed=0,
    )
    model.save(tmp_path / "settings")
    loaded = PPO.load(tmp_path / "settings")
    for name in ("objective", "kl_coef", "kl_penalty_target", "lr_kl_target", "lr_kl_cadence", "n_steps", "batch_size"):
        assert getattr(loaded, name) == getattr(model, name)
    for key, value in model.policy.state_dict().items():
        np.testing.assert_array_equal(loaded.policy.state_dict()[key].numpy(), value.numpy())

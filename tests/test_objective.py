"""The PPO objective and its minibatch loss: one update of the clipped objective equals SB3's, the loss terms logged as
means over the update (the penalty is beta times the mean KL), the penalty objective unclipped, and SB3's ``target_kl``
early stop. The KL estimators are tested in ``test_kl.py``, the adaptive rules (beta, the learning rate) in
``test_adaptive.py``, and whole runs against SB3's in ``test_parity.py``."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.logger import configure

from sb3_ppo_ext import PPO

TINY = dict(net_arch=[16])


def test_update_is_identical_to_sb3_ppo():
    """Same weights, optimizer state, rollout and numpy seed: one update of ours equals one of SB3's PPO (several
    minibatches and epochs, gSDE, value clipping). Both shuffle with numpy's global generator."""
    import copy

    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.env_util import make_vec_env

    kwargs = dict(
        n_steps=64,
        batch_size=64,
        n_epochs=3,
        use_sde=True,
        sde_sample_freq=4,
        clip_range=0.3,
        clip_range_vf=0.5,
        policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=th.nn.ReLU, net_arch=[32, 32]),
    )
    theirs = SB3PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=4, seed=0), seed=0, **kwargs).learn(256)
    ours = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=4, seed=0), seed=0, **kwargs)
    ours.set_logger(theirs.logger)
    ours.policy.load_state_dict(theirs.policy.state_dict())
    ours.policy.optimizer.load_state_dict(copy.deepcopy(theirs.policy.optimizer.state_dict()))  # load shares tensors
    for name in ("observations", "actions", "rewards", "returns", "episode_starts", "values", "log_probs", "advantages"):
        setattr(ours.rollout_buffer, name, getattr(theirs.rollout_buffer, name).copy())
    ours.rollout_buffer.generator_ready = theirs.rollout_buffer.generator_ready
    ours._current_progress_remaining = theirs._current_progress_remaining
    before = copy.deepcopy(theirs.policy.state_dict())
    np.random.seed(7)
    theirs.train()
    np.random.seed(7)
    ours.train()
    for name, value in theirs.policy.state_dict().items():
        moved = (value - before[name]).abs().max().item()
        assert moved > 0
        assert (value - ours.policy.state_dict()[name]).abs().max().item() <= 1e-3 * moved + 1e-8, name


def test_logged_keys_and_means(tmp_path):
    model = PPO(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64,
        batch_size=16,
        n_epochs=3,
        objective="clip_kl_penalty",
        lr_kl_target=0.01,
        policy_kwargs=TINY,
        seed=0,
    )
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(128)
    logged = model.logger.name_to_value
    expected = {
        "train/entropy_loss",
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/approx_kl",
        "train/clip_fraction",
        "train/loss",
        "train/explained_variance",
        "train/n_updates",
        "train/clip_range",
        "train/learning_rate",
        "train/std",
        "train/kl",
        "train/kl_coef",
        "train/kl_penalty_loss",
    }
    assert expected <= set(logged)
    # Means over the whole update: the penalty is beta (of this update) times the mean KL over its minibatches.
    assert logged["train/kl_penalty_loss"] == pytest.approx(logged["train/kl_coef"] * logged["train/kl"], rel=1e-5)
    header = (tmp_path / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"train/kl", "train/kl_coef", "train/kl_penalty_loss", "train/approx_kl"} <= set(header)


def test_penalty_without_clipping_ignores_clip_range():
    """With objective='kl_penalty' the surrogate is unclipped: a zero clip range must not freeze learning."""
    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=128,
        batch_size=64,
        n_epochs=4,
        objective="kl_penalty",
        clip_range=1e-9,
        kl_coef=0.01,
        kl_penalty_target=None,
        policy_kwargs=TINY,
        seed=0,
    )
    before = th.nn.utils.parameters_to_vector(model.policy.action_net.parameters()).clone()
    model.learn(128)
    after = th.nn.utils.parameters_to_vector(model.policy.action_net.parameters())
    assert not th.allclose(before, after)
    assert model.kl_penalty.coef == model.kl_coef == 0.01  # fixed beta


def test_target_kl_stops_epochs_like_sb3():
    from stable_baselines3 import PPO as SB3PPO

    kwargs = dict(n_steps=128, batch_size=32, n_epochs=10, target_kl=1e-9, policy_kwargs=TINY, seed=0)
    ours = PPO("MlpPolicy", "CartPole-v1", **kwargs).learn(256)
    theirs = SB3PPO("MlpPolicy", "CartPole-v1", **kwargs).learn(256)
    # The first minibatch has KL 0, the second exceeds 1.5 * target: both stop in epoch 0 of each update.
    assert ours._n_updates == theirs._n_updates == 2

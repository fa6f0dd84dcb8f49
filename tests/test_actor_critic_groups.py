"""Separate actor and critic learning rates and gradient clips (``vf_learning_rate``, ``vf_max_grad_norm``)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, MlpExtractor

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo import actor_critic_groups
from sb3_ppo_ext.ppo.optim import ClippedStep, fused_kernel_devices
from sb3_ppo_ext.zoo.config.blocks import preprocess_block


def _one_step_model(**kwargs) -> PPO:
    """One Adam step per train(): the whole 64-sample rollout is one minibatch, one epoch."""
    settings: dict[str, Any] = dict(n_steps=64, batch_size=64, n_epochs=1, learning_rate=1e-3, seed=0, device="cpu")
    settings.update(kwargs)
    return PPO("MlpPolicy", "Pendulum-v1", **settings)


def _named(policy) -> dict[str, th.Tensor]:
    return {name: parameter.detach().clone() for name, parameter in policy.named_parameters()}


def _critic_names(policy) -> set[str]:
    critic = {id(parameter) for parameter in actor_critic_groups.critic_parameters(policy)}
    return {name for name, parameter in policy.named_parameters() if id(parameter) in critic}


class _LinearExtractor(BaseFeaturesExtractor):
    def __init__(self, observation_space, features_dim: int = 4):
        super().__init__(observation_space, features_dim)
        self.linear = th.nn.Linear(observation_space.shape[0], features_dim)

    def forward(self, observations):
        return self.linear(observations)


def test_the_critic_is_the_value_head_and_value_branch():
    model = _one_step_model(vf_learning_rate=3e-3)
    assert _critic_names(model.policy) == {
        "mlp_extractor.value_net.0.weight",
        "mlp_extractor.value_net.0.bias",
        "mlp_extractor.value_net.2.weight",
        "mlp_extractor.value_net.2.bias",
        "value_net.weight",
        "value_net.bias",
    }
    shared = _one_step_model(vf_learning_rate=3e-3, policy_kwargs={"features_extractor_class": _LinearExtractor})
    assert not any("features_extractor" in name for name in _critic_names(shared.policy))  # the actor's
    unshared = _one_step_model(
        vf_learning_rate=3e-3,
        policy_kwargs={"features_extractor_class": _LinearExtractor, "share_features_extractor": False},
    )
    extractors = {name for name in _critic_names(unshared.policy) if "features_extractor" in name}
    assert extractors == {"vf_features_extractor.linear.weight", "vf_features_extractor.linear.bias"}


def test_each_group_takes_a_hand_computed_adam_step_at_its_own_rate():
    model = _one_step_model(vf_learning_rate=3e-3, max_grad_norm=1e9)
    before = _named(model.policy)
    model.learn(64)  # one rollout, one update of one minibatch
    critic = _critic_names(model.policy)
    eps = model.policy.optimizer.param_groups[0]["eps"]  # SB3 sets 1e-5 for Adam
    checked = 0
    for name, parameter in model.policy.named_parameters():
        lr = 3e-3 if name in critic else 1e-3
        # Adam's first step (bias-corrected moments m = g, v = g^2): lr * g / (|g| + eps).
        expected = before[name] - lr * parameter.grad / (parameter.grad.abs() + eps)
        assert th.allclose(parameter.detach(), expected, rtol=0, atol=1e-7), name
        checked += 1
    assert checked == len(before)
    assert [group["lr"] for group in model.policy.optimizer.param_groups] == [1e-3, 3e-3]


@pytest.mark.parametrize("vf_max_grad_norm", [None, 1e9])
def test_the_clip_applies_per_group(vf_max_grad_norm):
    model = _one_step_model(vf_learning_rate=1e-3, max_grad_norm=1e-3, vf_max_grad_norm=vf_max_grad_norm)
    model.learn(64)
    critic = _critic_names(model.policy)
    grads = {name: parameter.grad for name, parameter in model.policy.named_parameters()}
    actor_norm = th.linalg.vector_norm(th.stack([g.norm() for n, g in grads.items() if n not in critic]))
    critic_norm = th.linalg.vector_norm(th.stack([g.norm() for n, g in grads.items() if n in critic]))
    total_norm = th.linalg.vector_norm(th.stack([actor_norm, critic_norm]))
    if vf_max_grad_norm is None:  # one clip over all gradients, as SB3
        assert total_norm.item() == pytest.approx(1e-3, rel=1e-4)
    else:  # the actor's clipped to max_grad_norm, the critic's left alone by its own, huge, limit
        assert actor_norm.item() == pytest.approx(1e-3, rel=1e-4)
        assert critic_norm.item() > 1e-2


@pytest.mark.skipif("cpu" not in fused_kernel_devices(), reason="no fused Adam kernel for the CPU in this torch")
def test_clipped_step_clip_groups_equal_one_clip_grad_norm_per_group_exactly():
    th.manual_seed(0)
    reference = th.nn.Sequential(th.nn.Linear(4, 8), th.nn.Tanh(), th.nn.Linear(8, 2))
    ours = copy.deepcopy(reference)
    parameters = list(ours.parameters())
    reference_optimizer = th.optim.Adam(reference.parameters(), lr=1e-2, fused=True)
    step = ClippedStep(th.optim.Adam(parameters, lr=1e-2, fused=True), parameters, 0.5, clip_groups=[(2, 0.05), (2, 3.0)])
    for seed in range(4):  # the first step goes through torch, the next ones through the direct path
        inputs = th.randn(16, 4, generator=th.Generator().manual_seed(seed)) * 3
        for network in (reference, ours):
            for parameter in network.parameters():
                parameter.grad = None
            network(inputs).pow(2).sum().backward()
        reference_parameters = list(reference.parameters())
        th.nn.utils.clip_grad_norm_(reference_parameters[:2], 0.05)
        th.nn.utils.clip_grad_norm_(reference_parameters[2:], 3.0)
        reference_optimizer.step()
        step.step()
        for expected, actual in zip(reference.parameters(), ours.parameters(), strict=True):
            assert th.equal(expected, actual)
    assert step._groups is not None
    with pytest.raises(ValueError, match="must cover the 4 parameters"):
        ClippedStep(th.optim.Adam(parameters), parameters, 0.5, clip_groups=[(1, 0.5)])


def test_the_kl_adaptive_rate_adapts_the_actor_only():
    model = _one_step_model(vf_learning_rate=3e-3, lr_kl_target=1e-6, batch_size=16, n_epochs=4)
    model.learn(128)
    actor_group, critic_group = model.policy.optimizer.param_groups
    assert actor_group["lr"] == model.adaptive_learning_rate < 1e-3  # the tiny KL target cut it
    assert critic_group["lr"] == 3e-3


def test_schedules_follow_progress_across_learn_calls():
    model = _one_step_model(vf_learning_rate=lambda progress: 3e-3 * progress, learning_rate=lambda progress: 1e-3)
    model.learn(128)
    model.learn(128, reset_num_timesteps=False)
    progress = model._current_progress_remaining  # set before the last update
    assert model.policy.optimizer.param_groups[1]["lr"] == pytest.approx(3e-3 * progress)
    assert model.policy.optimizer.param_groups[0]["lr"] == 1e-3
    assert model.num_timesteps == 256


def test_save_load_keeps_both_groups_and_sb3_loads_the_same_policy(tmp_path):
    model = _one_step_model(vf_learning_rate=3e-3, vf_max_grad_norm=2.0, batch_size=32)
    model.learn(128)
    model.save(tmp_path / "model.zip")

    loaded = PPO.load(tmp_path / "model.zip", device="cpu")
    assert (loaded.vf_max_grad_norm, [g["lr"] for g in loaded.policy.optimizer.param_groups]) == (2.0, [1e-3, 3e-3])
    saved_state = model.policy.optimizer.state_dict()["state"]
    loaded_state = loaded.policy.optimizer.state_dict()["state"]
    assert saved_state.keys() == loaded_state.keys()
    for key in saved_state:
        for name in saved_state[key]:
            assert th.equal(saved_state[key][name], loaded_state[key][name])

    # SB3's PPO (one parameter group) loads it: same actions, every Adam moment on its own parameter.
    sb3 = SB3PPO.load(tmp_path / "model.zip", device="cpu")
    observations = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    expected = model.predict(observations, deterministic=True)[0]
    np.testing.assert_array_equal(sb3.predict(observations, deterministic=True)[0], expected)
    ours_by_name = {name: model.policy.optimizer.state[p] for name, p in model.policy.named_parameters()}
    for name, parameter in sb3.policy.named_parameters():
        assert th.equal(sb3.policy.optimizer.state[parameter]["exp_avg"], ours_by_name[name]["exp_avg"]), name

    # And the other way: SB3's one-group save continues in ours with a separate critic.
    sb3.save(tmp_path / "sb3.zip")
    continued = PPO.load(tmp_path / "sb3.zip", custom_objects={"vf_learning_rate": 5e-3}, device="cpu")
    assert [g["lr"] for g in continued.policy.optimizer.param_groups][1] == 5e-3
    by_name = {name: continued.policy.optimizer.state[p] for name, p in continued.policy.named_parameters()}
    for name, parameter in sb3.policy.named_parameters():
        assert th.equal(by_name[name]["exp_avg_sq"], sb3.policy.optimizer.state[parameter]["exp_avg_sq"]), name


def test_defaults_keep_sb3s_one_group():
    model = _one_step_model()
    assert not model.separate_critic and len(model.policy.optimizer.param_groups) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(vf_learning_rate=0.0), "vf_learning_rate must be > 0"),
        (dict(vf_learning_rate="3e-3"), "vf_learning_rate must be a finite number"),
        (dict(vf_max_grad_norm=-1.0), "vf_max_grad_norm must be > 0"),
    ],
)
def test_bad_values_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _one_step_model(**kwargs)


class _NoValueBranch(MlpExtractor):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.critic_layers = self.value_net
        del self.value_net

    def forward_critic(self, features):
        return self.critic_layers(features)

    def forward(self, features):
        return self.forward_actor(features), self.forward_critic(features)


def test_a_policy_whose_critic_cannot_be_found_is_refused():
    from stable_baselines3.common.policies import ActorCriticPolicy

    class Policy(ActorCriticPolicy):
        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = _NoValueBranch(self.features_dim, self.net_arch, self.activation_fn, self.device)

    with pytest.raises(ValueError, match="no value_net module"):
        PPO(Policy, "Pendulum-v1", n_steps=64, batch_size=64, vf_learning_rate=1e-3)
    PPO(Policy, "Pendulum-v1", n_steps=64, batch_size=64)  # without the option it builds as before


def test_a_zoo_block_sets_a_linear_critic_schedule():
    block = preprocess_block({"vf_learning_rate": "lin_3e-3", "vf_max_grad_norm": 1.0}, where="a test block")
    schedule = block["vf_learning_rate"]
    assert schedule(1.0) == pytest.approx(3e-3) and schedule(0.5) == pytest.approx(1.5e-3)
    with pytest.raises(ValueError, match="vf_learning_rate must be a number or a linear schedule"):
        preprocess_block({"vf_learning_rate": "cos_3e-3"}, where="a test block")

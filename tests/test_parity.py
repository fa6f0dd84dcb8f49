"""Same seed, same run: ours and SB3's PPO collect the same actions and end with the same weights.

Each test trains SB3's PPO and ours side by side from the same seed for several updates and compares what a user
could compare: the actions and rewards seen by the callback at every step, the number of updates and the final
parameters.

With the defaults they agree to float32 rounding: the numpy actor's matmuls, the direct log-probabilities and torch's
fused Adam kernel round differently in the last bit; discrete actions, which could only change where the noise falls
within that rounding of a category boundary, are compared exactly. Where ours takes SB3's torch paths instead of
those three, the runs are bit-identical.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import DiagGaussianDistribution
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import (
    BitFlippingEnv,
    IdentityEnvMultiBinary,
    IdentityEnvMultiDiscrete,
    SimpleMultiObsEnv,
)
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.evaluation import ActionEvaluator
from sb3_ppo_ext.ppo.numpy_policy import NumpyActorCritic

PARAMETER_ATOL = 2e-6  # after 4 updates of 3 epochs each; measured at most 6.3e-7 (seeds 0-3, every case below)
# Pendulum near upright amplifies a difference of one ulp in an action by up to ~1e3 over an episode of 200 steps
# (measured at most 8e-4 in these runs, 1e-6 over the first steps), so continuous actions and rewards are compared
# with this tolerance; discrete and binary actions exactly.
CONTINUOUS_ATOL = 2e-3
ROLLOUTS = 4


class StepRecorder(BaseCallback):
    """Keeps the actions and rewards of every collection step (``self.locals`` of ``collect_rollouts``)."""

    def __init__(self) -> None:
        super().__init__()
        self.actions: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []

    def _on_step(self) -> bool:
        self.actions.append(np.array(self.locals["actions"], copy=True))
        self.rewards.append(np.array(self.locals["rewards"], copy=True))
        return True


def train(
    algorithm: type, env: Any, n_envs: int, policy: Any = "MlpPolicy", compile_policy: bool = False, **kwargs: Any
) -> tuple[Any, StepRecorder]:
    """``algorithm`` trained for ``ROLLOUTS`` rollouts on ``n_envs`` copies of ``env`` (seed 0), with its recorder."""
    np.random.seed(0)  # SimpleMultiObsEnv draws its observations from numpy's global generator when it is built
    model = algorithm(policy, make_vec_env(env, n_envs=n_envs, seed=0), seed=0, **kwargs)
    if compile_policy:
        model.policy = th.compile(model.policy)  # SB3's documented "compiling models" recipe
    recorder = StepRecorder()
    model.learn(ROLLOUTS * model.n_steps * n_envs, callback=recorder)
    return model, recorder


def assert_same_run(theirs: tuple[Any, StepRecorder], ours: tuple[Any, StepRecorder], exact: bool = False) -> None:
    """Same actions and rewards at every step, same number of updates, same final parameters: bit for bit when
    ``exact``, else to the tolerances above."""
    (their_model, their_steps), (our_model, our_steps) = theirs, ours
    their_actions, our_actions = np.stack(their_steps.actions), np.stack(our_steps.actions)
    assert their_actions.dtype == our_actions.dtype and their_actions.shape == our_actions.shape
    if isinstance(their_model.action_space, spaces.Box) and not exact:
        np.testing.assert_allclose(our_actions, their_actions, rtol=0, atol=CONTINUOUS_ATOL)
        np.testing.assert_allclose(our_steps.rewards, their_steps.rewards, rtol=0, atol=CONTINUOUS_ATOL)
    else:
        np.testing.assert_array_equal(our_actions, their_actions)
        np.testing.assert_array_equal(our_steps.rewards, their_steps.rewards)
    assert our_model._n_updates == their_model._n_updates
    their_parameters = their_model.policy.state_dict()
    our_parameters = our_model.policy.state_dict()
    assert list(our_parameters) == list(their_parameters)
    for name, value in their_parameters.items():
        atol = 0.0 if exact else PARAMETER_ATOL
        np.testing.assert_allclose(our_parameters[name].numpy(), value.numpy(), rtol=0, atol=atol, err_msg=name)


SMALL = dict(n_steps=64, batch_size=32, n_epochs=3)
SB3_ADAM = dict(optimizer_kwargs=dict(eps=1e-5, fused=False))  # SB3's Adam settings, with the for-loop kernel named
CASES = {
    "cartpole": ("CartPole-v1", 1, SMALL),
    "cartpole-4-envs": ("CartPole-v1", 4, dict(SMALL, n_steps=32)),
    "cartpole-early-stop-vf-clip": (
        "CartPole-v1",
        2,
        dict(SMALL, learning_rate=3e-3, target_kl=0.003, clip_range_vf=0.2, ent_coef=0.01),
    ),
    "pendulum": ("Pendulum-v1", 1, dict(SMALL, batch_size=48)),  # also a truncated last minibatch
    "pendulum-2-envs": ("Pendulum-v1", 2, SMALL),
    "pendulum-gsde": ("Pendulum-v1", 2, dict(SMALL, use_sde=True, sde_sample_freq=4)),
    "pendulum-gsde-per-rollout": ("Pendulum-v1", 1, dict(SMALL, use_sde=True)),
    "pendulum-gsde-squashed": ("Pendulum-v1", 2, dict(SMALL, use_sde=True, policy_kwargs=dict(squash_output=True))),
    "multibinary": (lambda: IdentityEnvMultiBinary(4), 2, SMALL),
    "multidiscrete": (lambda: IdentityEnvMultiDiscrete(3), 2, SMALL),
    "dict-observations": (lambda: BitFlippingEnv(n_bits=4), 2, dict(SMALL, policy="MultiInputPolicy")),
    "dict-observations-box-actions": (
        lambda: BitFlippingEnv(n_bits=4, continuous=True),
        2,
        dict(SMALL, policy="MultiInputPolicy"),
    ),
    "rmsprop": ("CartPole-v1", 2, dict(SMALL, policy_kwargs=dict(optimizer_class=th.optim.RMSprop))),
}
# A NatureCNN with ReLUs on image observations: its kinks, with Adam's normalisation, can turn a last-bit difference into
# 1e-3 within a few updates, so it is compared only where the runs must be bit-identical.
IMAGE_CASE = (lambda: SimpleMultiObsEnv(random_start=False), 2, dict(SMALL, policy="MultiInputPolicy"))


@pytest.mark.parametrize("fast_collect", [True, False], ids=["fast-collect", "torch-collect"])
@pytest.mark.parametrize("case", list(CASES))
def test_same_seed_same_run_as_sb3(case, fast_collect):
    env, n_envs, kwargs = CASES[case]
    theirs = train(SB3PPO, env, n_envs, **kwargs)
    ours = train(PPO, env, n_envs, fast_collect=fast_collect, **kwargs)
    assert_same_run(theirs, ours)


def test_a_batch_size_above_the_rollout_size_warns_and_trains_as_sb3():
    """SB3 only warns when ``batch_size > n_steps * n_envs`` (each epoch is then one minibatch of the whole rollout):
    so does ours, with SB3's text, and the run is SB3's."""
    kwargs = dict(SMALL, batch_size=100)  # rollouts of 64 transitions

    def warned(algorithm: type) -> tuple[tuple[Any, StepRecorder], list[str]]:
        with pytest.warns(UserWarning, match="mini-batch size of 100") as caught:
            run = train(algorithm, "CartPole-v1", 1, **kwargs)
        return run, [str(warning.message) for warning in caught if "mini-batch" in str(warning.message)]

    theirs, their_warnings = warned(SB3PPO)
    ours, our_warnings = warned(PPO)
    assert our_warnings == their_warnings
    assert ours[0]._n_updates == ROLLOUTS * kwargs["n_epochs"]  # one minibatch per epoch
    assert_same_run(theirs, ours)


def test_early_stopping_case_stops_early():
    env, n_envs, kwargs = CASES["cartpole-early-stop-vf-clip"]
    model, _ = train(PPO, env, n_envs, **kwargs)
    assert model._n_updates < ROLLOUTS * kwargs["n_epochs"]


@pytest.mark.parametrize(
    "case",
    [
        "cartpole-4-envs",
        "cartpole-early-stop-vf-clip",
        "pendulum",
        "pendulum-gsde",
        "pendulum-gsde-squashed",
        "multibinary",
        "multidiscrete",
        "dict-observations-box-actions",
        "dict-image-observations",
    ],
)
def test_bit_identical_where_ours_takes_sb3s_torch_paths(case):
    """With what our fast paths replace taken through torch as SB3 takes it (collection: ``fast_collect=False``;
    log-probabilities: ``direct_evaluation=False``; Adam: the for-loop kernel), the runs are bit-identical: the
    random draws, the minibatch order, the packed minibatches, the loss, the clipping and the early stop are SB3's
    exactly, also for a CNN with ReLUs, whose kinks amplify any rounding difference."""
    env, n_envs, kwargs = CASES.get(case, IMAGE_CASE)
    policy_kwargs = dict(kwargs.get("policy_kwargs") or {}, **SB3_ADAM)
    kwargs = dict(kwargs, policy_kwargs=policy_kwargs)
    theirs = train(SB3PPO, env, n_envs, **kwargs)
    ours = train(PPO, env, n_envs, fast_collect=False, direct_evaluation=False, **kwargs)
    assert ours[0].update_loss.evaluator.head is None  # the switch took SB3's evaluate_actions
    assert_same_run(theirs, ours, exact=True)


@pytest.mark.parametrize("case", ["cartpole", "pendulum", "pendulum-gsde", "multibinary", "multidiscrete"])
def test_parity_cases_use_the_numpy_actor(case):
    """The fast-collect runs above do exercise the numpy actor (it is not silently falling back)."""
    env, n_envs, kwargs = CASES[case]
    kwargs = {key: value for key, value in kwargs.items() if key not in ("n_steps", "batch_size", "n_epochs")}
    model = PPO(kwargs.pop("policy", "MlpPolicy"), make_vec_env(env, n_envs=n_envs), **kwargs)
    assert NumpyActorCritic.supports(model.policy)


# ---------------------------------------------------------------- policies that SB3 accepts, ours accepts


@pytest.mark.slow
def test_compiled_policy_trains_as_sb3():
    """``model.policy = th.compile(model.policy)`` (SB3's docs): both take the torch paths through the wrapper."""
    theirs = train(SB3PPO, "CartPole-v1", 2, compile_policy=True, **SMALL)
    ours = train(PPO, "CartPole-v1", 2, compile_policy=True, **SMALL)
    assert ActionEvaluator(ours[0].policy).head is None and not NumpyActorCritic.supports(ours[0].policy)
    assert_same_run(theirs, ours)


class CountingEvaluatePolicy(ActorCriticPolicy):
    """Overrides ``evaluate_actions`` (here: only counts calls): the update must call it."""

    calls = 0

    def evaluate_actions(self, obs, actions):
        type(self).calls += 1
        return super().evaluate_actions(obs, actions)


class CountingForwardPolicy(ActorCriticPolicy):
    """Overrides ``forward`` (here: only counts calls): collection must call it."""

    calls = 0

    def forward(self, obs, deterministic=False):
        type(self).calls += 1
        return super().forward(obs, deterministic)


class FloorGaussian(DiagGaussianDistribution):
    """A custom distribution: a Gaussian whose standard deviation never falls below 0.5."""

    def proba_distribution(self, mean_actions, log_std):
        return super().proba_distribution(mean_actions, th.clamp(log_std, min=float(np.log(0.5))))


class FloorGaussianPolicy(ActorCriticPolicy):
    def _build(self, lr_schedule):
        super()._build(lr_schedule)
        self.action_dist = FloorGaussian(int(np.prod(self.action_space.shape)))


@pytest.mark.parametrize(
    "policy_class, env, uses_numpy_actor, uses_direct_head",
    [
        (CountingEvaluatePolicy, "Pendulum-v1", True, False),
        (CountingForwardPolicy, "CartPole-v1", False, True),
        (FloorGaussianPolicy, "Pendulum-v1", False, False),
    ],
)
def test_custom_policies_take_sb3_paths_and_train_as_sb3(policy_class, env, uses_numpy_actor, uses_direct_head):
    kwargs = dict(SMALL, policy_kwargs=dict(log_std_init=-1.5) if policy_class is FloorGaussianPolicy else None)
    policy_class.calls = 0
    theirs = train(SB3PPO, env, 2, policy=policy_class, **kwargs)
    their_calls, policy_class.calls = policy_class.calls, 0
    ours = train(PPO, env, 2, policy=policy_class, **kwargs)
    assert NumpyActorCritic.supports(ours[0].policy) == uses_numpy_actor
    assert (ActionEvaluator(ours[0].policy).head is not None) == uses_direct_head
    if policy_class is not FloorGaussianPolicy:
        assert their_calls > 0 and policy_class.calls == their_calls  # the override ran as often as in SB3
    assert_same_run(theirs, ours)

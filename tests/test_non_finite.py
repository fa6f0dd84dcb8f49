"""NaN never reaches the weights: collection stops within the step of the first non-finite observation (terminal ones
included), reward or policy value, on every collection path, with VecNormalize's statistics as before that step; and an
update whose gradients are non-finite raises before its step, with the weights and the optimizer state as they
were."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.ppo.non_finite import CollectionGuard, NonFiniteCollectionError, check_filled_buffer, check_finite
from sb3_ppo_ext.ppo.optim import ClippedStep, NonFiniteGradientError, fused_kernel_devices


class PoisonAt(gym.Wrapper):
    """Returns a NaN observation or reward at step ``at`` (counted over the env's life) and records every action."""

    def __init__(self, env: gym.Env, at: int, what: str):
        super().__init__(env)
        self.at, self.what, self.steps = at, what, 0
        self.actions: list[Any] = []

    def step(self, action):
        self.actions.append(np.asarray(action, dtype=float).copy())
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.what == "observation":
                observation = np.full_like(observation, np.nan)
            else:
                reward = float("nan")
        return observation, reward, terminated, truncated, info


def _poisoned_vec_env(what: str, env_id: str = "Pendulum-v1") -> DummyVecEnv:
    """Two envs; the second returns a NaN ``what`` at its 40th step (step 80 of the run)."""
    return DummyVecEnv([lambda: Monitor(gym.make(env_id)), lambda: PoisonAt(Monitor(gym.make(env_id)), 40, what)])


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_a_nan_observation_stops_collection_before_any_nan_action(env_id):
    env = _poisoned_vec_env("observation", env_id)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0)
    with pytest.raises(ValueError, match=r"non-finite observation from env\(s\) \[1\] at step 80"):
        model.learn(256)
    poisoned = env.envs[1]
    assert poisoned.steps == 40 and all(np.isfinite(action).all() for action in poisoned.actions)


def test_a_nan_reward_stops_collection_at_its_step():
    model = PPO("MlpPolicy", _poisoned_vec_env("reward"), n_steps=64, batch_size=64, seed=0)
    with pytest.raises(ValueError, match=r"non-finite reward from env\(s\) \[1\] at step 80"):
        model.learn(256)
    assert model.num_timesteps == 78  # the poisoned step is not counted: nothing of it went into the rollout


class PoisonReturns(BaseCallback):
    """Makes the returns of rollout ``rollout`` NaN (so its first minibatch's gradients are) and snapshots the model
    then."""

    def __init__(self, rollout: int):
        super().__init__()
        self.rollout, self.seen = rollout, 0
        self.weights: dict[str, Any] | None = None
        self.optimizer_state: dict[str, Any] | None = None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.seen += 1
        if self.seen == self.rollout:
            assert isinstance(self.model, PPO)
            self.model.rollout_buffer.returns[:] = np.nan
            self.weights = copy.deepcopy(self.model.policy.state_dict())
            self.optimizer_state = copy.deepcopy(self.model.policy.optimizer.state_dict())


@pytest.mark.parametrize("rollout", [1, 2])  # the first step goes through torch, later ones through ClippedStep's own path
def test_non_finite_gradients_raise_before_the_step_and_leave_the_model_intact(rollout):
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_epochs=2, seed=0)
    poison = PoisonReturns(rollout)
    with pytest.raises(FloatingPointError, match=r"non-finite gradients in update .* No step was taken"):
        model.learn(64 * 3, callback=poison)
    for name, tensor in model.policy.state_dict().items():
        assert th.equal(tensor, poison.weights[name]), name
    state = model.policy.optimizer.state_dict()["state"]
    for key, saved in poison.optimizer_state["state"].items():
        for field in saved:
            assert th.equal(state[key][field], saved[field])


@pytest.mark.skipif("cpu" not in fused_kernel_devices(), reason="no fused Adam kernel for the CPU in this torch")
def test_clipped_step_refuses_non_finite_gradients_only_when_asked():
    network = th.nn.Linear(3, 2)
    parameters = list(network.parameters())
    step = ClippedStep(th.optim.Adam(parameters, fused=True), parameters, 0.5, error_if_nonfinite=True)
    for _ in range(2):  # through torch, then the direct path
        network.weight.grad = th.full_like(network.weight, np.inf)
        network.bias.grad = th.zeros_like(network.bias)
        before = [parameter.detach().clone() for parameter in parameters]
        with pytest.raises(NonFiniteGradientError):
            step.step()
        assert all(th.equal(a, b) for a, b in zip(before, parameters, strict=True))
        network.weight.grad = th.ones_like(network.weight)
        step.step()  # finite gradients step as usual
    lenient = ClippedStep(th.optim.Adam(parameters, fused=True), parameters, 0.5)
    network.weight.grad = th.full_like(network.weight, np.nan)
    lenient.step()  # torch's default: no check
    assert th.isnan(network.weight).all()


# ----------------------------------------------------------- every collection path, through one check


class Poison(gym.Wrapper):
    """At step ``at`` of its life, puts ``value`` (NaN or inf) into ``field``: ``"observation"`` (every entry; of a Dict
    observation, the ``"speed"`` key's), ``"reward"``, or ``"terminal_observation"`` (that step's observation, with the
    episode truncated there, so that the vec env puts it in ``infos[i]["terminal_observation"]``)."""

    def __init__(self, env: gym.Env, at: int, field: str, value: float):
        super().__init__(env)
        self.at, self.field, self.value, self.steps = at, field, value, 0

    def _poisoned(self, observation):
        if isinstance(observation, dict):
            return {**observation, "speed": np.full_like(observation["speed"], self.value)}
        return np.full_like(observation, self.value)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.field == "reward":
                reward = self.value
            else:
                observation = self._poisoned(observation)
                truncated = truncated or self.field == "terminal_observation"
        return observation, reward, terminated, truncated, info


class DictObservation(gym.ObservationWrapper):
    """Pendulum's observation as a Dict: ``angle`` (cos, sin) and ``speed``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        assert isinstance(env.observation_space, spaces.Box)
        low, high = env.observation_space.low, env.observation_space.high
        self.observation_space = spaces.Dict({"angle": spaces.Box(low[:2], high[:2]), "speed": spaces.Box(low[2:], high[2:])})

    def observation(self, observation):
        return {"angle": observation[:2], "speed": observation[2:]}


class LastStatistics(BaseCallback):
    """Keeps a copy of the VecNormalize statistics after every collection step that passed."""

    def __init__(self):
        super().__init__()
        self.last: Any = None

    def _on_step(self) -> bool:
        vec_normalize = self.model.get_vec_normalize_env()
        assert vec_normalize is not None
        self.last = copy.deepcopy(statistics_of(vec_normalize))
        return True


def statistics_of(normalizer: VecNormalize) -> dict:
    """What a VecNormalize learns, by name: each ``RunningMeanStd``'s mean, var and count, and the discounted returns."""
    obs_rms = normalizer.obs_rms if isinstance(normalizer.obs_rms, dict) else {"": normalizer.obs_rms}
    moments = {f"obs_rms{key}": (rms.mean, rms.var, rms.count) for key, rms in obs_rms.items()}
    ret_rms = normalizer.ret_rms
    return {**moments, "ret_rms": (ret_rms.mean, ret_rms.var, ret_rms.count), "returns": (normalizer.returns,)}


def assert_same_statistics(actual: dict, expected: dict) -> None:
    """Equal to the bit, and finite."""
    assert actual.keys() == expected.keys()
    for key in expected:
        for a, b in zip(actual[key], expected[key], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=key)
        assert all(np.isfinite(part).all() for part in actual[key]), key


def poisoned_env(field: str, value: float, at: int, dict_observations: bool, normalize: bool) -> DummyVecEnv | VecNormalize:
    """Two Pendulums; the second puts ``value`` into ``field`` at its step ``at`` (the run's step ``2 * at``)."""

    def make(poison: bool):
        def build():
            env = gym.make("Pendulum-v1")
            env = DictObservation(env) if dict_observations else env
            return Poison(env, at, field, value) if poison else env

        return build

    venv = DummyVecEnv([make(False), make(True)])
    return VecNormalize(venv) if normalize else venv


def rollout_buffer_values(buffer) -> list[np.ndarray]:
    observations = list(buffer.observations.values()) if isinstance(buffer.observations, dict) else [buffer.observations]
    fields = ("actions", "rewards", "returns", "episode_starts", "values", "log_probs", "advantages")
    return [*observations, *(getattr(buffer, name) for name in fields)]


N_STEPS = 8
FAULTS = {  # id: (field, value, the poisoned env's step); N_STEPS steps per rollout, so step 13 is in the second
    "nan-reward": ("reward", np.nan, 13),
    "nan-observation": ("observation", np.nan, 13),
    "inf-observation": ("observation", np.inf, 13),
    "nan-terminal-observation": ("terminal_observation", np.nan, 13),
    "inf-terminal-observation": ("terminal_observation", -np.inf, 13),
    "nan-observation-on-the-last-step": ("observation", np.nan, 2 * N_STEPS),
}
PATHS = {  # id: (fast_collect, Dict observations); Dict observations always take SB3's loop
    "fast-collect": (True, False),
    "sb3-collect": (False, False),
    "dict": (True, True),
}
# VecNormalize warns while it updates its statistics with the poisoned step, which the guard then undoes.
VEC_NORMALIZE_WARNS = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@VEC_NORMALIZE_WARNS
@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "vec-normalize"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_non_finite_value_stops_collection_within_its_step_on_every_path(fault, path, normalize, tmp_path):
    field, value, at = FAULTS[fault]
    fast_collect, dict_observations = PATHS[path]
    if normalize and field == "terminal_observation" and np.isinf(value):
        pytest.skip("VecNormalize clips it to -clip_obs before anyone sees it: see the test below")
    env = poisoned_env(field, value, at, dict_observations, normalize)
    policy = "MultiInputPolicy" if dict_observations else "MlpPolicy"
    model = PPO(policy, env, n_steps=N_STEPS, batch_size=16, n_epochs=1, seed=0, fast_collect=fast_collect)
    recorder = LastStatistics() if normalize else None
    with pytest.raises(NonFiniteCollectionError) as raised:
        model.learn(4 * N_STEPS * 2, callback=recorder)
    error = raised.value
    expected_field = field + ("['speed']" if dict_observations and field != "reward" else "")
    assert (error.field, error.env_indices, error.step) == (expected_field, [1], 2 * at)
    assert f"non-finite {expected_field}" in str(error) and f"env(s) [1] at step {2 * at}" in str(error)
    assert model.num_timesteps == 2 * (at - 1)  # nothing of the poisoned step was counted
    assert all(np.isfinite(part).all() for part in rollout_buffer_values(model.rollout_buffer))
    if not normalize:
        return
    assert_same_statistics(statistics_of(env), recorder.last)  # as after the last good step
    model.save(tmp_path / "model.zip")
    env.save(tmp_path / "vec_normalize.pkl")
    clean_env = poisoned_env(field, value, 10**6, dict_observations, normalize=False)  # the poison never comes
    resumed_env = VecNormalize.load(tmp_path / "vec_normalize.pkl", clean_env)
    # VecNormalize.save leaves out the discounted returns (a load starts them at zero); the rest is the last good state.
    assert_same_statistics({**statistics_of(resumed_env), "returns": recorder.last["returns"]}, recorder.last)
    resumed = PPO.load(tmp_path / "model.zip", env=resumed_env)
    resumed.learn(2 * N_STEPS * 2, reset_num_timesteps=False)
    assert resumed.num_timesteps == 2 * (at - 1) + 2 * N_STEPS * 2


@pytest.mark.parametrize("path", PATHS)
def test_vec_normalize_clips_an_infinite_terminal_observation_before_anyone_sees_it(path):
    """VecNormalize's ``normalize_obs`` turns -inf into -clip_obs, and its statistics never see terminal observations:
    nothing non-finite reaches the buffer or the statistics, and the run goes on."""
    fast_collect, dict_observations = PATHS[path]
    env = poisoned_env("terminal_observation", -np.inf, 13, dict_observations, True)
    policy = "MultiInputPolicy" if dict_observations else "MlpPolicy"
    model = PPO(policy, env, n_steps=N_STEPS, batch_size=16, n_epochs=1, seed=0, fast_collect=fast_collect)
    model.learn(2 * N_STEPS * 2)
    assert all(np.isfinite(part).all() for part in rollout_buffer_values(model.rollout_buffer))
    assert all(np.isfinite(part).all() for moments in statistics_of(env).values() for part in moments)


@pytest.mark.parametrize("fast_collect", [True, False], ids=["fast-collect", "sb3-collect"])
def test_non_finite_weights_are_named_as_the_policy_s_values(fast_collect):
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=N_STEPS, batch_size=8, n_epochs=1, seed=0, fast_collect=fast_collect)
    with th.no_grad():
        model.policy.value_net.bias.fill_(np.nan)
    with pytest.raises(NonFiniteCollectionError, match="its weights are non-finite") as raised:
        model.learn(N_STEPS)
    # Our loop checks each step's values before using them; SB3's loop computes them inside itself, so they are
    # checked in the filled buffer. Either names the step that produced the observation: the reset, 0.
    assert (raised.value.field, raised.value.env_indices, raised.value.step) == ("value", [0], 0)


def test_the_first_observation_of_a_rollout_is_checked_before_it_is_acted_on():
    class NanReset(gym.Wrapper):
        def reset(self, **kwargs):
            observation, info = self.env.reset(**kwargs)
            return np.full_like(observation, np.nan), info

    model = PPO("MlpPolicy", DummyVecEnv([lambda: NanReset(gym.make("Pendulum-v1"))]), n_steps=N_STEPS, batch_size=8)
    with pytest.raises(NonFiniteCollectionError, match=r"non-finite observation from env.* at step 0.*before acting on it"):
        model.learn(N_STEPS)
    assert model.num_timesteps == 0


# ------------------------------------------------------------------------------------ the units, by hand


def test_check_finite_names_the_rows_and_passes_finite_values_that_overflow_a_sum_of_squares():
    big = np.full((2, 3), 1e30, dtype=np.float32)  # finite, but its squares overflow float32
    check_finite("observation", big, 4, "")
    check_finite("observation", np.full((2, 3), 255, dtype=np.uint8), 4, "")
    values = np.zeros((3, 2), dtype=np.float32)
    values[2, 1] = np.inf
    values[0, 0] = np.nan
    with pytest.raises(
        NonFiniteCollectionError,
        match=r"non-finite observation from env\(s\) \[0, 2\] at step 6 "
        r"\(env 0: \[nan\], env 2: \[inf\]\); kept",
    ) as raised:
        check_finite("observation", values, 6, "kept")
    assert (raised.value.env_index, raised.value.env_indices) == (0, [0, 2])
    with pytest.raises(NonFiniteCollectionError) as raised:
        check_finite("terminal_observation", {"a": np.zeros((1, 2)), "b": values[2:]}, 6, "", env_indices=[5])
    assert (raised.value.field, raised.value.env_indices) == ("terminal_observation['b']", [5])


@VEC_NORMALIZE_WARNS
def test_a_step_that_fails_the_check_leaves_vec_normalize_as_before_it():
    env = VecNormalize(poisoned_env("observation", np.inf, 2, False, False))
    env.reset()
    guard = CollectionGuard(env)
    guard.step(np.zeros((2, 1), dtype=np.float32))
    before = copy.deepcopy(statistics_of(env))
    with pytest.raises(NonFiniteCollectionError, match=r"non-finite observation \(as VecNormalize received it\)"):
        guard.step(np.zeros((2, 1), dtype=np.float32))
    assert_same_statistics(statistics_of(env), before)
    assert np.isfinite(env.get_original_obs()).all() and guard.num_timesteps == 2


def test_check_filled_buffer_names_the_value_the_policy_computed():
    buffer = RolloutBuffer(4, spaces.Box(-1, 1, (1,)), spaces.Box(-1, 1, (1,)), n_envs=2)
    buffer.rewards[2, 1] = np.nan  # a finite reward plus gamma * a non-finite terminal value
    with pytest.raises(NonFiniteCollectionError, match="terminal_value") as raised:
        check_filled_buffer(buffer, 10)
    assert (raised.value.env_indices, raised.value.step) == ([1], 10 + 3 * 2)
    buffer.rewards[2, 1] = 0.0
    buffer.returns[:, 0] = np.nan  # a non-finite last value spreads backwards through the returns
    with pytest.raises(NonFiniteCollectionError, match="last_value") as raised:
        check_filled_buffer(buffer, 10)
    assert (raised.value.env_indices, raised.value.step) == ([0], 10 + 4 * 2)

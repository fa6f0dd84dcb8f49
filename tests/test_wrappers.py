"""FrameSkip: repeats the action, sums rewards, stops at the end of an episode. MaskObservation: hides entries."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from sb3_ppo_ext.wrappers import FrameSkip, MaskObservation


class CountingEnv(gym.Env):
    """Reward ``t`` at step ``t`` (1-based); terminates after ``terminate_at`` steps; records the actions it got."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(3)

    def __init__(self, terminate_at: int = 100) -> None:
        self.terminate_at = terminate_at
        self.t = 0
        self.actions: list[int] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.actions = []
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        self.actions.append(int(action))
        return np.array([self.t], np.float32), float(self.t), self.t >= self.terminate_at, False, {"t": self.t}


def test_repeats_the_action_and_sums_the_rewards():
    env = FrameSkip(CountingEnv(), skip=4)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(2)
    assert env.unwrapped.actions == [2, 2, 2, 2]
    assert reward == 1 + 2 + 3 + 4
    assert observation[0] == 4 and info["t"] == 4 and info["frame_skip_steps"] == 4
    assert not terminated and not truncated


def test_stops_at_termination():
    env = FrameSkip(CountingEnv(terminate_at=6), skip=4)
    env.reset(seed=0)
    env.step(0)
    _, reward, terminated, _, info = env.step(1)
    assert terminated and reward == 5 + 6 and info["frame_skip_steps"] == 2
    assert env.unwrapped.actions == [0, 0, 0, 0, 1, 1]


def test_stops_at_truncation():
    env = FrameSkip(gym.wrappers.TimeLimit(CountingEnv(), max_episode_steps=5), skip=3)
    env.reset(seed=0)
    env.step(0)
    _, reward, terminated, truncated, info = env.step(0)
    assert truncated and not terminated and reward == 4 + 5 and info["frame_skip_steps"] == 2


def test_skip_one_is_the_plain_env():
    env = FrameSkip(CountingEnv(), skip=1)
    env.reset(seed=0)
    assert env.step(1)[1] == 1.0


@pytest.mark.parametrize("skip", [0, -2, 1.5, "4", True])
def test_rejects_bad_skip(skip):
    with pytest.raises(ValueError, match="skip must be"):
        FrameSkip(CountingEnv(), skip=skip)


class VectorEnv(gym.Env):
    """Observation ``[t, t + 1, t + 2, t + 3]`` (``t`` counts steps) in a Box with bounds [-10, 10]."""

    observation_space = spaces.Box(-10.0, 10.0, (4,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        self.t += 1
        return self._observation(), 0.0, False, False, {}

    def _observation(self):
        return np.arange(self.t, self.t + 4, dtype=np.float32)


def test_mask_hides_the_chosen_entries_and_keeps_the_rest():
    env = MaskObservation(VectorEnv(), indices=[1, -1], value=0.5)
    observation, _ = env.reset(seed=0)
    np.testing.assert_array_equal(observation, [0.0, 0.5, 2.0, 0.5])
    observation = env.step(0)[0]
    np.testing.assert_array_equal(observation, [1.0, 0.5, 3.0, 0.5])
    assert observation.dtype == np.float32 and env.observation_space.contains(observation)
    np.testing.assert_array_equal(env.observation_space.low, [-10.0, 0.5, -10.0, 0.5])
    np.testing.assert_array_equal(env.observation_space.high, [10.0, 0.5, 10.0, 0.5])


def test_mask_leaves_the_inner_observation_alone():
    inner = VectorEnv()
    env = MaskObservation(inner, indices=[0])
    env.reset(seed=0)
    raw = inner._observation()
    env.observation(raw)
    np.testing.assert_array_equal(raw, [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("indices", "match"),
    [
        ([], "non-empty list"),
        ("20", "non-empty list"),
        ([1.5], "must be an integer"),
        ([4], "out of range"),
        ([-5], "out of range"),
    ],
)
def test_mask_rejects_bad_indices(indices, match):
    with pytest.raises(ValueError, match=match):
        MaskObservation(VectorEnv(), indices=indices)


@pytest.mark.parametrize("space", [spaces.Discrete(3), spaces.Box(0, 255, (2, 2), np.uint8)])
def test_mask_rejects_an_observation_that_is_not_a_flat_box(space):
    env = VectorEnv()
    env.observation_space = space
    with pytest.raises(ValueError, match="one-dimensional Box"):
        MaskObservation(env, indices=[0])


def test_mask_rejects_a_non_finite_value():
    with pytest.raises(ValueError, match="value must be a finite number"):
        MaskObservation(VectorEnv(), indices=[0], value=float("nan"))

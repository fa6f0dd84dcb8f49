"""FrameSkip: repeats the action, sums rewards, stops at the end of an episode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from sb3_ppo_ext.wrappers import FrameSkip


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

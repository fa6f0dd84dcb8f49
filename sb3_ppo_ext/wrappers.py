"""Environment wrappers usable from a zoo config's ``env_wrapper:`` key."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3_ppo_ext.validation import (
    MAX_FRAME_SKIP,
    HyperparameterError,
    check_int,
    check_number,
    check_observation_indices,
)


class FrameSkip(gym.Wrapper):
    """Repeat each action for ``skip`` environment steps and return the summed reward.

    Stops early at termination or truncation, so an episode never runs past its end; ``info`` is the last step's,
    with ``frame_skip_steps`` (how many steps were taken). Zoo config::

        env_wrapper:
          - sb3_ppo_ext.wrappers.FrameSkip:
              skip: 6

    :param env: the environment to wrap.
    :param skip: number of environment steps per agent step (1 to :data:`~sb3_ppo_ext.validation.MAX_FRAME_SKIP`;
        1 leaves the environment unchanged).
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        self.skip = check_int("skip", skip, minimum=1, maximum=MAX_FRAME_SKIP, limit="MAX_FRAME_SKIP")

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        total_reward = 0.0
        for steps_taken in range(1, self.skip + 1):  # noqa: B007  (read after the loop: the steps taken)
            observation, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            if terminated or truncated:
                break
        info = dict(info)
        info["frame_skip_steps"] = steps_taken
        return observation, total_reward, terminated, truncated, info


class MaskObservation(gym.ObservationWrapper):
    """Hide chosen entries of a flat ``Box`` observation: each is replaced by a constant ``value``.

    The observation keeps its shape, so a policy's input layer and a ``VecNormalize``'s statistics keep theirs; the
    observation space's bounds at the masked entries become ``value``. For an ablation: does a policy need an input
    (a walker's foot-contact flags, entries 20 and 21 of ``Walker2D-v0``) to learn? rl-zoo3's ``MaskVelocityWrapper``
    does the same for the velocity entries of six classic tasks, named in its code; this one takes the entries as a
    setting. Zoo config::

        env_wrapper:
          - sb3_ppo_ext.wrappers.MaskObservation:
              indices: [20, 21]

    :param env: the environment to wrap; its observation space must be a one-dimensional ``Box``.
    :param indices: positions in the observation vector (0-based; negative counts from the end) to hide.
    :param value: the constant shown in their place.
    """

    def __init__(self, env: gym.Env, indices: list[int], value: float = 0.0) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise HyperparameterError(f"MaskObservation needs a one-dimensional Box observation space, got {space!r}")
        self.indices = check_observation_indices("indices", indices, size=space.shape[0])
        self.value = check_number("value", value)
        low, high = space.low.copy(), space.high.copy()
        low[self.indices] = self.value
        high[self.indices] = self.value
        self.observation_space = spaces.Box(low, high, space.shape, space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        masked = np.array(observation, copy=True)
        masked[self.indices] = self.value
        return masked

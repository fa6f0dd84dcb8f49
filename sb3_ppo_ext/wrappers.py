"""Environment wrappers usable from a zoo config's ``env_wrapper:`` key."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from sb3_ppo_ext.validation import check_int


class FrameSkip(gym.Wrapper):
    """Repeat each action for ``skip`` environment steps and return the summed reward.

    Stops early at termination or truncation, so an episode never runs past its end; ``info`` is the last step's,
    with ``frame_skip_steps`` (how many steps were taken). Zoo config::

        env_wrapper:
          - sb3_ppo_ext.wrappers.FrameSkip:
              skip: 6

    :param env: the environment to wrap.
    :param skip: number of environment steps per agent step (>= 1; 1 leaves the environment unchanged).
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        self.skip = check_int("skip", skip, minimum=1)

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

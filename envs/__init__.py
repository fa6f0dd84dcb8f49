"""Bundled PyBullet tasks, installed as ``sb3_ppo_ext.envs``.

Registration is cheap: entry points are strings, so importing this module does not import pybullet.
Every id lives in the ``sb3_ppo_ext`` gymnasium namespace.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

NAMESPACE = "sb3_ppo_ext"

# id (without namespace), entry point, max_episode_steps, reward_threshold, kwargs
_REGISTRATIONS: list[tuple[str, str, int, float, dict]] = [
    ("Walker2D-v0", "sb3_ppo_ext.envs.walker2d:Walker2DEnv", 1000, 2500.0, {}),
    ("Humanoid-v0", "sb3_ppo_ext.envs.humanoid:HumanoidEnv", 1000, 3000.0, {}),
    ("HumanoidFlagrun-v0", "sb3_ppo_ext.envs.humanoid:HumanoidFlagrunEnv", 1000, 2000.0, {}),
    ("HumanoidFlagrunHarder-v0", "sb3_ppo_ext.envs.humanoid:HumanoidFlagrunHarderEnv", 1000, 2000.0, {}),
    ("RocketLander-v0", "sb3_ppo_ext.envs.rocket_lander:RocketLanderEnv", 400, 100.0, {"continuous": True}),
    ("RocketLanderDiscrete-v0", "sb3_ppo_ext.envs.rocket_lander:RocketLanderEnv", 400, 100.0, {"continuous": False}),
]

ENV_IDS: tuple[str, ...] = tuple(f"{NAMESPACE}/{name}" for name, *_ in _REGISTRATIONS)


def register_envs() -> None:
    """Register every bundled task with gymnasium (idempotent)."""
    for name, entry_point, max_episode_steps, reward_threshold, kwargs in _REGISTRATIONS:
        env_id = f"{NAMESPACE}/{name}"
        if env_id in registry:
            continue
        register(
            id=env_id,
            entry_point=entry_point,
            max_episode_steps=max_episode_steps,
            reward_threshold=reward_threshold,
            kwargs=dict(kwargs),
        )


register_envs()

"""Vectorised envs beyond SB3's own: several envs per local worker process, or envs on the actors of a Ray cluster.

- :mod:`~sb3_ppo_ext.vec_env.shared_memory_vec_env`: ``SharedMemoryVecEnv``, SB3's ``SubprocVecEnv`` with
  several envs per worker process and the per-step arrays in shared memory.
- :mod:`~sb3_ppo_ext.vec_env.ray_vec_env`: ``RayVecEnv``, envs in Ray actors anywhere in a Ray cluster (the
  ``ray`` extra).

``from sb3_ppo_ext.vec_env import RayVecEnv`` imports Ray then, on first use of a Ray name, so that importing this
package (or the shared-memory VecEnv) never needs Ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sb3_ppo_ext.vec_env.shared_memory_vec_env import EnvWorkerError, SharedMemoryVecEnv

if TYPE_CHECKING:
    from sb3_ppo_ext.vec_env.ray_vec_env import EnvActorLostError, RayVecEnv

#: The names of :mod:`~sb3_ppo_ext.vec_env.ray_vec_env` this package gives on first access (importing Ray then).
RAY_NAMES = frozenset(
    {
        "ACTOR_LOSS_POLICIES",
        "DEFAULT_ACTOR_OPTIONS",
        "ActorLossPolicy",
        "ActorRestart",
        "EnvActorLostError",
        "EnvGroup",
        "RayVecEnv",
        "concatenate_observations",
        "connect",
        "locate",
        "observation_at",
        "remote_env_group",
        "split_into_groups",
        "stack_observations",
    }
)

__all__ = ["EnvActorLostError", "EnvWorkerError", "RayVecEnv", "SharedMemoryVecEnv"]


def __getattr__(name: str) -> Any:
    """A Ray name (:data:`RAY_NAMES`), imported with Ray on first access (PEP 562); any other name is missing."""
    if name not in RAY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.ray_vec_env"), name)
    globals()[name] = value
    return value

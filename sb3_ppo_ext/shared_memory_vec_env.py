"""The older import path of :mod:`sb3_ppo_ext.vec_env.shared_memory_vec_env` (``SharedMemoryVecEnv``), kept so that
``from sb3_ppo_ext.shared_memory_vec_env import SharedMemoryVecEnv`` goes on working."""

from sb3_ppo_ext.vec_env.shared_memory_vec_env import (
    SEGMENT_PREFIX,
    EnvWorkerError,
    SharedArray,
    SharedMemoryVecEnv,
    default_n_workers,
    plan_segment,
    split_evenly,
    usable_cores,
)

__all__ = [
    "SEGMENT_PREFIX",
    "EnvWorkerError",
    "SharedArray",
    "SharedMemoryVecEnv",
    "default_n_workers",
    "plan_segment",
    "split_evenly",
    "usable_cores",
]

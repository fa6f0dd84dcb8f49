"""sb3_ppo_ext: a faster drop-in PPO for Stable-Baselines3 with adaptive KL, callbacks and PyBullet tasks."""

from sb3_ppo_ext import envs  # noqa: F401  (registers the bundled tasks with gymnasium)
from sb3_ppo_ext.ppo import PPO
from sb3_ppo_ext.safe_loading import (
    PickleRefusedError,
    load_vecnormalize_without_pickles,
    load_without_pickles,
    save_vecnormalize_statistics,
)

__version__ = "0.1.0"

__all__ = [
    "PPO",
    "PickleRefusedError",
    "__version__",
    "load_vecnormalize_without_pickles",
    "load_without_pickles",
    "save_vecnormalize_statistics",
]

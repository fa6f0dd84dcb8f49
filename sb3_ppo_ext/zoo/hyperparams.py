"""Deprecated: the older name of :mod:`sb3_ppo_ext.zoo.config.blocks` (the checks of a config block) and
:mod:`sb3_ppo_ext.zoo.config.run_files` (a run folder's settings files)."""

import warnings

from sb3_ppo_ext.zoo.config.blocks import *  # noqa: F403
from sb3_ppo_ext.zoo.config.run_files import *  # noqa: F403

warnings.warn(
    "sb3_ppo_ext.zoo.hyperparams is deprecated: import from sb3_ppo_ext.zoo.config.blocks or sb3_ppo_ext.zoo.config.run_files",
    DeprecationWarning,
    stacklevel=2,
)

"""Deprecated: the older name of :mod:`sb3_ppo_ext.zoo.config.expressions` (the restricted parser of config expressions)."""

import warnings

from sb3_ppo_ext.zoo.config.expressions import *  # noqa: F403

warnings.warn(
    "sb3_ppo_ext.zoo.safe_eval is deprecated: import from sb3_ppo_ext.zoo.config.expressions", DeprecationWarning, stacklevel=2
)

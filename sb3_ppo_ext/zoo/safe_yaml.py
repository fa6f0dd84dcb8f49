"""Deprecated: the older name of :mod:`sb3_ppo_ext.zoo.config.yaml_files` (bounded YAML reading)."""

import warnings

from sb3_ppo_ext.zoo.config.yaml_files import *  # noqa: F403

warnings.warn(
    "sb3_ppo_ext.zoo.safe_yaml is deprecated: import from sb3_ppo_ext.zoo.config.yaml_files", DeprecationWarning, stacklevel=2
)

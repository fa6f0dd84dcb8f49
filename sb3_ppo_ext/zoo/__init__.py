"""rl-zoo3 integration: ``ppo_ext`` in rl-zoo3's registry, safe config handling, the ``sb3-ppo-ext`` subcommands.

Importing this package imports rl-zoo3 (install the ``zoo`` extra).
"""

from sb3_ppo_ext.allow_list import allowed_names
from sb3_ppo_ext.zoo.config.blocks import check_block_keys, preprocess_block, valid_keys
from sb3_ppo_ext.zoo.config.command_line import SafeStoreDict
from sb3_ppo_ext.zoo.config.expressions import parse_expression
from sb3_ppo_ext.zoo.experiment import SafeExperimentManager
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME, default_config_path, register_algorithm

__all__ = [
    "ALGORITHM_NAME",
    "SafeExperimentManager",
    "SafeStoreDict",
    "allowed_names",
    "check_block_keys",
    "default_config_path",
    "parse_expression",
    "preprocess_block",
    "register_algorithm",
    "valid_keys",
]

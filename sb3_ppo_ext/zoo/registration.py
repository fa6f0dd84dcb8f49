"""``ppo_ext`` in rl-zoo3's registry: its name, the bundled config, and the registration of our PPO and its Optuna
sampler."""

from __future__ import annotations

from pathlib import Path

from rl_zoo3 import hyperparams_opt
from rl_zoo3.utils import ALGOS

from sb3_ppo_ext import zoo_configs
from sb3_ppo_ext.ppo import PPO
from sb3_ppo_ext.zoo.sampler import convert_ppo_ext_params, sample_ppo_ext_params

#: Name of our PPO in rl-zoo3's registry (``--algo ppo_ext``, run folders ``logs/ppo_ext/...``).
ALGORITHM_NAME = "ppo_ext"


def default_config_path() -> str:
    """Path of the bundled ``ppo_ext.yml`` (package data of ``sb3_ppo_ext.zoo_configs``)."""
    return str(Path(zoo_configs.__file__).with_name("ppo_ext.yml"))


def register_algorithm() -> None:
    """Make ``ppo_ext`` a first-class rl-zoo3 algorithm (idempotent); SB3's algorithms stay available.

    Adds our PPO to ``rl_zoo3.ALGOS`` and its Optuna sampler / converter to ``rl_zoo3.hyperparams_opt``, the
    documented way to run a third-party algorithm with rl-zoo3.
    """
    ALGOS[ALGORITHM_NAME] = PPO
    hyperparams_opt.HYPERPARAMS_SAMPLER.setdefault(ALGORITHM_NAME, sample_ppo_ext_params)
    hyperparams_opt.HYPERPARAMS_CONVERTER[ALGORITHM_NAME] = convert_ppo_ext_params

"""``train`` and ``optimize``: rl-zoo3's ``train.py`` with ``ppo_ext``, our config and safe config parsing by default;
``train --resume`` continues a run (:mod:`~sb3_ppo_ext.zoo.resume`)."""

from __future__ import annotations

from collections.abc import Sequence
from unittest.mock import patch

from sb3_ppo_ext.zoo.config.command_line import SafeStoreDict
from sb3_ppo_ext.zoo.experiment import SafeExperimentManager
from sb3_ppo_ext.zoo.parsers import (
    DEBUG,
    NO_PROGRESS,
    TRAIN_OPTION_CHANGES,
    TRUST_PICKLES_TRAIN,
    VEC_ENV_OPTIONS,
    peek_option,
    script_argv,
    zoo_parser,
)
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME, default_config_path, register_algorithm
from sb3_ppo_ext.zoo.resume import RESUME, resumed_run_options


def _zoo_train_argv(argv: Sequence[str], *, optimize: bool) -> list[str]:
    """Our defaults followed by the user's arguments (later options win in argparse, ``--no-progress`` included)."""
    argv = list(argv)
    defaults = ["--algo", ALGORITHM_NAME]
    algo = peek_option(argv, "--algo") or ALGORITHM_NAME
    if algo == ALGORITHM_NAME and peek_option(argv, "-conf", "--conf-file") is None:
        defaults += ["--conf-file", default_config_path()]
    defaults += ["--optimize-hyperparameters", "--no-optim-plots"] if optimize else ["--progress"]
    return defaults + argv


def train(argv: Sequence[str], *, optimize: bool = False) -> None:
    """``train`` / ``optimize``: rl-zoo3's ``train.py`` with ``ppo_ext`` and our config by default; ``train --resume``
    continues a run (:mod:`~sb3_ppo_ext.zoo.resume`)."""
    register_algorithm()
    import rl_zoo3.train  # rl-zoo3's script, imported when it runs: it imports rl_zoo3.import_envs (other packages' envs)

    program = f"sb3-ppo-ext {'optimize' if optimize else 'train'}"
    options = [NO_PROGRESS, DEBUG, TRUST_PICKLES_TRAIN, *VEC_ENV_OPTIONS, *(() if optimize else (RESUME,))]
    resumed = not optimize and peek_option(argv, "--resume") is not None
    with (
        script_argv(program, _zoo_train_argv(argv, optimize=optimize)),
        zoo_parser(program, TRAIN_OPTION_CHANGES, options, complete=resumed_run_options(argv) if resumed else None),
        patch.multiple(rl_zoo3.train, StoreDict=SafeStoreDict, ExperimentManager=SafeExperimentManager),
    ):
        rl_zoo3.train.train()

"""Deprecated: the older name of :mod:`sb3_ppo_ext.zoo.run_selection` (run folders and which one a command plays)."""

import warnings

from sb3_ppo_ext.zoo.run_selection import (
    SETUP_SETTINGS_FILES,
    Run,
    holds_model,
    holds_only_setup_files,
    list_runs,
    missing_run_message,
    model_file_pattern,
    newest_run,
    run_path,
)

__all__ = [
    "SETUP_SETTINGS_FILES",
    "Run",
    "holds_model",
    "holds_only_setup_files",
    "list_runs",
    "missing_run_message",
    "model_file_pattern",
    "newest_run",
    "run_path",
]

warnings.warn(
    "sb3_ppo_ext.zoo.runs is deprecated: import from sb3_ppo_ext.zoo.run_selection", DeprecationWarning, stacklevel=2
)

"""The ``sb3-ppo-ext`` commands by name, each from the module of its family: :mod:`~sb3_ppo_ext.zoo.train_command`
(``train``, ``optimize``), :mod:`~sb3_ppo_ext.zoo.run_commands` (``enjoy``, ``record-video``, ``export``, ``plot``),
:mod:`~sb3_ppo_ext.zoo.pretrained_commands` (the same with ``--pretrained``) and :mod:`sb3_ppo_ext.grid.cli`
(``grid``).

Each zoo-backed command runs rl-zoo3's own script function with our defaults (any option the user gives wins),
rl-zoo3's ``StoreDict`` / ``ExperimentManager`` swapped for the safe versions and its parser amended
(:func:`~sb3_ppo_ext.zoo.parsers.zoo_parser`). :func:`by_name` looks the functions up in this module when called, so
that a test can replace one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sb3_ppo_ext.grid import cli as grid_cli
from sb3_ppo_ext.zoo.parsers import NO_PROGRESS, amend_parser
from sb3_ppo_ext.zoo.run_commands import enjoy, export, plot, record_video
from sb3_ppo_ext.zoo.train_command import train

__all__ = ["NO_PROGRESS", "amend_parser", "by_name", "enjoy", "export", "grid", "plot", "record_video", "train"]


def grid(argv: Sequence[str]) -> None:
    """``sb3-ppo-ext grid``: the learning grids' command line (:func:`sb3_ppo_ext.grid.cli.main`), with a grid
    file's relative ``conf`` and ``trained_agent`` paths starting from the current directory.

    :param argv: the arguments after ``grid`` (``run GRID --root R --jobs 2``, ``collect ...``, ``report ...``).
    :raises SystemExit: with the subcommand's exit status when it is not 0.
    """
    status = grid_cli.main(argv, prog="sb3-ppo-ext grid")
    if status:
        raise SystemExit(status)


def by_name() -> dict[str, Callable[[Sequence[str]], None]]:
    """The commands by name (``train``, ``optimize``, ``enjoy``, ``record-video``, ``export``, ``plot``, ``grid``)."""
    return {
        "train": train,
        "optimize": lambda argv: train(argv, optimize=True),
        "enjoy": enjoy,
        "record-video": record_video,
        "export": export,
        "plot": plot,
        "grid": grid,
    }

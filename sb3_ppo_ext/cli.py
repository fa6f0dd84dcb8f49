"""``sb3-ppo-ext``: train, tune, watch, record, export and plot zoo-style runs of our PPO (``ppo_ext``), and run
multi-seed learning grids.

The entry point: it reads the command name and ``--debug``, runs the command (:func:`sb3_ppo_ext.zoo.commands.by_name`)
and turns a user error into one line. The command needs the ``zoo``
extra (rl-zoo3).
"""

from __future__ import annotations

import difflib
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from gymnasium.error import Error as GymnasiumError
from stable_baselines3.common.base_class import BaseAlgorithm

from sb3_ppo_ext.callbacks._render_env import headless_sdl_settings
from sb3_ppo_ext.zoo import commands
from sb3_ppo_ext.zoo.parsers import DEBUG_OPTION
from sb3_ppo_ext.zoo.stopping import TrainingStopped

USAGE = """usage: sb3-ppo-ext COMMAND [options]

Commands (each takes --help):
  train          train with rl-zoo3's machinery; defaults: --algo ppo_ext, the bundled zoo_configs/ppo_ext.yml,
                 a progress bar (--no-progress turns it off); e.g. sb3-ppo-ext train --env sb3_ppo_ext/Walker2D-v0
  optimize       Optuna search over PPO and adaptive-KL settings; share a study with --storage FILE.log|DB-URL
                 --study-name NAME
  enjoy          run a trained agent from logs/ (the algorithm of the newest run of --env unless --algo is given;
                 no window on a headless machine)
  record-video   record a video of a trained agent (rgb_array rendering, works headless)
  export         write the ONNX policy of a run
  plot           plot the training curves of runs into an image file
  grid           multi-seed learning grids: run a grid file's (task, variant, seed) cells, collect their
                 evaluations into one CSV, report mean and IQM with confidence intervals; e.g.
                 sb3-ppo-ext grid run GRID.yml --root RUNS --jobs 2, then grid collect, grid report

Every command takes --debug: the full traceback of an error instead of one line.
Runs follow rl-zoo3's layout: logs/<algo>/<env>_<n>/. Config strings are parsed safely, never eval'd. Model zips
and VecNormalize statistics are loaded without unpickling anything (enjoy, record-video, export, train -i); what
only a pickle holds is refused unless --trust-pickles is given.
"""

#: Exception types that report a mistake of the user when they carry a message and are not raised while a model
#: learns (see :func:`is_user_error`); ``gymnasium.error.Error`` (unknown env ids, missing env dependencies) too.
USER_ERROR_TYPES: tuple[type[BaseException], ...] = (ValueError, AssertionError, OSError)


def is_user_error(error: BaseException) -> bool:
    """Whether ``error`` reports a mistake in the command line, a config file, an env id or a run folder.

    That is: a :data:`USER_ERROR_TYPES` or gymnasium error with a message, not raised inside the ``learn()`` of an
    SB3 algorithm (a ``ValueError`` there, such as NaN actions, is a failure of training, not of the command line).

    :param error: an exception that ended a command (with its traceback).
    """
    if not isinstance(error, (*USER_ERROR_TYPES, GymnasiumError)) or not str(error).strip():
        return False
    return not raised_while_learning(error)


def raised_while_learning(error: BaseException) -> bool:
    """Whether the traceback of ``error`` passes through the ``learn()`` method of an SB3 algorithm."""
    return any(
        frame.f_code.co_name == "learn" and isinstance(frame.f_locals.get("self"), BaseAlgorithm)
        for frame, _ in traceback.walk_tb(error.__traceback__)
    )


def one_line(message: str) -> str:
    """``message`` with its lines joined by spaces."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def fail(message: str, program: str = "sb3-ppo-ext") -> NoReturn:
    """End the command as argparse ends on a usage error: ``<program>: error: <message>`` on stderr, exit status 2.

    :param message: what is wrong (joined into one line).
    :param program: ``sb3-ppo-ext`` or ``sb3-ppo-ext <command>``, as argparse names the program of a subcommand.
    """
    print(f"{program}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``sb3-ppo-ext`` and ``python -m sb3_ppo_ext``.

    A user error (:func:`is_user_error`) ends the command in one line with exit status 2, unless ``--debug`` is given;
    training stopped by SIGTERM or a failed env worker (:class:`~sb3_ppo_ext.zoo.stopping.TrainingStopped`, the
    model saved) ends it in one line with the exit status of the cause (143 for SIGTERM, 1 for a worker).

    Run as the program (``argv`` not given), it ignores Ctrl-C once the command has ended: a second Ctrl-C pressed
    while a stopped run saves and the process exits would otherwise kill it as the interpreter shuts down (Python
    gives SIGINT back to the system's default then), with exit status -2 / 130 instead of the command's.

    :param argv: arguments after the program name (default: ``sys.argv[1:]``).
    """
    if argv is None:
        try:
            main(sys.argv[1:])
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the process ends now (an uncaught Ctrl-C still ends it so)
        return
    argv = list(argv)
    debug = DEBUG_OPTION in argv
    argv = [token for token in argv if token != DEBUG_OPTION]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return
    command, rest = argv[0], argv[1:]
    by_name = commands.by_name()
    if command not in by_name:
        near = difflib.get_close_matches(command, list(by_name), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        fail(f"unknown command {command!r}{hint}; commands: {', '.join(by_name)}")
    os.environ.update(headless_sdl_settings())
    try:
        by_name[command](rest)
    except TrainingStopped as stopped:  # saved what it had trained; says so, and why it stopped
        print(f"sb3-ppo-ext {command}: stopped: {one_line(str(stopped))}", file=sys.stderr)
        raise SystemExit(stopped.exit_status) from None
    except Exception as error:
        if debug or not is_user_error(error):
            raise
        fail(str(error), program=f"sb3-ppo-ext {command}")


if __name__ == "__main__":
    main()

"""The rl-zoo3 parsers as ``sb3-ppo-ext`` amends them: our defaults and help texts, our options (among them those
several commands share: ``--debug``, read by the entry point, :func:`sb3_ppo_ext.cli.main`, and shown in each
command's ``--help``, and ``--trust-pickles``), one-line usage errors, and the helpers that run an rl-zoo3 script
function on an argument list."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

from sb3_ppo_ext.callbacks.export import check_onnx_opset
from sb3_ppo_ext.safe_loading.errors import TRUST_PICKLES_OPTION
from sb3_ppo_ext.validation import MIN_ONNX_OPSET, HyperparameterError
from sb3_ppo_ext.zoo.config.command_line import SafeStoreDict
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME
from sb3_ppo_ext.zoo.vec_env_choice import VEC_ENV_TYPES

DEFAULT_LOG_FOLDER = "logs"

#: An option to add to a parser: its flags and the keyword arguments of ``add_argument``.
Option = tuple[tuple[str, ...], Mapping[str, Any]]

#: The option, taken by every command, that shows the traceback of a user error.
DEBUG_OPTION = "--debug"
DEBUG_HELP = (
    "show the traceback of an error; without it, a mistake in the command line, a config file, an env id or a run "
    "folder (a ValueError, AssertionError, OSError or gymnasium error with a message, raised anywhere but inside a "
    "model's learn()) ends the command with one line 'sb3-ppo-ext COMMAND: error: ...' and exit status 2; any other "
    "error shows its traceback anyway"
)
#: ``--debug`` as each command's parser shows it (the entry point removes it before the command parses).
DEBUG: Option = ((DEBUG_OPTION,), {"action": "store_true", "default": argparse.SUPPRESS, "help": DEBUG_HELP})

TRUST_PICKLES_HELP = (
    "load the run's model zip and vecnormalize.pkl by unpickling them, as rl-zoo3 and SB3 do: a crafted file runs "
    "code, so only for files you trust (default: both are rebuilt from plain data, and what cannot be is refused)"
)
#: ``--trust-pickles`` of ``enjoy`` / ``record-video`` / ``export``.
TRUST_PICKLES: Option = ((TRUST_PICKLES_OPTION,), {"action": "store_true", "default": False, "help": TRUST_PICKLES_HELP})
#: ``--trust-pickles`` of ``train`` / ``optimize``: what ``-i`` loads.
TRUST_PICKLES_TRAIN: Option = (
    (TRUST_PICKLES_OPTION,),
    {
        "action": "store_true",
        "default": False,
        "help": "with -i: load the model zip, its VecNormalize statistics and a replay_buffer.pkl by unpickling them, as "
        "rl-zoo3 does: a crafted file runs code, so only for files you trust (default: the model and statistics "
        "are rebuilt from plain data, and what cannot be is refused)",
    },
)


def at_least_one(value: str, hint: str = "") -> int:
    """An option's integer ``value``, refused (with ``hint`` after the message) below 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}{hint}")
    return number


def n_timesteps(value: str) -> int:
    """``-n`` of ``train`` / ``optimize``: at least 1 (rl-zoo3 ignores a value <= 0 and trains the config's budget)."""
    return at_least_one(value, " (leave -n out to train the config's n_timesteps)")


def onnx_opset(value: str) -> int:
    """``--opset`` of ``export``: an ONNX opset the installed onnx and torch write
    (:func:`~sb3_ppo_ext.callbacks.export.check_onnx_opset`), checked before anything is loaded."""
    try:
        return check_onnx_opset("opset", int(value))
    except HyperparameterError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


#: ``--opset`` of ``export``, with and without ``--pretrained``.
OPSET: Option = (
    ("--opset",),
    {
        "type": onnx_opset,
        "default": 17,
        "help": f"ONNX opset version, from {MIN_ONNX_OPSET} to the newest the installed onnx and torch write (default 17)",
    },
)


#: rl-zoo3's train options as ``train`` / ``optimize`` show and check them: option string -> attributes of its action.
TRAIN_OPTION_CHANGES: dict[str, dict[str, Any]] = {
    "--algo": {"help": f"RL algorithm (default: {ALGORITHM_NAME}, our PPO; the others use rl-zoo3's own configs)"},
    "--n-timesteps": {"type": n_timesteps, "help": "training steps, >= 1 (default: the config's n_timesteps)"},
    "--conf-file": {
        "help": f"YAML config file (.yml / .yaml): one block of hyperparameters per env id (default for {ALGORITHM_NAME}: "
        "the bundled ppo_ext.yml); Python config files and packages are refused, as rl-zoo3 would run their code"
    },
    "--progress": {"help": "show a progress bar (the default of train)"},
    # None: the task's preferred VecEnv, chosen by SafeExperimentManager
    "--vec-env": {
        "choices": list(VEC_ENV_TYPES),
        "default": None,
        "help": "VecEnv type: dummy (the envs step in this process), subproc (a process per env), shared "
        "(SharedMemoryVecEnv: a block of envs in this process and one in a worker process per other core) or ray (a "
        "Ray cluster, see --ray-address; the ray extra) (default: the task's preferred VecEnv, shared for the bundled "
        "Humanoid, RocketLander and Walker2D tasks, falling back to dummy if it cannot start; else dummy)",
    },
    "--hyperparams": {
        "help": "override hyperparameters, e.g. n_envs:4 learning_rate:lin_3e-4 objective:\"'kl_penalty'\" "
        "(Python literals, parsed safely: string values need quotes)"
    },
}


#: rl-zoo3's enjoy / record_video options as ``enjoy`` / ``record-video`` show them.
PLAY_OPTION_CHANGES: dict[str, dict[str, Any]] = {
    # None: chosen from the parsed options by choose_played_run
    "--algo": {
        "default": None,
        "help": "RL algorithm of the run (default: the algorithm of the newest run of --env under --folder)",
    },
    "--folder": {"default": DEFAULT_LOG_FOLDER, "help": f"log folder (default: {DEFAULT_LOG_FOLDER})"},
    "--exp-id": {
        "help": "run number (default 0: the newest run that holds the model to play; -1: a model straight "
        "under the algorithm's folder)"
    },
}


NO_PROGRESS: Option = (
    ("--no-progress",),
    {"dest": "progress", "action": "store_false", "default": argparse.SUPPRESS, "help": "no progress bar"},
)


#: ``train`` / ``optimize`` options of ``--vec-env ray`` (and any VecEnv's keyword arguments).
VEC_ENV_OPTIONS: tuple[Option, ...] = (
    (
        ("--ray-address",),
        {
            "default": None,
            "help": "with --vec-env ray: the Ray cluster, 'auto' (started here with `ray start`), "
            "'ray://host:10001' (Ray Client) or host:port of its head (default: the cluster of RAY_ADDRESS, else a new "
            "local one)",
        },
    ),
    (
        ("--vec-env-kwargs",),
        {
            "type": str,
            "nargs": "+",
            "action": SafeStoreDict,
            "default": None,
            "help": "keyword arguments of the VecEnv class (without --vec-env: of the task's preferred one), e.g. "
            "n_workers:1 (worker processes besides this one) for --vec-env shared, envs_per_actor:8 "
            "on_actor_loss:\"'restart'\" actor_options:dict(num_cpus=1) for --vec-env ray",
        },
    ),
)


def amend_parser(parser: argparse.ArgumentParser, changes: Mapping[str, Mapping[str, Any]], options: Sequence[Option]) -> None:
    """Give the options of ``parser`` our attributes and add the ``options`` it lacks (idempotent).

    :param parser: a parser rl-zoo3 has built.
    :param changes: option string -> attributes of its action to replace (``help``, ``type``).
    :param options: options to add.
    """
    for action in parser._actions:
        for flag in action.option_strings:
            for name, value in changes.get(flag, {}).items():
                setattr(action, name, value)
    for flags, settings in options:
        if flags[0] not in parser._option_string_actions:
            parser.add_argument(*flags, **settings)


def nearest_option_hint(parser: argparse.ArgumentParser, message: str) -> str:
    """`` (did you mean --x?)``: the options of ``parser`` nearest to those an argparse error ``message`` does not know."""
    if not message.startswith("unrecognized arguments:"):
        return ""
    known = list(parser._option_string_actions)
    unknown = [token.partition("=")[0] for token in message.partition(":")[2].split() if token.startswith("--")]
    near = [match for token in unknown for match in difflib.get_close_matches(token, known, n=1)]
    return f" (did you mean {', '.join(near)}?)" if near else ""


@contextmanager
def zoo_parser(
    program: str,
    changes: Mapping[str, Mapping[str, Any]],
    options: Sequence[Option],
    complete: Callable[[argparse.Namespace, argparse.ArgumentParser], None] | None = None,
) -> Iterator[None]:
    """While an rl-zoo3 script runs as ``program``, amend its parser (:func:`amend_parser`) before it parses, and
    ``complete`` the parsed options (defaults that depend on other options; it is given the parser too) before the
    script reads them.

    rl-zoo3's scripts build their parser inline, so ``ArgumentParser.parse_known_args`` and ``error`` are swapped
    for the time of the script; they act on a parser with an ``--env`` option only (rl-zoo3's: our own parsers are
    done by then) and name it ``program`` (newer Pythons name a parser after ``python -m <module>`` when run so). A
    usage error is one line, ``<program>: error: <message>``, exit status 2, instead of argparse's usage.

    Option abbreviations are turned off (``--fold`` is an error that suggests ``--folder``): ``train`` chooses its
    config from the options as the user wrote them (:func:`peek_option`), so rl-zoo3 must read the same ones; one rule for
    every command.
    """
    parse_known_args = argparse.ArgumentParser.parse_known_args
    error = argparse.ArgumentParser.error

    def is_zoo_parser(parser: argparse.ArgumentParser) -> bool:
        return "--env" in parser._option_string_actions

    def amended_parse_known_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        if is_zoo_parser(self):
            self.prog = program
            self.allow_abbrev = False
            amend_parser(self, changes, options)
        parsed, extras = parse_known_args(self, args, namespace)
        if complete is not None and is_zoo_parser(self) and not extras:  # extras: parse_args reports them next
            complete(parsed, self)
        return parsed, extras

    def one_line_error(self: argparse.ArgumentParser, message: str) -> Any:
        if not is_zoo_parser(self):
            return error(self, message)
        self.exit(2, f"{program}: error: {message}{nearest_option_hint(self, message)}\n")

    with patch.multiple(argparse.ArgumentParser, parse_known_args=amended_parse_known_args, error=one_line_error):
        yield


def add_debug_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Show ``--debug`` in the help of one of our parsers (:func:`sb3_ppo_ext.cli.main` takes it off the arguments)."""
    parser.add_argument(*DEBUG[0], **DEBUG[1])
    return parser


def peek_option(argv: Sequence[str], *flags: str) -> str | None:
    """The value the user gave for an option (any of ``flags``), or ``None``; rl-zoo3's parser does the real work.

    Only for choosing defaults: neither reads abbreviations (see :func:`zoo_parser`); checks of what rl-zoo3 loads
    act on what it parsed (:class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager`) or hook the function that
    loads it (:func:`~sb3_ppo_ext.zoo.config.run_files.checked_get_saved_hyperparams`).
    """
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument(*flags, dest="value", default=None)
    known, _ = parser.parse_known_args(list(argv))
    return known.value


def asks_help(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks for the help (``-h`` / ``--help``)."""
    return "-h" in argv or "--help" in argv


@contextmanager
def script_argv(program: str, argv: Sequence[str]) -> Iterator[None]:
    """Run an rl-zoo3 script function as if called as ``program argv...``."""
    saved = sys.argv
    sys.argv = [program, *argv]
    try:
        yield
    finally:
        sys.argv = saved

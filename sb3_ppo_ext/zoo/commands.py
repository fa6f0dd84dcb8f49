"""The subcommands of ``sb3-ppo-ext``: rl-zoo3's scripts with ``ppo_ext``, our configs and safe config parsing.

Each zoo-backed command runs rl-zoo3's own script function on an argument list that starts with our defaults
(``--algo``, the bundled config, ``-f logs``, a progress bar), so any option the user gives later wins, with
rl-zoo3's ``StoreDict`` / ``ExperimentManager`` swapped for the safe versions and its parser amended
(:func:`zoo_parser`: our defaults in its help, our options, ``-n`` checked, one-line usage errors) while it runs.
Runs are loaded without unpickling (:mod:`sb3_ppo_ext.safe_loading`; ``enjoy`` / ``record-video`` through
:class:`~sb3_ppo_ext.zoo.loading.PlayedRunLoading`, ``train -i`` through
:class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager`) unless ``--trust-pickles`` is given.
"""

from __future__ import annotations

import argparse
import difflib
import os
import runpy
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import rl_zoo3.utils
from huggingface_sb3 import EnvironmentName
from rl_zoo3.utils import ALGOS, get_model_path

from sb3_ppo_ext.callbacks import export_onnx
from sb3_ppo_ext.callbacks._media import env_fps, write_mp4
from sb3_ppo_ext.envs._bullet import display_available
from sb3_ppo_ext.pretrained import load_pretrained, play, summarise_episodes
from sb3_ppo_ext.safe_loading import load_without_pickles, read_vecnormalize_statistics, statistics_saved
from sb3_ppo_ext.zoo.experiment import (
    ALGORITHM_NAME,
    VEC_ENV_TYPES,
    SafeExperimentManager,
    SafeStoreDict,
    default_config_path,
    patched_zoo_module,
    register_algorithm,
)
from sb3_ppo_ext.zoo.hyperparams import check_run_folder, checked_get_saved_hyperparams
from sb3_ppo_ext.zoo.loading import PlayedRunLoading, played_model_statistics
from sb3_ppo_ext.zoo.options import DEBUG, TRUST_PICKLES, TRUST_PICKLES_TRAIN, Option
from sb3_ppo_ext.zoo.plotting import X_AXES, find_runs, plot_runs
from sb3_ppo_ext.zoo.resume import given_options, run_settings, take_run_settings
from sb3_ppo_ext.zoo.runs import (
    Run,
    holds_model,
    list_runs,
    missing_run_message,
    model_file_pattern,
    newest_run,
    run_path,
)

DEFAULT_LOG_FOLDER = "logs"


def n_timesteps(value: str) -> int:
    """``-n`` of ``train`` / ``optimize``: at least 1 (rl-zoo3 ignores a value <= 0 and trains the config's budget)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value} (leave -n out to train the config's n_timesteps)")
    return number


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

#: ``--resume`` of ``train``.
RESUME: Option = (
    ("--resume",),
    {
        "default": None,
        "metavar": "RUN_FOLDER",
        "help": "continue a run (e.g. logs/ppo_ext/<env>_1) in its folder, with its own settings, from its newest "
        "checkpoint (--save-freq) or final model: step count, schedules, VecNormalize statistics, adaptive-KL "
        "state and evaluation history carry on; -n sets a new total; only options of how to run (-n, "
        "--num-threads, --progress, --vec-env, --device, ...) may be given with it",
    },
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
    usage error is one line, ``<program>: error: <message>``, exit status 2, instead of argparse's usage (30 lines for
    rl-zoo3's train).

    Option abbreviations are turned off (``--fold`` is an error that suggests ``--folder``): ``train`` chooses its
    config from the options as the user wrote them (:func:`_peek`), so rl-zoo3 must read the same ones; one rule for
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

    with patched_zoo_module(argparse.ArgumentParser, parse_known_args=amended_parse_known_args, error=one_line_error):
        yield


def add_debug_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Show ``--debug`` in the help of one of our parsers (:func:`sb3_ppo_ext.cli.main` takes it off the arguments)."""
    parser.add_argument(*DEBUG[0], **DEBUG[1])
    return parser


def _peek(argv: Sequence[str], *flags: str) -> str | None:
    """The value the user gave for an option (any of ``flags``), or ``None``; rl-zoo3's parser does the real work.

    Only for choosing defaults: neither reads abbreviations (see :func:`zoo_parser`); checks of what rl-zoo3 loads
    act on what it parsed (:class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager`) or hook the function that
    loads it (:func:`~sb3_ppo_ext.zoo.hyperparams.checked_get_saved_hyperparams`).
    """
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument(*flags, dest="value", default=None)
    known, _ = parser.parse_known_args(list(argv))
    return known.value


def _asks_help(argv: Sequence[str]) -> bool:
    return "-h" in argv or "--help" in argv


@contextmanager
def _script_argv(program: str, argv: Sequence[str]) -> Iterator[None]:
    """Run an rl-zoo3 script function as if called as ``program argv...``."""
    saved = sys.argv
    sys.argv = [program, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def _zoo_train_argv(argv: Sequence[str], *, optimize: bool) -> list[str]:
    """Our defaults followed by the user's arguments (later options win in argparse, ``--no-progress`` included)."""
    argv = list(argv)
    defaults = ["--algo", ALGORITHM_NAME]
    algo = _peek(argv, "--algo") or ALGORITHM_NAME
    if algo == ALGORITHM_NAME and _peek(argv, "-conf", "--conf-file") is None:
        defaults += ["--conf-file", default_config_path()]
    defaults += ["--optimize-hyperparameters", "--no-optim-plots"] if optimize else ["--progress"]
    return defaults + argv


def _resumed_run_options(user_argv: Sequence[str]) -> Callable[[argparse.Namespace, argparse.ArgumentParser], None]:
    """The options of ``train --resume RUN``: the run's saved ones, and those of
    :data:`~sb3_ppo_ext.zoo.resume.RESUME_OPTIONS` that ``user_argv`` gives."""

    def complete(parsed: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
        given = given_options(parser, list(user_argv))
        try:
            _, saved_arguments, _ = run_settings(parsed.resume)
            take_run_settings(parsed, saved_arguments, given)
        except ValueError as error:
            parser.error(str(error))

    return complete


def train(argv: Sequence[str], *, optimize: bool = False) -> None:
    """``train`` / ``optimize``: rl-zoo3's ``train.py`` with ``ppo_ext`` and our config by default; ``train --resume``
    continues a run (:mod:`~sb3_ppo_ext.zoo.resume`)."""
    register_algorithm()
    import rl_zoo3.train  # rl-zoo3's script, imported when it runs: it imports rl_zoo3.import_envs (other packages' envs)

    program = f"sb3-ppo-ext {'optimize' if optimize else 'train'}"
    options = [NO_PROGRESS, DEBUG, TRUST_PICKLES_TRAIN, *VEC_ENV_OPTIONS, *(() if optimize else (RESUME,))]
    resumed = not optimize and _peek(argv, "--resume") is not None
    with (
        _script_argv(program, _zoo_train_argv(argv, optimize=optimize)),
        zoo_parser(program, TRAIN_OPTION_CHANGES, options, complete=_resumed_run_options(argv) if resumed else None),
        patched_zoo_module(rl_zoo3.train, StoreDict=SafeStoreDict, ExperimentManager=SafeExperimentManager),
    ):
        rl_zoo3.train.train()


def newest_algorithm(log_folder: str, env_id: str, exp_id: int = 0) -> str:
    """The algorithm of the newest run of ``env_id`` under ``log_folder`` (run ``exp_id`` only, unless it is 0).

    Says which it chose when several algorithms have runs of the env.

    :raises ValueError: when there is no such run, naming the runs there are and the nearest env name.
    """

    env_name = str(EnvironmentName(env_id))
    runs = list_runs(log_folder, ALGOS)
    newest = newest_run(runs, env_name, exp_id)
    if newest is None:
        raise ValueError(missing_run_message(runs, log_folder, env_name, exp_id))
    algorithms = sorted({run.algo for run in runs if run.env_name == env_name})
    if len(algorithms) > 1:
        print(
            f"Runs of {env_name} under {log_folder}/ by {', '.join(algorithms)}: using the newest, {newest.algo}'s "
            "(--algo chooses)"
        )
    return newest.algo


def newest_played_run(log_folder: str, env_id: str, model: str, algo: str | None = None) -> Run | None:
    """The run that ``enjoy`` / ``record-video`` / ``export`` play when no run number is given: the newest run of
    ``env_id`` under ``log_folder`` (of ``algo`` only, unless it is ``None``) that holds the ``model`` file, or ``None``.

    Says which run it chose, and which newer runs it passed over for holding no such file (rl-zoo3 takes the
    highest run number, even a folder an ``optimize`` run or a failed ``train`` left with monitor files only).

    :param model: the model file, a glob pattern relative to a run folder (:func:`~sb3_ppo_ext.zoo.runs.model_file_pattern`).
    :raises ValueError: when runs of the env exist but none holds the file, naming them; without ``algo``, also when
        there is no run of the env at all (with ``algo``, rl-zoo3 reports that: it may download a run from the hub).
    """

    env_name = str(EnvironmentName(env_id))
    every_run = list_runs(log_folder, ALGOS)
    runs = [run for run in every_run if run.env_name == env_name and algo in (None, run.algo)]
    if not runs:
        if algo is None:
            raise ValueError(missing_run_message(every_run, log_folder, env_name))
        return None
    played = [run for run in runs if holds_model(run_path(log_folder, run), model)]
    names = sorted(f"{run.algo}/{run.env_name}_{run.number}" for run in runs)
    if not played:
        raise ValueError(
            f"no run of {env_name} under {log_folder}/ holds {model} (runs: {', '.join(names)}): an "
            "optimize run, or a train that stopped before it saved, leaves none; --load-best / "
            "--load-last-checkpoint play other models"
        )
    newest = newest_run(played, env_name)
    assert newest is not None  # played is a non-empty list of runs of env_name
    passed = sorted(
        f"{run.algo}/{run.env_name}_{run.number}"
        for run in runs
        if run not in played and (run.modified > newest.modified or (run.algo == newest.algo and run.number > newest.number))
    )
    algorithms = sorted({run.algo for run in played})
    if len(algorithms) > 1:
        print(
            f"Runs of {env_name} under {log_folder}/ by {', '.join(algorithms)}: using the newest, {newest.algo}'s "
            "(--algo chooses)"
        )
    skipped = f"; passed over {', '.join(passed)}: no {model} in them" if passed else ""
    print(f"Loading latest experiment with a model, id={newest.number} ({run_path(log_folder, newest)}{skipped})")
    return newest


def played_run(
    log_folder: str,
    env_id: str,
    algo: str | None,
    exp_id: int,
    *,
    load_best: bool = False,
    load_checkpoint: int | str | None = None,
    load_last_checkpoint: bool = False,
) -> tuple[str, int]:
    """The algorithm and run number that ``enjoy`` / ``record-video`` / ``export`` play, given their options.

    Run 0 (the default) is the newest run of ``env_id`` under ``log_folder`` that holds the model the ``load_*``
    options choose (:func:`newest_played_run`), of ``algo`` if given; a run number without ``algo``: the algorithm of
    the newest run so numbered; -1 (a model straight under the algorithm's folder): ``ppo_ext`` unless ``algo``.
    ``(algo, 0)`` when ``algo`` is given and has no run of the env, for rl-zoo3 to report (or download).
    """
    if exp_id < 0:
        return algo or ALGORITHM_NAME, exp_id
    if exp_id > 0:
        return algo or newest_algorithm(log_folder, env_id, exp_id), exp_id

    model = model_file_pattern(
        str(EnvironmentName(env_id)),
        load_best=load_best,
        load_checkpoint=load_checkpoint,
        load_last_checkpoint=load_last_checkpoint,
    )
    played = newest_played_run(log_folder, env_id, model, algo)
    if played is None:  # only when algo is given: without it, newest_played_run raises instead
        return cast(str, algo), 0
    return played.algo, played.number


def choose_played_run(parsed: argparse.Namespace) -> None:
    """Complete the options rl-zoo3's enjoy / record_video parsed: ``--algo`` and ``--exp-id`` of the played run
    (:func:`played_run`). Chosen from the parsed options, so from exactly the folder rl-zoo3 then reads."""
    parsed.algo, parsed.exp_id = played_run(
        parsed.folder,
        parsed.env.gym_id,
        parsed.algo,
        parsed.exp_id,
        load_best=parsed.load_best,
        load_checkpoint=parsed.load_checkpoint,
        load_last_checkpoint=parsed.load_last_checkpoint,
    )


def _play_options(loading: PlayedRunLoading) -> Callable[[argparse.Namespace, argparse.ArgumentParser], None]:
    """Complete the options rl-zoo3's enjoy / record_video parsed: the played run (:func:`choose_played_run`) and
    whether ``loading`` trusts pickles."""

    def complete(parsed: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
        choose_played_run(parsed)
        loading.complete(parsed)

    return complete


def _zoo_play_argv(argv: Sequence[str], *, headless_no_render: bool) -> list[str]:
    """The user's arguments, after ``--no-render`` on a headless machine for ``enjoy``; the other defaults are set
    on rl-zoo3's parser (:data:`PLAY_OPTION_CHANGES`, :func:`choose_played_run`)."""
    argv = list(argv)
    if headless_no_render and not display_available() and "--no-render" not in argv and not _asks_help(argv):
        print("No display found: running without a window (use `sb3-ppo-ext record-video` for a video).")
        return ["--no-render", *argv]
    return argv


def _pretrained_parser(command: str, description: str | None) -> argparse.ArgumentParser:
    parser = add_debug_option(
        argparse.ArgumentParser(prog=f"sb3-ppo-ext {command}", description=description, allow_abbrev=False)
    )
    parser.add_argument(
        "--pretrained",
        action="store_true",
        required=True,
        help="play the agent shipped with the package (no training run, no pickle loaded)",
    )
    parser.add_argument("--env", required=True, help="env id with a shipped agent, or an agent folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env")
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return number


def _default_output(env_id_or_folder: str, folder: str, extension: str) -> str:
    """``<folder>/<env name>-pretrained<extension>``, numbered (``-2``, ``-3``...) rather than replacing a file."""

    if os.path.isdir(env_id_or_folder):
        name = os.path.basename(os.path.normpath(env_id_or_folder))
    else:
        name = str(EnvironmentName(env_id_or_folder))
    path, number = os.path.join(folder, f"{name}-pretrained{extension}"), 1
    while os.path.exists(path):
        number += 1
        path = os.path.join(folder, f"{name}-pretrained-{number}{extension}")
    return path


def episode_line(episode: dict[str, Any]) -> str:
    """One line of an episode played by :func:`~sb3_ppo_ext.pretrained.playing.play`: return, length, and what the task
    reports (distance and speed, flags, success and how a failure ended)."""
    line = f"Episode Reward: {episode['return']:.2f}  Episode Length: {episode['length']}"
    if "speed" in episode:
        line += f"  distance {episode['distance']:.1f} m  mean speed {episode['speed']:.2f} m/s"
    if "flags_reached" in episode:
        line += f"  flags reached {episode['flags_reached']}"
    if "success" in episode:
        ended = episode.get("crash_reason", "time limit" if episode["truncated"] else "ended")
        line += "  success" if episode["success"] else f"  no success ({ended})"
    elif episode["truncated"]:
        line += "  (time limit)"
    return line


def episodes_summary(episodes: list[dict[str, Any]]) -> list[str]:
    """The lines that sum up the episodes played (:func:`~sb3_ppo_ext.pretrained.playing.summarise_episodes`): the mean
    return with its spread (standard deviation, lowest and highest) and the mean length; the success rate with how
    the other episodes ended, where the task reports success; the mean speed and the flags, where it has them; the
    reward per step, term by term, where the task reports its terms."""

    if not episodes:
        return ["no episode finished within the steps played (raise -n)"]
    summary = summarise_episodes(episodes)
    count = summary["episodes"]
    returns = [episode["return"] for episode in episodes]
    lines = [
        f"{count} episode{'s' if count > 1 else ''}: mean return {summary['mean_return']:.2f} (std "
        f"{summary['std_return']:.2f}, min {min(returns):.2f}, max {max(returns):.2f}), mean length "
        f"{summary['mean_length']:.0f}"
    ]
    if "successes" in summary:
        failures = ", ".join(f"{reason} {number}" for reason, number in summary["failures"].items())
        lines.append(
            f"success rate: {summary['successes']}/{count} ({100 * summary['successes'] / count:.0f}%)"
            + (f"; the others ended by: {failures}" if failures else "")
        )
    if "mean_speed_m_s" in summary:
        lines.append(f"mean speed {summary['mean_speed_m_s']:.2f} m/s")
    if "mean_flags" in summary:
        lines.append(
            f"flags reached: mean {summary['mean_flags']:.2f}, at least one in {summary['with_a_flag']}/{count} episodes"
        )
    if "reward_terms_per_step" in summary:
        terms = ", ".join(f"{term} {value:.3f}" for term, value in summary["reward_terms_per_step"].items())
        lines.append(f"reward per step: {terms}")
    return lines


def _print_episodes(episodes: list[dict[str, Any]]) -> None:
    for episode in episodes:
        print(episode_line(episode))
    for line in episodes_summary(episodes):
        print(line)


def _episode_step_limit(env: Any) -> int:
    """The time limit of the episodes of ``env`` (a ``VecEnv``), 1000 steps where its spec has none."""
    spec = env.get_attr("spec")[0]
    return int(getattr(spec, "max_episode_steps", None) or 1000)


def enjoy_pretrained(argv: Sequence[str]) -> None:
    """``enjoy --pretrained``: play a shipped agent for a few episodes, printing each one's return (and distance and
    speed, success), then their mean, spread and success rate."""

    parser = _pretrained_parser("enjoy", enjoy_pretrained.__doc__)
    parser.add_argument("--n-episodes", type=_positive, default=5, help="episodes to play (default: 5)")
    parser.add_argument(
        "-n",
        "--n-timesteps",
        type=_positive,
        default=None,
        help="steps to play at most (default: what --n-episodes episodes of the task's time limit take)",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    parser.add_argument("--no-render", action="store_true", help="no window (the default on a headless machine)")
    args = parser.parse_args(list(argv))
    render = not args.no_render and display_available()
    model, env = load_pretrained(args.env, seed=args.seed, render_mode="human" if render else None)
    try:
        steps = args.n_timesteps or args.n_episodes * _episode_step_limit(env)
        _print_episodes(play(model, env, steps, deterministic=not args.stochastic, n_episodes=args.n_episodes))
    finally:
        env.close()


def record_video_pretrained(argv: Sequence[str]) -> None:
    """``record-video --pretrained``: an MP4 of a shipped agent (rendered off-screen)."""

    parser = _pretrained_parser("record-video", record_video_pretrained.__doc__)
    parser.add_argument("-n", "--n-timesteps", type=_positive, default=1000, help="steps to record")
    parser.add_argument(
        "-o",
        "--output-folder",
        default="videos",
        help="folder of the video (<env>-pretrained.mp4; numbered instead of replacing an earlier one)",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    args = parser.parse_args(list(argv))
    model, env = load_pretrained(args.env, seed=args.seed, render_mode="rgb_array")
    try:
        frames: list = []
        episodes = play(
            model, env, args.n_timesteps, deterministic=not args.stochastic, on_frame=lambda: frames.append(env.render())
        )
        fps = env_fps(env.envs[0]) if hasattr(env, "envs") else 30.0
    finally:
        env.close()
    os.makedirs(args.output_folder, exist_ok=True)
    path = _default_output(args.env, args.output_folder, ".mp4")
    write_mp4(path, frames, fps)
    _print_episodes(episodes)
    print(f"Saved {len(frames)} frames to {path}")


def export_pretrained(argv: Sequence[str]) -> None:
    """``export --pretrained``: the ONNX policy of a shipped agent (raw observation -> action)."""

    parser = _pretrained_parser("export", export_pretrained.__doc__)
    parser.add_argument(
        "-o", "--output", help="ONNX file (default: <env>-pretrained.onnx here, numbered instead of replacing an earlier one)"
    )
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    args = parser.parse_args(list(argv))
    model, env = load_pretrained(args.env, seed=args.seed)
    output = args.output or _default_output(args.env, ".", ".onnx")
    try:
        export_onnx(model, output, opset=args.opset)  # bakes in the statistics of the model's env (frozen VecNormalize)
    finally:
        env.close()
    print(f"Exported the pretrained agent of {args.env} to {output}")


def enjoy(argv: Sequence[str]) -> None:
    """``enjoy``: rl-zoo3's ``enjoy.py`` on the runs under ``logs/``; no window on a headless machine."""
    if "--pretrained" in argv:
        enjoy_pretrained(argv)
        return
    register_algorithm()
    import rl_zoo3.enjoy  # rl-zoo3's script, imported when it runs: it imports rl_zoo3.import_envs (other packages' envs)

    program = "sb3-ppo-ext enjoy"
    zoo_argv = _zoo_play_argv(argv, headless_no_render=True)
    loading = PlayedRunLoading()
    # The run's config.yml / args.yml are checked by the function that reads them, in the folder it reads them from;
    # the model and the statistics are loaded through `loading` (no pickle unless --trust-pickles).
    with (
        _script_argv(program, zoo_argv),
        zoo_parser(program, PLAY_OPTION_CHANGES, [DEBUG, TRUST_PICKLES], complete=_play_options(loading)),
        patched_zoo_module(
            rl_zoo3.enjoy,
            StoreDict=SafeStoreDict,
            get_saved_hyperparams=checked_get_saved_hyperparams,
            ALGOS=loading.algorithms(rl_zoo3.enjoy.ALGOS),
            create_test_env=loading.recording(rl_zoo3.enjoy.create_test_env),
        ),
        patched_zoo_module(rl_zoo3.utils, VecNormalize=loading.statistics_loader()),
    ):
        rl_zoo3.enjoy.enjoy()


def record_video(argv: Sequence[str]) -> None:
    """``record-video``: rl-zoo3's ``record_video.py`` (renders ``rgb_array``, works headless)."""
    if "--pretrained" in argv:
        record_video_pretrained(argv)
        return
    register_algorithm()

    program = "sb3-ppo-ext record-video"
    zoo_argv = _zoo_play_argv(argv, headless_no_render=False)
    loading = PlayedRunLoading()
    # record_video.py is a __main__ script: it imports ALGOS, StoreDict, create_test_env and get_saved_hyperparams from
    # rl_zoo3.utils when it runs; the run's config.yml / args.yml are checked by the function that reads them; the
    # model and the statistics are loaded through `loading` (no pickle unless --trust-pickles).
    with (
        _script_argv(program, zoo_argv),
        zoo_parser(program, PLAY_OPTION_CHANGES, [DEBUG, TRUST_PICKLES], complete=_play_options(loading)),
        patched_zoo_module(
            rl_zoo3.utils,
            StoreDict=SafeStoreDict,
            get_saved_hyperparams=checked_get_saved_hyperparams,
            ALGOS=loading.algorithms(rl_zoo3.utils.ALGOS),
            create_test_env=loading.recording(rl_zoo3.utils.create_test_env),
            VecNormalize=loading.statistics_loader(),
        ),
    ):
        runpy.run_module("rl_zoo3.record_video", run_name="__main__")


def plot(argv: Sequence[str]) -> None:
    """``plot``: training curves of the runs of one or more environments into an image file."""

    parser = add_debug_option(argparse.ArgumentParser(prog="sb3-ppo-ext plot", description=plot.__doc__, allow_abbrev=False))
    parser.add_argument("--env", nargs="+", required=True, help="environment id(s)")
    parser.add_argument("--algo", help="algorithm folder under the log folder (default: that of the newest run of each env)")
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument("--exp-id", type=int, nargs="+", help="run numbers to include (default: all)")
    parser.add_argument("-o", "--output", help="image file, .png / .pdf / .svg (default: <folder>/<algo>/<env>_curves.png)")
    parser.add_argument("-x", "--x-axis", choices=X_AXES, default="steps")
    parser.add_argument("-w", "--window", type=int, default=20, help="episodes in the moving average")
    args = parser.parse_args(list(argv))
    register_algorithm()
    algorithms = {env_id: args.algo or newest_algorithm(args.folder, env_id) for env_id in args.env}
    runs = [run for env_id, algo in algorithms.items() for run in find_runs(args.folder, algo, env_id)]
    if args.exp_id:
        runs = [run for run in runs if int(run.rsplit("_", 1)[1]) in args.exp_id]
    if not runs:
        where = ", ".join(sorted({os.path.join(args.folder, algo) for algo in algorithms.values()}))
        raise ValueError(
            f"no runs of {' '.join(args.env)} numbered {args.exp_id} under {where}"
            if args.exp_id
            else f"no runs of {' '.join(args.env)} under {where}"
        )
    first_env = args.env[0]
    output = args.output or os.path.join(args.folder, algorithms[first_env], f"{EnvironmentName(first_env)}_curves.png")
    plotted = plot_runs(runs, output, x_axis=args.x_axis, window=args.window, title=", ".join(args.env))
    unfinished = "" if plotted == len(runs) else f" ({len(runs) - plotted} without a finished episode yet)"
    print(f"Plotted {plotted} of {len(runs)} runs{unfinished} into {os.path.abspath(output)}; -o chooses the file")


def export(argv: Sequence[str]) -> None:
    """``export``: write the ONNX policy of a run (raw observation -> action, normalisation included); nothing is
    unpickled unless ``--trust-pickles`` is given."""
    if "--pretrained" in argv:
        export_pretrained(argv)
        return
    register_algorithm()

    parser = add_debug_option(
        argparse.ArgumentParser(prog="sb3-ppo-ext export", description=export.__doc__, allow_abbrev=False)
    )
    parser.add_argument("--env", required=True, help="environment id of the run")
    parser.add_argument(
        "--algo",
        choices=list(ALGOS),
        help="RL algorithm of the run (default: the algorithm of the newest run of --env under --folder)",
    )
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument(
        "--exp-id", type=int, default=0, help="run number (default 0: the newest run that holds the model to export)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--load-best", action="store_true", help="export best_model.zip instead of the final model")
    which.add_argument("--load-checkpoint", type=int, help="export the checkpoint of this many timesteps")
    which.add_argument("--load-last-checkpoint", action="store_true", help="export the latest checkpoint")
    parser.add_argument("-o", "--output", help="ONNX file (default: next to the model, with .onnx)")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    parser.add_argument(*TRUST_PICKLES[0], **TRUST_PICKLES[1])
    args = parser.parse_args(list(argv))

    env_name = EnvironmentName(args.env)
    algo, exp_id = played_run(
        args.folder,
        args.env,
        args.algo,
        args.exp_id,
        load_best=args.load_best,
        load_checkpoint=args.load_checkpoint,
        load_last_checkpoint=args.load_last_checkpoint,
    )
    _, model_path, log_path = get_model_path(
        exp_id, args.folder, algo, env_name, args.load_best, args.load_checkpoint, args.load_last_checkpoint
    )
    check_run_folder(os.path.join(log_path, str(env_name)))
    vecnormalize_path = played_model_statistics(
        log_path,
        str(env_name),
        load_best=args.load_best,
        load_checkpoint=args.load_checkpoint,
        load_last_checkpoint=args.load_last_checkpoint,
    )
    statistics: Any = None
    if args.trust_pickles:
        model = ALGOS[algo].load(model_path, device="cpu")
        statistics = vecnormalize_path if os.path.isfile(vecnormalize_path) else None
    else:
        model = load_without_pickles(model_path, algorithm=ALGOS[algo], device="cpu", training=False)
        if statistics_saved(vecnormalize_path):
            statistics = read_vecnormalize_statistics(vecnormalize_path)  # refuses a pickle without its plain twin
    output = args.output or os.path.splitext(model_path)[0] + ".onnx"
    export_onnx(model, output, statistics, opset=args.opset)
    print(f"Exported {model_path} to {output}")

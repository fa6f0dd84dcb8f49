"""Run selection: the run folders of a log folder in rl-zoo3's layout, ``<log folder>/<algo>/<env name>_<n>/``, and
which one a command (``enjoy``, ``record-video``, ``export``, ``plot``) means when the user names only the env."""

from __future__ import annotations

import argparse
import difflib
import glob
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple, cast

from huggingface_sb3 import EnvironmentName
from rl_zoo3.utils import ALGOS

from sb3_ppo_ext.callbacks.checkpoint import DEFAULT_NAME_PREFIX, checkpoint_file_name
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME


class Run(NamedTuple):
    """One run folder."""

    algo: str
    #: the env id with ``/`` replaced by ``-``, as in the folder name (``sb3_ppo_ext-Walker2D-v0``)
    env_name: str
    number: int
    #: modification time of the folder, i.e. when it last received a file (the final model is written last)
    modified: float


def list_runs(log_folder: str, algorithms: Iterable[str]) -> list[Run]:
    """Every run folder ``<log_folder>/<algo>/<env name>_<n>`` of the given algorithms, sorted."""
    runs = []
    for algo in algorithms:
        algo_folder = os.path.join(log_folder, algo)
        if not os.path.isdir(algo_folder):
            continue
        for name in os.listdir(algo_folder):
            env_name, separator, number = name.rpartition("_")
            path = os.path.join(algo_folder, name)
            if separator and env_name and number.isdigit() and os.path.isdir(path):
                runs.append(Run(algo, env_name, int(number), os.path.getmtime(path)))
    return sorted(runs)


def run_path(log_folder: str, run: Run) -> str:
    """The folder of ``run`` under ``log_folder``."""
    return os.path.join(log_folder, run.algo, f"{run.env_name}_{run.number}")


def model_file_pattern(
    env_name: str, *, load_best: bool = False, load_checkpoint: int | str | None = None, load_last_checkpoint: bool = False
) -> str:
    """The file (a glob pattern, relative to a run folder) of the model that rl-zoo3's ``get_model_path`` loads with
    these options: the final model ``<env name>.zip``, ``best_model.zip``, or a ``--save-freq`` checkpoint."""
    if load_best:
        return "best_model.zip"
    if load_checkpoint is not None:
        return checkpoint_file_name(DEFAULT_NAME_PREFIX, load_checkpoint)
    if load_last_checkpoint:
        return checkpoint_file_name(DEFAULT_NAME_PREFIX, "*")
    return f"{glob.escape(env_name)}.zip"


def holds_model(folder: str, pattern: str) -> bool:
    """Whether run ``folder`` holds a file matching ``pattern`` (from :func:`model_file_pattern`).

    A run folder without one is a run that stopped before it saved a model, or the folder an ``optimize`` run
    leaves (monitor files only): nothing to play."""
    return any(os.path.isfile(path) for path in glob.glob(os.path.join(glob.escape(folder), pattern)))


#: The hidden file of a run folder that the ``train`` training it holds locked
#: (:class:`~sb3_ppo_ext.zoo.run_lock.RunFolderLock`), with that trainer's pid: no file of the run, ignored by what reads
#: runs.
LOCK_FILE = ".train.lock"

#: What a ``train`` command writes into its new run folder before its first training step, besides the training
#: envs' monitor files (``<n>.monitor.csv``): the files of the ``<env name>/`` folder, with the run's settings and
#: its first ``VecNormalize`` statistics.
SETUP_SETTINGS_FILES: frozenset[str] = frozenset(
    {"config.yml", "args.yml", "command.txt", "vecnormalize.pkl", "vecnormalize.npz"}
)


def holds_only_setup_files(folder: str, env_name: str) -> bool:
    """Whether run ``folder`` holds nothing but what a ``train`` command writes there before it trains: monitor
    files, an empty ``progress.csv`` (opened when training starts, written at the first dump of the logger), the
    trainer's lock file (:data:`LOCK_FILE`) and the ``<env name>/`` folder of
    :data:`SETUP_SETTINGS_FILES` (no model, checkpoint, evaluation or anything else)."""
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and (entry.name.endswith(".monitor.csv") or entry.name == LOCK_FILE):
            continue
        if entry.name == PROGRESS_FILE and entry.is_file(follow_symlinks=False) and entry.stat().st_size == 0:
            continue
        if entry.name != env_name or entry.is_symlink() or not entry.is_dir():
            return False
        if any(
            not item.is_file(follow_symlinks=False) or item.name not in SETUP_SETTINGS_FILES for item in os.scandir(entry.path)
        ):
            return False
    return True


def newest_run(runs: Iterable[Run], env_name: str, number: int = 0) -> Run | None:
    """The most recently modified run of ``env_name`` (among the runs numbered ``number`` unless it is 0), or ``None``."""
    candidates = [run for run in runs if run.env_name == env_name and number in (0, run.number)]
    return max(candidates, key=lambda run: run.modified, default=None)


def missing_run_message(runs: Sequence[Run], log_folder: str, env_name: str, number: int = 0) -> str:
    """Why no run of ``env_name`` (numbered ``number`` unless 0) is found under ``log_folder``: the runs that are
    there and the nearest env name."""
    if not runs:
        return f"no run under {log_folder}/ (no <algo>/<env>_<n> folder there): train one first, with sb3-ppo-ext train"
    if number and any(run.env_name == env_name for run in runs):
        numbers = sorted({run.number for run in runs if run.env_name == env_name})
        return f"no run {env_name}_{number} under {log_folder}/<algo>/ (runs of {env_name}: {numbers})"
    env_names = sorted({run.env_name for run in runs})
    near = difflib.get_close_matches(env_name, env_names, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    names = sorted({f"{run.algo}/{run.env_name}" for run in runs})
    listed = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    return f"no run of {env_name} under {log_folder}/ (runs there: {listed}){hint}"


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
    _say_which_algorithm([run for run in runs if run.env_name == env_name], newest, log_folder)
    return newest.algo


def newest_played_run(log_folder: str, env_id: str, model: str, algo: str | None = None) -> Run | None:
    """The run that ``enjoy`` / ``record-video`` / ``export`` play when no run number is given: the newest run of
    ``env_id`` under ``log_folder`` (of ``algo`` only, unless it is ``None``) that holds the ``model`` file, or ``None``.

    Says which run it chose, and which newer runs it passed over for holding no such file (rl-zoo3 takes the
    highest run number, even a folder an ``optimize`` run or a failed ``train`` left with monitor files only).

    :param model: the model file, a glob pattern relative to a run folder (:func:`model_file_pattern`).
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
    if not played:
        names = sorted(f"{run.algo}/{run.env_name}_{run.number}" for run in runs)
        raise ValueError(
            f"no run of {env_name} under {log_folder}/ holds {model} (runs: {', '.join(names)}): an "
            "optimize run, or a train that stopped before it saved, leaves none; --load-best / "
            "--load-last-checkpoint play other models"
        )
    newest = newest_run(played, env_name)
    assert newest is not None  # played is a non-empty list of runs of env_name
    _say_which_algorithm(played, newest, log_folder)
    passed = _passed_over(runs, played, newest)
    skipped = f"; passed over {', '.join(passed)}: no {model} in them" if passed else ""
    print(f"Loading latest experiment with a model, id={newest.number} ({run_path(log_folder, newest)}{skipped})")
    return newest


def _say_which_algorithm(runs: Sequence[Run], newest: Run, log_folder: str) -> None:
    """Say which algorithm's run was chosen when ``runs`` (of one env) are by several algorithms."""
    algorithms = sorted({run.algo for run in runs})
    if len(algorithms) > 1:
        print(
            f"Runs of {newest.env_name} under {log_folder}/ by {', '.join(algorithms)}: using the newest, "
            f"{newest.algo}'s (--algo chooses)"
        )


def _passed_over(runs: Sequence[Run], played: Sequence[Run], newest: Run) -> list[str]:
    """The runs (``algo/env_n``) newer than the chosen one, or numbered above it, that hold no model to play."""
    return sorted(
        f"{run.algo}/{run.env_name}_{run.number}"
        for run in runs
        if run not in played and (run.modified > newest.modified or (run.algo == newest.algo and run.number > newest.number))
    )


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

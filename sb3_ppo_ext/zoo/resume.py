"""Continue a zoo run where it stopped: ``sb3-ppo-ext train --resume RUN_FOLDER``.

Where rl-zoo3's ``-i model.zip`` starts a new run from a model (a new folder, the counters from 0), ``--resume``
continues the same run, for any algorithm rl-zoo3 runs:

- the settings are the run's own (its ``args.yml`` and ``config.yml``, whatever the config file says today); only
  :data:`RESUME_OPTIONS` may be given again, and a new ``-n`` / ``--save-freq`` is written back
  (:data:`RUN_PLAN_OPTIONS`);
- the model is the newest intact checkpoint, or the final model when it has more steps (:func:`find_resume_point`),
  loaded without unpickling unless ``--trust-pickles``, with the ``VecNormalize`` statistics saved with it;
- training continues with ``reset_num_timesteps=False`` up to the same total; the evaluation history is kept up to
  the checkpoint (:func:`restore_evaluation_history`) and the monitor files are continued (:class:`ContinuedMonitor`).

Not restored: the envs' states and the random generators (fresh episodes, the generators seeded from the run's seed),
and the collection between the checkpoint and the stop, which is done again.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common import env_util
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.monitor import Monitor

from sb3_ppo_ext.callbacks.checkpoint import find_latest_checkpoint, list_checkpoints, model_zip_defect
from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.safe_loading import load_bounded_npz, read_zip_data
from sb3_ppo_ext.validation import MAX_EVALUATION_HISTORY_BYTES
from sb3_ppo_ext.zoo.config.blocks import MAX_N_TIMESTEPS
from sb3_ppo_ext.zoo.config.run_files import check_run_folder, load_run_yaml
from sb3_ppo_ext.zoo.parsers import Option
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE, check_progress_csv
from sb3_ppo_ext.zoo.run_text_files import MonitorFile, scan_monitor

#: The options that may be given with ``--resume`` (``argparse`` destinations): how the run is carried out, not what
#: it trains. Every other setting comes from the run's ``args.yml`` / ``config.yml``.
RESUME_OPTIONS: frozenset[str] = frozenset(
    {
        "resume",
        "n_timesteps",
        "num_threads",
        "progress",
        "verbose",
        "device",
        "vec_env",
        "vec_env_kwargs",
        "ray_address",
        "trust_pickles",
        "log_interval",
        "gym_packages",
        "debug",
        "save_freq",
    }
)
#: The options of :data:`RESUME_OPTIONS` that are the run's plan, not this session's way of running: a resume that
#: gives them writes them into the run's ``args.yml``, so that the next plain ``--resume`` keeps the new total budget
#: and checkpoints (the others, e.g. ``--num-threads`` or ``--trust-pickles``, hold for the session that gives them).
RUN_PLAN_OPTIONS: tuple[str, ...] = ("n_timesteps", "save_freq")
#: Saved options that are not taken over: ``--gym-packages`` imports modules, so it is only taken from the command
#: line; ``-i`` and the search options do not apply to a resumed run.
NOT_TAKEN_FROM_RUN: dict[str, Any] = {
    "gym_packages": [],
    "trained_agent": "",
    "optimize_hyperparameters": False,
    "hyperparams": None,
    "uuid": False,
}


class ResumeError(ValueError):
    """A run folder that ``--resume`` cannot continue (no such run, no intact checkpoint, unreadable settings)."""


def run_settings(run_folder: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The parameter folder of a run (``<run>/<env>``) and its saved ``args.yml`` and ``config.yml``.

    :param run_folder: rl-zoo3's run folder, ``<log folder>/<algo>/<env>_<n>``.
    :raises ResumeError: when the folder or its settings are missing, unreadable or refused
        (:func:`~sb3_ppo_ext.zoo.config.run_files.check_run_folder`).
    """
    if not os.path.isdir(run_folder):
        raise ResumeError(f"--resume: {run_folder!r} is not a folder (give a run folder, e.g. logs/ppo_ext/<env>_1)")
    found = sorted(glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml")))
    if len(found) != 1:
        what = "no <env>/args.yml" if not found else f"{len(found)} <env>/args.yml files"
        raise ResumeError(f"--resume: {run_folder!r} has {what}: give the folder of one run, e.g. logs/ppo_ext/<env>_1")
    params_path = os.path.dirname(found[0])
    for name in ("args.yml", "config.yml"):
        path = os.path.join(params_path, name)
        if not os.path.isfile(path):
            raise ResumeError(f"--resume: {path} is missing: the run's settings cannot be read")
    try:
        settings = check_run_folder(params_path)
    except ValueError as error:
        raise ResumeError(f"--resume: {error}") from None
    if not settings.arguments or not settings.config:
        empty = "args.yml" if not settings.arguments else "config.yml"
        raise ResumeError(f"--resume: {os.path.join(params_path, empty)} holds no settings")
    return params_path, settings.arguments, settings.config


def given_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The destinations of the options that ``argv`` gives (whatever their values)."""
    given = set()
    for token in argv:
        flag = token.partition("=")[0]
        action = parser._option_string_actions.get(flag)
        if action is not None:
            given.add(action.dest)
    return given


def take_run_settings(parsed: argparse.Namespace, saved_arguments: dict[str, Any], given: set[str]) -> None:
    """Set the options of a resumed run on ``parsed``: the saved ones, except those of :data:`RESUME_OPTIONS` the
    command line gives.

    :raises ResumeError: when the command line gives an option outside :data:`RESUME_OPTIONS`.
    """
    refused = sorted(given - RESUME_OPTIONS)
    if refused:
        flags = ", ".join("--" + dest.replace("_", "-") for dest in refused)
        allowed = ", ".join("--" + dest.replace("_", "-") for dest in sorted(RESUME_OPTIONS - {"resume"}))
        raise ResumeError(
            f"--resume continues a run with its own settings (its args.yml and config.yml); {flags} "
            f"cannot be given with it (only {allowed}); to train with other settings, start a new run "
            "from the model with -i"
        )
    for key, value in saved_arguments.items():
        if key in given or key in NOT_TAKEN_FROM_RUN or not hasattr(parsed, key):
            continue
        setattr(parsed, key, value)
    for key, value in NOT_TAKEN_FROM_RUN.items():
        if key not in given:
            setattr(parsed, key, value)


def record_run_plan(params_path: str, arguments: argparse.Namespace) -> None:
    """Write the resumed session's :data:`RUN_PLAN_OPTIONS` into the run's ``args.yml`` (atomically; the other
    saved options are kept as they are)."""
    path = os.path.join(params_path, "args.yml")
    saved = load_run_yaml(path)
    if not isinstance(saved, dict):
        raise ResumeError(f"--resume: {path} is not a mapping of settings")
    updated = {**saved, **{key: getattr(arguments, key) for key in RUN_PLAN_OPTIONS if hasattr(arguments, key)}}
    if updated != saved:
        with atomic_write(path, "w") as stream:
            yaml.safe_dump(updated, stream)


@dataclass(frozen=True)
class ResumePoint:
    """The saved state a run continues from: the model zip, its ``VecNormalize`` statistics and its step count."""

    model_path: str
    statistics_path: str | None
    num_timesteps: int


def saved_num_timesteps(model_path: str) -> int:
    """The ``num_timesteps`` stored in a model zip (read from its JSON data, nothing unpickled)."""
    value = read_zip_data(model_path).get("num_timesteps")
    if not isinstance(value, int) or value < 0:
        raise ResumeError(f"--resume: {model_path} has no step count (num_timesteps) to continue from")
    return value


def find_resume_point(run_folder: str, env_name: str) -> ResumePoint:
    """The newest intact checkpoint of the run (``rl_model_<steps>_steps.zip``), or its final model
    (``<env>.zip``) when that has more steps (a finished run given a larger budget).

    A damaged final model (:func:`~sb3_ppo_ext.callbacks.checkpoint.model_zip_defect`, e.g. cut short at 0 bytes) is
    skipped with a warning naming the file, as damaged checkpoints are skipped for older ones.

    :raises ResumeError: when the run has neither an intact checkpoint nor an intact final model.
    """
    checkpoint = find_latest_checkpoint(run_folder)
    candidates = []
    if checkpoint is not None:
        candidates.append(ResumePoint(checkpoint.model_path, checkpoint.vecnormalize_path, checkpoint.num_timesteps))
    final_model = os.path.join(run_folder, f"{env_name}.zip")
    final_defect = model_zip_defect(final_model) if os.path.isfile(final_model) else None
    if final_defect is not None:
        warnings.warn(
            f"--resume: skipping the final model {final_model}: {final_defect}; continuing from the newest intact "
            "checkpoint instead",
            UserWarning,
            stacklevel=2,
        )
    elif os.path.isfile(final_model):
        statistics = os.path.join(run_folder, env_name, "vecnormalize.pkl")
        candidates.append(ResumePoint(final_model, statistics, saved_num_timesteps(final_model)))
    if not candidates:
        damaged = len(list_checkpoints(run_folder))
        why = f"{damaged} damaged checkpoints" if damaged else "no checkpoint (train with --save-freq to have some)"
        final = f"a damaged final model {env_name}.zip" if final_defect is not None else f"no final model {env_name}.zip"
        raise ResumeError(f"--resume: {run_folder!r} has {why} and {final} to continue from")
    return max(candidates, key=lambda point: point.num_timesteps)


def successes_by_evaluation(n_evaluations: int, successes: Sequence[Any]) -> list[Any | None]:
    """Each evaluation's row of ``successes`` from an ``evaluations.npz``, ``None`` for an evaluation that has none.

    rl-zoo3's ``EvalCallback`` appends a row of successes for each evaluation whose episodes reported
    ``info["is_success"]``. A run resumed after its task began reporting them (a newer version of the task) holds rows
    for its last evaluations only: the rows belong to the last ``len(successes)`` evaluations. More rows than
    evaluations cannot be placed: every evaluation then gets ``None``.

    :param n_evaluations: the number of evaluations (``len(timesteps)``).
    :param successes: the file's ``successes`` rows.
    """
    missing = n_evaluations - len(successes)
    if missing < 0:
        return [None] * n_evaluations
    return [None] * missing + list(successes)


def read_evaluations(run_folder: str) -> dict[str, np.ndarray]:
    """A run's evaluation history (SB3's ``EvalCallback``'s ``evaluations.npz``), read within
    :data:`~sb3_ppo_ext.validation.MAX_EVALUATION_HISTORY_BYTES` per array (:func:`load_bounded_npz`) and checked to
    be one: ``timesteps`` (one per evaluation, finite and non-negative), ``results`` and ``ep_lengths`` (one row per
    evaluation, the same shape), ``successes`` where the task reports them.

    :raises ValueError: naming the file and what is wrong with it.
    """
    path = os.path.join(run_folder, "evaluations.npz")
    arrays = load_bounded_npz(path, MAX_EVALUATION_HISTORY_BYTES)
    missing = [key for key in ("timesteps", "results", "ep_lengths") if key not in arrays]
    if missing:
        raise ValueError(f"{path}: it has no {', '.join(missing)}; not the evaluation history of SB3's EvalCallback")
    timesteps, results, lengths = arrays["timesteps"], arrays["results"], arrays["ep_lengths"]
    if timesteps.ndim != 1 or results.ndim != 2 or len(results) != len(timesteps) or lengths.shape != results.shape:
        raise ValueError(
            f"{path}: timesteps {timesteps.shape}, results {results.shape} and ep_lengths {lengths.shape} are not one "
            "row per evaluation"
        )
    for key, values in arrays.items():
        if values.dtype.kind not in "biuf" or not np.all(np.isfinite(values)):
            raise ValueError(f"{path}: {key} must hold finite numbers (got {values.dtype})")
    if np.any(timesteps < 0) or np.any(timesteps > MAX_N_TIMESTEPS):
        raise ValueError(f"{path}: timesteps must lie in [0, {MAX_N_TIMESTEPS}]")
    return arrays


def restore_evaluation_history(
    callback: EvalCallback, num_timesteps: int, n_envs: int, saved: dict[str, np.ndarray] | None = None
) -> int:
    """Give ``callback`` the run's evaluations up to ``num_timesteps`` and its place on the evaluation grid.

    rl-zoo3's ``EvalCallback`` writes its whole history to ``evaluations.npz`` at each evaluation and keeps the best
    mean reward in memory: without this, the resumed run would overwrite the history with its own evaluations only,
    and save its first evaluation as ``best_model.zip`` however bad. Its call counter is set as if the run had not
    stopped, so evaluations stay at multiples of ``eval_freq``.

    :param saved: the history, where it was read already (:func:`read_evaluations`); else it is read from the
        callback's ``evaluations.npz``.
    :returns: the number of evaluations kept.
    """
    callback.n_calls = num_timesteps // n_envs
    if saved is None:
        path = None if callback.log_path is None else callback.log_path + ".npz"
        if path is None or not os.path.isfile(path):
            return 0
        saved = read_evaluations(os.path.dirname(path))
    keep = saved["timesteps"] <= num_timesteps
    callback.evaluations_timesteps = [int(step) for step in saved["timesteps"][keep]]
    callback.evaluations_results = [list(row) for row in saved["results"][keep]]
    callback.evaluations_length = [list(row) for row in saved["ep_lengths"][keep]]
    if "successes" in saved:
        rows = successes_by_evaluation(len(keep), list(saved["successes"]))
        callback.evaluations_successes = [list(row) for row, kept in zip(rows, keep, strict=True) if kept and row is not None]
    if callback.evaluations_results:
        callback.best_mean_reward = float(max(np.mean(row) for row in callback.evaluations_results))
        callback.last_mean_reward = float(np.mean(callback.evaluations_results[-1]))
    return len(callback.evaluations_results)


class ContinuedMonitor(Monitor):
    """SB3's ``Monitor`` that appends to an existing monitor file and continues its elapsed times.

    The file's rows keep the header of the run's start (``t_start``); new rows get ``t`` from the last one written on,
    so the file stays sorted by time and reads as one run whose clock did not run while it was stopped. A row cut short
    by the stop (no line end) is removed first, so that the new rows do not continue it. A file that does not exist
    yet, or holds no more than its header, is started as SB3's ``Monitor`` starts one.
    """

    def __init__(self, env: Any, filename: str | None = None, *args: Any, **kwargs: Any) -> None:
        monitor = None
        if filename is not None and os.path.isfile(path := monitor_file_path(filename)):
            monitor = continuable_monitor(path)
            if monitor is not None and not monitor.has_columns:  # its header only: started afresh
                monitor = None
            if monitor is not None and os.path.getsize(path) > monitor.complete_bytes:
                os.truncate(path, monitor.complete_bytes)  # the row the stop cut short
        kwargs["override_existing"] = monitor is None
        super().__init__(env, filename, *args, **kwargs)
        if monitor is not None and monitor.episodes:
            self.t_start -= monitor.episodes[-1][0]


def monitor_file_path(filename: str) -> str:
    """The file SB3's ``Monitor`` writes for ``filename`` (a folder gets ``monitor.csv``, a name ``.monitor.csv``)."""
    if filename.endswith(Monitor.EXT):
        return filename
    if os.path.isdir(filename):
        return os.path.join(filename, Monitor.EXT)
    return f"{filename}.{Monitor.EXT}"


def continuable_monitor(path: str) -> MonitorFile | None:
    """A monitor file that a resumed run continues, read once a bounded line at a time and keeping only its last
    episode (:func:`~sb3_ppo_ext.zoo.run_text_files.scan_monitor`, as ``grid collect`` and ``plot`` read it: a JSON
    header with a finite ``t_start``, rows of finite ``t``), or ``None`` for an empty file; the last ``t`` must be
    >= 0: a continued clock that starts from a NaN or an infinity writes only NaN or infinite times.

    :raises ResumeError: naming the file and what is wrong with it.
    """
    if os.path.getsize(path) == 0:
        return None
    try:
        monitor = scan_monitor(path, keep_episodes=False)
    except ValueError as error:
        raise ResumeError(f"--resume: {error}; not a monitor file a run can continue") from None
    if monitor.episodes and monitor.episodes[-1][0] < 0:
        raise ResumeError(
            f"--resume: {path}: the elapsed time t of its last row must be a finite number >= 0, got {monitor.episodes[-1][0]}"
        )
    return monitor


@contextlib.contextmanager
def continued_monitors() -> Iterator[None]:
    """While envs are made with SB3's ``make_vec_env``, wrap them in :class:`ContinuedMonitor`.

    Envs built in worker processes (``SubprocVecEnv``, ``SharedMemoryVecEnv``) get it too when the VecEnv is
    constructed inside the block: their constructors send ``make_vec_env``'s env functions to the workers with
    cloudpickle, which pickles such a local function by value with the values its globals (``Monitor`` here) hold at
    that moment (``tests/test_zoo_vec_env.py`` checks a resumed run's monitor files on ``SharedMemoryVecEnv``)."""
    # Replacing SB3's class for the block is the point; mypy refuses assignments to a class name, hence the ignores.
    original = env_util.Monitor
    env_util.Monitor = ContinuedMonitor  # type: ignore[misc]
    try:
        yield
    finally:
        env_util.Monitor = original  # type: ignore[misc]


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


def resumed_run_options(user_argv: Sequence[str]) -> Callable[[argparse.Namespace, argparse.ArgumentParser], None]:
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


class ResumableExperiment(ExperimentManager):
    """The ``--resume`` part of :class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager`, all of it: the run's
    folder and saved settings, its resume point, its monitor files continued, the training up to its total budget and
    its run plan recorded (as this module's docstring describes)."""

    #: Where a ``--resume``d run continues from (set when its settings are read, :meth:`take_resume_point`), else
    #: ``None``.
    resume_point: ResumePoint | None = None
    #: A resumed run's evaluation history (:func:`read_evaluations`), read once by :meth:`take_resume_point`, or
    #: ``None`` where it has none.
    evaluation_history: dict[str, np.ndarray] | None = None

    @property
    def resume_folder(self) -> str | None:
        """The run folder of ``--resume``, or ``None`` for a new run."""
        return getattr(self.args, "resume", None)

    def continue_in_run_folder(self) -> None:
        """Save into the resumed run's own folder (rl-zoo3 set up a new one, which it has not created yet)."""
        if self.resume_folder is not None:
            self.save_path = os.path.normpath(self.resume_folder)
            self.params_path = f"{self.save_path}/{self.env_name}"

    def resumed_config_document(self) -> dict[str, Any] | None:
        """The config document of a resumed run (its env id mapped to the hyperparameters its ``config.yml`` saved,
        :func:`run_settings`, whatever its config file says today), or ``None`` for a new run."""
        if self.resume_folder is None:
            return None
        _, _, config = run_settings(self.resume_folder)
        return {self.env_name.gym_id: config}

    def take_resume_point(self) -> None:
        """Find where a resumed run continues from (:func:`find_resume_point`) and continue training that model."""
        if self.resume_folder is None:
            return
        self.resume_point = find_resume_point(self.save_path, str(self.env_name))
        self.trained_agent, self.continue_training = self.resume_point.model_path, True
        # The files the continued run reads back, checked before anything is built or trained.
        if os.path.isfile(os.path.join(self.save_path, "evaluations.npz")):
            self.evaluation_history = read_evaluations(self.save_path)
        if os.path.isfile(os.path.join(self.save_path, PROGRESS_FILE)):
            check_progress_csv(os.path.join(self.save_path, PROGRESS_FILE))
        for monitor_file in glob.glob(os.path.join(glob.escape(self.save_path), f"*{Monitor.EXT}")):
            continuable_monitor(monitor_file)  # here, not first in an env worker process

    def monitors_of(self, *, eval_env: bool, no_log: bool) -> contextlib.AbstractContextManager:
        """While envs are built: a resumed run's training envs continue its monitor files (:class:`ContinuedMonitor`)
        instead of starting them again; other envs as rl-zoo3 builds them."""
        continuing = self.resume_point is not None and not eval_env and not no_log
        return continued_monitors() if continuing else contextlib.nullcontext()

    def learn(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training (the next class's ``learn``), or for a resumed run :meth:`learn_resumed`."""
        if self.resume_point is None:
            super().learn(model)
        else:
            self.learn_resumed(model)

    def learn_resumed(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training loop for a resumed run: its step count, schedules and evaluation history continue up to
        the total budget (``-n``, else the config's ``n_timesteps``).

        rl-zoo3's ``ExperimentManager.learn`` calls ``model.learn(self.n_timesteps)`` with no way to pass
        ``reset_num_timesteps=False`` (and setting ``learn`` on the model would be saved into every checkpoint), so its
        loop is repeated here: the same ``--log-interval`` reading, callbacks, Ctrl-C handling and clean-up.
        """
        assert self.resume_point is not None  # only called for a resumed run
        for callback in self.callbacks:
            if isinstance(callback, EvalCallback):
                restore_evaluation_history(callback, model.num_timesteps, self.n_envs, self.evaluation_history)
        remaining = max(0, int(self.n_timesteps) - int(model.num_timesteps))
        print(
            f"Resuming {self.save_path} at {model.num_timesteps} steps from {self.resume_point.model_path}: "
            f"{remaining} steps to {int(self.n_timesteps)}"
        )
        kwargs: dict[str, Any] = {}
        if self.log_interval > -1:  # rl-zoo3's reading of --log-interval
            kwargs["log_interval"] = self.log_interval
        elif self.log_interval < -1:
            kwargs["log_interval"] = None
        if self.callbacks:
            kwargs["callback"] = self.callbacks
        try:
            if remaining > 0:
                model.learn(remaining, reset_num_timesteps=False, **kwargs)
        except KeyboardInterrupt:  # as rl-zoo3: keep the model trained so far
            pass
        finally:
            if self.callbacks:
                self.callbacks[0].on_training_end()
            with contextlib.suppress(EOFError):
                if model.env is not None:
                    model.env.close()

    def record_resumed_run(self, command: str) -> bool:
        """For a resumed run: keep its ``config.yml`` and ``args.yml``, but for its new budget and checkpoint frequency
        (:func:`record_run_plan`), and add ``command`` to its ``command.txt``.

        :return: whether the run is resumed (a new run's files are written by the caller).
        """
        if self.resume_point is None:
            return False
        record_run_plan(self.params_path, self.args)
        with open(os.path.join(self.params_path, "command.txt"), "a", encoding="utf-8") as file:
            file.write(f"\n{command}")
        print(f"Log path: {self.save_path}")
        return True

"""rl-zoo3's ExperimentManager with safe config handling, and the registration of ``ppo_ext`` in rl-zoo3."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import inspect
import os
import re
import shutil
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import yaml
from rl_zoo3 import hyperparams_opt
from rl_zoo3.callbacks import SaveVecNormalizeCallback
from rl_zoo3.exp_manager import ExperimentManager
from rl_zoo3.utils import ALGOS
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import CheckpointCallback, EvalCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecNormalize

from sb3_ppo_ext.callbacks import LiveViewCallback, RotatingCheckpointCallback, VideoRecorderCallback
from sb3_ppo_ext.pretrained.saving import recorded_env_kwargs
from sb3_ppo_ext.safe_loading import (
    load_vecnormalize_without_pickles,
    load_without_pickles,
    refusal,
    save_vecnormalize_statistics,
    statistics_path,
    statistics_saved,
)
from sb3_ppo_ext.vec_env.shared_memory_vec_env import EnvWorkerError, SharedMemoryVecEnv
from sb3_ppo_ext.zoo.config.reading import (
    DeferredPrint,
    check_read_block,
    check_yaml_config_path,
    read_config_document,
    reading_document,
    sorted_block,
)
from sb3_ppo_ext.zoo.loading import BEST_MODEL_STATISTICS
from sb3_ppo_ext.zoo.patching import patched_zoo_module
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME
from sb3_ppo_ext.zoo.resume import (
    ResumePoint,
    continued_monitors,
    find_resume_point,
    record_run_plan,
    restore_evaluation_history,
    resumed_config,
)
from sb3_ppo_ext.zoo.run_selection import holds_only_setup_files
from sb3_ppo_ext.zoo.sampler import sample_ppo_ext_params
from sb3_ppo_ext.zoo.stopping import (
    SIGTERM_EXIT_STATUS,
    WORKER_FAILURE_EXIT_STATUS,
    TrainingStopped,
    sigterm_stops_training,
)
from sb3_ppo_ext.zoo.vec_env_choice import preferred_vec_env, shared_memory_vec_env, vec_env_settings


def warn_if_nothing_learns(algorithm: type[Any], hyperparams: dict[str, Any], n_timesteps: int) -> None:
    """Warn when an off-policy run ends before it learns: ``n_timesteps <= learning_starts`` (the config's value, else
    the algorithm's default) trains nothing, and rl-zoo3 says nothing about it.

    :param algorithm: the algorithm class (DDPG, SAC, TD3, DQN ... have ``learning_starts``).
    :param hyperparams: the run's constructor arguments.
    :param n_timesteps: the run's training budget.
    """
    parameter = inspect.signature(algorithm.__init__).parameters.get("learning_starts")
    if parameter is None:
        return
    learning_starts = hyperparams.get("learning_starts", parameter.default)
    if isinstance(learning_starts, (int, float)) and n_timesteps <= learning_starts:
        warnings.warn(
            f"n_timesteps={n_timesteps} <= learning_starts={learning_starts}: {algorithm.__name__} only collects "
            f"random transitions before learning_starts, so this run trains nothing; raise -n above "
            f"{learning_starts} or lower learning_starts",
            UserWarning,
            stacklevel=2,
        )


class SaveVecNormalizeStatisticsCallback(SaveVecNormalizeCallback):
    """rl-zoo3's ``SaveVecNormalizeCallback`` (its evaluation saves ``vecnormalize.pkl`` with each new best model)
    that also writes the plain-data twin of each pickle beside it (``vecnormalize.npz``, see
    :func:`~sb3_ppo_ext.safe_loading.vecnormalize.save_vecnormalize_statistics`), so that the two always hold the
    same statistics.

    Called by an evaluation that saves ``best_model.zip``, it also writes the statistics beside that model
    (:data:`~sb3_ppo_ext.zoo.loading.BEST_MODEL_STATISTICS`, pickle and twin): ``vecnormalize.pkl`` is overwritten
    with the final statistics when training ends, and ``--load-best`` plays the best model with its own."""

    def _on_step(self) -> bool:
        result = super()._on_step()
        vec_normalize = self.model.get_vec_normalize_env()
        if self.n_calls % self.save_freq == 0 and vec_normalize is not None:
            name = "vecnormalize.npz" if self.name_prefix is None else f"{self.name_prefix}_{self.num_timesteps}_steps.npz"
            save_vecnormalize_statistics(vec_normalize, os.path.join(self.save_path, name))
            best_model_folder = getattr(self.parent, "best_model_save_path", None)
            if best_model_folder is not None:
                path = os.path.join(best_model_folder, BEST_MODEL_STATISTICS)
                vec_normalize.save(path)
                save_vecnormalize_statistics(vec_normalize, statistics_path(path))
        return result


#: Held while :meth:`SafeExperimentManager.create_envs` builds envs: it sets rl-zoo3's VecEnv class for one build, and
#: ``optimize --n-jobs`` builds envs in several threads. A module's lock, not the manager's: rl-zoo3 pickles the
#: manager for ARS's asynchronous evaluation.
_BUILDING_ENVS = threading.Lock()


class SafeExperimentManager(ExperimentManager):
    """rl-zoo3's ExperimentManager that checks keys, never evaluates config text and unpickles nothing by default.

    After rl-zoo3 has read and merged the block (YAML, ``--hyperparams``, an Optuna trial), every key must be a
    constructor parameter or a zoo key, every expression string is parsed with the restricted parser, schedules
    and class paths are checked; only then does rl-zoo3's own pre-processing run, which finds nothing left to
    ``eval``. Python config files (which rl-zoo3 would ``exec``) and modules are refused; a YAML config is read once,
    within size, nesting and alias-expansion limits, and must map env ids to mappings; the settings rl-zoo3 consumes
    (``n_envs``, ``n_steps``, ``buffer_size``, ``net_arch`` ...) must have their type and a sane size. The run's
    ``config.yml`` / ``args.yml`` are written as plain YAML.

    Every ``vecnormalize.pkl`` it writes (the final one, the evaluation's, the checkpoints') gets a plain-data twin
    ``.npz`` beside it. Continuing a run (``-i``) loads the model with
    :func:`~sb3_ppo_ext.safe_loading.models.load_without_pickles` and the statistics from their twin, and refuses a
    replay buffer pickle, unless ``--trust-pickles`` is given (:attr:`trust_pickles`).

    The training envs step on the VecEnv of ``--vec-env``, else on the task's preferred one
    (:data:`PREFERRED_VEC_ENVS`); with ``shared``, the evaluation envs step on DummyVecEnv, and a SharedMemoryVecEnv
    the user did not ask for that cannot start gives way to DummyVecEnv (:meth:`vec_env_builder`).
    """

    def __init__(
        self,
        args: argparse.Namespace,
        algo: str,
        env_id: str,
        *positional: Any,
        vec_env_type: str | None = None,
        **keywords: Any,
    ) -> None:
        """rl-zoo3's set-up, with the VecEnv of :func:`vec_env_settings` (rl-zoo3 knows only ``dummy`` and ``subproc``).

        :param vec_env_type: ``--vec-env``; ``None`` (not given): the task's preferred VecEnv
            (:func:`preferred_vec_env`). With ``--vec-env-kwargs``, those are for that preferred VecEnv's class, and a
            key it does not take is an error that says so.
        """
        preferred = preferred_vec_env(env_id)
        given = vec_env_type
        vec_env_type = given or preferred
        keywords["vec_env_type"] = vec_env_type if vec_env_type in ("dummy", "subproc") else "dummy"
        super().__init__(args, algo, env_id, *positional, **keywords)
        #: The ``--vec-env`` type of the training envs: the one given, else the task's preferred one.
        self.vec_env_type = vec_env_type
        #: Whether a SharedMemoryVecEnv that cannot start gives way to DummyVecEnv
        #: (:meth:`shared_memory_vec_env_or_dummy`): when it is the task's preferred VecEnv and the command line does
        #: not name it (for a resumed run: the one its ``args.yml`` records). A VecEnv the user chose that cannot
        #: start is an error.
        self.vec_env_falls_back = vec_env_type == preferred and (given is None or self.resume_folder is not None)
        #: Why SharedMemoryVecEnv could not start, once it gave way to DummyVecEnv (then the envs step in the driver).
        self.shared_memory_failure: str | None = None
        # rl-zoo3 picks DummyVecEnv or SubprocVecEnv (mypy infers ABCMeta from its dict of the two).
        zoo_class = cast(type[VecEnv], self.vec_env_class)
        try:
            self.vec_env_class, self.vec_env_kwargs = vec_env_settings(vec_env_type, zoo_class, args)
        except ValueError as error:
            if given is not None:
                raise
            raise ValueError(
                f"{error}; {env_id} trains on --vec-env {vec_env_type} when --vec-env is not given: give --vec-env to "
                "choose another"
            ) from None
        args.vec_env = vec_env_type  # args.yml records the VecEnv used (create_envs: its training envs')
        #: Where a ``--resume``d run continues from (set when its settings are read), else ``None``.
        self.resume_point: ResumePoint | None = None
        if self.resume_folder is not None:
            self.save_path = os.path.normpath(self.resume_folder)
            self.params_path = f"{self.save_path}/{self.env_name}"
        #: Whether this command creates its run folder (a new run): then a failure before the first training step
        #: removes it again (:meth:`remove_unstarted_run`).
        self.creates_run_folder = self.resume_folder is None and not os.path.exists(self.save_path)
        #: What stopped training before its budget (SIGTERM or the failure of an env worker), once it did, and the
        #: command's exit status for it: the model is then saved as after Ctrl-C and :meth:`save_trained_model`
        #: raises :class:`TrainingStopped`.
        self.stopped_by: str | None = None
        self.stopped_exit_status = 0

    def remove_unstarted_run(self) -> None:
        """Remove the run folder this command created, when it holds nothing but what set-up wrote there
        (:func:`~sb3_ppo_ext.zoo.run_selection.holds_only_setup_files`): a run that never trained would otherwise be the
        newest run of the env, with monitor files but no model. A folder holding anything else is kept."""
        created = self.creates_run_folder and os.path.isdir(self.save_path)
        if created and holds_only_setup_files(self.save_path, str(self.env_name)):
            shutil.rmtree(self.save_path, ignore_errors=True)
            print(f"Removed {self.save_path}: the run stopped before its first training step")

    def setup_experiment(self) -> tuple[BaseAlgorithm, dict[str, Any]] | None:
        """rl-zoo3's set-up (config, envs, model); a failure removes the new run folder (:meth:`remove_unstarted_run`)."""
        try:
            return super().setup_experiment()
        except BaseException:
            self.remove_unstarted_run()
            raise

    @property
    def resume_folder(self) -> str | None:
        """The run folder of ``--resume`` (:mod:`~sb3_ppo_ext.zoo.resume`), or ``None`` for a new run."""
        return getattr(self.args, "resume", None)

    @property
    def trust_pickles(self) -> bool:
        """Whether ``--trust-pickles`` was given: ``-i``'s model, statistics and replay buffer are then unpickled, as
        rl-zoo3 does."""
        return bool(getattr(self.args, "trust_pickles", False))

    def read_hyperparameters(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """rl-zoo3's reading of the config block, on a document we read first (:mod:`~sb3_ppo_ext.zoo.config.reading`):
        the config file within the YAML limits and of the shape rl-zoo3 assumes (a resumed run: the block it saved),
        then the block rl-zoo3 merged checked, and only then printed as rl-zoo3 prints it."""
        check_yaml_config_path(self.config)
        if self.resume_folder is not None:
            document = {self.env_name.gym_id: resumed_config(self.resume_folder)}
        else:
            document = read_config_document(self.config)
        deferred = DeferredPrint()
        with reading_document(document, deferred):
            hyperparams, saved_hyperparams = super().read_hyperparameters()
        if self.storage and self.study_name and self.trial_id == 0:
            # rl-zoo3 tests `if self.trial_id`, so it silently ignores trial 0: load it here, then let the
            # command line override it as rl-zoo3 does for the other trials.
            hyperparams.update(self.load_trial(self.storage, self.study_name, self.trial_id))
            hyperparams.update(self.custom_hyperparams or {})
            saved_hyperparams = sorted_block(hyperparams)
        parsed, saved_hyperparams = check_read_block(
            hyperparams,
            saved_hyperparams,
            algorithm=ALGOS[self.algo],
            n_timesteps=self.n_timesteps,
            where=f"the {self.env_name.gym_id!r} block of {self.config} (or its command-line overrides)",
        )
        deferred.print_all()  # only now: what rl-zoo3 prints is checked, so it prints in bounded time and space
        if self.resume_folder is not None:
            self.resume_point = find_resume_point(self.save_path, str(self.env_name))
            self.trained_agent, self.continue_training = self.resume_point.model_path, True
        return parsed, saved_hyperparams

    def _preprocess_hyperparams(self, hyperparams: dict[str, Any]) -> tuple[dict[str, Any], Any, list, Any]:
        """rl-zoo3's pre-processing; then the evaluation env gets the config's ``env_kwargs`` (unless
        ``--eval-env-kwargs`` was given), and our video and live-view callbacks that play the trained env's id get the
        config's ``env_wrapper`` (unless they were given one), so that they see the env the policy was trained on.

        rl-zoo3 means the evaluation env to share the training env's keyword arguments, but binds them when it is built,
        before the config block is read: a block's (or ``--hyperparams``') ``env_kwargs`` then reached the training envs
        only, and the periodic evaluations (``evaluations.npz``, ``best_model.zip``) played the task's defaults."""
        hyperparams, env_wrapper, callbacks, vec_env_wrapper = super()._preprocess_hyperparams(hyperparams)
        if self._eval_env_kwargs_args is None:
            self.eval_env_kwargs = self.env_kwargs
        warn_if_nothing_learns(ALGOS[self.algo], hyperparams, self.n_timesteps)
        if env_wrapper is not None:
            for callback in callbacks:
                if not isinstance(callback, (VideoRecorderCallback, LiveViewCallback)):
                    continue
                if callback.env_id == self.env_name.gym_id and callback.env_wrapper is None:
                    callback.env_wrapper = env_wrapper
        return hyperparams, env_wrapper, callbacks, vec_env_wrapper

    def create_callbacks(self) -> None:
        """rl-zoo3's callbacks, with its ``--save-freq`` checkpoints written by our
        :class:`~sb3_ppo_ext.callbacks.RotatingCheckpointCallback` (same file names, every checkpoint kept as rl-zoo3
        keeps them): each file is written atomically, and the ``VecNormalize`` statistics go beside each zip
        (``rl_model_vecnormalize_<steps>_steps.pkl``), which rl-zoo3's plain ``CheckpointCallback`` does not save."""
        super().create_callbacks()
        for index, callback in enumerate(self.callbacks):
            if type(callback) is CheckpointCallback:  # rl-zoo3 counts its save_freq in calls: n_envs steps each
                self.callbacks[index] = RotatingCheckpointCallback(
                    save_freq=callback.save_freq * self.n_envs,
                    save_path=callback.save_path,
                    keep_last=None,
                    name_prefix=callback.name_prefix,
                    save_vecnormalize=True,
                    save_on_training_end=False,
                    verbose=callback.verbose,
                )
            elif isinstance(callback, EvalCallback) and type(callback.callback_on_new_best) is SaveVecNormalizeCallback:
                saver = callback.callback_on_new_best
                callback.callback_on_new_best = SaveVecNormalizeStatisticsCallback(
                    save_freq=saver.save_freq, save_path=saver.save_path, name_prefix=saver.name_prefix, verbose=saver.verbose
                )
                callback.callback_on_new_best.parent = callback

    def create_envs(self, n_envs: int, eval_env: bool = False, no_log: bool = False) -> VecEnv:
        """rl-zoo3's envs, built by :meth:`vec_env_builder`; a resumed run's training envs continue its monitor files
        (:class:`~sb3_ppo_ext.zoo.resume.ContinuedMonitor`) instead of starting them again. The ``--vec-env`` type
        that steps the training envs, with its keyword arguments, is set in ``args`` (saved as ``args.yml`` once they
        are built)."""
        self.check_env_kwargs(self.eval_env_kwargs if eval_env else self.env_kwargs, eval_env=eval_env)
        builder, kwargs = self.vec_env_builder(n_envs, eval_env=eval_env)
        continuing = self.resume_point is not None and not eval_env and not no_log
        with (
            _BUILDING_ENVS,
            patched_zoo_module(self, vec_env_class=builder, vec_env_kwargs=kwargs),
            continued_monitors() if continuing else contextlib.nullcontext(),
        ):
            env = super().create_envs(n_envs, eval_env=eval_env, no_log=no_log)
        if not eval_env and self.vec_env_type == "shared":
            on_dummy = not isinstance(env.unwrapped, SharedMemoryVecEnv)
            self.args.vec_env = "dummy" if on_dummy else "shared"
            if on_dummy:  # DummyVecEnv took no keyword arguments (and a resumed run gives it none)
                self.args.vec_env_kwargs = None
        return env

    def check_env_kwargs(self, env_kwargs: dict[str, Any], *, eval_env: bool) -> None:
        """Make one env of the task with ``env_kwargs`` (once per distinct set) before the VecEnv builds them: a
        keyword the task does not take (``TypeError``) or a value it refuses (``ValueError``) is then a one-line error
        naming the option, rather than a traceback from inside a worker process.

        :raises ValueError: naming ``--env-kwargs`` (or ``--eval-env-kwargs``) and the config's ``env_kwargs``.
        """
        if not env_kwargs:
            return
        checked = getattr(self, "_checked_env_kwargs", [])
        if env_kwargs in checked:
            return
        option = "--eval-env-kwargs" if eval_env and self._eval_env_kwargs_args is not None else "--env-kwargs"
        try:
            gym.make(self.env_name.gym_id, **env_kwargs).close()
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{option} (or the config's env_kwargs) {env_kwargs}: {self.env_name.gym_id} refuses them "
                f"({type(error).__name__}: {one_line_of(error)})"
            ) from None
        self._checked_env_kwargs = [*checked, dict(env_kwargs)]

    def vec_env_builder(self, n_envs: int, *, eval_env: bool) -> tuple[Callable[..., VecEnv], dict[str, Any]]:
        """The class (or function) that builds ``n_envs`` envs, and its keyword arguments: those of ``--vec-env``
        (:func:`vec_env_settings`). With ``shared``, DummyVecEnv builds the evaluation envs, a single env (a worker
        process would only add a pipe round trip per step) and every env once SharedMemoryVecEnv failed to start;
        :meth:`shared_memory_vec_env_or_dummy` builds the others where it may fall back (:attr:`vec_env_falls_back`).
        """
        if self.vec_env_type != "shared":
            return self.vec_env_class, self.vec_env_kwargs
        if eval_env or n_envs == 1 or self.shared_memory_failure is not None:
            return DummyVecEnv, {}
        if self.vec_env_falls_back:
            return self.shared_memory_vec_env_or_dummy, self.vec_env_kwargs
        return shared_memory_vec_env, self.vec_env_kwargs

    def shared_memory_vec_env_or_dummy(self, env_fns: Sequence[Callable[[], Any]], **kwargs: Any) -> VecEnv:
        """A :class:`~sb3_ppo_ext.shared_memory_vec_env.SharedMemoryVecEnv` of ``env_fns``, or, when it cannot start
        (``OSError`` / ``RuntimeError``: no ``/dev/shm``, no process start method, a worker that dies or hangs while
        starting), a DummyVecEnv, said in one line; later envs of the run are built by DummyVecEnv too. An env that
        raises while it is built is not a failure to start: its error is raised, as DummyVecEnv would raise it.

        :param env_fns: functions that each return a new env (``make_vec_env``'s).
        :param kwargs: the keyword arguments of SharedMemoryVecEnv (``--vec-env-kwargs``; DummyVecEnv takes none).
        """
        try:
            return shared_memory_vec_env(env_fns, **kwargs)
        except (OSError, RuntimeError) as error:
            if isinstance(error, EnvWorkerError) and error.env_index is not None:
                raise
            first_line = next(iter(str(error).splitlines()), "")
            self.shared_memory_failure = f"{type(error).__name__}: {first_line}"
        ignored = f", --vec-env-kwargs {', '.join(sorted(kwargs))} ignored" if kwargs else ""
        print(
            f"SharedMemoryVecEnv could not start ({self.shared_memory_failure}); the envs step in this process on "
            f"DummyVecEnv{ignored} (--vec-env chooses the VecEnv)"
        )
        return DummyVecEnv(list(env_fns))

    def learn(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training (:meth:`_learn`), which SIGTERM or a failed env worker stop without losing the run: as
        after Ctrl-C, learning ends, the envs are closed and the model trained so far is saved with its statistics
        (rl-zoo3 then calls :meth:`save_trained_model`, which says what stopped training). A worker failure before
        the first step stops the command at once (nothing trained, nothing to save)."""

        def stopped_by_sigterm() -> None:
            self.stopped_by = f"training was stopped by SIGTERM at {model.num_timesteps} steps"
            self.stopped_exit_status = SIGTERM_EXIT_STATUS

        with sigterm_stops_training(stopped_by_sigterm):
            try:
                self._learn(model)
            except EnvWorkerError as error:
                what = str(error).splitlines()[0]
                if model.num_timesteps == 0:
                    raise TrainingStopped(
                        f"{what}; training stopped before its first step, nothing to save", WORKER_FAILURE_EXIT_STATUS
                    ) from error
                self.stopped_by = f"{what}; training stopped at {model.num_timesteps} steps"
                self.stopped_exit_status = WORKER_FAILURE_EXIT_STATUS

    def _learn(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training; a resumed run continues its step count, schedules and evaluation history up to the
        total budget (``-n``, else the config's ``n_timesteps``), as :mod:`~sb3_ppo_ext.zoo.resume` describes."""
        if self.resume_point is None:
            try:
                with self.evaluation_env_type_accepted():
                    super().learn(model)
            except BaseException:
                if model.num_timesteps == 0:  # failed before its first step: nothing trained, nothing to keep
                    self.remove_unstarted_run()
                raise
            return
        for callback in self.callbacks:
            if isinstance(callback, EvalCallback):
                restore_evaluation_history(callback, model.num_timesteps, self.n_envs)
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
                with self.evaluation_env_type_accepted():
                    model.learn(remaining, reset_num_timesteps=False, **kwargs)
        except KeyboardInterrupt:  # as rl-zoo3: keep the model trained so far
            pass
        finally:
            if self.callbacks:
                self.callbacks[0].on_training_end()
            with contextlib.suppress(EOFError):
                if model.env is not None:
                    model.env.close()

    @contextmanager
    def evaluation_env_type_accepted(self) -> Iterator[None]:
        """While models learn: with ``shared``, SB3's ``EvalCallback`` warning that the evaluation env is not of the
        training env's type is silenced, since the evaluation envs step on DummyVecEnv by design
        (:meth:`vec_env_builder`); other warnings are shown as before."""
        with warnings.catch_warnings():
            if self.vec_env_type == "shared":
                warnings.filterwarnings("ignore", "Training and eval env are not of the same type", UserWarning)
            yield

    def checkpoint_statistics_path(self) -> str | None:
        """The ``VecNormalize`` statistics saved with the ``-i`` model when it is a checkpoint
        (``<prefix>_<steps>_steps.zip`` -> ``<prefix>_vecnormalize_<steps>_steps.pkl`` beside it), if that file or its
        plain-data twin (``.npz``) exists."""
        match = re.fullmatch(r"(?P<prefix>.+)_(?P<steps>\d+)_steps\.zip", os.path.basename(self.trained_agent or ""))
        if not self.continue_training or match is None:
            return None
        path = os.path.join(os.path.dirname(self.trained_agent), f"{match['prefix']}_vecnormalize_{match['steps']}_steps.pkl")
        return path if statistics_saved(path) else None

    def load_statistics(self, path: str, env: VecEnv) -> VecNormalize:
        """``VecNormalize.load(path, env)`` with ``--trust-pickles``; otherwise the statistics are read from the
        plain-data twin of ``path`` (:func:`~sb3_ppo_ext.safe_loading.vecnormalize.load_vecnormalize_without_pickles`), which
        refuses a pickle that has none."""
        if self.trust_pickles and os.path.isfile(path):
            return VecNormalize.load(path, env)
        return load_vecnormalize_without_pickles(path, env)

    def _maybe_normalize(self, env: VecEnv, eval_env: bool) -> VecEnv:
        """rl-zoo3's normalisation, with the statistics read by :meth:`load_statistics`, and when continuing from a
        checkpoint the statistics saved with that checkpoint (rl-zoo3 reads only a run's final ``vecnormalize.pkl``,
        so a checkpoint resumed with fresh statistics of mean 0 / variance 1, or with the final ones of a later point
        of the run). Continuing a normalised run without any saved statistics is warned about, never silent."""
        statistics = self.checkpoint_statistics_path()
        if statistics is not None:
            if self.verbose > 0 and not eval_env:
                print(f"Loading the checkpoint's VecNormalize statistics {statistics}")
        else:
            # rl-zoo3 looks here whenever the file exists (with or without -i).
            final_statistics = os.path.join(os.path.dirname(self.trained_agent), self.env_name, "vecnormalize.pkl")
            if statistics_saved(final_statistics):
                print("Loading saved VecNormalize stats")
                statistics = final_statistics
            elif self.continue_training and self.normalize and not eval_env:
                warnings.warn(
                    f"continuing {self.trained_agent} with NEW VecNormalize statistics (mean 0, variance 1): neither "
                    f"the checkpoint's statistics file nor {final_statistics} exists, so the policy sees differently "
                    "scaled observations than it was trained on",
                    UserWarning,
                    stacklevel=2,
                )
        if statistics is None:
            return super()._maybe_normalize(env, eval_env)  # finds no file either: a fresh VecNormalize, or none
        env = self.load_statistics(statistics, env)
        if eval_env:
            env.training = False
            env.norm_reward = False
        return env

    def _load_pretrained_agent(self, hyperparams: dict[str, Any], env: VecEnv) -> BaseAlgorithm:
        """rl-zoo3's loading of the ``-i`` model, by :func:`~sb3_ppo_ext.safe_loading.models.load_without_pickles` unless
        ``--trust-pickles``: the schedules come from the zip's readable fields or, where it keeps them as pickles only,
        from this run's config (rl-zoo3 passes the block to ``load``, which sets it on the model); anything else
        stored only as a pickle, and a ``replay_buffer.pkl`` beside the model, is refused."""
        if self.trust_pickles:
            return super()._load_pretrained_agent(hyperparams, env)
        algorithm = ALGOS[self.algo]
        replay_buffer = os.path.join(os.path.dirname(self.trained_agent), "replay_buffer.pkl")
        if os.path.exists(replay_buffer):
            raise refusal(
                replay_buffer,
                "is a replay buffer, saved only as a pickle (move it away to continue without it)",
                f"{algorithm.__name__}.load_replay_buffer",
            )
        print("Loading pretrained agent")
        for key in ("policy", "policy_kwargs"):  # the policy must not change; rl-zoo3 drops them too
            hyperparams.pop(key, None)
        return load_without_pickles(
            self.trained_agent,
            env,
            algorithm=algorithm,
            device=self.device,
            training=True,
            seed=self.seed,
            tensorboard_log=self.tensorboard_log,
            verbose=self.verbose,
            **hyperparams,
        )

    def save_trained_model(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's saving of the final model (and ``vecnormalize.pkl``), plus the statistics' plain-data twin
        ``vecnormalize.npz`` beside the pickle.

        :raises TrainingStopped: once saved, when SIGTERM or a failed env worker stopped training (:meth:`learn`).
        """
        super().save_trained_model(model)
        vec_normalize = model.get_vec_normalize_env()
        if self.normalize and vec_normalize is not None:
            save_vecnormalize_statistics(vec_normalize, os.path.join(self.params_path, "vecnormalize.npz"))
        if self.stopped_by is not None:
            statistics = " and its VecNormalize statistics" if self.normalize and vec_normalize is not None else ""
            raise TrainingStopped(
                f"{self.stopped_by}; the model{statistics} were saved to {self.save_path}; continue with: "
                f"sb3-ppo-ext train --resume {self.save_path}",
                self.stopped_exit_status,
            )

    def hyperparameters_optimization(self) -> None:
        """rl-zoo3's search, with the settings given by ``--hyperparams`` kept fixed rather than sampled."""
        pinned = dict(self.custom_hyperparams or {})
        samplers = hyperparams_opt.HYPERPARAMS_SAMPLER
        original = samplers.get(self.algo)
        if self.algo == ALGORITHM_NAME and pinned:
            samplers[self.algo] = functools.partial(sample_ppo_ext_params, pinned=pinned)
        try:
            with self.evaluation_env_type_accepted():
                super().hyperparameters_optimization()
        finally:
            if original is not None:
                samplers[self.algo] = original

    def _save_config(self, saved_hyperparams: dict[str, Any]) -> None:
        """Write ``config.yml``, ``args.yml`` and ``command.txt`` like rl-zoo3, as plain YAML (no Python tags); a
        resumed run keeps its files, but for its new budget and checkpoint frequency
        (:func:`~sb3_ppo_ext.zoo.resume.record_run_plan`), and adds its command line to ``command.txt``. A new run's
        ``env_kwargs`` in both files name the task's version-dependent defaults it trained with
        (:func:`~sb3_ppo_ext.pretrained.saving.recorded_env_kwargs`)."""
        command = " ".join(getattr(sys, "orig_argv", ["python3", *sys.argv]))
        if self.resume_point is not None:
            record_run_plan(self.params_path, self.args)
            with open(os.path.join(self.params_path, "command.txt"), "a", encoding="utf-8") as file:
                file.write(f"\n{command}")
            print(f"Log path: {self.save_path}")
            return
        env_kwargs = recorded_env_kwargs(self.env_name.gym_id, self.env_kwargs)
        if env_kwargs != self.env_kwargs:
            # The task's version-dependent defaults (a locomotion task's foot-contact flags) written out, so that
            # `enjoy` and `train --resume` (which read both files) keep this run's task if a later version changes one.
            saved_hyperparams = {**saved_hyperparams, "env_kwargs": env_kwargs}
            self.args.env_kwargs = env_kwargs
        with open(os.path.join(self.params_path, "config.yml"), "w") as file:
            yaml.safe_dump(to_plain_yaml(saved_hyperparams), file)
        arguments = vars(self.args)
        with open(os.path.join(self.params_path, "args.yml"), "w") as file:
            yaml.safe_dump(to_plain_yaml({key: arguments[key] for key in sorted(arguments)}), file)
        (Path(self.params_path) / "command.txt").write_text(command)
        print(f"Log path: {self.save_path}")


def one_line_of(error: BaseException) -> str:
    """The first line of ``error``'s message (gymnasium adds the creator's arguments after it)."""
    return next(iter(str(error).splitlines()), "")


def to_plain_yaml(value: Any) -> Any:
    """``value`` with mappings as plain dicts, tuples as lists, classes as import paths, anything else as ``repr``."""
    if isinstance(value, (dict, OrderedDict)):
        return {str(key): to_plain_yaml(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain_yaml(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


#: Names this module held before they moved to the module of their job -> that module (deprecated here).
_MOVED_NAMES: dict[str, str] = {
    "ALGORITHM_NAME": "sb3_ppo_ext.zoo.registration",
    "default_config_path": "sb3_ppo_ext.zoo.registration",
    "register_algorithm": "sb3_ppo_ext.zoo.registration",
    "patched_zoo_module": "sb3_ppo_ext.zoo.patching",
    "SafeStoreDict": "sb3_ppo_ext.zoo.config.command_line",
    "parse_key_value_arguments": "sb3_ppo_ext.zoo.config.command_line",
    "SIGTERM_EXIT_STATUS": "sb3_ppo_ext.zoo.stopping",
    "WORKER_FAILURE_EXIT_STATUS": "sb3_ppo_ext.zoo.stopping",
    "TrainingStopped": "sb3_ppo_ext.zoo.stopping",
    "TerminationRequested": "sb3_ppo_ext.zoo.stopping",
    "sigterm_stops_training": "sb3_ppo_ext.zoo.stopping",
    "VEC_ENV_TYPES": "sb3_ppo_ext.zoo.vec_env_choice",
    "DEFAULT_VEC_ENV": "sb3_ppo_ext.zoo.vec_env_choice",
    "PREFERRED_VEC_ENVS": "sb3_ppo_ext.zoo.vec_env_choice",
    "preferred_vec_env": "sb3_ppo_ext.zoo.vec_env_choice",
    "vec_env_settings": "sb3_ppo_ext.zoo.vec_env_choice",
    "shared_memory_vec_env": "sb3_ppo_ext.zoo.vec_env_choice",
}


def __getattr__(name: str) -> Any:
    """A name that moved to another module (:data:`_MOVED_NAMES`), with a ``DeprecationWarning`` (PEP 562)."""
    if name not in _MOVED_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"sb3_ppo_ext.zoo.experiment.{name} is deprecated: import it from {_MOVED_NAMES[name]}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_MOVED_NAMES[name]), name)

"""rl-zoo3's ExperimentManager with safe config handling (:class:`SafeExperimentManager`), made of one part per job
and the config checks of :mod:`~sb3_ppo_ext.zoo.config`."""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import shutil
import sys
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any
from unittest.mock import patch

import gymnasium as gym
import yaml
from rl_zoo3 import hyperparams_opt
from rl_zoo3.utils import ALGOS
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.vec_env import VecEnv

from sb3_ppo_ext.callbacks import LiveViewCallback, VideoRecorderCallback
from sb3_ppo_ext.pretrained.saving import recorded_env_kwargs
from sb3_ppo_ext.zoo.config.reading import (
    DeferredPrint,
    check_read_block,
    check_yaml_config_path,
    read_config_document,
    reading_document,
    sorted_block,
)
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE, ProgressCSVCallback
from sb3_ppo_ext.zoo.registration import ALGORITHM_NAME
from sb3_ppo_ext.zoo.resume import ResumableExperiment
from sb3_ppo_ext.zoo.run_lock import LockedRunExperiment
from sb3_ppo_ext.zoo.run_selection import holds_only_setup_files
from sb3_ppo_ext.zoo.run_summary import end_of_training_line, last_and_best
from sb3_ppo_ext.zoo.safe_run_files import SafeRunFilesExperiment
from sb3_ppo_ext.zoo.sampler import sample_ppo_ext_params
from sb3_ppo_ext.zoo.stopping import StoppableExperiment
from sb3_ppo_ext.zoo.vec_env_choice import VecEnvChoosingExperiment, preferred_vec_env, zoo_vec_env_type


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


#: Held while :meth:`SafeExperimentManager.create_envs` builds envs: it sets rl-zoo3's VecEnv class for one build, and
#: ``optimize --n-jobs`` builds envs in several threads. A module's lock, not the manager's: rl-zoo3 pickles the
#: manager for ARS's asynchronous evaluation.
_BUILDING_ENVS = threading.Lock()


class SafeExperimentManager(
    StoppableExperiment, ResumableExperiment, LockedRunExperiment, VecEnvChoosingExperiment, SafeRunFilesExperiment
):
    """rl-zoo3's ExperimentManager that checks keys, never evaluates config text and unpickles nothing by default.

    The config file (YAML only: rl-zoo3 would ``exec`` a Python one) is read once within the YAML limits; the block
    rl-zoo3 reads and merges (YAML, ``--hyperparams``, an Optuna trial) is checked and parsed
    (:mod:`~sb3_ppo_ext.zoo.config`) before rl-zoo3's own pre-processing, which then finds nothing left to ``eval``.
    The run's ``config.yml`` / ``args.yml`` are written as plain YAML, and SB3's logger writes ``progress.csv`` too
    (:mod:`~sb3_ppo_ext.zoo.progress_csv`).

    The other jobs are its bases': models and statistics without pickles
    (:class:`~sb3_ppo_ext.zoo.safe_run_files.SafeRunFilesExperiment`), the VecEnv
    (:class:`~sb3_ppo_ext.zoo.vec_env_choice.VecEnvChoosingExperiment`), ``--resume``
    (:class:`~sb3_ppo_ext.zoo.resume.ResumableExperiment`), SIGTERM and failed env workers
    (:class:`~sb3_ppo_ext.zoo.stopping.StoppableExperiment`) and one trainer per run folder
    (:class:`~sb3_ppo_ext.zoo.run_lock.LockedRunExperiment`).
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
        """rl-zoo3's set-up, with the VecEnv of
        :meth:`~sb3_ppo_ext.zoo.vec_env_choice.VecEnvChoosingExperiment.choose_vec_env`, in the run folder of
        ``--resume`` when it is given (then locked at once,
        :meth:`~sb3_ppo_ext.zoo.run_lock.LockedRunExperiment.lock_run_folder`).

        :param vec_env_type: ``--vec-env``; ``None`` (not given): the task's preferred VecEnv.
        """
        keywords["vec_env_type"] = zoo_vec_env_type(vec_env_type or preferred_vec_env(env_id))
        super().__init__(args, algo, env_id, *positional, **keywords)
        self.choose_vec_env(args, vec_env_type, resumed=self.resume_folder is not None)
        self.continue_in_run_folder()
        if self.resume_folder is not None:  # before its resume point is read: a second trainer stops at once
            self.lock_run_folder()
        #: Whether this command creates its run folder (a new run): then a failure before the first training step
        #: removes it again (:meth:`remove_unstarted_run`).
        self.creates_run_folder = self.resume_folder is None and not os.path.exists(self.save_path)

    def remove_unstarted_run(self) -> None:
        """Remove the run folder this command created, when it holds nothing but what set-up wrote there
        (:func:`~sb3_ppo_ext.zoo.run_selection.holds_only_setup_files`): a run that never trained would otherwise be the
        newest run of the env, with monitor files but no model. A folder holding anything else is kept, and so is one
        whose lock this command does not hold (another trainer that chose the same new folder at the same moment)."""
        created = self.creates_run_folder and self.holds_run_folder and os.path.isdir(self.save_path)
        if created and holds_only_setup_files(self.save_path, str(self.env_name)):
            shutil.rmtree(self.save_path, ignore_errors=True)
            print(f"Removed {self.save_path}: the run stopped before its first training step")

    def setup_experiment(self) -> tuple[BaseAlgorithm, dict[str, Any]] | None:
        """rl-zoo3's set-up (config, envs, model); a failure removes the new run folder (:meth:`remove_unstarted_run`) and
        gives its lock back."""
        try:
            return super().setup_experiment()
        except BaseException:
            self.remove_unstarted_run()
            self.release_run_folder()
            raise

    def read_hyperparameters(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """rl-zoo3's reading of the config block, on a document we read first (:mod:`~sb3_ppo_ext.zoo.config.reading`):
        the config file within the YAML limits and of the shape rl-zoo3 assumes (a resumed run: the block it saved),
        then the block rl-zoo3 merged checked, and only then printed as rl-zoo3 prints it."""
        check_yaml_config_path(self.config)
        document = self.resumed_config_document() or read_config_document(self.config)
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
        self.take_resume_point()
        return parsed, saved_hyperparams

    def _preprocess_hyperparams(self, hyperparams: dict[str, Any]) -> tuple[dict[str, Any], Any, list, Any]:
        """rl-zoo3's pre-processing; then the evaluation env gets the config's ``env_kwargs`` (unless
        ``--eval-env-kwargs`` was given: rl-zoo3 binds them before the block is read, so its evaluations played the
        task's defaults), and our video and live-view callbacks that play the trained env's id get the config's
        ``env_wrapper`` (unless they were given one), so that they see the env the policy was trained on."""
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
        """rl-zoo3's callbacks (:meth:`~sb3_ppo_ext.zoo.safe_run_files.SafeRunFilesExperiment.create_callbacks`), and
        for a training run (not ``optimize``'s trials) :class:`~sb3_ppo_ext.zoo.progress_csv.ProgressCSVCallback`: the
        logger's values in the run folder's ``progress.csv``, continued by a resumed run."""
        super().create_callbacks()
        if not self.optimize_hyperparameters:
            self.callbacks.append(ProgressCSVCallback(os.path.join(self.save_path, PROGRESS_FILE)))

    def create_envs(self, n_envs: int, eval_env: bool = False, no_log: bool = False) -> VecEnv:
        """rl-zoo3's envs, built by the VecEnv of
        :meth:`~sb3_ppo_ext.zoo.vec_env_choice.VecEnvChoosingExperiment.vec_env_builder`; a resumed run's training envs
        continue its monitor files (:class:`~sb3_ppo_ext.zoo.resume.ContinuedMonitor`) instead of starting them again.
        The ``--vec-env`` type that steps the training envs, with its keyword arguments, is set in ``args`` (saved as
        ``args.yml`` once they are built)."""
        self.check_env_kwargs(self.eval_env_kwargs if eval_env else self.env_kwargs, eval_env=eval_env)
        builder, kwargs = self.vec_env_builder(n_envs, eval_env=eval_env)
        with (
            _BUILDING_ENVS,
            patch.multiple(self, vec_env_class=builder, vec_env_kwargs=kwargs),
            self.monitors_of(eval_env=eval_env, no_log=no_log),
        ):
            env = super().create_envs(n_envs, eval_env=eval_env, no_log=no_log)
        if not eval_env:
            self.record_training_vec_env(env)
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

    def learn(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training, stopped without losing the run by SIGTERM or a failed env worker
        (:meth:`~sb3_ppo_ext.zoo.stopping.StoppableExperiment.learn`), for a resumed run up to its total budget
        (:meth:`~sb3_ppo_ext.zoo.resume.ResumableExperiment.learn`); a new run that fails before its first step is
        removed (:meth:`remove_unstarted_run`); a failure gives the run folder's lock back."""
        with self.evaluation_env_type_accepted():
            try:
                super().learn(model)
            except BaseException:
                if model.num_timesteps == 0:  # failed before its first step: nothing trained, nothing to keep
                    self.remove_unstarted_run()
                self.release_run_folder()
                self.restore_ctrl_c()
                raise

    def save_trained_model(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's saving of the final model (:meth:`~sb3_ppo_ext.zoo.stopping.StoppableExperiment.save_trained_model`),
        then, for a run that finished (not one stopped by SIGTERM), one line with the final model's and the best model's
        last evaluations (:func:`~sb3_ppo_ext.zoo.run_summary.end_of_training_line`). The run folder's lock is given
        back at the end, whatever happens, and Ctrl-C to its handler of before training
        (:meth:`~sb3_ppo_ext.zoo.stopping.StoppableExperiment.restore_ctrl_c`)."""
        try:
            super().save_trained_model(model)
            evaluation = next((callback for callback in self.callbacks if isinstance(callback, EvalCallback)), None)
            if evaluation is None or self.verbose < 1:
                return
            last_best = last_and_best(evaluation.evaluations_timesteps, evaluation.evaluations_results)
            if last_best is not None:
                print(end_of_training_line(*last_best, self.play_best_command()))
        finally:
            self.release_run_folder()
            self.restore_ctrl_c()

    def play_best_command(self) -> str:
        """The ``enjoy`` command that plays this run's ``best_model.zip``."""
        algo = "" if self.algo == ALGORITHM_NAME else f" --algo {self.algo}"
        exp_id = self.save_path.rstrip(os.sep).rsplit("_", 1)[-1]
        return f"sb3-ppo-ext enjoy{algo} --env {self.env_name.gym_id} -f {self.log_folder} --exp-id {exp_id} --load-best"

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
        resumed run keeps its files (:meth:`~sb3_ppo_ext.zoo.resume.ResumableExperiment.record_resumed_run`). A new run's
        ``env_kwargs`` in both files name the task's version-dependent defaults it trained with
        (:func:`~sb3_ppo_ext.pretrained.saving.recorded_env_kwargs`)."""
        command = " ".join(getattr(sys, "orig_argv", ["python3", *sys.argv]))
        if self.record_resumed_run(command):
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

"""What a training run loads and writes beside its model, without pickles unless ``--trust-pickles``: the ``-i`` model
and its ``VecNormalize`` statistics loaded from plain data, and a plain-data twin (``.npz``) written beside every
``vecnormalize.pkl`` (the final one, the evaluation's best model's, the ``--save-freq`` checkpoints')."""

from __future__ import annotations

import os
import warnings
from typing import Any

from rl_zoo3.callbacks import SaveVecNormalizeCallback
from rl_zoo3.exp_manager import ExperimentManager
from rl_zoo3.utils import ALGOS
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import CheckpointCallback, EvalCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_ppo_ext.callbacks import RotatingCheckpointCallback
from sb3_ppo_ext.callbacks.checkpoint import checkpoint_statistics_of, write_model_files
from sb3_ppo_ext.files import atomic_path
from sb3_ppo_ext.safe_loading import (
    load_vecnormalize_without_pickles,
    load_without_pickles,
    refusal,
    save_vecnormalize_statistics,
    statistics_path,
    statistics_saved,
)
from sb3_ppo_ext.zoo.loading import BEST_MODEL_STATISTICS


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


class SafeRunFilesExperiment(ExperimentManager):
    """The part of :class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager` that loads and saves a run's model and
    statistics: continuing a run (``-i``) loads the model with
    :func:`~sb3_ppo_ext.safe_loading.models.load_without_pickles` and the statistics from their twin, and refuses a
    replay buffer pickle, unless ``--trust-pickles`` is given (:attr:`trust_pickles`); every ``vecnormalize.pkl`` it
    writes gets its plain-data twin."""

    @property
    def trust_pickles(self) -> bool:
        """Whether ``--trust-pickles`` was given: ``-i``'s model, statistics and replay buffer are then unpickled, as
        rl-zoo3 does."""
        return bool(getattr(self.args, "trust_pickles", False))

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

    def checkpoint_statistics_path(self) -> str | None:
        """The ``VecNormalize`` statistics saved with the ``-i`` model when it is a checkpoint
        (``<prefix>_<steps>_steps.zip`` -> ``<prefix>_vecnormalize_<steps>_steps.pkl`` beside it), if that file or its
        plain-data twin (``.npz``) exists."""
        path = checkpoint_statistics_of(self.trained_agent or "")
        if not self.continue_training or path is None:
            return None
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
        """rl-zoo3's saving of the final model: the same files and lines (``<env>.zip``, ``replay_buffer.pkl`` with
        ``--save-replay-buffer``, ``<env>/vecnormalize.pkl``), plus the statistics' plain-data twin ``vecnormalize.npz``
        beside the pickle, each written atomically as the checkpoints are
        (:func:`~sb3_ppo_ext.callbacks.checkpoint.write_model_files`): the statistics first, the model zip last, where
        rl-zoo3 writes them in place (a stop during the save left a cut-short ``<env>.zip``)."""
        print(f"Saving to {self.save_path}")
        if hasattr(model, "save_replay_buffer") and self.save_replay_buffer:
            print("Saving replay buffer")
            with atomic_path(os.path.join(self.save_path, "replay_buffer.pkl")) as temporary:
                model.save_replay_buffer(temporary)
        statistics = os.path.join(self.params_path, "vecnormalize.pkl") if self.normalize else None
        write_model_files(model, os.path.join(self.save_path, f"{self.env_name}.zip"), statistics)

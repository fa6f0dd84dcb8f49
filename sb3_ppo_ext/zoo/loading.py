"""How rl-zoo3's ``enjoy`` / ``record_video`` load a run while ``sb3-ppo-ext`` runs them: without unpickling.

Both scripts load the model with ``ALGOS[algo].load(...)`` and, inside ``create_test_env``, the ``VecNormalize``
statistics with ``VecNormalize.load(...)``: both unpickle. :class:`PlayedRunLoading` provides the stand-ins swapped
into their modules for the time of the script: the model through
:func:`~sb3_ppo_ext.safe_loading.models.load_without_pickles` (``training=False``, the saved spaces matched against
the env ``create_test_env`` made), the statistics from their plain-data twin; with ``--trust-pickles``, rl-zoo3's own
loading. The statistics are those saved with the played model (:func:`played_model_statistics`), where rl-zoo3 plays
every model with the run's final ones.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_ppo_ext.callbacks.checkpoint import DEFAULT_NAME_PREFIX, list_checkpoints, vecnormalize_checkpoint_path
from sb3_ppo_ext.safe_loading import (
    load_vecnormalize_without_pickles,
    load_without_pickles,
    statistics_saved,
)

#: The statistics of ``best_model.zip``, beside it in the run folder: the evaluation writes them with each new best
#: model (pickle and plain twin), because the run's ``<env>/vecnormalize.pkl`` ends up with the final statistics.
BEST_MODEL_STATISTICS = "best_model_vecnormalize.pkl"


def played_model_statistics(
    run_folder: str,
    env_folder_name: str,
    *,
    load_best: bool = False,
    load_checkpoint: int | str | None = None,
    load_last_checkpoint: bool = False,
) -> str:
    """The ``VecNormalize`` pickle path (its plain ``.npz`` twin beside it) of the statistics saved with the model
    that rl-zoo3's ``get_model_path`` plays for these options: ``best_model.zip``'s
    (:data:`BEST_MODEL_STATISTICS`), a checkpoint's (``rl_model_vecnormalize_<steps>_steps.pkl``), else the run's
    final ``<env>/vecnormalize.pkl``, which is also what rl-zoo3 loads for every model, and what is returned when the
    played model has no statistics of its own (runs made by rl-zoo3 itself or before they were saved).

    :param run_folder: the run folder (``<log folder>/<algo>/<env>_<n>``).
    :param env_folder_name: the run's parameter folder name (the env id with ``/`` written ``-``).
    """
    own = None
    if load_best:
        own = os.path.join(run_folder, BEST_MODEL_STATISTICS)
    elif load_checkpoint is not None:
        own = vecnormalize_checkpoint_path(run_folder, DEFAULT_NAME_PREFIX, load_checkpoint)
    elif load_last_checkpoint:
        checkpoints = list_checkpoints(run_folder)
        if checkpoints:  # rl-zoo3's choice: the largest step count in the name
            own = vecnormalize_checkpoint_path(run_folder, DEFAULT_NAME_PREFIX, checkpoints[-1].num_timesteps)
    if own is not None and statistics_saved(own):
        return own
    return os.path.join(run_folder, env_folder_name, "vecnormalize.pkl")


class _AlgorithmLoader:
    """Stands in for an algorithm class in rl-zoo3's ``ALGOS`` while a run is played: only ``load`` is used."""

    def __init__(self, algorithm: type[BaseAlgorithm], loading: PlayedRunLoading) -> None:
        self.algorithm = algorithm
        self.loading = loading

    def load(self, path: str, env: VecEnv | None = None, custom_objects: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if self.loading.trust_pickles:
            return self.algorithm.load(path, env=env, custom_objects=custom_objects, **kwargs)
        return load_without_pickles(
            path,
            env,
            algorithm=self.algorithm,
            training=False,
            custom_objects=custom_objects,
            reference_env=self.loading.env,
            **kwargs,
        )


class _StatisticsLoader:
    """Stands in for ``VecNormalize`` in ``rl_zoo3.utils`` while a run is played: only ``load`` is used."""

    def __init__(self, loading: PlayedRunLoading) -> None:
        self.loading = loading

    def load(self, load_path: str, venv: VecEnv) -> VecNormalize:
        load_path = self.loading.statistics_of_played_model(load_path)
        if self.loading.trust_pickles:
            return VecNormalize.load(load_path, venv)
        return load_vecnormalize_without_pickles(load_path, venv)


class PlayedRunLoading:
    """The loading of one played run: whether pickles are trusted (set from the parsed options by :meth:`complete`)
    and the env ``create_test_env`` made (the saved spaces are matched against it)."""

    def __init__(self) -> None:
        self.trust_pickles = False
        self.env: VecEnv | None = None
        self.played_model: dict[str, Any] = {}

    def complete(self, parsed: argparse.Namespace) -> None:
        """Read ``--trust-pickles`` and the choice of the played model from the options rl-zoo3's script parsed."""
        self.trust_pickles = bool(getattr(parsed, "trust_pickles", False))
        self.played_model = {
            key: getattr(parsed, key, default)
            for key, default in (("load_best", False), ("load_checkpoint", None), ("load_last_checkpoint", False))
        }

    def statistics_of_played_model(self, run_statistics: str) -> str:
        """The statistics saved with the played model (:func:`played_model_statistics`) in place of the run's
        ``<env>/vecnormalize.pkl`` that rl-zoo3 asks for."""
        params_folder = os.path.dirname(run_statistics)
        chosen = played_model_statistics(os.path.dirname(params_folder), os.path.basename(params_folder), **self.played_model)
        if os.path.abspath(chosen) != os.path.abspath(run_statistics):
            print(f"Loading the statistics saved with the model: {chosen}")
        return chosen

    def algorithms(self, registry: Mapping[str, type]) -> dict[str, _AlgorithmLoader]:
        """rl-zoo3's ``ALGOS`` with each algorithm's ``load`` going through this loading."""
        return {name: _AlgorithmLoader(algorithm, self) for name, algorithm in registry.items()}

    def statistics_loader(self) -> _StatisticsLoader:
        """The stand-in for ``VecNormalize`` in ``rl_zoo3.utils`` (whose ``create_test_env`` calls its ``load``)."""
        return _StatisticsLoader(self)

    def recording(self, create_test_env: Callable[..., VecEnv]) -> Callable[..., VecEnv]:
        """``create_test_env``, remembering the env it returns."""

        def create(*args: Any, **kwargs: Any) -> VecEnv:
            self.env = create_test_env(*args, **kwargs)
            return self.env

        return create


__all__ = ["BEST_MODEL_STATISTICS", "PlayedRunLoading", "played_model_statistics"]

"""The training env's ``VecNormalize``, found through its wrappers, and its observation statistics applied to a
separate env's observations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize


def observation_normalizer(training_env: VecEnv | None) -> Callable[[Any], Any]:
    """A function that normalises observations with the training ``VecNormalize`` statistics, without updating them.

    The identity when the training env has no ``VecNormalize`` or does not normalise observations. The statistics are
    read at each call, so the function follows the training statistics as they change.
    """
    vec_normalize = unwrap_vec_normalize(training_env) if training_env is not None else None
    if vec_normalize is None or not vec_normalize.norm_obs:
        return lambda observation: observation
    return vec_normalize.normalize_obs


def find_vec_normalize(training_env: VecEnv | None) -> VecNormalize | None:
    """The ``VecNormalize`` wrapper of ``training_env`` (searched through all wrappers), or ``None``."""
    return unwrap_vec_normalize(training_env) if training_env is not None else None

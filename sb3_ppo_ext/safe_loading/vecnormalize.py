"""``VecNormalize`` statistics as plain data, written and read without pickles.

``VecNormalize.load`` unpickles ``vecnormalize.pkl``, and a crafted file runs code when it is loaded.
:func:`save_vecnormalize_statistics` writes a plain-data twin beside it (``vecnormalize.npz``: arrays and a JSON
text) and :func:`load_vecnormalize_without_pickles` reads that twin with ``numpy.load(allow_pickle=False)``; a
pickle without its twin is refused with a :class:`~sb3_ppo_ext.safe_loading.errors.PickleRefusedError`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.safe_loading.errors import refusal
from sb3_ppo_ext.safe_loading.zips import check_zip_sizes, npz_headers
from sb3_ppo_ext.validation import check_vecnormalize_kwargs

STATISTICS_FORMAT_VERSION = 1
#: Settings of ``VecNormalize`` kept in the statistics file (its constructor arguments besides the env).
_STATISTICS_SETTINGS = ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys")


def statistics_path(path: str) -> str:
    """The plain-data twin of a ``VecNormalize`` pickle: ``vecnormalize.pkl`` -> ``vecnormalize.npz`` (an ``.npz``
    path is returned as it is)."""
    stem, extension = os.path.splitext(os.fspath(path))
    return path if extension == ".npz" else stem + ".npz"


def statistics_saved(path: str) -> bool:
    """Whether the ``VecNormalize`` pickle ``path`` or its plain-data twin (``.npz``) exists."""
    return os.path.isfile(path) or os.path.isfile(statistics_path(path))


@dataclass
class VecNormalizeStatistics:
    """What a ``VecNormalize`` saves besides its env: its settings and running statistics, as plain data.

    Attribute names are ``VecNormalize``'s, so code that reads statistics (``export_onnx``) takes either.

    :param obs_rms: the observation statistics (one per normalised key for ``Dict`` observations), ``None`` when
        observations are not normalised.
    :param ret_rms: the statistics of the discounted return (reward normalisation).
    """

    training: bool
    norm_obs: bool
    norm_reward: bool
    clip_obs: float
    clip_reward: float
    gamma: float
    epsilon: float
    norm_obs_keys: list[str] | None
    obs_rms: RunningMeanStd | dict[str, RunningMeanStd] | None
    ret_rms: RunningMeanStd

    @classmethod
    def of(cls, vec_normalize: VecNormalize) -> VecNormalizeStatistics:
        """The statistics and settings of ``vec_normalize`` (copies)."""
        obs_rms = copy.deepcopy(getattr(vec_normalize, "obs_rms", None)) if vec_normalize.norm_obs else None
        keys = vec_normalize.norm_obs_keys
        return cls(
            training=bool(vec_normalize.training),
            norm_obs=bool(vec_normalize.norm_obs),
            norm_reward=bool(vec_normalize.norm_reward),
            clip_obs=float(vec_normalize.clip_obs),
            clip_reward=float(vec_normalize.clip_reward),
            gamma=float(vec_normalize.gamma),
            epsilon=float(vec_normalize.epsilon),
            norm_obs_keys=None if keys is None else [str(key) for key in keys],
            obs_rms=obs_rms,
            ret_rms=copy.deepcopy(vec_normalize.ret_rms),
        )

    def wrap(self, venv: VecEnv) -> VecNormalize:
        """A ``VecNormalize`` around ``venv`` with these settings and statistics (what ``VecNormalize.load`` gives).

        :raises ValueError: when the statistics do not fit ``venv``'s observations.
        """
        vec_normalize = VecNormalize(venv, **{name: getattr(self, name) for name in _STATISTICS_SETTINGS})
        if self.norm_obs:
            expected = vec_normalize.obs_rms
            # With norm_obs, the saved statistics are set: a RunningMeanStd, or one per key where the env's are a dict.
            saved_rms: Any = self.obs_rms
            pairs = (
                [(key, expected[key], saved_rms[key]) for key in expected]
                if isinstance(expected, dict)
                else [(None, expected, saved_rms)]
            )
            for key, fresh, saved in pairs:
                if fresh.mean.shape != saved.mean.shape:
                    where = "observations" if key is None else f"observations[{key!r}]"
                    raise ValueError(
                        f"the saved VecNormalize statistics have shape {saved.mean.shape}, the env's "
                        f"{where} {fresh.mean.shape}"
                    )
            vec_normalize.obs_rms = copy.deepcopy(saved_rms)
        vec_normalize.ret_rms = copy.deepcopy(self.ret_rms)
        return vec_normalize


def _rms_arrays(prefix: str, rms: RunningMeanStd) -> dict[str, np.ndarray]:
    return {
        f"{prefix}.mean": np.asarray(rms.mean, dtype=np.float64),
        f"{prefix}.var": np.asarray(rms.var, dtype=np.float64),
        f"{prefix}.count": np.asarray(rms.count, dtype=np.float64),
    }


def save_vecnormalize_statistics(vec_normalize: VecNormalize | VecNormalizeStatistics, path: str) -> str:
    """Write the settings and statistics of ``vec_normalize`` as plain data: one ``.npz`` of float64 arrays
    (``obs.mean`` / ``obs.var`` / ``obs.count``, ``obs.<i>.*`` per key of ``Dict`` observations, ``ret.*``) and a
    JSON text ``settings`` (``VecNormalize``'s constructor arguments, the observation keys, a format version).
    Written atomically; :func:`load_vecnormalize_without_pickles` reads it back.

    :param vec_normalize: the ``VecNormalize`` (or its statistics).
    :param path: the file, conventionally beside the pickle (:func:`statistics_path`).
    :returns: ``path``.
    """
    statistics = (
        vec_normalize if isinstance(vec_normalize, VecNormalizeStatistics) else VecNormalizeStatistics.of(vec_normalize)
    )
    settings: dict[str, Any] = {"format_version": STATISTICS_FORMAT_VERSION, "obs_keys": None}
    settings.update({name: getattr(statistics, name) for name in _STATISTICS_SETTINGS})
    arrays = _rms_arrays("ret", statistics.ret_rms)
    if isinstance(statistics.obs_rms, dict):
        settings["obs_keys"] = list(statistics.obs_rms)
        for index, key in enumerate(settings["obs_keys"]):
            arrays.update(_rms_arrays(f"obs.{index}", statistics.obs_rms[key]))
    elif statistics.obs_rms is not None:
        arrays.update(_rms_arrays("obs", statistics.obs_rms))
    with atomic_write(path) as stream:
        # numpy's stub matches **arrays against savez's allow_pickle: bool; no key of arrays is allow_pickle.
        np.savez(stream, settings=np.array(json.dumps(settings)), **arrays)  # type: ignore[arg-type]
    return path


#: Most numbers in one array of a statistics file (an observation of 4 M numbers: a 2048 x 2048 image).
MAX_STATISTICS_VALUES = 1 << 22
#: Longest settings text (JSON) of a statistics file (a few hundred characters; more with many observation keys).
MAX_SETTINGS_CHARACTERS = 1 << 20


def _expected_observation_shape(observation_space: spaces.Space | None, key: str | None) -> tuple[int, ...] | None:
    """The shape of VecNormalize's observation statistics (of ``key`` for a ``Dict`` space) for ``observation_space``;
    ``None`` when there is no space to compare with."""
    if observation_space is None:
        return None
    if isinstance(observation_space, spaces.Dict):
        space = observation_space.spaces.get(key) if key is not None else None
    else:
        space = observation_space if key is None else None
    return None if space is None or space.shape is None else tuple(space.shape)


def check_statistics_arrays(
    headers: Mapping[str, tuple[tuple[int, ...], np.dtype]],
    settings: Mapping[str, Any],
    *,
    where: str,
    observation_space: spaces.Space | None = None,
) -> None:
    """Check, on their headers (:func:`npz_headers`), the arrays a statistics file must hold for its ``settings``:
    float64 ``<prefix>.mean`` and ``.var`` of one shape and a scalar ``.count`` for ``ret``, ``obs`` (when
    observations are normalised) or ``obs.<i>`` (per key of ``Dict`` observations); and, given the env's
    ``observation_space``, observation statistics of its shape.

    :raises ValueError: naming the missing or misshapen array.
    """
    prefixes: list[tuple[str, str | None]] = [("ret", None)]
    if settings.get("obs_keys") is not None:
        prefixes += [(f"obs.{index}", key) for index, key in enumerate(settings["obs_keys"])]
    elif settings.get("norm_obs"):
        prefixes.append(("obs", None))
    for prefix, key in prefixes:
        names = [f"{prefix}.{name}" for name in ("mean", "var", "count")]
        missing = [name for name in names if name not in headers]
        if missing:
            raise ValueError(f"{where} lacks the array {missing[0]!r}")
        (mean_shape, mean_dtype), (var_shape, var_dtype), (count_shape, count_dtype) = (headers[name] for name in names)
        if mean_dtype != np.float64 or var_dtype != np.float64 or mean_shape != var_shape or count_shape != ():
            raise ValueError(
                f"{where}: {prefix} must hold float64 mean and var of one shape and a scalar count, got "
                f"{mean_dtype}{mean_shape}, {var_dtype}{var_shape}, count {count_dtype}{count_shape}"
            )
        expected = _expected_observation_shape(observation_space, key) if prefix != "ret" else ()
        if expected is not None and mean_shape != expected:
            observations = "observations" if key is None else f"observations[{key!r}]"
            raise ValueError(
                f"the saved VecNormalize statistics have shape {mean_shape}, the env's {observations} {expected} ({where})"
            )


def _read_rms(arrays: Any, prefix: str, where: str) -> RunningMeanStd:
    """The running statistics ``prefix`` of an open statistics file, checked by :func:`check_statistics_arrays`;
    refused (``ValueError`` naming the array) unless every value is finite, ``var >= 0`` and ``count > 0``."""
    mean, var, count = (np.asarray(arrays[f"{prefix}.{name}"]) for name in ("mean", "var", "count"))
    for name, values in (("mean", mean), ("var", var), ("count", count)):
        if not np.isfinite(values).all():
            raise ValueError(f"{where}: the array {prefix}.{name!s} holds a non-finite value (NaN or inf); refused")
    if (var < 0).any():
        raise ValueError(f"{where}: the array {prefix}.var must be >= 0, got {float(var.min())!r}")
    if not count > 0:
        raise ValueError(f"{where}: the array {prefix}.count must be > 0, got {float(count)!r}")
    rms = RunningMeanStd(shape=mean.shape)
    rms.mean, rms.var, rms.count = mean.copy(), var.copy(), float(count)
    return rms


def check_statistics_settings(settings: Mapping[str, Any], *, where: str) -> None:
    """Raise ``ValueError`` unless ``settings`` holds every ``VecNormalize`` setting, each by the rule a zoo config's
    ``normalize`` follows (:func:`~sb3_ppo_ext.validation.check_vecnormalize_kwargs`)."""
    missing = [name for name in _STATISTICS_SETTINGS if name not in settings]
    if missing:
        raise ValueError(f"{where}: the settings lack {missing}")
    check_vecnormalize_kwargs({name: settings[name] for name in _STATISTICS_SETTINGS}, name=f"{where}: the setting")


def read_vecnormalize_statistics(path: str, observation_space: spaces.Space | None = None) -> VecNormalizeStatistics:
    """The statistics written by :func:`save_vecnormalize_statistics`, read without unpickling.

    Sizes are checked before anything is read: the zip's entries
    (:func:`~sb3_ppo_ext.safe_loading.zips.check_zip_sizes`), then each array's shape and dtype on its ``.npy``
    header (:func:`npz_headers`: at most :data:`MAX_STATISTICS_VALUES` numbers, a settings text of at most
    :data:`MAX_SETTINGS_CHARACTERS`), and against ``observation_space`` when given (:func:`check_statistics_arrays`).

    :param path: the ``.npz`` statistics file, or the ``vecnormalize.pkl`` it is the twin of (:func:`statistics_path`).
    :param observation_space: the observation space of the env the statistics are for, if known.
    :raises PickleRefusedError: when only the pickle exists.
    :raises ValueError: when the file is missing, not such a file, too large or of other shapes than the env's.
    """
    twin = statistics_path(path)
    if not os.path.isfile(twin):
        if os.path.isfile(path):
            raise refusal(
                f"{path}:",
                f"the VecNormalize statistics are saved only as a pickle (no plain-data twin "
                f"{os.path.basename(twin)} beside it; runs of sb3-ppo-ext write one)",
                "VecNormalize.load",
            )
        raise ValueError(f"no VecNormalize statistics file {twin!r}")
    try:
        with np.load(twin, allow_pickle=False) as arrays:
            check_zip_sizes(arrays.zip, twin, nested=())
            headers = npz_headers(arrays.zip, twin)
            for name, (shape, dtype) in headers.items():
                values = math.prod(shape) * max(1, dtype.itemsize // 8)  # a string of n characters: n / 2 numbers' room
                if values > MAX_STATISTICS_VALUES:
                    raise ValueError(
                        f"{twin}: its array {name!r} has shape {shape} of {dtype}, more than "
                        f"{MAX_STATISTICS_VALUES} numbers (MAX_STATISTICS_VALUES); refused before reading it"
                    )
            shape, dtype = headers.get("settings", ((), np.dtype(np.float64)))
            if shape != () or dtype.kind != "U" or dtype.itemsize // 4 > MAX_SETTINGS_CHARACTERS:
                raise ValueError(
                    f"{twin}: its settings must be one text of at most {MAX_SETTINGS_CHARACTERS} "
                    f"characters, got {dtype}{shape}"
                )
            settings = json.loads(str(arrays["settings"][()]))
            if not isinstance(settings, dict) or settings.get("format_version") != STATISTICS_FORMAT_VERSION:
                version = settings.get("format_version") if isinstance(settings, dict) else None
                raise ValueError(f"{twin}: format_version {version!r}, this version reads {STATISTICS_FORMAT_VERSION}")
            check_statistics_arrays(headers, settings, where=twin, observation_space=observation_space)
            ret_rms = _read_rms(arrays, "ret", twin)
            obs_rms: RunningMeanStd | dict[str, RunningMeanStd] | None = None
            if settings.get("obs_keys") is not None:
                obs_rms = {key: _read_rms(arrays, f"obs.{index}", twin) for index, key in enumerate(settings["obs_keys"])}
            elif settings.get("norm_obs"):
                obs_rms = _read_rms(arrays, "obs", twin)
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as error:
        raise ValueError(f"{twin} is not a VecNormalize statistics file ({error})") from None
    check_statistics_settings(settings, where=twin)
    return VecNormalizeStatistics(**{name: settings[name] for name in _STATISTICS_SETTINGS}, obs_rms=obs_rms, ret_rms=ret_rms)


def load_vecnormalize_without_pickles(path: str, venv: VecEnv) -> VecNormalize:
    """``VecNormalize.load(path, venv)`` from the plain-data twin of ``path``, unpickling nothing.

    :param path: a ``vecnormalize.pkl`` whose twin ``vecnormalize.npz`` lies beside it, or the ``.npz`` itself.
    :param venv: the env to wrap.
    :raises PickleRefusedError: when only the pickle exists (a ``ValueError`` naming ``--trust-pickles``).
    """
    return read_vecnormalize_statistics(path, venv.observation_space).wrap(venv)

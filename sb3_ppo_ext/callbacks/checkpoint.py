"""Rotating, crash-safe checkpoints and resuming from them."""

from __future__ import annotations

import contextlib
import glob
import os
import pickle
import pickletools
import re
import warnings
import zipfile
from dataclasses import dataclass
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import CheckpointCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

from sb3_ppo_ext.callbacks._schedule import StepSchedule, check_frequency
from sb3_ppo_ext.files import atomic_write, check_writable_dir, fsync_directory
from sb3_ppo_ext.ppo import PPO
from sb3_ppo_ext.safe_loading import save_vecnormalize_statistics, statistics_path
from sb3_ppo_ext.validation import check_int

#: The name prefix of rl-zoo3's ``--save-freq`` checkpoints (SB3's ``CheckpointCallback`` default), and of
#: :class:`RotatingCheckpointCallback`'s by default.
DEFAULT_NAME_PREFIX = "rl_model"

_STEPS_PATTERN = r"_(\d+)_steps\.zip"


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint on disk: the model zip and, when saved, the ``VecNormalize`` statistics.

    :param num_timesteps: the model's ``num_timesteps`` when it was saved.
    :param model_path: path of the model zip (holds the weights, the optimiser, ``num_timesteps``, the schedules'
        progress and the adaptive-KL state ``kl_coef`` / ``adaptive_learning_rate``).
    :param vecnormalize_path: path of the pickled ``VecNormalize``, or ``None``.
    :param statistics_path: path of the same statistics as plain data (``.npz``, read without unpickling by
        :func:`~sb3_ppo_ext.safe_loading.vecnormalize.load_vecnormalize_without_pickles`), or ``None``.
    """

    num_timesteps: int
    model_path: str
    vecnormalize_path: str | None
    statistics_path: str | None = None


def checkpoint_file_name(name_prefix: str, num_timesteps: int | str) -> str:
    """File name of the model zip of a checkpoint (SB3's ``CheckpointCallback`` naming); ``num_timesteps="*"`` gives
    the glob pattern of every checkpoint of ``name_prefix``."""
    return f"{name_prefix}_{num_timesteps}_steps.zip"


def model_checkpoint_path(folder: str, name_prefix: str, num_timesteps: int) -> str:
    """Path of the model zip of a checkpoint (SB3's ``CheckpointCallback`` naming)."""
    return os.path.join(folder, checkpoint_file_name(name_prefix, num_timesteps))


def vecnormalize_checkpoint_path(folder: str, name_prefix: str, num_timesteps: int | str) -> str:
    """Path of the ``VecNormalize`` pickle of a checkpoint (SB3's ``CheckpointCallback`` naming)."""
    return os.path.join(folder, f"{name_prefix}_vecnormalize_{num_timesteps}_steps.pkl")


def checkpoint_statistics_of(model_path: str) -> str | None:
    """The ``VecNormalize`` pickle path saved with the checkpoint ``model_path`` (``<prefix>_<steps>_steps.zip`` ->
    ``<prefix>_vecnormalize_<steps>_steps.pkl`` beside it), or ``None`` when ``model_path`` is not named as a
    checkpoint."""
    match = re.fullmatch(r"(?P<prefix>.+)" + _STEPS_PATTERN, os.path.basename(model_path))
    if match is None:
        return None
    return vecnormalize_checkpoint_path(os.path.dirname(model_path), match["prefix"], int(match.group(2)))


def list_checkpoints(folder: str, name_prefix: str = DEFAULT_NAME_PREFIX) -> list[Checkpoint]:
    """The complete checkpoints in ``folder``, oldest first.

    The model zip is written last, so a zip on disk means its checkpoint is complete; temporary files of an
    interrupted write are ignored.
    """
    pattern = re.compile(re.escape(name_prefix) + _STEPS_PATTERN + "$")
    found = []
    for path in glob.glob(os.path.join(glob.escape(folder), checkpoint_file_name(glob.escape(name_prefix), "*"))):
        match = pattern.fullmatch(os.path.basename(path))
        if match is None:
            continue
        steps = int(match.group(1))
        stats = vecnormalize_checkpoint_path(folder, name_prefix, steps)
        plain = statistics_path(stats)
        found.append(
            Checkpoint(steps, path, stats if os.path.exists(stats) else None, plain if os.path.exists(plain) else None)
        )
    return sorted(found, key=lambda checkpoint: checkpoint.num_timesteps)


def model_zip_defect(model_path: str) -> str | None:
    """Why the model zip ``model_path`` cannot be loaded, or ``None`` when it can (as far as reading it without
    unpickling anything tells): it is not a readable zip (a file cut short by a process killed while writing it, e.g.
    0 bytes), an entry fails its CRC check (``zipfile.ZipFile.testzip``), or it lacks SB3's ``data`` entry.

    :param model_path: the zip (a checkpoint, or a run's final model).
    """
    try:
        with zipfile.ZipFile(model_path) as archive:
            damaged = archive.testzip()
            if damaged is not None:
                return f"its entry {damaged!r} fails the CRC check"
            if "data" not in archive.namelist():
                return "it has no 'data' entry (not a Stable-Baselines3 model)"
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return f"it is not a readable zip file ({error})"
    return None


def checkpoint_defect(checkpoint: Checkpoint, *, needs_statistics: bool) -> str | None:
    """Why ``checkpoint`` cannot be resumed, or ``None`` when it can; reads its files without unpickling anything.

    A defect: the model zip's (:func:`model_zip_defect`: not a readable zip, an entry failing its CRC check, no SB3
    ``data`` entry), or (when ``needs_statistics``) the ``VecNormalize`` statistics are missing or not a complete
    pickle (their opcodes are scanned with ``pickletools.genops``, which builds no object).

    :param checkpoint: a checkpoint of :func:`list_checkpoints`.
    :param needs_statistics: whether the checkpoint must have its ``VecNormalize`` statistics.
    """
    defect = model_zip_defect(checkpoint.model_path)
    if defect is not None:
        return defect
    if not needs_statistics:
        return None
    if checkpoint.vecnormalize_path is None:
        return "its VecNormalize statistics file is missing (the other checkpoints of the series have one)"
    try:
        with open(checkpoint.vecnormalize_path, "rb") as handle:
            for _ in pickletools.genops(handle):
                pass
    except (ValueError, OSError) as error:  # genops: ValueError for a truncated or garbled pickle
        return f"its VecNormalize statistics {checkpoint.vecnormalize_path} are not a complete pickle ({error})"
    return None


def find_latest_checkpoint(
    folder: str, name_prefix: str = DEFAULT_NAME_PREFIX, *, needs_statistics: bool | None = None
) -> Checkpoint | None:
    """The newest intact checkpoint in ``folder`` (``None`` when there is none or the folder does not exist).

    Newer checkpoints with a defect (:func:`checkpoint_defect`: a corrupt zip, missing or truncated statistics) are
    skipped with a warning naming the file and the defect.

    :param folder: the checkpoint folder.
    :param name_prefix: the callback's ``name_prefix``.
    :param needs_statistics: whether a checkpoint must have its ``VecNormalize`` statistics; ``None``: when any
        checkpoint of the folder has them (a series saved from a normalised run).
    """
    checkpoints = list_checkpoints(folder, name_prefix) if os.path.isdir(folder) else []
    if needs_statistics is None:
        needs_statistics = any(checkpoint.vecnormalize_path is not None for checkpoint in checkpoints)
    for checkpoint in reversed(checkpoints):
        defect = checkpoint_defect(checkpoint, needs_statistics=needs_statistics)
        if defect is None:
            return checkpoint
        warnings.warn(
            f"skipping the checkpoint {checkpoint.model_path}: {defect}; trying an older one", UserWarning, stacklevel=2
        )
    return None


def resume_from_checkpoint(
    folder: str,
    env: VecEnv,
    algorithm: type[BaseAlgorithm] | None = None,
    name_prefix: str = DEFAULT_NAME_PREFIX,
    **load_kwargs: Any,
) -> BaseAlgorithm:
    """Load the newest checkpoint of ``folder`` to continue training where it stopped.

    The model comes back with its ``num_timesteps`` (so schedules and the step-based callbacks carry on), its
    optimiser state and its adaptive-KL state. When the checkpoint has ``VecNormalize`` statistics, ``env`` is wrapped
    in the saved ``VecNormalize`` (or, when ``env`` already has one, that one receives the saved statistics).
    Continue with ``model.learn(remaining_timesteps(model, total), reset_num_timesteps=False)``.

    :param folder: the checkpoint folder of :class:`RotatingCheckpointCallback`.
    :param env: the training environment, a ``VecEnv`` without or with ``VecNormalize``.
    :param algorithm: the algorithm class; defaults to ``sb3_ppo_ext.PPO``.
    :param name_prefix: the callback's ``name_prefix``.
    :param load_kwargs: passed on to ``algorithm.load`` (e.g. ``device``).
    :raises FileNotFoundError: when ``folder`` has no intact checkpoint (see :func:`find_latest_checkpoint`: the
        statistics are required when ``env`` normalises or the series has them).
    """
    if algorithm is None:
        algorithm = PPO
    needs_statistics = True if unwrap_vec_normalize(env) is not None else None
    checkpoint = find_latest_checkpoint(folder, name_prefix, needs_statistics=needs_statistics)
    if checkpoint is None:
        damaged = len(list_checkpoints(folder, name_prefix)) if os.path.isdir(folder) else 0
        if damaged:
            raise FileNotFoundError(
                f"no intact checkpoint named {name_prefix}_<steps>_steps.zip in {folder!r} ({damaged} damaged ones skipped)"
            )
        raise FileNotFoundError(f"no checkpoint named {name_prefix}_<steps>_steps.zip in {folder!r}")
    if checkpoint.vecnormalize_path is not None:
        env = _with_saved_statistics(env, checkpoint.vecnormalize_path)
    return algorithm.load(checkpoint.model_path, env=env, **load_kwargs)


def write_model_files(model: BaseAlgorithm, model_path: str, vecnormalize_path: str | None = None) -> str | None:
    """Write ``model`` as a zip and, when ``vecnormalize_path`` is given, its ``VecNormalize`` statistics (SB3's pickle
    there and its plain-data twin ``.npz`` beside it), each file atomically (:func:`~sb3_ppo_ext.files.atomic_write`:
    a temporary file in the same folder, fsynced, then moved into place). The statistics come first and the model zip
    last, so that a model zip on disk has its statistics complete beside it; a process killed while writing leaves
    the files of before (and at most a temporary ``.<name>.*.tmp*`` file), never a half-written one.

    :param model: the model to save.
    :param model_path: the zip to write (a checkpoint, or a run's final model).
    :param vecnormalize_path: where to write the pickle of the model's ``VecNormalize``, or ``None`` for no statistics.
    :returns: the path of the statistics' plain-data twin, or ``None`` when no statistics were written.
    :raises ValueError: when ``vecnormalize_path`` is given and the model's env has no ``VecNormalize``.
    """
    plain_path = None
    if vecnormalize_path is not None:
        vec_normalize = model.get_vec_normalize_env()
        if vec_normalize is None:
            raise ValueError(f"cannot write {vecnormalize_path}: the model's env has no VecNormalize statistics")
        plain_path = save_vecnormalize_statistics(vec_normalize, statistics_path(vecnormalize_path))
        with atomic_write(vecnormalize_path) as handle:
            pickle.dump(vec_normalize, handle)
    with atomic_write(model_path) as handle:
        # SB3 annotates the path as str | Path | BufferedIOBase; it writes to any binary file (IO[bytes]).
        model.save(handle)  # type: ignore[arg-type]
    return plain_path


def remaining_timesteps(model: BaseAlgorithm, total_timesteps: int) -> int:
    """Steps left to reach ``total_timesteps`` in all, for ``learn(..., reset_num_timesteps=False)``.

    With ``reset_num_timesteps=False`` SB3 adds ``num_timesteps`` to the requested steps, so learning the remainder
    ends at ``total_timesteps`` and the schedules' progress continues from where the checkpoint left it.
    """
    check_int("total_timesteps", total_timesteps, minimum=1)
    return max(0, int(total_timesteps) - int(model.num_timesteps))


def _with_saved_statistics(env: VecEnv, vecnormalize_path: str) -> VecEnv:
    existing = unwrap_vec_normalize(env)
    if existing is None:
        return VecNormalize.load(vecnormalize_path, env)
    with open(vecnormalize_path, "rb") as handle:
        saved: VecNormalize = pickle.load(handle)
    for attribute in (
        "obs_rms",
        "ret_rms",
        "clip_obs",
        "clip_reward",
        "gamma",
        "epsilon",
        "norm_obs",
        "norm_reward",
        "training",
    ):
        setattr(existing, attribute, getattr(saved, attribute))
    return env


class RotatingCheckpointCallback(CheckpointCallback):
    """Save the model every ``save_freq`` environment steps and keep only the newest ``keep_last`` checkpoints.

    Extends SB3's ``CheckpointCallback`` (same file names) with rotation and crash-safe writes: each file is written
    to a temporary file in the same folder, fsynced and moved into place with ``os.replace``; the ``VecNormalize``
    statistics are written before the model zip, so a model zip on disk is always a complete checkpoint and a crash
    mid-write leaves the previous checkpoint intact. The model zip holds ``num_timesteps`` and the adaptive-KL
    state; resume with :func:`resume_from_checkpoint`. The statistics are written twice: as SB3's pickle
    (``<prefix>_vecnormalize_<steps>_steps.pkl``, what ``VecNormalize.load`` reads) and as plain data beside it
    (``.npz``, which :func:`~sb3_ppo_ext.safe_loading.vecnormalize.load_vecnormalize_without_pickles` reads without
    unpickling).

    Unlike SB3's ``CheckpointCallback``, ``save_freq`` counts environment steps (``model.num_timesteps``, i.e. summed
    over parallel envs), not callback calls, and a checkpoint is taken at the first rollout start once a multiple of
    ``save_freq`` is reached: after the update, with no collected data pending, so a resumed run repeats or loses
    nothing. File names carry the exact ``num_timesteps``.

    :param save_freq: save every ``save_freq`` environment steps (>= 1; rounded up to the next rollout boundary).
    :param save_path: folder for the checkpoints (created; must be writable).
    :param keep_last: how many checkpoints to keep (>= 1); older ones are deleted. ``None`` keeps every checkpoint
        (as SB3's ``CheckpointCallback`` does).
    :param name_prefix: file name prefix.
    :param save_vecnormalize: also save the ``VecNormalize`` statistics when the training env has them.
    :param save_on_training_end: also save when training ends (after the last update), so the final state can be
        resumed.
    :param verbose: 0 silent, 1 or more: log each save.
    """

    def __init__(
        self,
        save_freq: int,
        save_path: str,
        keep_last: int | None = 5,
        name_prefix: str = DEFAULT_NAME_PREFIX,
        save_vecnormalize: bool = True,
        save_on_training_end: bool = True,
        verbose: int = 0,
    ) -> None:
        save_freq = check_frequency("save_freq", save_freq)
        save_path = check_writable_dir("save_path", save_path)
        if not isinstance(name_prefix, str) or not name_prefix or os.sep in name_prefix:
            raise ValueError(f"name_prefix must be a non-empty file name prefix without {os.sep!r}, got {name_prefix!r}")
        super().__init__(
            save_freq,
            save_path,
            name_prefix,
            save_replay_buffer=False,
            save_vecnormalize=bool(save_vecnormalize),
            verbose=verbose,
        )
        self.keep_last = None if keep_last is None else check_int("keep_last", keep_last, minimum=1)
        self.save_on_training_end = bool(save_on_training_end)
        self._schedule = StepSchedule(save_freq)
        self.last_checkpoint: Checkpoint | None = None

    def _init_callback(self) -> None:
        check_writable_dir("save_path", self.save_path)
        self._remove_leftovers_of_killed_writes()

    def _on_training_start(self) -> None:
        self._schedule.start(self.num_timesteps)

    def _on_rollout_start(self) -> None:
        # Between rollouts the update is done and no collected data is pending: the state to resume from.
        if self._schedule.due(self.num_timesteps):
            self.save_checkpoint()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        if self.save_on_training_end:
            self.save_checkpoint()

    def save_checkpoint(self) -> Checkpoint:
        """Write a checkpoint for the current ``num_timesteps`` now, then delete the ones beyond ``keep_last``."""
        steps = self.num_timesteps
        model_path = model_checkpoint_path(self.save_path, self.name_prefix, steps)
        stats_path = None
        if self.save_vecnormalize and self.model.get_vec_normalize_env() is not None:
            stats_path = vecnormalize_checkpoint_path(self.save_path, self.name_prefix, steps)
        try:
            plain_path = write_model_files(self.model, model_path, stats_path)
        except BaseException:
            if stats_path is not None:  # statistics without their model are no checkpoint
                for path in (stats_path, statistics_path(stats_path)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            raise
        self.last_checkpoint = Checkpoint(steps, model_path, stats_path, plain_path)
        self.logger.record("checkpoint/num_timesteps", steps, exclude="stdout")
        if self.verbose >= 1:
            self.logger.info(f"Saved checkpoint {model_path}")
        self._rotate()
        return self.last_checkpoint

    def _rotate(self) -> None:
        if self.keep_last is None:
            return
        checkpoints = list_checkpoints(self.save_path, self.name_prefix)
        for old in checkpoints[: max(0, len(checkpoints) - self.keep_last)]:
            # Model zip first: a checkpoint without its zip is not listed any more even if the next unlink fails.
            stats = vecnormalize_checkpoint_path(self.save_path, self.name_prefix, old.num_timesteps)
            for path in (old.model_path, stats, statistics_path(stats)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        fsync_directory(self.save_path)

    def _remove_leftovers_of_killed_writes(self) -> None:
        """Delete what a process killed while writing this callback's checkpoints leaves: temporary files, and
        statistics files without their model zip (written first, so a kill before the zip is moved into place, or
        during a rotation, leaves them alone)."""
        folder, prefix = glob.escape(self.save_path), glob.escape(self.name_prefix)
        leftovers = glob.glob(os.path.join(folder, f".{prefix}_*.tmp*"))
        pattern = re.compile(re.escape(self.name_prefix) + r"_vecnormalize_(\d+)_steps\.(pkl|npz)")
        for path in glob.glob(os.path.join(folder, f"{prefix}_vecnormalize_*_steps.*")):
            match = pattern.fullmatch(os.path.basename(path))
            steps = None if match is None else int(match.group(1))
            if steps is not None and not os.path.exists(model_checkpoint_path(self.save_path, self.name_prefix, steps)):
                leftovers.append(path)
        for path in leftovers:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if leftovers:
            fsync_directory(self.save_path)

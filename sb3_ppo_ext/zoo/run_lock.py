"""One trainer per run folder at a time: ``sb3-ppo-ext train`` (a new run and ``--resume``) holds an exclusive lock on
its run folder for as long as it trains, and a second trainer of the same folder stops at once with a one-line error
(two trainers would interleave their checkpoints, evaluations, monitor files and ``progress.csv`` in one run).

The lock is ``flock`` on the hidden file :data:`~sb3_ppo_ext.zoo.run_selection.LOCK_FILE` in the run folder, which
holds the pid of the trainer that took it last. The operating system releases it when its process ends, however it
ends (SIGKILL included), so a lock is never left stuck; an unlocked file means nothing. The lock is advisory: it
keeps out the commands that take it (``train``), not readers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import IO, Any

from rl_zoo3.exp_manager import ExperimentManager

from sb3_ppo_ext.zoo.run_selection import LOCK_FILE


class RunFolderBusy(ValueError):
    """A run folder that another trainer holds (:class:`RunFolderLock`): the command stops with this one line and exit
    status 2, as for any mistake of the command line."""


def lock_file_path(run_folder: str) -> str:
    """The lock file of ``run_folder`` (:data:`~sb3_ppo_ext.zoo.run_selection.LOCK_FILE` inside it)."""
    return os.path.join(run_folder, LOCK_FILE)


def _recorded_pid(stream: IO[str]) -> int | None:
    """The pid written in an open lock file, or ``None`` when it holds none (yet)."""
    stream.seek(0)
    text = stream.read(32).strip()
    return int(text) if text.isdigit() else None


#: How long (seconds) a trainer tries for its run folder's lock before it reports the folder busy: long enough to
#: outlast a grid's look at the lock (:func:`run_folder_trainer` holds it for an instant), far shorter than a trainer
#: holds it.
ACQUIRE_PATIENCE_S = 0.5


def _lock_within(stream: IO[str], patience_s: float) -> None:
    """Take the exclusive ``flock`` of an open file, trying again every 50 ms for ``patience_s`` seconds.

    :raises BlockingIOError: when another open file of it still holds the lock after ``patience_s``.
    """
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


class RunFolderLock:
    """The exclusive lock of one run folder (``flock`` on its lock file,
    :data:`~sb3_ppo_ext.zoo.run_selection.LOCK_FILE`), held from :meth:`acquire` to :meth:`release` or the end of the
    process. :meth:`acquire` does not wait for a trainer that holds it (only :data:`ACQUIRE_PATIENCE_S`, for a grid's
    look at the lock to pass).

    :param run_folder: rl-zoo3's run folder, ``<log folder>/<algo>/<env>_<n>`` (it must exist).
    """

    def __init__(self, run_folder: str) -> None:
        self.run_folder = run_folder
        self._stream: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock through this object."""
        return self._stream is not None

    def __getstate__(self) -> dict[str, Any]:
        """A copy does not hold the lock (only this process's open file does): rl-zoo3 pickles its experiment manager,
        with this lock, into ARS's evaluation workers."""
        return {"run_folder": self.run_folder, "_stream": None}

    def acquire(self) -> None:
        """Take the lock and write this process's pid into the lock file.

        :raises RunFolderBusy: when another trainer holds it, naming the folder and that trainer's pid.
        """
        if self._stream is not None:
            return
        # Kept open while the lock is held: the lock belongs to this open file and ends when it is closed.
        stream = open(lock_file_path(self.run_folder), "a+", encoding="ascii")
        try:
            _lock_within(stream, ACQUIRE_PATIENCE_S)
        except BlockingIOError:
            holder = _recorded_pid(stream)
            stream.close()
            trainer = "another trainer" if holder is None else f"another trainer (pid {holder})"
            stop = "" if holder is None else f" or stop it (kill {holder})"
            raise RunFolderBusy(
                f"{self.run_folder} is being trained by {trainer}, which holds its lock file {LOCK_FILE}: one trainer "
                f"per run folder at a time; wait for that one to end{stop}, then run this command again"
            ) from None
        except BaseException:
            stream.close()
            raise
        stream.seek(0)
        stream.truncate()
        stream.write(f"{os.getpid()}\n")
        stream.flush()
        self._stream = stream

    def release(self) -> None:
        """Give the lock back (the lock file stays); nothing happens when it is not held."""
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
            stream.close()


def run_folder_trainer(run_folder: str) -> int | None:
    """The pid of the trainer that holds ``run_folder``'s lock now, or ``None`` when no process holds it.

    Tries the lock for an instant and gives it back at once. A trainer that has taken the lock but not yet written its
    pid (a few microseconds) is reported as pid 0.
    """
    path = lock_file_path(run_folder)
    if not os.path.isfile(path):
        return None
    try:
        stream = open(path, encoding="ascii")
    except OSError:  # removed meanwhile, or not readable: no lock this process can see
        return None
    with stream:
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _recorded_pid(stream) or 0
        fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
    return None


class LockedRunExperiment(ExperimentManager):
    """The part of :class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager` that holds the run folder's lock
    (:class:`RunFolderLock`) while it trains: taken by :meth:`lock_run_folder` (a resumed run's before anything of the
    run is read, a new run's when rl-zoo3 creates its folder, before anything is written into it; not by
    ``optimize``, whose trials write folders of their own), and given back by :meth:`release_run_folder` when the
    command ends."""

    #: The run folder's lock, once :meth:`lock_run_folder` has taken it.
    run_folder_lock: RunFolderLock | None = None

    @property
    def holds_run_folder(self) -> bool:
        """Whether this command holds its run folder's lock (so the folder is its own to write, or to remove)."""
        return self.run_folder_lock is not None and self.run_folder_lock.held

    def lock_run_folder(self) -> None:
        """Take the lock of the run folder (``save_path``, which must exist), unless it is held already or this is
        ``optimize``.

        :raises RunFolderBusy: when another trainer holds the folder.
        """
        if self.holds_run_folder or self.optimize_hyperparameters:
            return
        lock = RunFolderLock(self.save_path)
        lock.acquire()
        self.run_folder_lock = lock

    def create_log_folder(self) -> None:
        """rl-zoo3's creation of the run folder, then its lock taken (:meth:`lock_run_folder`).

        :raises RunFolderBusy: when another trainer holds the folder.
        """
        super().create_log_folder()
        self.lock_run_folder()

    def release_run_folder(self) -> None:
        """Give the run folder's lock back (when held): the command has saved what it trained, or failed."""
        if self.run_folder_lock is not None:
            self.run_folder_lock.release()

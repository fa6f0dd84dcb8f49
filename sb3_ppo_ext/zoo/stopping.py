"""Training stopped before its budget without losing the run: SIGTERM handled as Ctrl-C (and held back while the
final model is saved), a second Ctrl-C held back while training stops, and the exception that tells the command line
what stopped training and with which exit status."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common.base_class import BaseAlgorithm

from sb3_ppo_ext.vec_env.shared_memory_vec_env import EnvWorkerError

#: Exit status of ``train`` stopped by SIGTERM (the shell's convention: 128 + the signal's number).
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM
#: Exit status of ``train`` stopped by a failed env worker.
WORKER_FAILURE_EXIT_STATUS = 1
#: Exit status of ``train`` given a second Ctrl-C while it stopped (the first one ends it with 0, as rl-zoo3 does).
SECOND_CTRL_C_EXIT_STATUS = 1


class TrainingStopped(Exception):
    """Training stopped before its budget, by SIGTERM or by an env (worker) that failed; the model and its
    ``VecNormalize`` statistics were saved to the run folder first, when it had trained, so that ``train --resume``
    continues from them. The command line prints the message in one line and exits with :attr:`exit_status`.

    :param message: what stopped training, and what was saved where.
    :param exit_status: the command's exit status (:data:`SIGTERM_EXIT_STATUS`, :data:`WORKER_FAILURE_EXIT_STATUS`).
    """

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class TerminationRequested(KeyboardInterrupt):
    """SIGTERM (a cluster scheduler, ``docker stop``, a grid being stopped) raised while a model learns, as Ctrl-C
    raises ``KeyboardInterrupt``: training stops and the model is saved as after Ctrl-C."""


@contextmanager
def sigterm_caught(on_signal: Callable[[], None], *, interrupt: bool = False) -> Iterator[None]:
    """While the block runs, the first SIGTERM calls ``on_signal`` (to record that it came) instead of ending the
    process, and the caller acts on it afterwards; the caller's handler is put back at the end. Off the main thread,
    nothing changes (Python runs signal handlers in the main thread only).

    :param interrupt: ``False``: later SIGTERMs are ignored and the block runs to its end, for work a signal must not
        cut in two (writing the final model). ``True``: the first SIGTERM also raises :class:`TerminationRequested` in
        the block, as Ctrl-C raises ``KeyboardInterrupt``, and a second one ends the process (the signal's default).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    received = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        if received.is_set():  # a later SIGTERM during a deferred block
            return
        received.set()
        on_signal()
        if interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            raise TerminationRequested("SIGTERM")

    signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class CtrlCWhileStopping:
    """SIGINT (Ctrl-C) while a model learns and the run is then saved: the first one stops training as Python's own
    handler does (``KeyboardInterrupt``, which rl-zoo3 catches to save the model), and every later one, or any one
    that comes once a SIGTERM has stopped training, is only recorded: the save runs to its end rather than dying with
    the signal (exit status -2 / 130). Installed only where SIGINT raises ``KeyboardInterrupt`` (Python's default, in
    the main thread): a process started with SIGINT ignored keeps ignoring it."""

    def __init__(self) -> None:
        #: SIGINT's handler before :meth:`install`, while this object's handler is installed.
        self.previous: Any = None
        #: Whether training is stopping (a first Ctrl-C or a SIGTERM came).
        self.stopping = False
        #: Whether a Ctrl-C came while training was stopping.
        self.late = False

    def install(self) -> None:
        """Take over SIGINT (see the class), unless another handler than Python's default holds it."""
        in_main_thread = threading.current_thread() is threading.main_thread()
        if in_main_thread and self.previous is None and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.stopping:
            self.late = True
            return
        self.stopping = True
        raise KeyboardInterrupt

    def restore(self) -> None:
        """Give SIGINT back to the handler it had before :meth:`install` (the command line ignores it from there to
        the process's end: :func:`~sb3_ppo_ext.cli.main`)."""
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None


class StoppableExperiment(ExperimentManager):
    """The part of :class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager` that SIGTERM or a failed env worker stop
    without losing the run: as after Ctrl-C, learning ends and the model trained so far is saved with its statistics,
    then :meth:`save_trained_model` raises :class:`TrainingStopped` (a worker failure before the first step: at once,
    nothing to save). A SIGTERM during the save, or a second Ctrl-C while training stops (:class:`CtrlCWhileStopping`),
    waits for the save to end, then stops the command the same way; a single Ctrl-C ends it with 0, as in rl-zoo3."""

    #: What stopped training before its budget (SIGTERM or the failure of an env worker), once it did.
    stopped_by: str | None = None
    #: The command's exit status for :attr:`stopped_by`.
    stopped_exit_status: int = 0
    #: The handler of Ctrl-C while the model learns and is saved, once :meth:`learn` has installed it.
    ctrl_c: CtrlCWhileStopping | None = None

    def restore_ctrl_c(self) -> None:
        """Give SIGINT back to its handler of before :meth:`learn` (:meth:`CtrlCWhileStopping.restore`)."""
        if self.ctrl_c is not None:
            self.ctrl_c.restore()

    def learn(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's training (the next class's ``learn``), which SIGTERM or a failed env worker stop."""

        ctrl_c = self.ctrl_c = CtrlCWhileStopping()

        def stopped_by_sigterm() -> None:
            self.stopped_by = f"training was stopped by SIGTERM at {model.num_timesteps} steps"
            self.stopped_exit_status = SIGTERM_EXIT_STATUS
            ctrl_c.stopping = True

        ctrl_c.install()
        with sigterm_caught(stopped_by_sigterm, interrupt=True):
            try:
                super().learn(model)
            except EnvWorkerError as error:
                what = str(error).splitlines()[0]
                if model.num_timesteps == 0:
                    raise TrainingStopped(
                        f"{what}; training stopped before its first step, nothing to save", WORKER_FAILURE_EXIT_STATUS
                    ) from error
                self.stopped_by = f"{what}; training stopped at {model.num_timesteps} steps"
                self.stopped_exit_status = WORKER_FAILURE_EXIT_STATUS

    def save_trained_model(self, model: BaseAlgorithm) -> None:
        """rl-zoo3's saving of the final model (the next class's), which a SIGTERM does not cut short: one that comes
        during the save is held back until the files are written (:func:`sigterm_caught`).

        :raises TrainingStopped: once saved, when SIGTERM or a failed env worker stopped training (:meth:`learn`), a
            SIGTERM came during the save, or a second Ctrl-C while training stopped.
        """

        def stopped_by_sigterm_during_save() -> None:
            if self.stopped_by is None:
                self.stopped_by = (
                    f"SIGTERM came while the final model was being saved, at {model.num_timesteps} steps; the save "
                    "was finished first"
                )
                self.stopped_exit_status = SIGTERM_EXIT_STATUS

        with sigterm_caught(stopped_by_sigterm_during_save):
            super().save_trained_model(model)
        if self.ctrl_c is not None and self.ctrl_c.late and self.stopped_by is None:
            self.stopped_by = f"a second Ctrl-C came while training stopped at {model.num_timesteps} steps"
            self.stopped_exit_status = SECOND_CTRL_C_EXIT_STATUS
        if self.stopped_by is not None:
            saved = self.normalize and model.get_vec_normalize_env() is not None
            what = "the model and its VecNormalize statistics were" if saved else "the model was"
            raise TrainingStopped(
                f"{self.stopped_by}; {what} saved to {self.save_path}; continue with: "
                f"sb3-ppo-ext train --resume {self.save_path}",
                self.stopped_exit_status,
            )

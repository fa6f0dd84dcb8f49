"""Training stopped before its budget without losing the run: SIGTERM handled as Ctrl-C, and the exception that
tells the command line what stopped training and with which exit status."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Exit status of ``train`` stopped by SIGTERM (the shell's convention: 128 + the signal's number).
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM


#: Exit status of ``train`` stopped by a failed env worker.
WORKER_FAILURE_EXIT_STATUS = 1


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
def sigterm_stops_training(on_signal: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM calls ``on_signal`` and raises :class:`TerminationRequested` in the main thread;
    a second SIGTERM ends the process at once (the signal's default). Off the main thread, nothing changes (Python
    runs signal handlers in the main thread only).

    :param on_signal: called first, to record that training was stopped by the signal.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        on_signal()
        raise TerminationRequested("SIGTERM")

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

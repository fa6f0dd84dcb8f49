"""The number of torch intra-op threads the update runs on: one for small minibatches, more only where they gain.

**What it mirrors.** SB3 and rl-zoo3 leave torch's default, one intra-op thread per core, for the whole run
(rl-zoo3's ``--num-threads`` sets it for the process). :class:`~sb3_ppo_ext.ppo.ppo.PPO`'s ``update_threads`` sets the
count for the update alone and gives the caller's setting back when the update ends, so collection, evaluation and
the user's own code run as they would have.

**What it gains.** A minibatch of a few hundred rows through a 256x256 network is ~60 operations of microseconds
each: splitting them over threads costs a barrier per operation and gains nothing, and on a busy machine a barrier
waits for whichever thread is descheduled. Measured on the Walker2D block's update (16 x 512 samples, 256x256
networks; 2-core machine, 2026-12-05, ``model.train()`` timed in a script beside one busy single-threaded process):
minibatches of 128, 20 epochs: 9.9-13.7 s on one thread against 120-134 s on two with libgomp's default waiting;
minibatches of 2048, 5 epochs: 1.0-1.9 s against 6.1-10.6 s. With nothing else running, two threads gained at most
a few percent at 128 rows (3%: 1531 against 1479 env steps per second of the whole loop, docs/results/ppo_speed.md).
At 1024 rows they gain more on an idle machine and lose more on a busy one (the same networks, 10 epochs, one update
of 8192 samples timed in a script, the machine otherwise idle: 0.58 s on one thread, 0.42 s on two with OpenMP's
threads sleeping at barriers, 0.37 s with them spinning; beside one busy process, 0.58 s against 1.44 s on two
sleeping threads). So ``"auto"`` keeps the update on one thread below :data:`ROWS_PER_EXTRA_THREAD` rows per
minibatch and gives it one more thread per that many rows above it, never more than the caller allows or the usable
cores: it gives up up to a quarter of an update's time on an idle machine to never lose 2.5 times it on a busy one.

**What it cannot guard.** Other processes' load changes during a run; the count is chosen from the minibatch's size,
not from the load. Choosing it by timing minibatches on one and on two threads would follow the load, but the count
changes the update's floating-point sums (at 1024 rows the weights after 2 updates differ by up to 6e-3 between one
and two threads, while two runs on the same count are bit-identical), so a run's result would depend on the machine's
load: a seed would no longer give one run. Beside a busy process, extra threads cost less once OpenMP's threads
sleep at a barrier instead of spinning (:mod:`sb3_ppo_ext.openmp_wait`, set when the package is imported before
torch).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch as th

from sb3_ppo_ext.validation import HyperparameterError

#: The ``update_threads`` setting that lets the update choose (:func:`update_thread_count`).
AUTO = "auto"
#: Rows per minibatch for each intra-op thread of an ``"auto"`` update: below this, one thread.
ROWS_PER_EXTRA_THREAD = 4096

UpdateThreads = int | str | None


def check_update_threads(setting: object) -> UpdateThreads:
    """``setting`` if it is a valid ``update_threads`` (``"auto"``, ``None`` or an int >= 1), else a
    :class:`~sb3_ppo_ext.validation.HyperparameterError` naming the value."""
    if setting is None or setting == AUTO:
        return setting  # type: ignore[return-value]
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return setting
    raise HyperparameterError(f"update_threads must be 'auto', None (torch's setting) or an int >= 1, got {setting!r}")


def update_thread_count(setting: UpdateThreads, minibatch_rows: int, caller_threads: int, cores: int) -> int | None:
    """The intra-op threads of an update, or ``None`` to leave torch's setting as it is.

    :param setting: ``"auto"``: one thread per :data:`ROWS_PER_EXTRA_THREAD` rows of a minibatch (at least one), at
        most ``caller_threads``; an int: that many; ``None``: the caller's setting.
    :param minibatch_rows: rows of one minibatch (PPO's ``batch_size``, or the rollout when it is smaller).
    :param caller_threads: torch's intra-op threads before the update (``torch.get_num_threads()``).
    :param cores: the usable cores (:func:`~sb3_ppo_ext.vec_env.shared_memory_vec_env.usable_cores`, the count the
        shared-memory VecEnv sizes its workers by); no choice goes above them.
    """
    if setting is None:
        return None
    if setting == AUTO:
        wanted = min(caller_threads, max(1, minibatch_rows // ROWS_PER_EXTRA_THREAD))
    else:
        wanted = int(setting)
    return max(1, min(wanted, cores))


@contextmanager
def intra_op_threads(count: int | None) -> Iterator[None]:
    """Run the body with ``count`` torch intra-op threads and give the previous count back after it (also on an
    error); ``None`` or the current count: leave torch alone."""
    previous = th.get_num_threads()
    if count is None or count == previous:
        yield
        return
    th.set_num_threads(count)
    try:
        yield
    finally:
        th.set_num_threads(previous)

"""OpenMP threads that sleep at a barrier instead of spinning, so that a run shares a busy machine without collapsing.

**What it changes.** torch's CPU kernels split work over intra-op threads with OpenMP (libgomp in the PyPI wheels).
By default a libgomp thread that reaches a barrier spins for a while (``GOMP_SPINCOUNT``, 300,000 iterations) before
it sleeps. On a machine with more runnable processes than cores, the thread a barrier waits for is often descheduled
while the others spin on their cores, and every one of the ~60 small operations of a PPO minibatch pays for it.
``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads sleep at once.

**What it gains** (the Walker2D block's update, 16 x 512 samples through 256x256 networks, one
``model.train()``; 2-core machine, 2026-12-05, other jobs running beside it, so only the ratios mean anything): with
one busy single-threaded process beside it, two intra-op threads took 120-134 s per update with libgomp's default
waiting (minibatches of 128) and 8.2-10.8 s with ``PASSIVE``, where one thread took 8.4-13.7 s; with minibatches
of 2048, 6.1-10.6 s against 1.4-1.6 s, one thread 1.0-1.9 s.

**What it cannot guard.** libgomp reads the variable once, when it is loaded, which is when torch is first imported.
:func:`prefer_sleeping_openmp_threads` therefore runs when ``sb3_ppo_ext`` is imported (this module imports nothing
that loads torch) and does nothing when torch is already loaded or when the user has set ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT``: their choice wins. A program that imports torch before ``sb3_ppo_ext`` keeps libgomp's default;
the update's own thread choice (:mod:`sb3_ppo_ext.ppo.threads`) keeps small minibatches on one thread either way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

#: The OpenMP setting this module writes, and libgomp's own variable for the same behaviour (either set: left alone).
WAIT_POLICY_VARIABLES: tuple[str, ...] = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def prefer_sleeping_openmp_threads(
    environ: MutableMapping[str, str] | None = None, loaded_modules: Mapping[str, object] | None = None
) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless torch is loaded already or the user chose a wait policy.

    :param environ: the environment to change (default: ``os.environ``).
    :param loaded_modules: the modules loaded so far (default: ``sys.modules``).
    :return: whether the variable was set.
    """
    environ = os.environ if environ is None else environ
    modules: Mapping[str, object] = sys.modules if loaded_modules is None else loaded_modules
    if "torch" in modules or any(name in environ for name in WAIT_POLICY_VARIABLES):
        return False
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True

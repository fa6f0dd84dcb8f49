"""sb3_ppo_ext: a faster drop-in PPO for Stable-Baselines3 with adaptive KL, callbacks and PyBullet tasks.

Importing the package registers the bundled tasks (``sb3_ppo_ext.envs``, which needs no torch); the rest is
imported on first use (``from sb3_ppo_ext import PPO`` imports the algorithm then), so that
``import sb3_ppo_ext.envs`` stays light, e.g. in env worker processes.

Layers, lowest first. A module imports from its own layer and the layers below it, never from a layer above, and
no two modules import each other, directly or through others; a function imports inside its body only an
optional dependency (an extra), with a comment saying so. ``tests/test_import_graph.py`` reads this list and
checks all three.

1. ``validation``, ``files``, ``plain_data``, ``allow_list``, ``zoo_configs``, ``openmp_wait``: parameter checks,
   atomic file writes, spaces and policy settings as plain data, the names config values and agent files may use,
   OpenMP's waiting threads set to sleep before torch loads
2. ``envs``, ``wrappers``, ``vec_env``, ``ppo``: the tasks, env wrappers, the vectorised envs and the algorithm
3. ``safe_loading``: model zips and ``VecNormalize`` statistics loaded without unpickling
4. ``callbacks``: training callbacks
5. ``pretrained``: shipped agents (their format, saving, loading, playing)
6. ``zoo``, ``grid``: the rl-zoo3 glue behind the ``sb3-ppo-ext`` commands, and packing a zoo run as an agent; the
   multi-seed grid (``sb3-ppo-ext grid``), which runs ``sb3-ppo-ext train`` in subprocesses and reads their run
   folders through the zoo's readers. The arrow is grid -> zoo: ``zoo.commands`` is the one zoo module that imports
   the grid (its command line)
7. ``cli``, ``__main__``, ``sb3_ppo_ext``: the command line, and this module, which names the public API
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from sb3_ppo_ext.openmp_wait import prefer_sleeping_openmp_threads

# Before anything imports torch: OpenMP threads that sleep at a barrier, so that the update does not collapse on a
# busy machine (the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins; nothing happens if torch is loaded already).
prefer_sleeping_openmp_threads()

# Registers the bundled tasks with gymnasium. sb3_ppo_ext.envs is the top-level envs/ folder (pyproject's package-dir),
# a mapping mypy does not follow, hence the ignore.
from sb3_ppo_ext import envs  # type: ignore[attr-defined]  # noqa: E402, F401

if TYPE_CHECKING:
    from sb3_ppo_ext.ppo import PPO
    from sb3_ppo_ext.safe_loading import (
        PickleRefusedError,
        load_vecnormalize_without_pickles,
        load_without_pickles,
        save_vecnormalize_statistics,
    )
    from sb3_ppo_ext.validation import HyperparameterError

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported on first access.
_LAZY_NAMES: dict[str, str] = {
    "HyperparameterError": "sb3_ppo_ext.validation",
    "PPO": "sb3_ppo_ext.ppo",
    "PickleRefusedError": "sb3_ppo_ext.safe_loading",
    "load_vecnormalize_without_pickles": "sb3_ppo_ext.safe_loading",
    "load_without_pickles": "sb3_ppo_ext.safe_loading",
    "save_vecnormalize_statistics": "sb3_ppo_ext.safe_loading",
}

__all__ = [
    "PPO",
    "HyperparameterError",
    "PickleRefusedError",
    "__version__",
    "load_vecnormalize_without_pickles",
    "load_without_pickles",
    "save_vecnormalize_statistics",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a subpackage, as ``sb3_ppo_ext.ppo``) on first access (PEP 562)."""
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_NAMES})

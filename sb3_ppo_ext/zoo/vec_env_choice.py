"""Which VecEnv steps a run's envs: the ``--vec-env`` choices, each task's preferred one, and the class with its keyword
arguments for ``--vec-env``, ``--vec-env-kwargs`` and ``--ray-address``."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from stable_baselines3.common.vec_env import VecEnv

from sb3_ppo_ext.validation import HyperparameterError
from sb3_ppo_ext.vec_env.shared_memory_vec_env import SharedMemoryVecEnv

#: ``--vec-env`` choices: rl-zoo3's, ``shared`` for :class:`~sb3_ppo_ext.shared_memory_vec_env.SharedMemoryVecEnv`
#: (several envs per process: a block in the driver and one in a worker per other usable core) and ``ray`` for
#: :class:`~sb3_ppo_ext.vec_env.RayVecEnv` (the ``ray`` extra).
VEC_ENV_TYPES: tuple[str, ...] = ("dummy", "subproc", "shared", "ray")


#: The VecEnv of a task :data:`PREFERRED_VEC_ENVS` does not name, when ``--vec-env`` is not given (rl-zoo3's default).
DEFAULT_VEC_ENV = "dummy"


#: The VecEnv a task trains on when ``--vec-env`` is not given (any other task: :data:`DEFAULT_VEC_ENV`): ``shared``
#: where stepping the envs in worker processes pays, as it does for every bundled locomotion and rocket block. Env
#: steps per second relative to DummyVecEnv on an idle 2-core machine (2026-12-03), SharedMemoryVecEnv with the
#: driver stepping one block: ``PPO.learn`` with each block's hyperparameters (``OMP_NUM_THREADS=1 python
#: benchmarks/bench_vec_envs.py --vec-envs shared shared_waiting --rounds 3 --steps 64 --train-iterations 2
#: --train-rounds 3``) Humanoid block (64 envs) 1.85x and 1.83x in two runs, Walker2D block (16 envs) 1.19x, its
#: update taking most of an iteration, RocketLander block (16 envs) 1.33x; ``sb3-ppo-ext train -n 32768 --num-threads
#: 1`` alternating with ``--vec-env dummy`` (fps as logged) Humanoid 1.83x and 1.91x, Walker2D 1.22x and 1.30x. The
#: flag-run blocks are the Humanoid block with longer budgets and the discrete lander's the RocketLander block with
#: another gamma (the same envs and rollouts, not measured apart). A table here, not a key of the config blocks:
#: plain rl-zoo3 would pass an unknown key to the model.
PREFERRED_VEC_ENVS: dict[str, str] = {
    "sb3_ppo_ext/Humanoid-v0": "shared",
    "sb3_ppo_ext/HumanoidFlagrun-v0": "shared",
    "sb3_ppo_ext/HumanoidFlagrunHarder-v0": "shared",
    "sb3_ppo_ext/RocketLander-v0": "shared",
    "sb3_ppo_ext/RocketLanderDiscrete-v0": "shared",
    "sb3_ppo_ext/Walker2D-v0": "shared",
}


def preferred_vec_env(env_id: str) -> str:
    """The ``--vec-env`` type ``env_id`` trains on when none is given (:data:`PREFERRED_VEC_ENVS`, else
    :data:`DEFAULT_VEC_ENV`)."""
    return PREFERRED_VEC_ENVS.get(env_id, DEFAULT_VEC_ENV)


def vec_env_settings(
    vec_env_type: str, zoo_class: type[VecEnv], args: argparse.Namespace
) -> tuple[type[VecEnv], dict[str, Any]]:
    """The VecEnv class and its keyword arguments for ``--vec-env``, ``--vec-env-kwargs`` and ``--ray-address``.

    :param vec_env_type: one of :data:`VEC_ENV_TYPES`.
    :param zoo_class: the class rl-zoo3 chose (for ``dummy`` / ``subproc``).
    :param args: the parsed options (``vec_env_kwargs``: a dict or ``None``; ``ray_address``: a string or ``None``).
    :raises ValueError: for an unknown ``vec_env_type``, a key the class does not take, or ``--ray-address`` without
        ``--vec-env ray``.
    """
    if vec_env_type not in VEC_ENV_TYPES:
        raise ValueError(f"--vec-env must be one of {VEC_ENV_TYPES}, got {vec_env_type!r}")
    kwargs = dict(getattr(args, "vec_env_kwargs", None) or {})
    address = getattr(args, "ray_address", None)
    vec_env_class = zoo_class
    if vec_env_type == "ray":
        from sb3_ppo_ext.vec_env.ray_vec_env import RayVecEnv  # the ray extra: this module imports Ray

        vec_env_class = RayVecEnv
        if address is not None:
            kwargs["address"] = address
    elif address is not None:
        raise ValueError(f"--ray-address is for --vec-env ray, not --vec-env {vec_env_type}")
    if vec_env_type == "shared":
        vec_env_class = SharedMemoryVecEnv
    accepted = set(inspect.signature(vec_env_class.__init__).parameters) - {"self", "env_fns"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ValueError(
            f"--vec-env-kwargs: {vec_env_class.__name__} takes no {', '.join(unknown)} (it takes "
            f"{', '.join(sorted(accepted)) or 'no keyword arguments'})"
        )
    return vec_env_class, kwargs


def shared_memory_vec_env(env_fns: Sequence[Callable[[], Any]], **kwargs: Any) -> SharedMemoryVecEnv:
    """``SharedMemoryVecEnv(env_fns, **kwargs)``, its refusal of a setting named as one of ``--vec-env-kwargs``."""
    try:
        return SharedMemoryVecEnv(env_fns, **kwargs)
    except HyperparameterError as error:
        raise HyperparameterError(f"--vec-env-kwargs: {error}") from None

"""Which VecEnv steps a run's envs: the ``--vec-env`` choices, each task's preferred one, and the class with its keyword
arguments for ``--vec-env``, ``--vec-env-kwargs`` and ``--ray-address``."""

from __future__ import annotations

import argparse
import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from sb3_ppo_ext.validation import HyperparameterError
from sb3_ppo_ext.vec_env.shared_memory_vec_env import EnvWorkerError, SharedMemoryVecEnv

#: ``--vec-env`` choices: rl-zoo3's, ``shared`` for :class:`~sb3_ppo_ext.vec_env.shared_memory_vec_env.SharedMemoryVecEnv`
#: (several envs per process: a block in the driver and one in a worker per other usable core) and ``ray`` for
#: :class:`~sb3_ppo_ext.vec_env.ray_vec_env.RayVecEnv` (the ``ray`` extra).
VEC_ENV_TYPES: tuple[str, ...] = ("dummy", "subproc", "shared", "ray")
#: The VecEnv of a task :data:`PREFERRED_VEC_ENVS` does not name, when ``--vec-env`` is not given (rl-zoo3's default).
DEFAULT_VEC_ENV = "dummy"
#: The VecEnv a task trains on when ``--vec-env`` is not given (any other task: :data:`DEFAULT_VEC_ENV`): ``shared``
#: where stepping the envs in worker processes pays (the measurements: docs/guide/scale_out.md). A table here, not a
#: key of the config blocks: plain rl-zoo3 would pass an unknown key to the model.
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


def zoo_vec_env_type(vec_env_type: str) -> str:
    """The ``vec_env_type`` rl-zoo3's ``ExperimentManager`` is given for ``vec_env_type``: it knows only ``dummy`` and
    ``subproc`` (the others are set after its set-up, :meth:`VecEnvChoosingExperiment.choose_vec_env`)."""
    return vec_env_type if vec_env_type in ("dummy", "subproc") else "dummy"


class VecEnvChoosingExperiment(ExperimentManager):
    """The part of :class:`~sb3_ppo_ext.zoo.experiment.SafeExperimentManager` that chooses the VecEnv: the training envs
    step on the VecEnv of ``--vec-env``, else on the task's preferred one (:data:`PREFERRED_VEC_ENVS`); with
    ``shared``, the evaluation envs step on DummyVecEnv, and a SharedMemoryVecEnv the user did not ask for that cannot
    start gives way to DummyVecEnv (:meth:`vec_env_builder`)."""

    def choose_vec_env(self, args: argparse.Namespace, given: str | None, *, resumed: bool) -> None:
        """Set the VecEnv of the training envs once rl-zoo3's set-up is done (it knows only ``dummy`` and ``subproc``).

        :param args: the parsed options (``args.vec_env`` is set to the type used).
        :param given: ``--vec-env``; ``None`` (not given): the task's preferred VecEnv (:func:`preferred_vec_env`).
            With ``--vec-env-kwargs``, those are for that preferred VecEnv's class, and a key it does not take is an
            error that says so.
        :param resumed: whether the run is resumed (its ``args.yml`` names the VecEnv, not the user).
        """
        env_id = self.env_name.gym_id
        preferred = preferred_vec_env(env_id)
        vec_env_type = given or preferred
        #: The ``--vec-env`` type of the training envs: the one given, else the task's preferred one.
        self.vec_env_type = vec_env_type
        #: Whether a SharedMemoryVecEnv that cannot start gives way to DummyVecEnv
        #: (:meth:`shared_memory_vec_env_or_dummy`): when it is the task's preferred VecEnv and the command line does
        #: not name it (for a resumed run: the one its ``args.yml`` records). A VecEnv the user chose that cannot
        #: start is an error.
        self.vec_env_falls_back = vec_env_type == preferred and (given is None or resumed)
        #: Why SharedMemoryVecEnv could not start, once it gave way to DummyVecEnv (then the envs step in the driver).
        self.shared_memory_failure: str | None = None
        # rl-zoo3 picks DummyVecEnv or SubprocVecEnv (mypy infers ABCMeta from its dict of the two).
        zoo_class = cast(type[VecEnv], self.vec_env_class)
        try:
            self.vec_env_class, self.vec_env_kwargs = vec_env_settings(vec_env_type, zoo_class, args)
        except ValueError as error:
            if given is not None:
                raise
            raise ValueError(
                f"{error}; {env_id} trains on --vec-env {vec_env_type} when --vec-env is not given: give --vec-env to "
                "choose another"
            ) from None
        args.vec_env = vec_env_type  # args.yml records the VecEnv used (create_envs: its training envs')

    def record_training_vec_env(self, env: VecEnv) -> None:
        """Set in ``args`` the VecEnv that steps the training envs ``env`` (DummyVecEnv where SharedMemoryVecEnv gave way),
        with its keyword arguments, for ``args.yml``."""
        if self.vec_env_type != "shared":
            return
        on_dummy = not isinstance(env.unwrapped, SharedMemoryVecEnv)
        self.args.vec_env = "dummy" if on_dummy else "shared"
        if on_dummy:  # DummyVecEnv took no keyword arguments (and a resumed run gives it none)
            self.args.vec_env_kwargs = None

    def vec_env_builder(self, n_envs: int, *, eval_env: bool) -> tuple[Callable[..., VecEnv], dict[str, Any]]:
        """The class (or function) that builds ``n_envs`` envs, and its keyword arguments: those of ``--vec-env``
        (:func:`vec_env_settings`). With ``shared``, DummyVecEnv builds the evaluation envs, a single env (a worker
        process would only add a pipe round trip per step) and every env once SharedMemoryVecEnv failed to start;
        :meth:`shared_memory_vec_env_or_dummy` builds the others where it may fall back (:attr:`vec_env_falls_back`).
        """
        if self.vec_env_type != "shared":
            return self.vec_env_class, self.vec_env_kwargs
        if eval_env or n_envs == 1 or self.shared_memory_failure is not None:
            return DummyVecEnv, {}
        if self.vec_env_falls_back:
            return self.shared_memory_vec_env_or_dummy, self.vec_env_kwargs
        return shared_memory_vec_env, self.vec_env_kwargs

    def shared_memory_vec_env_or_dummy(self, env_fns: Sequence[Callable[[], Any]], **kwargs: Any) -> VecEnv:
        """A :class:`~sb3_ppo_ext.vec_env.shared_memory_vec_env.SharedMemoryVecEnv` of ``env_fns``, or, when it cannot start
        (``OSError`` / ``RuntimeError``: no ``/dev/shm``, no process start method, a worker that dies or hangs while
        starting), a DummyVecEnv, said in one line; later envs of the run are built by DummyVecEnv too. An env that
        raises while it is built is not a failure to start: its error is raised, as DummyVecEnv would raise it.

        :param env_fns: functions that each return a new env (``make_vec_env``'s).
        :param kwargs: the keyword arguments of SharedMemoryVecEnv (``--vec-env-kwargs``; DummyVecEnv takes none).
        """
        try:
            return shared_memory_vec_env(env_fns, **kwargs)
        except (OSError, RuntimeError) as error:
            if isinstance(error, EnvWorkerError) and error.env_index is not None:
                raise
            first_line = next(iter(str(error).splitlines()), "")
            self.shared_memory_failure = f"{type(error).__name__}: {first_line}"
        ignored = f", --vec-env-kwargs {', '.join(sorted(kwargs))} ignored" if kwargs else ""
        print(
            f"SharedMemoryVecEnv could not start ({self.shared_memory_failure}); the envs step in this process on "
            f"DummyVecEnv{ignored} (--vec-env chooses the VecEnv)"
        )
        return DummyVecEnv(list(env_fns))

    @contextmanager
    def evaluation_env_type_accepted(self) -> Iterator[None]:
        """While models learn: with ``shared``, SB3's ``EvalCallback`` warning that the evaluation env is not of the
        training env's type is silenced, since the evaluation envs step on DummyVecEnv by design
        (:meth:`vec_env_builder`); other warnings are shown as before."""
        with warnings.catch_warnings():
            if self.vec_env_type == "shared":
                warnings.filterwarnings("ignore", "Training and eval env are not of the same type", UserWarning)
            yield

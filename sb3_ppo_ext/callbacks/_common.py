"""Plumbing shared by the callbacks: input checks, atomic file writes, evaluation environments, scheduling."""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

from sb3_ppo_ext.validation import check_int

#: Optional dependencies and the ``pip install`` extra that provides them.
OPTIONAL_DEPENDENCIES = {
    "imageio": "sb3-ppo-ext[video]",
    "imageio_ffmpeg": "sb3-ppo-ext[video]",
    "matplotlib": "sb3-ppo-ext[video]",
    "PIL": "sb3-ppo-ext[video]",
    "onnx": "sb3-ppo-ext[export]",
    "onnxruntime": "sb3-ppo-ext[export]",
}


def require_module(module: str, purpose: str) -> Any:
    """Import an optional dependency, or raise ``ImportError`` saying what needs it and how to install it.

    :param module: importable module name, e.g. ``"imageio"``.
    :param purpose: what the caller needs it for, used in the message.
    :return: the imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = OPTIONAL_DEPENDENCIES.get(module, module)
        raise ImportError(f"{purpose} needs the optional dependency {module!r}: pip install '{extra}'") from error


def check_frequency(name: str, value: Any) -> int:
    """Check that a frequency counted in environment steps is an integer >= 1."""
    return check_int(name, value, minimum=1)


def check_writable_dir(name: str, path: Any) -> str:
    """Create the folder ``path`` if needed and check that files can be created in it.

    :param name: parameter name, used in the error message.
    :param path: folder path (``str`` or ``os.PathLike``).
    :return: the path as a string.
    :raises ValueError: when the path is not a folder or cannot be written.
    """
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise ValueError(f"{name} must be a folder path, got {path!r}")
    folder = os.fspath(path)
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as error:
        raise ValueError(f"{name} must be a folder that can be written, got {folder!r} ({error.strerror or error})") from error
    return folder


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on success fsync it and move it onto ``path`` atomically.

    A failure inside the ``with`` block (or a crash) leaves any previous ``path`` untouched and removes the temporary
    file (a crash can leave a ``.<name>.*.tmp`` file behind, never a half-written ``path``).

    :param path: the final file path.
    :param mode: ``"wb"`` or ``"w"``.
    """
    with atomic_path(path) as temporary, open(temporary, mode) as handle:
        yield handle


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Like :func:`atomic_write` for writers that want a file name: yields a temporary path with the same extension.

    The temporary file is fsynced and moved onto ``path`` when the block succeeds, and removed when it fails.
    """
    folder = os.path.dirname(os.path.abspath(path))
    extension = os.path.splitext(path)[1]
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=f".tmp{extension}")
    os.close(descriptor)
    try:
        os.chmod(temporary, _file_mode(path))  # mkstemp makes 0600 files; keep the mode a plain open() would give
        yield temporary
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_directory(folder)


def _file_mode(path: str) -> int:
    """The permission bits for writing ``path``: those of the file it replaces, else ``0o666`` minus the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # reading the umask means setting it: put it straight back
        os.umask(umask)
        return 0o666 & ~umask


def fsync_directory(folder: str) -> None:
    """Flush a directory entry change (rename, unlink) to disk where the platform allows it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def check_env_spec(name: str, env: Any, env_kwargs: Any) -> None:
    """Check an environment argument given as an env id (with keyword arguments) or as an environment instance.

    :raises ValueError: for an unknown env id, non-dict ``env_kwargs``, or another type.
    """
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise ValueError(f"env_kwargs must be a dict or None, got {env_kwargs!r}")
    if isinstance(env, str):
        try:
            gym.spec(env)
        except gym.error.Error as error:
            raise ValueError(f"{name} must be a registered gymnasium env id, got {env!r} ({error})") from error
        return
    if isinstance(env, VecEnv):
        raise ValueError(f"{name} must be a single gymnasium.Env or an env id, not a VecEnv, got {env!r}")
    if not isinstance(env, gym.Env):
        raise ValueError(f"{name} must be a gymnasium env id string or a gymnasium.Env, got {env!r}")
    if env_kwargs:
        raise ValueError(f"env_kwargs is only used when {name} is an env id string, got env_kwargs={env_kwargs!r}")


def make_render_env(
    name: str,
    env: str | gym.Env,
    env_kwargs: dict[str, Any] | None,
    render_mode: str,
    env_wrapper: Callable[[gym.Env], gym.Env] | None = None,
) -> gym.Env:
    """The environment to render: created from an id with ``render_mode`` (then wrapped by ``env_wrapper``), or an
    instance checked for that mode.

    :raises ValueError: when the environment does not support ``render_mode``.
    """
    if isinstance(env, str):
        check_declared_render_mode(name, env, env_kwargs, render_mode)
        created = gym.make(env, render_mode=render_mode, **(env_kwargs or {}))
        check_render_mode(name, created, render_mode)
        return created if env_wrapper is None else env_wrapper(created)
    check_render_mode(name, env, render_mode)
    return env


def check_env_wrapper(env: str | gym.Env, env_wrapper: Any) -> Callable[[gym.Env], gym.Env] | None:
    """``env_wrapper`` if it is ``None`` or a callable applied to an env created from an id; else ``ValueError``."""
    if env_wrapper is None:
        return None
    if not callable(env_wrapper):
        raise ValueError(f"env_wrapper must be a callable taking and returning a gymnasium.Env, got {env_wrapper!r}")
    if not isinstance(env, str):
        raise ValueError("env_wrapper applies to an env created from an id; wrap an env instance before passing it")
    return env_wrapper


def declared_render_modes(env_id: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """The ``metadata["render_modes"]`` of a registered env, read from its class when possible (no env is built)."""
    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    metadata = getattr(creator, "metadata", None)
    if isinstance(metadata, dict):
        return list(metadata.get("render_modes", []))
    probe = gym.make(env_id, **(env_kwargs or {}))  # a factory function: build one to read its metadata
    try:
        return list(probe.metadata.get("render_modes", []))
    finally:
        probe.close()


def check_declared_render_mode(name: str, env_id: str, env_kwargs: dict[str, Any] | None, render_mode: str) -> None:
    """Raise ``ValueError`` unless the registered env ``env_id`` declares ``render_mode``."""
    supported = declared_render_modes(env_id, env_kwargs)
    if render_mode not in supported:
        raise ValueError(f"{name} must render in {render_mode!r} mode, got {env_id} (it supports {supported})")


def check_render_mode(name: str, env: gym.Env, render_mode: str) -> None:
    """Raise ``ValueError`` unless ``env`` declares ``render_mode`` and was created with it."""
    supported = env.metadata.get("render_modes", [])
    if render_mode not in supported or env.render_mode != render_mode:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
        raise ValueError(
            f"{name} must render in {render_mode!r} mode, got {env_id} with render_mode={env.render_mode!r} "
            f"(it supports {supported})"
        )


def observation_normalizer(training_env: VecEnv | None) -> Callable[[Any], Any]:
    """A function that normalises observations with the training ``VecNormalize`` statistics, without updating them.

    The identity when the training env has no ``VecNormalize`` or does not normalise observations. The statistics are
    read at each call, so the function follows the training statistics as they change.
    """
    vec_normalize = unwrap_vec_normalize(training_env) if training_env is not None else None
    if vec_normalize is None or not vec_normalize.norm_obs:
        return lambda observation: observation
    return vec_normalize.normalize_obs


def find_vec_normalize(training_env: VecEnv | None) -> VecNormalize | None:
    """The ``VecNormalize`` wrapper of ``training_env`` (searched through all wrappers), or ``None``."""
    return unwrap_vec_normalize(training_env) if training_env is not None else None


class StepSchedule:
    """Fires once every ``frequency`` environment steps, counted on the model's ``num_timesteps``.

    ``num_timesteps`` grows by ``n_envs`` per vectorised step and survives save/load, so a resumed run keeps firing
    at the same multiples of ``frequency``.
    """

    def __init__(self, frequency: int) -> None:
        self.frequency = frequency
        self.next_step = frequency

    def start(self, num_timesteps: int) -> None:
        """Set the next firing step to the first multiple of ``frequency`` after ``num_timesteps``."""
        self.next_step = next_multiple(num_timesteps, self.frequency)

    def due(self, num_timesteps: int) -> bool:
        """Whether a multiple of ``frequency`` was reached; if so, schedule the next one."""
        if num_timesteps < self.next_step:
            return False
        self.next_step = next_multiple(num_timesteps, self.frequency)
        return True


def next_multiple(value: int, frequency: int) -> int:
    """The smallest multiple of ``frequency`` strictly greater than ``value``."""
    return (value // frequency + 1) * frequency

"""``SharedMemoryVecEnv``: SB3's ``SubprocVecEnv`` with several envs per worker process and the per-step arrays in
shared memory.

**What it mirrors.** SB3's ``SubprocVecEnv``: the same VecEnv contract (``step_async`` / ``step_wait``, ``reset``
with the seeds of ``seed()`` and the options of ``set_options()`` used once, ``reset_infos``, ``get_attr`` /
``set_attr`` / ``env_method`` / ``has_attr`` / ``env_is_wrapped`` with ``indices``, ``render`` / ``get_images``,
``close``), the same worker loop per env (auto reset with ``terminal_observation`` and ``TimeLimit.truncated`` in
``info``), and the same default start method. Its results equal ``DummyVecEnv``'s for the same env functions and
seeds, step for step: observations in the observation space's dtype and rewards as float32 (``DummyVecEnv``'s
buffers; ``SubprocVecEnv`` returns rewards as the envs give them).

**What it changes.** ``n_workers`` processes each hold a contiguous block of the envs and step them one after the
other, instead of one process per env; by default (``step_in_driver``) the driver steps the last block itself while
the workers step theirs, instead of sleeping until they answer, so that one process per core steps envs and no pipe
round trip is spent on the driver's block. The actions, observations, rewards and dones of a step travel through
one shared-memory segment; the pipe to each worker carries a one-byte "step" and, back, an empty answer unless an
env returned a non-empty ``info`` or ended its episode (then the infos of those envs, ``terminal_observation`` and
``reset_info`` included, are pickled). Nothing else is pickled per step. Actions that do not match the shared action
buffer (another dtype or shape) are pickled instead, so that every env sees exactly the action it was given.

**What it gains (measured).** ``benchmarks/bench_vec_envs.py`` compares it with ``DummyVecEnv`` and
``SubprocVecEnv`` on the bundled blocks (docs/results/scale_out_results.md). Env steps per second of ``PPO.learn``
with each block's hyperparameters, relative to ``DummyVecEnv``, on an idle 2-core machine (2026-12-03), the driver
and one worker stepping against two workers and the driver waiting: Humanoid block (64 envs) 1.85x against 1.69x
(a second run: 1.83x against 1.68x), Walker2D block (16 envs) 1.19x against 1.13x, RocketLander block (16 envs)
1.33x against 1.20x; env-only stepping 1.84x, 1.80x and 1.88x. Memory for the Humanoid block: 2.1 GB in all (one
worker) against 1.9 GB for the same envs in the driver; ``SubprocVecEnv`` would need 64 processes, about 14 GB.

**What it guards.**

- A worker whose env raises in ``step`` or ``reset``, a worker that dies (killed, segfault) and a worker that does
  not answer within ``timeout_s`` raise :class:`EnvWorkerError`, naming the worker (or the driver, for an env of its
  own block), its process id, its envs and the env that raised (with the traceback); the VecEnv is then closed (every
  worker stopped, the driver's envs closed, the segment freed), since the envs' episodes are in an unknown state.
  An exception in ``get_attr`` / ``set_attr`` / ``env_method`` / ``render`` is raised again in the driver as it was
  raised (``AttributeError`` for a missing attribute, as ``DummyVecEnv``), with a note naming the env, and the
  VecEnv stays usable.
- ``close()`` is idempotent; it closes the envs, joins the workers (terminating those that do not end) and frees the
  segment. A VecEnv garbage-collected or left open at exit has its workers terminated and its segment freed
  (``weakref.finalize``; the envs' own ``close`` is not called then).
- The segment's name is removed from ``/dev/shm`` as soon as every worker has mapped it, so even a driver killed with
  SIGKILL leaves no named segment behind; the memory is freed with the last process that maps it. Workers end when
  the driver's end of their pipe closes (the driver exited or died).
- Workers ignore SIGINT: Ctrl-C interrupts the driver, whose ``close()`` (or exit) then ends the workers. A Ctrl-C
  while the driver steps or resets its own envs leaves them part stepped: the VecEnv is closed at once, as after a
  failure, and the ``KeyboardInterrupt`` raised as it is.

**Not done: stepping half of the envs while the driver acts on the other half.** In the Humanoid block's training
(same loaded run, DummyVecEnv) the driver's own work per step (policy, VecNormalize, rollout buffer) is about 2% of
the collection time and the update about 2% of an iteration, so the overlap could win little; and acting on each
half separately changes the policy's batch shapes and the order of its random draws, so same-seed results would no
longer equal ``DummyVecEnv``'s.

**Start method.** ``forkserver`` where available, else ``spawn``, as ``SubprocVecEnv``: the driver runs torch (and
its OpenMP threads), maybe Ray's threads; ``fork`` would copy their locks into the children (a deadlock risk), while
the forkserver is a clean single-threaded process that forks the workers. Like ``SubprocVecEnv``, a script using it
must guard its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import secrets
import signal
import time
import traceback
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env.base_vec_env import (
    CloudpickleWrapper,
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)
from stable_baselines3.common.vec_env.patch_gym import _patch_env
from stable_baselines3.common.vec_env.util import dict_to_obs, obs_space_info

from sb3_ppo_ext.validation import HyperparameterError, check_bool, check_choice, check_number

#: The driver's message "step the envs with the actions in shared memory" (a pickled command starts with 0x80).
STEP = b"s"
#: First byte of a worker's answer: done, nothing to report / done, a pickled value follows / failed, a pickled
#: ``(exception or None, traceback text, local env index or None)`` follows.
ANSWER_EMPTY, ANSWER_VALUE, ANSWER_ERROR = b"\x00", b"\x01", b"\x02"
#: Alignment of each array in the shared segment (a cache line).
ALIGNMENT = 64
#: Longest wait for the workers to close their envs and exit in ``close()`` (``timeout_s`` if shorter).
CLOSE_TIMEOUT_S = 30.0
#: Prefix of the shared segment's name (``/dev/shm/<prefix><pid>_<random>`` while the VecEnv starts).
SEGMENT_PREFIX = "sb3ppo_vec_"
#: Shortest and longest ``timeout_s`` / ``start_timeout_s`` (``None`` waits for ever): a worker that starts Python
#: and builds its envs takes seconds, and a timeout of a day already means "never".
MIN_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 86_400.0
#: Commands after whose failure the envs' state is unknown: the VecEnv closes and raises :class:`EnvWorkerError`.
FATAL_COMMANDS = frozenset({"start", "attach", "step", "reset"})


class EnvWorkerError(RuntimeError):
    """A worker process of a :class:`SharedMemoryVecEnv` failed: one of its envs raised in ``step`` / ``reset`` or
    while being built, it died, or it did not answer in time; or an env of the block the driver steps itself raised
    in ``step`` / ``reset`` or while being built. The VecEnv is closed when this is raised.

    :param worker_index: position of the worker (its envs are a contiguous block, in order); ``None``: the driver
        process (``step_in_driver``).
    :param pid: its process id.
    :param env_indices: the indices of the envs it held.
    :param env_index: the env that raised, where one did (``None``: the whole worker failed).
    :param what: what went wrong, e.g. ``"died (exit code -9) during step"``.
    :param remote_traceback: the worker's traceback, where an env raised.
    """

    def __init__(
        self,
        worker_index: int | None,
        pid: int | None,
        env_indices: Sequence[int],
        env_index: int | None,
        what: str,
        remote_traceback: str = "",
    ):
        self.worker_index = worker_index
        self.pid = pid
        self.env_indices = list(env_indices)
        self.env_index = env_index
        self.remote_traceback = remote_traceback
        holder = "the driver" if worker_index is None else f"worker {worker_index}"
        subject = f"env {env_index} in {holder}" if env_index is not None else holder
        message = (
            f"{subject} (pid {pid}, holding envs {self.env_indices}) {what}; the workers were stopped and the VecEnv closed"
        )
        if remote_traceback:
            message += f"\n\n{'Traceback' if worker_index is None else 'Worker traceback'}:\n{remote_traceback.rstrip()}"
        super().__init__(message)


@dataclass(frozen=True)
class SharedArray:
    """Where one array of all envs (first axis: env index) lies in the shared segment."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int

    def view(self, segment: SharedMemory) -> np.ndarray:
        """The array as a numpy view of the mapped ``segment``'s memory."""
        if segment.buf is None:
            raise ValueError(f"shared memory segment {segment.name!r} is not mapped")
        return np.ndarray(self.shape, dtype=np.dtype(self.dtype), buffer=segment.buf, offset=self.offset)


def plan_segment(
    fields: Sequence[tuple[str, tuple[int, ...], np.dtype]], alignment: int = ALIGNMENT
) -> tuple[list[SharedArray], int]:
    """Lay out arrays one after the other in one segment, each starting on a multiple of ``alignment`` bytes.

    :param fields: ``(name, shape, dtype)`` of each array.
    :return: where each array lies, and the segment's size in bytes (at least 1).
    """
    arrays, offset = [], 0
    for name, shape, dtype in fields:
        offset = -(-offset // alignment) * alignment
        arrays.append(SharedArray(name, tuple(int(n) for n in shape), np.dtype(dtype).str, offset))
        offset += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return arrays, max(offset, 1)


def split_evenly(n_envs: int, n_workers: int) -> list[range]:
    """The env indices of each worker: ``n_workers`` contiguous blocks whose sizes differ by at most one, the larger
    first (``numpy.array_split``'s rule)."""
    size, extra = divmod(n_envs, n_workers)
    blocks, start = [], 0
    for worker in range(n_workers):
        stop = start + size + (1 if worker < extra else 0)
        blocks.append(range(start, stop))
        start = stop
    return blocks


def shared_action_shape(action_space: spaces.Space) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of one env's action in the shared action buffer; ``None`` for a space without both (such
    actions are always pickled)."""
    if action_space.shape is None or action_space.dtype is None:
        return None
    return tuple(action_space.shape), np.dtype(action_space.dtype)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_n_workers(n_envs: int, step_in_driver: bool = False) -> int:
    """One process per core this process may run on, the driver counting as one where it steps envs
    (``step_in_driver``); at least one worker, and at most one process per env."""
    processes = max(1, min(n_envs, usable_cores()))
    return max(1, processes - 1) if step_in_driver else processes


# -- the worker process ------------------------------------------------------------------------------------------------


class _EnvWorker:
    """The envs of one worker process and what it does for each command (runs in the worker)."""

    def __init__(self) -> None:
        #: local index of the env being built or called, named in an error report
        self.current: int | None = None
        self.envs: list[gym.Env] = []
        self.segment: SharedMemory | None = None
        self.observations: list[np.ndarray] = []
        self.observation_keys: list[Any] = []
        self.rewards: np.ndarray | None = None
        self.dones: np.ndarray | None = None
        self.actions: np.ndarray | None = None

    def build(self, env_fns: Sequence[Callable[[], gym.Env]]) -> tuple[spaces.Space, spaces.Space]:
        """Build the envs; the observation and action spaces of the first."""
        for local, env_fn in enumerate(env_fns):
            self.current = local
            self.envs.append(_patch_env(env_fn()))
        self.current = None
        return self.envs[0].observation_space, self.envs[0].action_space

    def attach(self, name: str, arrays: list[SharedArray], observation_keys: list[Any], block: range) -> None:
        """Map the shared segment and keep views of this worker's rows of each array."""
        self.segment = SharedMemory(name=name)
        self.use_rows({array.name: array.view(self.segment) for array in arrays}, observation_keys, block)

    def use_rows(self, arrays: dict[str, np.ndarray], observation_keys: list[Any], block: range) -> None:
        """Keep views of this block's rows of each array of all envs (the driver's own block: its views of the
        segment, which it has mapped already)."""
        views = {name: array[block.start : block.stop] for name, array in arrays.items()}
        self.observation_keys = observation_keys
        self.observations = [views[f"observation{position}"] for position in range(len(observation_keys))]
        self.rewards, self.dones, self.actions = views["rewards"], views["dones"], views.get("actions")

    def detach(self) -> None:
        """Drop the views, then unmap the segment."""
        self.observations, self.rewards, self.dones, self.actions = [], None, None, None
        if self.segment is not None:
            self.segment.close()
            self.segment = None

    def save_observation(self, local: int, observation: Any) -> None:
        """Write one env's observation into its rows (cast to the space's dtype, as ``DummyVecEnv._save_obs``)."""
        for buffer, key in zip(self.observations, self.observation_keys, strict=True):
            buffer[local] = observation if key is None else observation[key]

    def step(self, actions: Sequence[Any] | None) -> list[tuple[int, dict, dict | None]]:
        """Step every env (``actions``: pickled ones, else those in shared memory), reset those whose episode ended;
        observations, rewards and dones go to shared memory.

        :return: ``(local index, info, reset info or None)`` of each env with a non-empty info or an ended episode.
        """
        assert self.rewards is not None and self.dones is not None  # attached before the first step
        reported = []
        for local, env in enumerate(self.envs):
            self.current = local
            if actions is not None:
                action = actions[local]
            else:
                assert self.actions is not None
                # a copy: the env may keep the array it was given, which the next step overwrites
                action = self.actions[local].copy() if self.actions.ndim > 1 else self.actions[local]
            observation, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            reset_info = None
            if done:
                info["terminal_observation"] = observation
                observation, reset_info = env.reset()
            self.save_observation(local, observation)
            self.rewards[local] = reward
            self.dones[local] = done
            if done or len(info) > 1 or info["TimeLimit.truncated"]:
                reported.append((local, info, reset_info))
        self.current = None
        return reported

    def reset(self, seeds: Sequence[int | None], options: Sequence[dict[str, Any]]) -> list[dict]:
        """Reset every env with its seed and options (``{}``: none); observations to shared memory; the reset
        infos."""
        reset_infos = []
        for local, (env, seed, option) in enumerate(zip(self.envs, seeds, options, strict=True)):
            self.current = local
            maybe_options = {"options": option} if option else {}
            observation, reset_info = env.reset(seed=seed, **maybe_options)
            self.save_observation(local, observation)
            reset_infos.append(reset_info)
        self.current = None
        return reset_infos

    def call(self, method: str, local_indices: Sequence[int], args: tuple) -> list[Any]:
        """``get_attr`` / ``set_attr`` / ``env_method`` / ``has_attr`` / ``is_wrapped`` / ``render`` for each env at
        ``local_indices``, as ``SubprocVecEnv``'s worker does them for its one env."""
        results = []
        for local in local_indices:
            self.current = local
            env = self.envs[local]
            if method == "get_attr":
                results.append(env.get_wrapper_attr(args[0]))
            elif method == "set_attr":
                results.append(setattr(env, args[0], args[1]))  # type: ignore[func-returns-value]
            elif method == "env_method":
                results.append(env.get_wrapper_attr(args[0])(*args[1], **args[2]))
            elif method == "has_attr":
                try:
                    env.get_wrapper_attr(args[0])
                    results.append(True)
                except AttributeError:
                    results.append(False)
            elif method == "is_wrapped":
                results.append(env_util.is_wrapped(env, args[0]))
            elif method == "render":
                results.append(env.render())
            else:
                raise NotImplementedError(f"`{method}` is not implemented in the worker")
        self.current = None
        return results

    def close(self) -> None:
        """Close every env, even after one raised; the first exception is raised once all are closed, ``current``
        naming the env that raised it."""
        first_error: Exception | None = None
        failed_env: int | None = None
        for local, env in enumerate(self.envs):
            try:
                env.close()
            except Exception as error:
                if first_error is None:
                    first_error, failed_env = error, local
        self.current = failed_env
        if first_error is not None:
            raise first_error


def _answer(connection: Connection, value: Any) -> None:
    connection.send_bytes(ANSWER_EMPTY if value is None else ANSWER_VALUE + pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


def _answer_error(connection: Connection, error: BaseException, local: int | None) -> None:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        payload = pickle.dumps((error, text, local), pickle.HIGHEST_PROTOCOL)
        pickle.loads(payload)  # an exception that pickles but cannot be rebuilt would fail in the driver
    except Exception:
        payload = pickle.dumps((None, text, local), pickle.HIGHEST_PROTOCOL)
    connection.send_bytes(ANSWER_ERROR + payload)


def _worker_main(connection: Connection, env_fns: CloudpickleWrapper) -> None:
    """Body of a worker process: build the envs, answer with their spaces, then serve commands until ``close`` or
    until the driver's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; it then closes the workers
    worker = _EnvWorker()
    try:
        try:
            built = worker.build(env_fns.var)
        except Exception as error:
            _answer_error(connection, error, worker.current)
            return
        _answer(connection, built)
        while True:
            message = connection.recv_bytes()
            try:
                if message == STEP:
                    connection.send_bytes(_encode_step(worker.step(None)))
                    continue
                command, data = pickle.loads(message)
                if command == "step":
                    connection.send_bytes(_encode_step(worker.step(data)))
                elif command == "reset":
                    _answer(connection, worker.reset(*data))
                elif command == "call":
                    _answer(connection, worker.call(*data))
                elif command == "attach":
                    worker.attach(*data)
                    _answer(connection, None)
                elif command == "close":
                    try:
                        worker.close()
                    except Exception as error:  # the worker ends all the same
                        _answer_error(connection, error, worker.current)
                        return
                    _answer(connection, None)
                    return
                else:
                    raise NotImplementedError(f"`{command}` is not implemented in the worker")
            except Exception as error:
                _answer_error(connection, error, worker.current)
    except (EOFError, OSError):  # the driver is gone: nothing to answer to
        pass
    finally:
        worker.detach()
        connection.close()


def _encode_step(reported: list[tuple[int, dict, dict | None]]) -> bytes:
    return ANSWER_VALUE + pickle.dumps(reported, pickle.HIGHEST_PROTOCOL) if reported else ANSWER_EMPTY


# -- the driver --------------------------------------------------------------------------------------------------------


class _Resources:
    """The processes, pipes and segment of one :class:`SharedMemoryVecEnv`, released once (by ``close()``, after a
    failure, or by the finalizer when the VecEnv is garbage-collected or the interpreter exits)."""

    def __init__(self) -> None:
        self.processes: list[Any] = []
        self.connections: list[Connection] = []
        #: the envs the driver steps itself (``step_in_driver``): their views of the segment go before it is unmapped
        self.driver_envs: _EnvWorker | None = None
        self.segment: SharedMemory | None = None
        self.segment_linked = False
        #: the driver's numpy views of the segment, dropped before it is unmapped
        self.arrays: dict[str, np.ndarray] = {}

    def unlink_segment(self) -> None:
        """Remove the segment's name (the memory stays until every process unmaps it)."""
        if self.segment is not None and self.segment_linked:
            self.segment_linked = False
            try:
                self.segment.unlink()
            except FileNotFoundError:
                pass

    def release(self, join_timeout_s: float = 0.0) -> None:
        """End every worker (waiting up to ``join_timeout_s`` for those asked to close, then SIGTERM, then SIGKILL),
        close the pipes, unmap and unlink the segment. Idempotent."""
        deadline = time.monotonic() + join_timeout_s
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.exitcode is None:
                process.terminate()
        for process in self.processes:
            process.join(5.0)
            if process.exitcode is None:
                process.kill()
                process.join()
        for connection in self.connections:
            connection.close()
        if self.driver_envs is not None:
            self.driver_envs.detach()
        self.arrays.clear()
        self.unlink_segment()
        if self.segment is not None:
            self.segment.close()
            self.segment = None


class SharedMemoryVecEnv(VecEnv):
    """A VecEnv stepping its envs in ``n_workers`` processes, a contiguous block of envs each, with the per-step
    arrays in shared memory; behaves as ``SubprocVecEnv`` (and returns what ``DummyVecEnv`` returns) for the same env
    functions and seeds. See the module's docstring for what it guards.

    :param env_fns: functions that each return a new env (sent to the workers with cloudpickle, as
        ``SubprocVecEnv`` does).
    :param n_workers: worker processes (>= 1, at most ``len(env_fns)``, or one less with ``step_in_driver``);
        default: one process per core this process may run on (the driver counting as one with ``step_in_driver``),
        at most one per env. Envs are split into contiguous blocks whose sizes differ by at most one.
    :param step_in_driver: the driver process steps the last block of envs itself while the workers step theirs,
        instead of waiting for them: one process fewer, and one pipe round trip less per step.
    :param start_method: a start method of ``multiprocessing`` (default: ``forkserver`` where available, else
        ``spawn``; see the module's docstring for why not ``fork``).
    :param timeout_s: the longest wait, in seconds (from :data:`MIN_TIMEOUT_S` to :data:`MAX_TIMEOUT_S`), for the
        workers to answer one command once started (a step, a reset, an attribute); a worker that does not answer in
        time is reported as failed with :class:`EnvWorkerError` and the VecEnv is closed. ``None``: wait forever (a
        dead worker is still detected at once).
    :param start_timeout_s: the same for starting: the workers' imports and building their envs (seconds on a loaded
        machine).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        n_workers: int | None = None,
        start_method: str | None = None,
        timeout_s: float | None = 600.0,
        start_timeout_s: float | None = 300.0,
        step_in_driver: bool = True,
    ):
        n_envs = len(env_fns)
        n_workers, start_method = self._check_arguments(
            n_envs, n_workers, start_method, timeout_s, start_timeout_s, step_in_driver
        )
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.start_method = start_method
        blocks = split_evenly(n_envs, n_workers + 1 if step_in_driver else n_workers)
        #: the env indices of each worker, in order
        self.blocks: list[range] = blocks[:n_workers]
        #: the env indices the driver steps itself (``step_in_driver``; the last block, the smaller where they differ)
        self.driver_block: range | None = blocks[-1] if step_in_driver else None
        self._driver_actions: list[Any] | None = None
        self.waiting = False
        self.closed = False
        self._closed_because = ""
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.release)
        try:
            self._start_workers(env_fns, start_method)
            if self.driver_block is not None:  # while the workers build theirs
                self._build_driver_envs([env_fns[index] for index in self.driver_block])
            observation_space, action_space = self._gather(range(n_workers), "start", start_timeout_s)[0]
            self._allocate_buffers(n_envs, observation_space, action_space)
            super().__init__(n_envs, observation_space, action_space)
        except BaseException:
            self._abort("failed to start")
            raise

    # -- set-up -----------------------------------------------------------------------------------------------------

    @staticmethod
    def _check_arguments(
        n_envs: int,
        n_workers: int | None,
        start_method: str | None,
        timeout_s: float | None,
        start_timeout_s: float | None,
        step_in_driver: bool,
    ) -> tuple[int, str]:
        """Raise ``ValueError`` (a :class:`~sb3_ppo_ext.validation.HyperparameterError` for the checked settings) for
        invalid arguments; return ``n_workers`` and ``start_method``, their defaults filled in."""
        if n_envs < 1:
            raise ValueError("env_fns must hold at least one env function, got none")
        check_bool("step_in_driver", step_in_driver)
        if step_in_driver and n_envs < 2:
            raise ValueError("step_in_driver needs at least 2 envs (one block for the driver, one for a worker), got 1")
        if n_workers is None:
            n_workers = default_n_workers(n_envs, step_in_driver)
        most = n_envs - 1 if step_in_driver else n_envs
        if not isinstance(n_workers, int) or isinstance(n_workers, bool) or not 1 <= n_workers <= most:
            envs = f"the {n_envs} envs less one for the driver" if step_in_driver else f"the number of envs, {n_envs}"
            raise ValueError(f"n_workers must be an int from 1 to {most} ({envs}), got {n_workers!r}")
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        check_choice("start_method", start_method, mp.get_all_start_methods())
        for name, value in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s)):
            if value is not None:
                try:
                    check_number(name, value, low=MIN_TIMEOUT_S, high=MAX_TIMEOUT_S)
                except HyperparameterError as error:
                    raise HyperparameterError(f"{error} (seconds; None waits for ever)") from None
        return n_workers, start_method

    def _start_workers(self, env_fns: Sequence[Callable[[], gym.Env]], start_method: str) -> None:
        """Start one worker process per block of :attr:`blocks`, each building its envs from its ``env_fns`` (their
        answers, the spaces, are gathered later); its pipe and process go to the resources released on close."""
        context = mp.get_context(start_method)
        # Workers register the segment they map with multiprocessing's resource tracker. Started now, before any
        # worker, it is the one every worker shares (a forked worker would otherwise start its own, which warns of a
        # "leaked" segment at exit and tries to unlink it again); the driver unlinks the segment, unregistering it.
        resource_tracker.ensure_running()
        for block in self.blocks:
            driver_end, worker_end = context.Pipe()
            functions = CloudpickleWrapper([env_fns[index] for index in block])
            # daemon: a worker never outlives an interpreter that exits without closing the VecEnv
            process = context.Process(target=_worker_main, args=(worker_end, functions), daemon=True)  # type: ignore[attr-defined]
            process.start()
            worker_end.close()
            self._resources.processes.append(process)
            self._resources.connections.append(driver_end)

    def _allocate_buffers(self, n_envs: int, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        """Create the shared segment of the per-step arrays for these spaces, have every worker map it, then remove its
        name."""
        keys, shapes, dtypes = obs_space_info(observation_space)
        self._observation_keys: list[Any] = list(keys)
        fields = [(f"observation{position}", (n_envs, *shapes[key]), dtypes[key]) for position, key in enumerate(keys)]
        fields += [("rewards", (n_envs,), np.dtype(np.float32)), ("dones", (n_envs,), np.dtype(bool))]
        action = shared_action_shape(action_space)
        if action is not None:
            fields.append(("actions", (n_envs, *action[0]), action[1]))
        arrays, size = plan_segment(fields)
        name = f"{SEGMENT_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
        resources = self._resources
        resources.segment = SharedMemory(name=name, create=True, size=size)
        resources.segment_linked = True
        resources.arrays = {array.name: array.view(resources.segment) for array in arrays}
        for worker, block in enumerate(self.blocks):
            self._send(worker, pickle.dumps(("attach", (name, arrays, self._observation_keys, block))), "attach")
        if resources.driver_envs is not None and self.driver_block is not None:
            resources.driver_envs.use_rows(resources.arrays, self._observation_keys, self.driver_block)
        self._gather(range(len(self.blocks)), "attach", self.start_timeout_s)
        resources.unlink_segment()

    def _build_driver_envs(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        """Build the envs of the driver's own block (an env that raises is an :class:`EnvWorkerError` naming it)."""
        driver_envs = self._resources.driver_envs = _EnvWorker()
        self._in_driver(driver_envs.build, env_fns, action="start")

    def _in_driver(self, method: Callable[..., Any], *args: Any, action: str) -> Any:
        """``method(*args)`` on the driver's envs; an exception there during ``start`` / ``step`` / ``reset`` (whose
        envs' state is then unknown) closes the VecEnv and is raised as an :class:`EnvWorkerError` naming the env; a
        ``KeyboardInterrupt`` there closes it too and is raised as it is."""
        driver_envs = self._resources.driver_envs
        assert driver_envs is not None and self.driver_block is not None
        try:
            return method(*args)
        except BaseException as error:
            if action not in FATAL_COMMANDS:
                raise
            if not isinstance(error, Exception):  # Ctrl-C: some envs stepped, others not; the workers' answers pending
                self._abort(f" after {type(error).__name__} while the driver's envs were in {action}")
                raise
            local = driver_envs.current
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            failure = EnvWorkerError(
                None,
                os.getpid(),
                list(self.driver_block),
                None if local is None else self.driver_block.start + local,
                f"raised {type(error).__name__}: {error} during {action}",
                text,
            )
            self._abort(f" after a failure: {str(failure).splitlines()[0]}")
            raise failure from error

    # -- talking to the workers -------------------------------------------------------------------------------------

    @property
    def worker_pids(self) -> list[int | None]:
        """The process id of each worker."""
        return [process.pid for process in self._resources.processes]

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"this SharedMemoryVecEnv is closed{self._closed_because}")

    def _send(self, worker: int, message: bytes, action: str) -> None:
        try:
            self._resources.connections[worker].send_bytes(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._failure(worker, None, f"died ({self._exit_status(worker)}) before {action}") from None

    def _exit_status(self, worker: int) -> str:
        """How the worker ended: ``exit code 1``, ``exit code -9, killed by SIGKILL`` (the OOM killer's signal), or
        ``still running``."""
        process = self._resources.processes[worker]
        process.join(1.0)
        code = process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"exit code {code}, killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def _failure(self, worker: int, local: int | None, what: str, remote_traceback: str = "") -> EnvWorkerError:
        """The error for a failed worker, after closing the VecEnv (its envs' state is unknown)."""
        block = self.blocks[worker]
        error = EnvWorkerError(
            worker,
            self._resources.processes[worker].pid,
            list(block),
            None if local is None else block.start + local,
            what,
            remote_traceback,
        )
        self._abort(f" after a failure: {str(error).splitlines()[0]}")
        return error

    def _abort(self, because: str) -> None:
        """Stop every worker at once and free everything (no graceful close: the envs' state is unknown; the
        driver's own envs are closed, whatever they raise)."""
        self.closed = True
        self.waiting = False
        self._closed_because = because if because.startswith(" ") else f" ({because})"
        self._close_driver_envs()
        self._resources.release()

    def _close_driver_envs(self) -> Exception | None:
        """Drop the driver's views of the segment and close its own envs (once); return what an env raised in its
        ``close`` (with a note naming it), so that the workers and the segment are released before it is raised."""
        driver_envs, self._resources.driver_envs = self._resources.driver_envs, None
        if driver_envs is None:
            return None
        driver_envs.detach()
        try:
            driver_envs.close()
        except Exception as error:
            if hasattr(error, "add_note") and self.driver_block is not None and driver_envs.current is not None:
                error.add_note(
                    f"(raised by env {self.driver_block.start + driver_envs.current} in the driver of a SharedMemoryVecEnv)"
                )
            return error
        return None

    def _gather(self, workers: Sequence[int], action: str, timeout_s: float | None) -> list[Any]:
        """The answer of each of ``workers`` to the command ``action`` just sent, in order.

        A worker that died or did not answer within the timeout raises :class:`EnvWorkerError` (the VecEnv is
        closed). A worker that answered with an exception: for the commands of :data:`FATAL_COMMANDS`, an
        :class:`EnvWorkerError` naming the env that raised; for the others, the exception itself is raised again
        once every worker has answered (the pipes stay in step), with a note naming the env.
        """
        connections, processes = self._resources.connections, self._resources.processes
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        raw: dict[int, bytes] = {}
        pending = list(workers)
        while pending:
            waitables: dict[Any, int] = {}
            for worker in pending:
                waitables[connections[worker]] = worker
                waitables[processes[worker].sentinel] = worker
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait(list(waitables), remaining)
            if not ready:
                raise self._failure(pending[0], None, f"did not answer {action} within {timeout_s} s")
            for handle in ready:
                worker = waitables[handle]
                if worker in raw:
                    continue
                connection = connections[worker]
                if handle is connection or connection.poll(0):
                    try:
                        raw[worker] = connection.recv_bytes()
                        continue
                    except (EOFError, OSError):
                        pass
                raise self._failure(worker, None, f"died ({self._exit_status(worker)}) during {action}")
            pending = [worker for worker in pending if worker not in raw]
        answers: list[Any] = []
        first_error: BaseException | None = None
        for worker in workers:
            message = raw[worker]
            if message[:1] == ANSWER_ERROR:
                error, text, local = pickle.loads(message[1:])
                if action in FATAL_COMMANDS:
                    name = f"{type(error).__name__}: {error}" if error is not None else text.strip().splitlines()[-1]
                    raise self._failure(worker, local, f"raised {name} during {action}", text) from error
                if first_error is None:
                    env_index = None if local is None else self.blocks[worker].start + local
                    first_error = _rebuilt_error(error, text, worker, env_index)
                answers.append(None)
            else:
                answers.append(pickle.loads(message[1:]) if message[:1] == ANSWER_VALUE else None)
        if first_error is not None:
            raise first_error
        return answers

    def _call(self, method: str, indices: VecEnvIndices, *args: Any) -> list[Any]:
        """Call the worker method ``method`` on the envs ``indices``, one message per worker concerned (the driver's
        own envs called here meanwhile); the results in the order of ``indices``."""
        self._check_open()
        targets = list(self._get_indices(indices))
        by_worker: dict[int, list[tuple[int, int]]] = {}  # worker -> (position in targets, local index)
        in_driver: list[tuple[int, int]] = []
        for position, index in enumerate(targets):
            if self.driver_block is not None and index in self.driver_block:
                in_driver.append((position, index - self.driver_block.start))
                continue
            worker = self._worker_of(index)
            by_worker.setdefault(worker, []).append((position, index - self.blocks[worker].start))
        for worker, places in by_worker.items():
            self._send(worker, pickle.dumps(("call", (method, [local for _, local in places], args))), method)
        results: list[Any] = [None] * len(targets)
        driver_error: Exception | None = None
        if in_driver:
            driver_envs = self._resources.driver_envs
            assert driver_envs is not None and self.driver_block is not None
            try:
                for (position, _), value in zip(
                    in_driver, driver_envs.call(method, [local for _, local in in_driver], args), strict=True
                ):
                    results[position] = value
            except KeyboardInterrupt:  # the workers' answers stay pending: the pipes would be out of step
                self._abort(f" after KeyboardInterrupt while the driver's envs ran {method}")
                raise
            except Exception as error:  # raised once the workers answered too (the pipes stay in step)
                env_index = None if driver_envs.current is None else self.driver_block.start + driver_envs.current
                if hasattr(error, "add_note"):  # Python >= 3.11
                    error.add_note(f"(raised by env {env_index} in the driver of a SharedMemoryVecEnv)")
                driver_error = error
        answers = self._gather(list(by_worker), method, self.timeout_s)
        if driver_error is not None:
            raise driver_error
        for places, answer in zip(by_worker.values(), answers, strict=True):
            for (position, _), value in zip(places, answer, strict=True):
                results[position] = value
        return results

    def _worker_of(self, index: int) -> int:
        for worker, block in enumerate(self.blocks):
            if index in block:
                return worker
        raise IndexError(f"env index {index} out of range for {self.num_envs} envs")

    def _observations(self) -> VecEnvObs:
        """A copy of every env's observation from shared memory, as ``DummyVecEnv`` returns it."""
        arrays = self._resources.arrays
        copies = OrderedDict(
            (key, arrays[f"observation{position}"].copy()) for position, key in enumerate(self._observation_keys)
        )
        return dict_to_obs(self.observation_space, copies)

    # -- VecEnv -----------------------------------------------------------------------------------------------------

    def step_async(self, actions: np.ndarray) -> None:
        self._check_open()
        shared = self._resources.arrays.get("actions")
        if (
            shared is not None
            and isinstance(actions, np.ndarray)
            and actions.dtype == shared.dtype
            and actions.shape == shared.shape
        ):
            shared[...] = actions
            messages = [STEP] * len(self.blocks)
            self._driver_actions = None
        else:  # another dtype or shape than the space's: each env gets exactly what it was given
            messages = [pickle.dumps(("step", [actions[index] for index in block])) for block in self.blocks]
            self._driver_actions = None if self.driver_block is None else [actions[index] for index in self.driver_block]
        for worker, message in enumerate(messages):
            self._send(worker, message, "step")
        self.waiting = True

    def step_wait(self) -> VecEnvStepReturn:
        self._check_open()
        if not self.waiting:
            raise RuntimeError("step_wait called without step_async")
        driver_envs, driver_block = self._resources.driver_envs, self.driver_block
        # the driver steps its own envs while the workers step theirs
        stepped_here = [] if driver_envs is None else self._in_driver(driver_envs.step, self._driver_actions, action="step")
        answers = self._gather(range(len(self.blocks)), "step", self.timeout_s)
        self.waiting = False
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": False} for _ in range(self.num_envs)]
        blocks_and_answers = list(zip(self.blocks, answers, strict=True))
        if driver_block is not None:
            blocks_and_answers.append((driver_block, stepped_here))
        for block, reported in blocks_and_answers:
            for local, info, reset_info in reported or ():
                infos[block.start + local] = info
                if reset_info is not None:
                    self.reset_infos[block.start + local] = reset_info
        arrays = self._resources.arrays
        return self._observations(), arrays["rewards"].copy(), arrays["dones"].copy(), infos

    def reset(self) -> VecEnvObs:
        self._check_open()
        for worker, block in enumerate(self.blocks):
            data = (self._seeds[block.start : block.stop], self._options[block.start : block.stop])
            self._send(worker, pickle.dumps(("reset", data)), "reset")
        driver_envs, driver_block = self._resources.driver_envs, self.driver_block
        if driver_envs is not None and driver_block is not None:
            seeds, options = (
                self._seeds[driver_block.start : driver_block.stop],
                self._options[driver_block.start : driver_block.stop],
            )
            self.reset_infos[driver_block.start : driver_block.stop] = self._in_driver(
                driver_envs.reset, seeds, options, action="reset"
            )
        answers = self._gather(range(len(self.blocks)), "reset", self.timeout_s)
        for block, reset_infos in zip(self.blocks, answers, strict=True):
            self.reset_infos[block.start : block.stop] = reset_infos
        # seeds and options are used once
        self._reset_seeds()
        self._reset_options()
        return self._observations()

    def close(self) -> None:
        """Close every env in its worker, end the workers and free the shared memory; idempotent.

        An exception an env raises in its own ``close()`` is raised once everything is released (the first one, with a
        note naming the env); the other envs are closed all the same.
        """
        if self.closed:
            return
        timeout = CLOSE_TIMEOUT_S if self.timeout_s is None else min(self.timeout_s, CLOSE_TIMEOUT_S)
        env_error: Exception | None = None
        try:
            if self.waiting:
                self._gather(range(len(self.blocks)), "step", timeout)
            env_error = self._close_driver_envs()
            for worker in range(len(self.blocks)):
                self._send(worker, pickle.dumps(("close", None)), "close")
            self._gather(range(len(self.blocks)), "close", timeout)
        except EnvWorkerError:
            return  # the failure closed everything already
        except Exception as error:  # an env that raised in close(): its worker ends all the same
            env_error = env_error or error
        self.closed = True
        self.waiting = False
        self._closed_because = ""
        self._resources.release(join_timeout_s=timeout)
        if env_error is not None:
            raise env_error

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images."
            )
            return [None for _ in range(self.num_envs)]
        return self._call("render", None)

    def has_attr(self, attr_name: str) -> bool:
        return all(self._call("has_attr", None, attr_name))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._call("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._call("set_attr", indices, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self._call("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self._call("is_wrapped", indices, wrapper_class)


def _rebuilt_error(error: BaseException | None, text: str, worker: int, env_index: int | None) -> BaseException:
    """The exception an env raised in a worker, to raise again in the driver, with a note naming the env and the
    worker's traceback (a ``RuntimeError`` holding the traceback where the exception could not be sent)."""
    where = f"raised by env {env_index} in worker {worker} of a SharedMemoryVecEnv"
    if error is None:
        return RuntimeError(f"{text.strip().splitlines()[-1]} ({where})\n\nWorker traceback:\n{text.rstrip()}")
    if hasattr(error, "add_note"):  # Python >= 3.11
        error.add_note(f"({where}; worker traceback:)\n{text.rstrip()}")
    return error

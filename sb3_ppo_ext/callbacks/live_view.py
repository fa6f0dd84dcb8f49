"""Watching the policy learn while training runs: a low-priority background process plays the latest weights."""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import cloudpickle
import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from sb3_ppo_ext.callbacks._media import check_video_dependencies, pad_to_even, write_gif, write_mp4
from sb3_ppo_ext.callbacks._render_env import (
    check_declared_render_mode,
    check_env_spec,
    check_env_wrapper,
    make_render_env,
)
from sb3_ppo_ext.callbacks._vec_normalize import find_vec_normalize
from sb3_ppo_ext.envs._bullet import display_available
from sb3_ppo_ext.files import check_writable_dir
from sb3_ppo_ext.validation import check_choice, check_int, check_number, check_positive

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

    from typing_extensions import Self

LIVE_VIEW_MODES = ("auto", "human", "file")
VIDEO_EXTENSIONS = (".gif", ".mp4")


def resolve_mode(mode: str) -> str:
    """``"human"`` or ``"file"``: ``"auto"`` picks the GUI where a display exists."""
    if mode == "auto":
        return "human" if display_available() else "file"
    return mode


class LiveViewCallback(BaseCallback):
    """Watch the policy learn: a background process plays the latest weights on its own copy of the environment.

    Like a render thread next to the trainer, but in a separate process at lower priority (``os.nice`` and, on
    Linux, ``SCHED_IDLE``) with a frame-rate cap, so that training keeps its speed (see
    ``benchmarks/bench_live_view.py``). The process shows the env in its window (``human`` mode) where a display
    exists; headless, it renders ``rgb_array`` frames and rewrites ``output_path`` (GIF or MP4, replaced atomically)
    at the end of every episode it plays, so an image viewer or a browser that reloads the file shows the policy as
    it improves.

    The weights (and the ``VecNormalize`` observation statistics, applied without updating them) are sent after an
    update at most every ``sync_interval`` seconds. The process stops when training ends, when training fails (a
    watchdog thread notices that ``learn()`` is no longer running), when :meth:`close` is called or the callback is
    used as a context manager, and by itself when the training process dies. A crash of the viewer only warns; it
    never stops training. Headless, a view that wrote no file (the viewer still starting, or given no CPU time on a
    busy machine before training ended) or could not write it is warned about once, with the reason.

    Start method ``"spawn"`` (default) imports the main module in the child: guard scripts with
    ``if __name__ == "__main__":``.

    :param env: env id, created in the viewer process with ``env_kwargs`` (an id, so that it can cross processes).
    :param mode: ``"auto"``, ``"human"`` (GUI window) or ``"file"`` (headless, rewrite ``output_path``).
    :param output_path: file of the headless view, ending in ``.gif`` or ``.mp4``; its folder must be writable.
    :param fps: frame-rate cap of the viewer (steps per second), > 0.
    :param sync_interval: minimum seconds between two weight transfers, >= 0.
    :param niceness: ``os.nice`` increment of the viewer process (0..19; higher is lower priority).
    :param idle_scheduling: on Linux, also run the viewer under the ``SCHED_IDLE`` policy, so that it only gets CPU
        time that nothing else wants. Niceness alone is not enough where the kernel groups processes by session
        (autogroup): the viewer's share then comes out of the training process's own share.
    :param max_episode_steps: episode step limit in the viewer, >= 1.
    :param max_frames: at most this many frames per written file (an episode longer than that is cut), >= 1.
    :param downsample: keep every ``downsample``-th pixel row and column of written frames (1: full size), >= 1.
    :param deterministic: act with the distribution's mode.
    :param env_kwargs: keyword arguments for ``gymnasium.make``.
    :param env_wrapper: applied to the viewer's env after ``gymnasium.make`` (sent to the viewer with cloudpickle;
        the zoo CLI passes the config's ``env_wrapper`` when ``env`` is the trained env's id).
    :param seed: seed of the viewer env's first reset.
    :param start_method: ``multiprocessing`` start method (``"spawn"``, ``"forkserver"`` or ``"fork"``).
    :param stop_timeout: seconds to wait for the viewer to exit before terminating it, > 0.
    :param verbose: verbosity level.
    """

    def __init__(
        self,
        env: str,
        mode: str = "auto",
        output_path: str = "live_view.gif",
        fps: float = 15.0,
        sync_interval: float = 2.0,
        niceness: int = 10,
        idle_scheduling: bool = True,
        max_episode_steps: int = 1000,
        max_frames: int = 300,
        downsample: int = 2,
        deterministic: bool = True,
        env_kwargs: dict[str, Any] | None = None,
        seed: int | None = 0,
        start_method: str = "spawn",
        stop_timeout: float = 10.0,
        env_wrapper: Callable[[gym.Env], gym.Env] | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if not isinstance(env, str):
            raise ValueError(f"env must be an env id string (the viewer process creates its own env), got {env!r}")
        check_env_spec("env", env, env_kwargs)
        #: The env id the viewer creates its env from (the same attribute as on ``VideoRecorderCallback``).
        self.env_id = env
        self.env_kwargs = dict(env_kwargs or {})
        self.env_wrapper = check_env_wrapper(env, env_wrapper)
        self.mode = check_choice("mode", mode, LIVE_VIEW_MODES)
        if not isinstance(output_path, (str, os.PathLike)) or not os.fspath(output_path).lower().endswith(VIDEO_EXTENSIONS):
            raise ValueError(f"output_path must be a file path ending in one of {VIDEO_EXTENSIONS}, got {output_path!r}")
        self.output_path = os.path.abspath(os.fspath(output_path))
        self.fps = check_positive("fps", fps)
        self.sync_interval = check_number("sync_interval", sync_interval, low=0.0)
        self.niceness = check_int("niceness", niceness, minimum=0)
        if self.niceness > 19:
            raise ValueError(f"niceness must be <= 19, got {niceness!r}")
        self.idle_scheduling = bool(idle_scheduling)
        self.max_episode_steps = check_int("max_episode_steps", max_episode_steps, minimum=1)
        self.max_frames = check_int("max_frames", max_frames, minimum=1)
        self.downsample = check_int("downsample", downsample, minimum=1)
        self.deterministic = bool(deterministic)
        if seed is not None:
            check_int("seed", seed, minimum=0)
        self.seed = seed
        self.start_method = check_choice("start_method", start_method, multiprocessing.get_all_start_methods())
        self.stop_timeout = check_positive("stop_timeout", stop_timeout)
        if resolve_mode(self.mode) == "file":
            check_writable_dir("output_path's folder", os.path.dirname(self.output_path))
            check_video_dependencies("LiveViewCallback", self.output_path.lower().endswith(".gif"))

        self.process: multiprocessing.process.BaseProcess | None = None
        self.watchdog: threading.Thread | None = None
        # A start method of this platform (checked above), so one of the contexts that have Process.
        self._context = cast("SpawnContext | ForkContext | ForkServerContext", multiprocessing.get_context(self.start_method))
        self._weights: Any = None
        self._stop_event: Any = None
        self._ready_event: Any = None
        self._watchdog_stop = threading.Event()
        self._lock = threading.Lock()
        self._learn_frame: FrameType | None = None
        self._training_thread_id: int | None = None
        self._last_sync = -float("inf")
        self._warned_dead = False
        self._report: _ViewerReport | None = None
        self._warned_output = False

    # ----------------------------------------------------------------- callback hooks

    def _init_callback(self) -> None:
        self.resolved_mode = resolve_mode(self.mode)
        render_mode = "human" if self.resolved_mode == "human" else "rgb_array"
        if self.resolved_mode == "file":
            check_writable_dir("output_path's folder", os.path.dirname(self.output_path))
        check_declared_render_mode("env", self.env_id, self.env_kwargs, render_mode)

    def _on_training_start(self) -> None:
        self._learn_frame = _find_learn_frame(sys._getframe(), self.model)
        self._training_thread_id = threading.get_ident()
        if self.process is None or not self.process.is_alive():
            self._start_process()
        self._sync(force=True)
        self._watchdog_stop.clear()
        if self._learn_frame is not None and (self.watchdog is None or not self.watchdog.is_alive()):
            self.watchdog = threading.Thread(target=self._watch_training, name="live-view-watchdog", daemon=True)
            self.watchdog.start()

    def _on_rollout_start(self) -> None:
        self._sync()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self.close()

    # ----------------------------------------------------------------- process control

    def _start_process(self) -> None:
        policy = self.model.policy
        constructor = policy._get_constructor_parameters()
        constructor["lr_schedule"] = _zero_learning_rate  # the viewer never trains; user schedules may not pickle
        spec = cloudpickle.dumps((type(policy), constructor, self.env_wrapper))
        config = {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "render_mode": "human" if self.resolved_mode == "human" else "rgb_array",
            "output_path": self.output_path if self.resolved_mode == "file" else None,
            "fps": self.fps,
            "niceness": self.niceness,
            "max_episode_steps": self.max_episode_steps,
            "max_frames": self.max_frames,
            "downsample": self.downsample,
            "deterministic": self.deterministic,
            "seed": self.seed,
            "parent_pid": os.getpid(),
        }
        self._weights = self._context.Queue(maxsize=1)
        self._stop_event = self._context.Event()
        self._ready_event = self._context.Event()
        self._report = _ViewerReport(self._context)
        self._warned_output = False
        self.process = self._context.Process(
            target=_viewer_main,
            args=(spec, config, self._weights, self._stop_event, self._ready_event, self._report),
            name="live-view",
            daemon=True,
        )
        self.process.start()
        # Lower its priority from here at once, so that its start-up imports already run at low priority.
        _lower_priority(self.process.pid, self.niceness, self.idle_scheduling)
        self._warned_dead = False

    def _sync(self, force: bool = False) -> None:
        """Send the current weights and normalisation statistics, at most every ``sync_interval`` seconds."""
        if self.process is None or self._weights is None:
            return
        if not self.process.is_alive():
            if not self._warned_dead:
                warnings.warn(f"the live view process exited (exit code {self.process.exitcode}); training goes on without it")
                self._warned_dead = True
            return
        self._warn_if_write_failed()
        now = time.monotonic()
        if not force and now - self._last_sync < self.sync_interval:
            return
        state = {name: tensor.detach().cpu().numpy() for name, tensor in self.model.policy.state_dict().items()}
        try:
            self._weights.put_nowait((state, _normalization_state(self.training_env)))
            self._last_sync = now
        except queue.Full:  # the viewer has not taken the previous weights yet: send at the next update
            pass

    def _watch_training(self) -> None:
        """Stop the viewer as soon as ``learn()`` is no longer on the training thread's stack (ended or raised)."""
        while not self._watchdog_stop.wait(0.5):
            if not _frame_on_stack(self._learn_frame, self._training_thread_id):
                self.close()
                return

    def close(self) -> None:
        """Stop the viewer process and the watchdog thread; safe to call more than once and from any thread."""
        with self._lock:
            self._watchdog_stop.set()
            process, self.process = self.process, None
            if process is not None:
                self._stop_event.set()
                starting = not self._ready_event.is_set() and process.is_alive()
                if starting:
                    # Still importing / building its env: it has written nothing, so there is nothing to wait for.
                    process.terminate()
                process.join(self.stop_timeout)
                if process.is_alive():
                    process.terminate()
                    process.join(5.0)
                if process.is_alive():
                    process.kill()
                    process.join()
                self._warn_if_nothing_written(starting, process.exitcode)
            if self._weights is not None:
                self._weights.cancel_join_thread()  # never block on weights the dead viewer did not read
                self._weights.close()
                self._weights = None
            self._learn_frame = None
        watchdog = self.watchdog
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join()

    def _warn_if_write_failed(self) -> None:
        """Warn (once) when the headless viewer reported that it could not write :attr:`output_path`."""
        error = None if self._report is None else self._report.first_error()
        if error is not None:
            self._warn_once(f"LiveViewCallback could not write {self.output_path}: {error}")

    def _warn_if_nothing_written(self, stopped_while_starting: bool, exitcode: int | None) -> None:
        """After the viewer stopped: warn (once) when the headless view wrote no file, with the reason
        (:func:`missing_output_reason`)."""
        self._warn_if_write_failed()
        report = self._report
        if report is None or self.resolved_mode != "file":
            return
        frames = report.frames.value
        reason = missing_output_reason(
            stopped_while_starting=stopped_while_starting, frames=frames, written=report.written.value, exitcode=exitcode
        )
        if reason is None:
            return
        if stopped_while_starting or not frames:
            reason += (
                f". The viewer runs at low priority (niceness {self.niceness}"
                f"{', SCHED_IDLE' if self.idle_scheduling else ''}): on a busy machine it may get no CPU time; "
                "train longer, or lower niceness / pass idle_scheduling=False"
            )
        self._warn_once(f"LiveViewCallback wrote no {self.output_path}: {reason}")

    def _warn_once(self, message: str) -> None:
        if not self._warned_output:
            self._warned_output = True
            warnings.warn(message, UserWarning, stacklevel=3)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def missing_output_reason(*, stopped_while_starting: bool, frames: int, written: int, exitcode: int | None) -> str | None:
    """Why a stopped headless viewer wrote no file, or ``None`` when it wrote one.

    :param stopped_while_starting: it was stopped before it played (still importing, building its env).
    :param frames: frames it rendered.
    :param written: files it wrote.
    :param exitcode: its exit code (negative: ended by that signal).
    """
    if written:
        return None
    if stopped_while_starting:
        return "its process was still starting (importing, building its env) when training ended"
    if exitcode not in (0, None):
        return f"its process ended with exit code {exitcode} after {frames} frames"
    if not frames:
        return "it rendered no frame before training ended"
    return f"it rendered {frames} frames but wrote none"


class _ViewerReport:
    """What the viewer process reports about its output file, readable in the training process even after the
    viewer has ended: frames rendered and files written (shared memory), and its first error writing one (a pipe)."""

    def __init__(self, context: Any) -> None:
        self.frames = context.Value("q", 0, lock=False)
        self.written = context.Value("q", 0, lock=False)
        self._errors = context.SimpleQueue()
        self._error: str | None = None

    def write_failed(self, error: Exception) -> None:
        """Viewer side: report an error writing the file (the first only)."""
        if self._error is None:
            self._error = f"{type(error).__name__}: {error}"
            self._errors.put(self._error)

    def first_error(self) -> str | None:
        """Training side: the first error the viewer reported, or ``None``."""
        if self._error is None and not self._errors.empty():
            self._error = self._errors.get()
        return self._error


def _lower_priority(pid: int | None, niceness: int, idle_scheduling: bool) -> None:
    """Give process ``pid`` the niceness of this process plus ``niceness`` (capped at 19) and, with
    ``idle_scheduling`` on Linux, the ``SCHED_IDLE`` policy, where the OS allows it."""
    if pid is None or not hasattr(os, "setpriority"):
        return
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + niceness)
        os.setpriority(os.PRIO_PROCESS, pid, max(target, os.getpriority(os.PRIO_PROCESS, pid)))
        if idle_scheduling and hasattr(os, "SCHED_IDLE"):
            os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:  # the child already exited, or the platform refuses: it lowers itself when it starts
        pass


def _zero_learning_rate(_progress_remaining: float) -> float:
    return 0.0


def _normalization_state(training_env: Any) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    vec_normalize = find_vec_normalize(training_env)
    if vec_normalize is None or not vec_normalize.norm_obs or isinstance(vec_normalize.obs_rms, dict):
        return None
    rms = vec_normalize.obs_rms
    return rms.mean.copy(), rms.var.copy(), float(vec_normalize.epsilon), float(vec_normalize.clip_obs)


def _find_learn_frame(frame: FrameType | None, model: Any) -> FrameType | None:
    """The innermost ``learn`` frame of ``model`` above ``frame`` (the one that called ``on_training_start``)."""
    while frame is not None:
        if frame.f_code.co_name == "learn" and frame.f_locals.get("self") is model:
            return frame
        frame = frame.f_back
    return None


def _frame_on_stack(target: FrameType | None, thread_id: int | None) -> bool:
    if target is None or thread_id is None:
        return False
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


# --------------------------------------------------------------------- viewer process


def _viewer_main(spec: bytes, config: dict[str, Any], weights: Any, stop: Any, ready: Any, report: _ViewerReport) -> None:
    """Entry point of the viewer process; sets ``ready`` once it plays (from then on it stops only when asked)."""
    if not hasattr(os, "setpriority") and hasattr(os, "nice"):  # elsewhere the parent has lowered it already
        try:
            os.nice(config["niceness"])
        except OSError:
            pass
    if config["output_path"] is not None:  # headless: SDL-based renderers (pygame) need no display or sound
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    th.set_num_threads(1)
    policy_class, constructor, env_wrapper = cloudpickle.loads(spec)
    policy = policy_class(**constructor)
    policy.set_training_mode(False)
    env = make_render_env("env", config["env_id"], config["env_kwargs"], config["render_mode"], env_wrapper)
    ready.set()
    try:
        _view(policy, env, config, weights, stop, report)
    except Exception:
        traceback.print_exc()
        raise
    finally:
        env.close()
    # Everything it wrote is closed: skip the interpreter's teardown (about half a second of unloading torch and its
    # libraries at low priority), which ``close()`` in the training process would otherwise wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _view(policy: Any, env: gym.Env, config: dict[str, Any], weights: Any, stop: Any, report: _ViewerReport) -> None:
    output_path = config["output_path"]
    frame_interval = 1.0 / config["fps"]
    normalization = None
    frames: list[np.ndarray] = []
    written = 0
    steps = 0
    observation, _ = env.reset(seed=config["seed"])
    while not stop.is_set() and os.getppid() == config["parent_pid"]:
        started = time.monotonic()
        latest = _latest(weights)
        if latest is not None:
            state, normalization = latest
            policy.load_state_dict({name: th.as_tensor(value) for name, value in state.items()})
        action, _ = policy.predict(_normalize(observation, normalization), deterministic=config["deterministic"])
        observation, _, terminated, truncated, _ = env.step(action)
        steps += 1
        if output_path is not None and len(frames) < config["max_frames"]:
            frame = cast(np.ndarray, env.render())  # an output file: the env renders rgb_array frames
            frames.append(frame[:: config["downsample"], :: config["downsample"]])
            report.frames.value += 1
        if terminated or truncated or steps >= config["max_episode_steps"]:
            if output_path is not None and frames:
                written += _write_reported(output_path, frames, config["fps"], report)
            frames, steps = [], 0
            observation, _ = env.reset()
        stop.wait(max(0.0, frame_interval - (time.monotonic() - started)))
    if output_path is not None and frames and not written:
        _write_reported(output_path, frames, config["fps"], report)  # a short run still leaves something to look at


def _latest(weights: Any) -> Any:
    latest = None
    while True:
        try:
            latest = weights.get_nowait()
        except queue.Empty:
            return latest


def _normalize(observation: np.ndarray, normalization: tuple[np.ndarray, np.ndarray, float, float] | None) -> np.ndarray:
    if normalization is None:
        return observation
    mean, var, epsilon, clip = normalization
    return np.clip((observation - mean) / np.sqrt(var + epsilon), -clip, clip).astype(np.float32)


def _write_reported(path: str, frames: list[np.ndarray], fps: float, report: _ViewerReport) -> int:
    """Write the file (:func:`_write`) and count it in ``report``; an error is reported, not raised (the viewer plays
    on, and may write the next episode). Returns the number of files written, 0 or 1."""
    try:
        _write(path, frames, fps)
    except Exception as error:  # any failure to write is the user's to see, never the viewer's end
        report.write_failed(error)
        return 0
    report.written.value += 1
    return 1


def _write(path: str, frames: list[np.ndarray], fps: float) -> None:
    if path.lower().endswith(".gif"):
        write_gif(path, frames, fps)
    else:
        write_mp4(path, [pad_to_even(frame) for frame in frames], fps)

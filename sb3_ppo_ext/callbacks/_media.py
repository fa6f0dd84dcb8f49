"""Rolling out a policy on a rendering environment and writing the frames as MP4 / GIF with imageio."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from sb3_ppo_ext.callbacks._dependencies import require_module
from sb3_ppo_ext.files import atomic_path

#: ``observation -> action`` for one (unbatched) observation.
ActionFunction = Callable[[Any], Any]


def check_video_dependencies(purpose: str, gif: bool) -> None:
    """Raise ``ImportError`` now, not after training, when imageio (and ffmpeg for MP4) is missing."""
    require_module("imageio", purpose)
    require_module("imageio_ffmpeg", purpose)
    if gif:
        require_module("PIL", purpose)


def rollout_frames(env: gym.Env, act: ActionFunction, max_steps: int, seed: int | None = None) -> list[np.ndarray]:
    """Play one episode (at most ``max_steps`` steps) and return the rendered frames: the reset frame plus one per step.

    :param env: an environment created with ``render_mode="rgb_array"``.
    :param act: the policy, one raw observation in, one action out.
    :param max_steps: step limit of the episode.
    :param seed: seed of the reset (``None``: continue the env's random stream).
    """
    observation, _ = env.reset(seed=seed)
    frames = [_frame(env)]
    for _ in range(max_steps):
        observation, _, terminated, truncated, _ = env.step(act(observation))
        frames.append(_frame(env))
        if terminated or truncated:
            break
    return frames


def _frame(env: gym.Env) -> np.ndarray:
    frame = env.render()
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise RuntimeError(f"render() of {env} returned {type(frame).__name__}, expected an (H, W, 3) rgb array")
    return frame


@contextlib.contextmanager
def mp4_writer(path: str, fps: float) -> Iterator[Callable[[np.ndarray], None]]:
    """An H.264 MP4 written frame by frame as they come (a long video never waits in memory), atomically: readers
    never see a half-written file, and a failure inside the block leaves no file. Yields the function that appends a
    frame; odd frame sizes are padded to even ones (H.264 needs even sizes) rather than rescaled."""
    imageio = require_module("imageio", "writing an MP4")
    with (
        atomic_path(path) as temporary,
        imageio.v2.get_writer(temporary, format="FFMPEG", mode="I", fps=fps, macro_block_size=1) as writer,
    ):
        yield lambda frame: writer.append_data(pad_to_even(frame))


def write_mp4(path: str, frames: Sequence[np.ndarray], fps: float) -> None:
    """Write ``frames`` as an H.264 MP4 atomically (:func:`mp4_writer`)."""
    with mp4_writer(path, fps) as append:
        for frame in frames:
            append(frame)


def write_gif(path: str, frames: Sequence[np.ndarray], fps: float) -> None:
    """Write ``frames`` as a looping GIF atomically."""
    imageio = require_module("imageio", "writing a GIF")
    with atomic_path(path) as temporary:
        imageio.v3.imwrite(temporary, np.stack(frames), extension=".gif", plugin="pillow", duration=1000.0 / fps, loop=0)


def pad_to_even(frame: np.ndarray) -> np.ndarray:
    """Pad an (H, W, C) frame with edge pixels to even height and width."""
    pad_height, pad_width = frame.shape[0] % 2, frame.shape[1] % 2
    if not pad_height and not pad_width:
        return frame
    return np.pad(frame, ((0, pad_height), (0, pad_width), (0, 0)), mode="edge")


def env_fps(env: gym.Env, default: float = 30.0) -> float:
    """The environment's ``metadata["render_fps"]``, or ``default``."""
    fps = env.metadata.get("render_fps")
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else default

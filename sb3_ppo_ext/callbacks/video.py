"""Periodic videos of the current policy on a separate environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from sb3_ppo_ext.callbacks._media import check_video_dependencies, env_fps, rollout_frames, write_gif, write_mp4
from sb3_ppo_ext.callbacks._render_env import check_env_spec, check_env_wrapper, check_render_mode, make_render_env
from sb3_ppo_ext.callbacks._schedule import StepSchedule, check_frequency
from sb3_ppo_ext.callbacks._vec_normalize import observation_normalizer
from sb3_ppo_ext.files import check_writable_dir
from sb3_ppo_ext.validation import check_int, check_positive


class VideoRecorderCallback(BaseCallback):
    """Every ``video_freq`` environment steps, play the current policy on a separate env and write an MP4 (and GIF).

    Headless: the env renders in ``rgb_array`` mode and imageio (ffmpeg) writes the files
    ``<name_prefix>-step-<num_timesteps>.mp4`` / ``.gif`` in ``video_folder``. When the training env has a
    ``VecNormalize``, its observation statistics are applied to the evaluation observations (without updating them),
    so the policy sees what it sees in training. A video is also written when training ends.

    :param env: env id (created with ``render_mode="rgb_array"`` and ``env_kwargs``) or a ``gymnasium.Env`` already
        created with ``render_mode="rgb_array"``. It must not share state with the training env.
    :param video_freq: record every ``video_freq`` environment steps (``model.num_timesteps``), >= 1.
    :param video_folder: output folder (created; must be writable).
    :param n_episodes: episodes per video, >= 1.
    :param max_steps: step limit per episode, >= 1.
    :param deterministic: act with the deterministic policy (the distribution's mode).
    :param fps: frames per second of the files; ``None`` takes the env's ``render_fps`` (30 when it has none).
    :param gif: also write a GIF.
    :param mp4: write an MP4.
    :param name_prefix: file name prefix.
    :param env_kwargs: keyword arguments for ``gymnasium.make`` when ``env`` is an id.
    :param env_wrapper: applied to the env created from an id (e.g. the training env's wrappers; the zoo CLI passes
        the config's ``env_wrapper`` when ``env`` is the trained env's id).
    :param seed: seed of the first episode's reset of each video (``None``: not reseeded).
    :param record_on_training_end: also record when training ends.
    :param verbose: 0 silent, 1 or more: log each file written.
    """

    def __init__(
        self,
        env: str | gym.Env,
        video_freq: int,
        video_folder: str,
        n_episodes: int = 1,
        max_steps: int = 1000,
        deterministic: bool = True,
        fps: float | None = None,
        gif: bool = False,
        mp4: bool = True,
        name_prefix: str = "policy",
        env_kwargs: dict[str, Any] | None = None,
        seed: int | None = 0,
        record_on_training_end: bool = True,
        env_wrapper: Callable[[gym.Env], gym.Env] | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        check_env_spec("env", env, env_kwargs)
        if isinstance(env, gym.Env):
            check_render_mode("env", env, "rgb_array")
        #: The env id the played env is created from, as in :class:`~sb3_ppo_ext.callbacks.LiveViewCallback`;
        #: ``None`` when ``env`` is an env instance.
        self.env_id: str | None = env if isinstance(env, str) else None
        self._env_argument = env
        self.env_kwargs = dict(env_kwargs or {})
        self.env_wrapper = check_env_wrapper(env, env_wrapper)
        self.video_freq = check_frequency("video_freq", video_freq)
        self.video_folder = check_writable_dir("video_folder", video_folder)
        self.n_episodes = check_int("n_episodes", n_episodes, minimum=1)
        self.max_steps = check_int("max_steps", max_steps, minimum=1)
        self.fps = None if fps is None else check_positive("fps", fps)
        if not gif and not mp4:
            raise ValueError(f"at least one of mp4 and gif must be True, got mp4={mp4!r}, gif={gif!r}")
        if seed is not None:
            check_int("seed", seed, minimum=0)
        self.deterministic = bool(deterministic)
        self.gif = bool(gif)
        self.mp4 = bool(mp4)
        self.name_prefix = name_prefix
        self.seed = seed
        self.record_on_training_end = bool(record_on_training_end)
        check_video_dependencies("VideoRecorderCallback", self.gif)
        self.env: gym.Env | None = None
        self._schedule = StepSchedule(self.video_freq)
        self._last_recorded: int | None = None
        #: Paths of the files written so far.
        self.written: list[str] = []

    def _init_callback(self) -> None:
        check_writable_dir("video_folder", self.video_folder)
        if self.env is None:
            self.env = make_render_env("env", self._env_argument, self.env_kwargs, "rgb_array", self.env_wrapper)

    def _on_training_start(self) -> None:
        self._schedule.start(self.num_timesteps)

    def _on_step(self) -> bool:
        if self._schedule.due(self.num_timesteps):
            self.record()
        return True

    def _on_training_end(self) -> None:
        if self.record_on_training_end and self._last_recorded != self.num_timesteps:
            self.record()
        if self.env_id is not None:
            self.close()  # created here from the id: recreated by the next learn()

    def record(self) -> list[str]:
        """Record ``n_episodes`` now and write the files named after the current step count; return their paths."""
        if self.env is None:
            raise RuntimeError("record() needs the callback initialised: pass it to learn() or call init_callback(model)")
        normalize = observation_normalizer(self.training_env)

        def act(observation: Any) -> np.ndarray:
            action, _ = self.model.predict(normalize(observation), deterministic=self.deterministic)
            return action

        frames: list[np.ndarray] = []
        for episode in range(self.n_episodes):
            seed = None if self.seed is None or episode > 0 else self.seed
            frames.extend(rollout_frames(self.env, act, self.max_steps, seed=seed))
        fps = self.fps if self.fps is not None else env_fps(self.env)
        stem = os.path.join(self.video_folder, f"{self.name_prefix}-step-{self.num_timesteps}")
        paths = []
        if self.mp4:
            write_mp4(stem + ".mp4", frames, fps)
            paths.append(stem + ".mp4")
        if self.gif:
            write_gif(stem + ".gif", frames, fps)
            paths.append(stem + ".gif")
        self._last_recorded = self.num_timesteps
        self.written.extend(paths)
        if self.verbose >= 1:
            self.logger.info(f"Wrote {', '.join(paths)} ({len(frames)} frames)")
        return paths

    def close(self) -> None:
        """Close the evaluation environment."""
        if self.env is not None:
            self.env.close()
            self.env = None

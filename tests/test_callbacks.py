"""Training callbacks: checkpoints and resume, videos, live view, learning curves, normalisation freeze, together."""

from __future__ import annotations

import builtins
import csv
import functools
import glob
import importlib.util
import os
import struct
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import imageio
import numpy as np
import pytest
import torch as th
from PIL import Image
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.callbacks import (
    ExportPolicyCallback,
    FreezeNormalizationCallback,
    LearningCurveCallback,
    LiveViewCallback,
    PinObservationStatisticsCallback,
    RotatingCheckpointCallback,
    VideoRecorderCallback,
    checkpoint_defect,
    find_latest_checkpoint,
    list_checkpoints,
    remaining_timesteps,
    resume_from_checkpoint,
)
from sb3_ppo_ext.callbacks._render_env import make_render_env
from sb3_ppo_ext.callbacks._schedule import StepSchedule, next_multiple
from sb3_ppo_ext.callbacks.live_view import (
    _normalization_state,
    _normalize,
    _view,
    _ViewerReport,
    missing_output_reason,
    resolve_mode,
)
from sb3_ppo_ext.callbacks.plot import moving_average
from sb3_ppo_ext.files import atomic_write

#: Tests that render CartPole / Pendulum frames (gymnasium's classic-control renderer needs pygame).
needs_rendering = pytest.mark.skipif(
    importlib.util.find_spec("pygame") is None, reason="classic-control rendering needs pygame (gymnasium[classic-control])"
)
th.set_num_threads(1)
TINY = {"net_arch": [16]}


class NoRenderEnv(gym.Env):
    """An env that cannot render at all."""

    metadata: dict[str, Any] = {"render_modes": []}
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


gym.register("CallbackTestNoRender-v0", entry_point=lambda **kwargs: NoRenderEnv(**kwargs), max_episode_steps=10)


class SuccessAtTimeLimit(gym.Wrapper):
    """Reports ``is_success`` at episode end: success means the time limit was reached."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            info["is_success"] = bool(truncated)
        return observation, reward, terminated, truncated, info


class WaitForFile(BaseCallback):
    """Holds training at ``step`` until ``path`` exists (so that a background writer has had time to write)."""

    def __init__(self, path: str, step: int, timeout: float = 60.0):
        super().__init__()
        self.path, self.step, self.timeout = path, step, timeout

    def _on_step(self) -> bool:
        if self.num_timesteps == self.step:
            deadline = time.monotonic() + self.timeout
            while not os.path.exists(self.path) and time.monotonic() < deadline:
                time.sleep(0.1)
        return True


def _ppo(env, **kwargs) -> PPO:
    kwargs = {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "policy_kwargs": TINY, "seed": 0, **kwargs}
    return PPO("MlpPolicy", env, **kwargs)


def _normalized_env(env_id: str = "CartPole-v1", n_envs: int = 1, **kwargs) -> VecNormalize:
    return VecNormalize(make_vec_env(env_id, n_envs=n_envs, seed=0, **kwargs))


# --------------------------------------------------------------------- scheduling and file writes


def test_step_schedule_fires_once_per_multiple_and_resumes_on_the_grid():
    assert [next_multiple(value, 64) for value in (0, 63, 64, 65)] == [64, 64, 128, 128]
    schedule = StepSchedule(100)
    schedule.start(0)
    fired = [steps for steps in range(0, 401, 30) if schedule.due(steps)]  # counts jump by 30 (n_envs = 30)
    assert fired == [120, 210, 300]
    schedule.start(250)  # a resumed run: next firing at 300
    assert not schedule.due(299) and schedule.due(300) and not schedule.due(350)


def test_atomic_write_failure_keeps_the_previous_file(tmp_path):
    path = str(tmp_path / "file.bin")
    with atomic_write(path) as handle:
        handle.write(b"first")
    with pytest.raises(OSError, match="disk full"), atomic_write(path) as handle:
        handle.write(b"half of the sec")
        raise OSError("disk full")
    assert Path(path).read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["file.bin"]


# --------------------------------------------------------------------- checkpoints


def test_rotating_checkpoints_keep_the_newest_and_resume_where_training_stopped(tmp_path):
    folder = str(tmp_path / "checkpoints")
    env = _normalized_env("Pendulum-v1")
    model = _ppo(env, objective="kl_penalty", kl_coef=1.0, kl_penalty_target=1e-4, lr_kl_target=0.001, learning_rate=1e-3)
    callback = RotatingCheckpointCallback(save_freq=64, save_path=folder, keep_last=2)
    model.learn(256, callback=callback)

    kept = list_checkpoints(folder)
    assert [checkpoint.num_timesteps for checkpoint in kept] == [192, 256]
    assert all(checkpoint.vecnormalize_path is not None for checkpoint in kept)
    assert all(checkpoint.statistics_path == checkpoint.vecnormalize_path[:-4] + ".npz" for checkpoint in kept)
    assert len(glob.glob(os.path.join(folder, "*"))) == 6  # zip, pickle and plain-data statistics of each
    assert model.kl_penalty.coef != 1.0  # the adaptive state moved, so restoring it is meaningful

    fresh_env = make_vec_env("Pendulum-v1", n_envs=1, seed=1)
    resumed = resume_from_checkpoint(folder, fresh_env)
    assert resumed.num_timesteps == 256
    assert resumed.kl_penalty.coef == model.kl_penalty.coef
    assert resumed.adaptive_learning_rate == model.adaptive_learning_rate
    stats = resumed.get_vec_normalize_env()
    assert stats is not None
    np.testing.assert_array_equal(stats.obs_rms.mean, env.obs_rms.mean)
    assert stats.obs_rms.count == env.obs_rms.count
    for saved, restored in zip(model.policy.state_dict().values(), resumed.policy.state_dict().values(), strict=True):
        th.testing.assert_close(saved, restored)

    already_normalized = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=1))
    into_existing = resume_from_checkpoint(folder, already_normalized)
    assert into_existing.get_vec_normalize_env() is already_normalized  # no second VecNormalize on top
    np.testing.assert_array_equal(already_normalized.obs_rms.var, env.obs_rms.var)
    assert already_normalized.ret_rms.count == env.ret_rms.count

    total = 384
    resumed.learn(remaining_timesteps(resumed, total), callback=callback, reset_num_timesteps=False)
    assert resumed.num_timesteps == total
    assert resumed._total_timesteps == total  # schedules measure progress against the original total
    assert [checkpoint.num_timesteps for checkpoint in list_checkpoints(folder)] == [320, 384]
    assert find_latest_checkpoint(folder).num_timesteps == 384


def test_interrupted_checkpoint_write_leaves_the_previous_one_loadable(tmp_path, monkeypatch):
    folder = str(tmp_path / "checkpoints")
    env = _normalized_env()
    model = _ppo(env)
    callback = RotatingCheckpointCallback(save_freq=64, save_path=folder)
    model.learn(64, callback=callback)
    assert [checkpoint.num_timesteps for checkpoint in list_checkpoints(folder)] == [64]

    def crash_mid_write(path_or_file, *args, **kwargs):
        path_or_file.write(b"PK\x03\x04 half a zip")
        raise OSError("No space left on device")

    monkeypatch.setattr(model, "save", crash_mid_write)
    with pytest.raises(OSError, match="No space left"):
        model.learn(64, callback=callback, reset_num_timesteps=False)
    assert sorted(os.listdir(folder)) == [
        "rl_model_64_steps.zip",
        "rl_model_vecnormalize_64_steps.npz",
        "rl_model_vecnormalize_64_steps.pkl",
    ]
    latest = find_latest_checkpoint(folder)
    assert latest.num_timesteps == 64
    assert PPO.load(latest.model_path).num_timesteps == 64


def _flip_a_byte_inside(path: str) -> None:
    """Damage a zip in place without changing its size (a bad sector, a bit flip): one byte in the middle of its
    largest entry's data, so that the entry's CRC no longer matches."""
    with zipfile.ZipFile(path) as archive:
        entry = max(archive.infolist(), key=lambda info: info.compress_size)
    with open(path, "r+b") as handle:
        handle.seek(entry.header_offset + 26)  # the local header's file name and extra field lengths
        name_length, extra_length = struct.unpack("<HH", handle.read(4))
        handle.seek(entry.header_offset + 30 + name_length + extra_length + entry.compress_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


def test_a_damaged_newest_checkpoint_is_skipped_with_a_warning_naming_it(tmp_path):
    folder = str(tmp_path / "checkpoints")
    env = _normalized_env()
    model = _ppo(env)
    model.learn(192, callback=RotatingCheckpointCallback(save_freq=64, save_path=folder, keep_last=None))
    oldest, middle, newest = list_checkpoints(folder)
    assert checkpoint_defect(newest, needs_statistics=True) is None

    _flip_a_byte_inside(newest.model_path)
    assert "fails the CRC check" in checkpoint_defect(newest, needs_statistics=False)
    with pytest.warns(UserWarning, match=f"skipping the checkpoint {newest.model_path}: .*CRC"):
        resumed = resume_from_checkpoint(folder, make_vec_env("CartPole-v1", n_envs=1, seed=1))
    assert resumed.num_timesteps == middle.num_timesteps
    assert resumed.get_vec_normalize_env() is not None

    # Statistics missing from a series that has them, or cut short: the checkpoint is skipped too.
    os.unlink(middle.vecnormalize_path)
    with open(oldest.vecnormalize_path, "r+b") as handle:
        handle.truncate(os.path.getsize(oldest.vecnormalize_path) // 2)
    with pytest.warns(UserWarning) as caught:
        assert find_latest_checkpoint(folder) is None
    messages = [str(warning.message) for warning in caught]
    assert any(middle.model_path in message and "statistics file is missing" in message for message in messages)
    assert any(oldest.model_path in message and "not a complete pickle" in message for message in messages)
    with (
        pytest.warns(UserWarning),
        pytest.raises(FileNotFoundError, match=r"no intact checkpoint .* \(3 damaged ones skipped\)"),
    ):
        resume_from_checkpoint(folder, make_vec_env("CartPole-v1", n_envs=1, seed=1))
    # A run that does not normalise can still resume the middle one (its zip is intact).
    with pytest.warns(UserWarning, match="rl_model_192_steps.zip"):
        assert find_latest_checkpoint(folder, needs_statistics=False).num_timesteps == middle.num_timesteps


def test_a_truncated_zip_is_no_checkpoint(tmp_path):
    model_path = tmp_path / "rl_model_64_steps.zip"
    model_path.write_bytes(b"PK\x03\x04 half a zip")
    (checkpoint,) = list_checkpoints(str(tmp_path))
    assert "not a readable zip file" in checkpoint_defect(checkpoint, needs_statistics=False)


def test_leftovers_of_killed_writes_are_removed_when_the_callback_starts(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    kept = ["rl_model_64_steps.zip", "rl_model_vecnormalize_64_steps.pkl", "other_vecnormalize_128_steps.pkl", "notes.txt"]
    leftovers = [
        ".rl_model_128_steps.zip.abc123.tmp.zip",
        "rl_model_vecnormalize_128_steps.pkl",
        "rl_model_vecnormalize_128_steps.npz",
    ]
    for name in kept + leftovers:
        (folder / name).write_bytes(b"x")
    model = _ppo(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    callback = RotatingCheckpointCallback(save_freq=10_000, save_path=str(folder), save_on_training_end=False)
    callback.init_callback(model)
    assert sorted(os.listdir(folder)) == sorted(kept)


def test_checkpoint_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="save_freq must be >= 1, got 0"):
        RotatingCheckpointCallback(save_freq=0, save_path=str(tmp_path))
    with pytest.raises(ValueError, match="save_freq must be >= 1, got -5"):
        RotatingCheckpointCallback(save_freq=-5, save_path=str(tmp_path))
    with pytest.raises(ValueError, match="keep_last must be >= 1, got 0"):
        RotatingCheckpointCallback(save_freq=10, save_path=str(tmp_path), keep_last=0)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="save_path must be a folder that can be written"):
        RotatingCheckpointCallback(save_freq=10, save_path=str(blocker / "checkpoints"))
    if os.geteuid() != 0:  # root can write anywhere
        read_only = tmp_path / "read_only"
        read_only.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="save_path"):
            RotatingCheckpointCallback(save_freq=10, save_path=str(read_only))
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        resume_from_checkpoint(str(tmp_path), make_vec_env("CartPole-v1"))


# --------------------------------------------------------------------- videos


class RecordObservations(gym.ObservationWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.seen: list[np.ndarray] = []

    def observation(self, observation):
        self.seen.append(np.array(observation))
        return observation


@needs_rendering
def test_video_has_one_frame_per_step_and_uses_frozen_training_normalisation(tmp_path, monkeypatch):
    env = _normalized_env("Pendulum-v1")
    model = _ppo(env)
    eval_env = RecordObservations(gym.make("Pendulum-v1", render_mode="rgb_array"))
    callback = VideoRecorderCallback(eval_env, video_freq=64, video_folder=str(tmp_path), max_steps=12, gif=True, n_episodes=2)
    seen_by_policy = []
    predict = model.predict

    def spy(observation, *args, **kwargs):
        seen_by_policy.append(np.array(observation))
        return predict(observation, *args, **kwargs)

    model.learn(64)  # statistics exist before the callback records
    monkeypatch.setattr(model, "predict", spy)
    callback.init_callback(model)
    count_before = env.obs_rms.count
    callback.num_timesteps = model.num_timesteps
    mp4, gif = callback.record()
    assert env.obs_rms.count == count_before  # the evaluation did not update the statistics
    assert os.path.basename(mp4) == "policy-step-64.mp4" and os.path.basename(gif) == "policy-step-64.gif"
    assert imageio.get_reader(mp4).count_frames() == 2 * (12 + 1)  # reset frame + one per step, two episodes
    assert imageio.v3.imread(gif, index=None).shape[0] == 2 * (12 + 1)
    raw = np.array([obs for obs in eval_env.seen])
    raw_acting = np.concatenate([raw[0:12], raw[13:25]])  # the last observation of each episode is not acted on
    np.testing.assert_allclose(np.array(seen_by_policy), env.normalize_obs(raw_acting), rtol=1e-6)


def test_video_and_live_view_name_the_played_env_id_alike(tmp_path):
    """Both keep the env id under ``env_id`` (``None`` for an env instance)."""
    video = VideoRecorderCallback("CartPole-v1", video_freq=64, video_folder=str(tmp_path))
    live = LiveViewCallback("CartPole-v1", mode="file", output_path=str(tmp_path / "live.gif"))
    assert video.env_id == live.env_id == "CartPole-v1"
    instance = gym.make("CartPole-v1", render_mode="rgb_array")
    from_instance = VideoRecorderCallback(instance, video_freq=64, video_folder=str(tmp_path))
    assert from_instance.env_id is None
    instance.close()


@needs_rendering
def test_video_callback_records_during_training_with_step_in_name(tmp_path):
    model = _ppo(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    callback = VideoRecorderCallback("CartPole-v1", video_freq=128, video_folder=str(tmp_path), max_steps=5)
    model.learn(256, callback=callback)
    assert sorted(os.listdir(tmp_path)) == ["policy-step-128.mp4", "policy-step-256.mp4"]
    assert callback.env is None  # the env it created from the id is closed at the end


def test_off_screen_rendering_without_a_display_uses_sdls_dummy_driver_unless_the_user_chose_one(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(name, raising=False)
    make_render_env("env", "CartPole-v1", None, "rgb_array").close()
    assert os.environ.get("SDL_VIDEODRIVER") == ("dummy" if sys.platform not in ("darwin", "win32") else None)
    monkeypatch.setenv("SDL_VIDEODRIVER", "offscreen")
    make_render_env("env", "CartPole-v1", None, "rgb_array").close()
    assert os.environ["SDL_VIDEODRIVER"] == "offscreen"  # the user's choice stays


@needs_rendering
def test_video_callback_prints_no_wayland_error_headless(tmp_path):
    """From Python, as from the command line: SDL's Wayland probe printed "error: XDG_RUNTIME_DIR is invalid or not
    set" when the callback first rendered (a fresh process: SDL starts once)."""
    script = (
        "import sys\n"
        "from sb3_ppo_ext import PPO\n"
        "from sb3_ppo_ext.callbacks import VideoRecorderCallback\n"
        "model = PPO('MlpPolicy', 'CartPole-v1', n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={'net_arch': [8]})\n"
        "video = VideoRecorderCallback('CartPole-v1', video_freq=32, video_folder=sys.argv[1], max_steps=3)\n"
        "model.learn(32, callback=video)\n"
    )
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
    }
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env={**environment, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr + result.stdout
    assert glob.glob(str(tmp_path / "*.mp4"))


@needs_rendering
def test_video_env_created_from_an_id_gets_the_env_wrapper(tmp_path):
    model = _ppo(make_vec_env("Pendulum-v1", seed=0))
    short_episodes = functools.partial(gym.wrappers.TimeLimit, max_episode_steps=4)
    callback = VideoRecorderCallback(  # Pendulum: every frame differs (a GIF merges identical ones)
        "Pendulum-v1",
        video_freq=64,
        video_folder=str(tmp_path),
        max_steps=100,
        gif=True,
        mp4=False,
        env_wrapper=short_episodes,
    )
    model.learn(64, callback=callback)
    (gif,) = callback.written
    assert imageio.v3.imread(gif, index=None).shape[0] == 4 + 1  # the wrapper ended the episode: reset + 4 steps


def test_video_bad_inputs(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match="video_folder must be a folder that can be written"):
        VideoRecorderCallback("CartPole-v1", video_freq=10, video_folder=str(tmp_path / "a_file" / "videos"))
    with pytest.raises(ValueError, match="video_freq must be >= 1, got 0"):
        VideoRecorderCallback("CartPole-v1", video_freq=0, video_folder=str(tmp_path))
    with pytest.raises(ValueError, match="env must render in 'rgb_array' mode"):
        VideoRecorderCallback(gym.make("CartPole-v1"), video_freq=10, video_folder=str(tmp_path))
    with pytest.raises(ValueError, match="registered gymnasium env id"):
        VideoRecorderCallback("NoSuchEnv-v9", video_freq=10, video_folder=str(tmp_path))
    with pytest.raises(ValueError, match="env_wrapper must be a callable"):
        VideoRecorderCallback("CartPole-v1", video_freq=10, video_folder=str(tmp_path), env_wrapper="TimeLimit")
    with pytest.raises(ValueError, match="env_wrapper applies to an env created from an id"):
        VideoRecorderCallback(
            gym.make("CartPole-v1", render_mode="rgb_array"),
            video_freq=10,
            video_folder=str(tmp_path),
            env_wrapper=gym.wrappers.TimeLimit,
        )
    callback = VideoRecorderCallback("CallbackTestNoRender-v0", video_freq=10, video_folder=str(tmp_path))
    model = _ppo(make_vec_env("CartPole-v1"))
    with pytest.raises(ValueError, match="env must render in 'rgb_array' mode"):
        model.learn(64, callback=callback)  # at start, before any training step
    assert model.num_timesteps == 0
    _hide_module(monkeypatch, "imageio")
    with pytest.raises(ImportError, match=r"needs the optional dependency 'imageio': pip install 'sb3-ppo-ext\[video\]'"):
        VideoRecorderCallback("CartPole-v1", video_freq=10, video_folder=str(tmp_path))


def _hide_module(monkeypatch, module: str) -> None:
    real_import = builtins.__import__

    def import_without(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", import_without)
    for loaded in [name for name in sys.modules if name == module or name.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, loaded)


# --------------------------------------------------------------------- normalisation freeze


def test_freeze_stops_statistics_at_the_step_count(tmp_path):
    env = _normalized_env(n_envs=2)
    model = _ppo(env, n_steps=32)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    callback = FreezeNormalizationCallback(freeze_after_steps=101)
    model.learn(256, callback=callback)
    assert callback.frozen_at_step == 102  # two envs: the count goes 100 -> 102
    assert env.training is False and env.norm_reward is True
    # 2 reset observations + 102 step observations (+ RunningMeanStd's initial epsilon count)
    assert env.obs_rms.count == pytest.approx(1e-4 + 2 + 102)
    with open(tmp_path / "progress.csv") as handle:
        logged = [row["normalization/frozen_at_step"] for row in csv.DictReader(handle)]
    assert "102" in logged


def test_freeze_after_resume_past_the_step_is_immediate_and_needs_vecnormalize():
    env = _normalized_env()
    model = _ppo(env)
    model.learn(64)
    count = env.obs_rms.count
    callback = FreezeNormalizationCallback(freeze_after_steps=10)
    model.learn(64, callback=callback, reset_num_timesteps=False)
    assert callback.frozen_at_step == 64 and env.obs_rms.count == count
    with pytest.raises(ValueError, match="freeze_after_steps must be >= 1, got 0"):
        FreezeNormalizationCallback(freeze_after_steps=0)
    with pytest.raises(ValueError, match="needs a training env wrapped in VecNormalize"):
        _ppo(make_vec_env("CartPole-v1")).learn(64, callback=FreezeNormalizationCallback(freeze_after_steps=10))


def test_pinned_entries_reach_the_policy_unnormalised_and_are_saved_so():
    env = _normalized_env("Pendulum-v1", n_envs=2)  # cos, sin, angular velocity
    model = _ppo(env, n_steps=32)
    model.learn(2048, callback=PinObservationStatisticsCallback(indices=[0, -1]))
    # written back after every step: exact at the end of training, whatever the last update did
    assert env.obs_rms.mean[[0, 2]].tolist() == [0.0, 0.0] and env.obs_rms.var[[0, 2]].tolist() == [1.0, 1.0]
    assert env.obs_rms.var[1] != 1.0  # the other entries keep their statistics
    raw = env.get_original_obs()
    normalised = env.normalize_obs(raw)
    np.testing.assert_allclose(normalised[:, [0, 2]], np.clip(raw[:, [0, 2]], -env.clip_obs, env.clip_obs), rtol=1e-6)
    # during training the policy saw them within one step's drift of the raw values
    rollout_observations = model.rollout_buffer.observations.reshape(-1, 3)
    assert np.abs(rollout_observations[:, 0]).max() <= 1.0 + 1e-2


def test_pinning_rejects_bad_indices_and_needs_observation_normalisation():
    with pytest.raises(ValueError, match="non-empty list"):
        PinObservationStatisticsCallback(indices=[])
    with pytest.raises(ValueError, match="non-empty list"):
        PinObservationStatisticsCallback(indices="20")
    with pytest.raises(ValueError, match="out of range for an observation of 3 entries"):
        _ppo(_normalized_env("Pendulum-v1")).learn(64, callback=PinObservationStatisticsCallback(indices=[3]))
    with pytest.raises(ValueError, match="norm_obs=True"):
        _ppo(VecNormalize(make_vec_env("Pendulum-v1"), norm_obs=False)).learn(
            64, callback=PinObservationStatisticsCallback(indices=[0])
        )


# --------------------------------------------------------------------- learning curve


def test_moving_average_by_hand():
    np.testing.assert_allclose(moving_average(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(moving_average(np.array([2.0, 4.0, 9.0]), 5), [2.0, 3.0, 5.0])
    assert moving_average(np.array([]), 3).size == 0
    with pytest.raises(ValueError, match="window must be >= 1"):
        moving_average(np.ones(3), 0)
    with pytest.raises(ValueError, match="window must be >= 1"):
        moving_average(np.ones(3), 0)


def test_learning_curve_png_with_returns_success_and_adaptive_kl(tmp_path):
    path = str(tmp_path / "plots" / "curve.png")
    env = VecNormalize(
        make_vec_env("CartPole-v1", n_envs=2, seed=0, wrapper_class=SuccessAtTimeLimit, env_kwargs={"max_episode_steps": 20})
    )
    model = _ppo(env, objective="kl_penalty", kl_penalty_target=0.01, lr_kl_target=0.01, learning_rate=1e-3, n_steps=32)
    callback = LearningCurveCallback(plot_freq=128, plot_path=path)
    model.learn(256, callback=callback)
    assert Image.open(path).format == "PNG"
    labels = [label for label, _, _ in callback.panels()]
    assert labels == ["episode return (raw)", "success rate", "KL(old || new)", "KL penalty beta", "learning rate"]
    returns = np.array(callback.episode_returns.values)
    assert returns.max() <= 20 and np.all(returns == np.round(returns))  # raw CartPole returns, not normalised ones
    assert set(callback.successes.values) <= {0.0, 1.0}
    updates = 256 // 64  # one point per update, the last one (read when training ends) included
    assert callback.train_curves["train/kl"].steps == [64, 128, 192, 256]
    assert len(callback.train_curves["train/kl_coef"]) == len(callback.train_curves["train/learning_rate"]) == updates
    assert callback.train_curves["train/kl_coef"].values[0] == 1.0  # the beta of the first update: kl_coef's default


def test_learning_curve_with_sb3_ppo_plots_only_the_learning_rate(tmp_path):
    model = SB3PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1, policy_kwargs=TINY, seed=0)
    callback = LearningCurveCallback(plot_freq=64, plot_path=str(tmp_path / "curve.png"))
    model.learn(128, callback=callback)
    assert [label for label, _, _ in callback.panels()] == ["episode return (raw)", "learning rate"]
    assert Image.open(tmp_path / "curve.png").size[0] > 0


def test_learning_curve_bad_inputs(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="plot_freq must be >= 1, got -1"):
        LearningCurveCallback(plot_freq=-1, plot_path=str(tmp_path / "c.png"))
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match="plot_path's folder must be a folder that can be written"):
        LearningCurveCallback(plot_freq=10, plot_path=str(tmp_path / "a_file" / "c.png"))
    with pytest.raises(ValueError, match=r"plot_path must be a path ending in \.png"):
        LearningCurveCallback(plot_freq=10, plot_path=str(tmp_path / "c.jpg"))
    _hide_module(monkeypatch, "matplotlib")
    with pytest.raises(ImportError, match="'matplotlib'"):
        LearningCurveCallback(plot_freq=10, plot_path=str(tmp_path / "c.png"))


# --------------------------------------------------------------------- live view


def _live_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "live-view-watchdog"]


class KeepProcess(BaseCallback):
    """Keeps a handle on the live view's process (the callback drops its own when it stops it) and its niceness."""

    def __init__(self, live: LiveViewCallback):
        super().__init__()
        self.live = live
        self.process: Any = None
        self.niceness: int | None = None
        self.policy: int | None = None

    def _on_step(self) -> bool:
        if self.process is None and self.live.process is not None:
            self.process = self.live.process
            self.niceness = os.getpriority(os.PRIO_PROCESS, self.process.pid) - os.getpriority(os.PRIO_PROCESS, 0)
            self.policy = os.sched_getscheduler(self.process.pid) if hasattr(os, "sched_getscheduler") else None
        return True


class RaiseWhenViewerPlays(BaseCallback):
    """Fails training once the live view's process is playing (so that its clean stop is what gets tested)."""

    def __init__(self, live: LiveViewCallback, timeout: float = 60.0):
        super().__init__()
        self.live, self.timeout = live, timeout

    def _on_step(self) -> bool:
        self.live._ready_event.wait(self.timeout)
        raise RuntimeError("simulated failure during training")


@needs_rendering
def test_live_view_refreshes_a_gif_and_stops_when_training_ends(tmp_path):
    path = str(tmp_path / "live.gif")
    env = _normalized_env()
    # Normal scheduling here: on a CI machine whose cores are all busy an idle-class viewer may get no CPU at all,
    # and this test is about the clean stop (the low priority is checked in the "still starting" test).
    live = LiveViewCallback(
        "CartPole-v1",
        mode="file",
        output_path=path,
        fps=200,
        sync_interval=0.0,
        max_frames=20,
        niceness=3,
        idle_scheduling=False,
    )
    keep = KeepProcess(live)
    model = _ppo(env)
    model.learn(192, callback=[live, keep, WaitForFile(path, step=64)])
    assert keep.niceness == 3 or os.getpriority(os.PRIO_PROCESS, 0) + 3 > 19
    assert live.process is None and not keep.process.is_alive() and keep.process.exitcode == 0
    assert not _live_threads()
    frames = imageio.v3.imread(path, index=None)
    assert 1 <= frames.shape[0] <= 20 and frames.shape[1:] == (200, 300, 3)  # 400 x 600 downsampled by 2


@needs_rendering
def test_live_view_plays_the_env_through_the_env_wrapper(tmp_path):
    path = str(tmp_path / "live.gif")
    live = LiveViewCallback(  # Pendulum: every frame differs (a GIF merges identical ones)
        "Pendulum-v1",
        mode="file",
        output_path=path,
        fps=200,
        sync_interval=0.0,
        max_frames=50,
        niceness=3,
        idle_scheduling=False,
        env_wrapper=functools.partial(gym.wrappers.TimeLimit, max_episode_steps=3),
    )
    _ppo(make_vec_env("Pendulum-v1")).learn(192, callback=[live, WaitForFile(path, step=64)])
    assert imageio.v3.imread(path, index=None).shape[0] == 3  # one frame per step of a 3-step episode


@needs_rendering
def test_live_view_stops_when_training_fails(tmp_path):
    live = LiveViewCallback(
        "CartPole-v1", mode="file", output_path=str(tmp_path / "live.mp4"), niceness=0, idle_scheduling=False, stop_timeout=30
    )
    keep = KeepProcess(live)
    with pytest.raises(RuntimeError, match="simulated failure"):
        _ppo(make_vec_env("CartPole-v1")).learn(512, callback=[live, keep, RaiseWhenViewerPlays(live)])
    assert keep.process is not None
    deadline = time.monotonic() + 45
    while (keep.process.is_alive() or _live_threads()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not keep.process.is_alive() and not _live_threads()
    assert keep.process.exitcode == 0  # it stopped when asked, it was not killed


def test_live_view_still_starting_is_terminated_at_once_when_training_ends(tmp_path):
    live = LiveViewCallback("CartPole-v1", mode="file", output_path=str(tmp_path / "live.gif"), niceness=19)
    keep = KeepProcess(live)
    model = _ppo(make_vec_env("CartPole-v1"))
    started = time.monotonic()
    # What a busy machine gave a user: no file, and now a warning that says why (once).
    with pytest.warns(UserWarning, match=r"wrote no .*live\.gif: its process was still starting .*\(niceness 19") as caught:
        model.learn(64, callback=[live, keep])
    assert len([warning for warning in caught if "LiveViewCallback" in str(warning.message)]) == 1
    assert time.monotonic() - started < 10  # no waiting for a viewer that has not started playing
    assert not keep.process.is_alive() and not _live_threads()
    # The viewer runs below the trainer: niceness 19 (relative) and, on Linux, the idle scheduling class.
    assert keep.niceness == 19 or os.getpriority(os.PRIO_PROCESS, 0) > 0
    assert keep.policy == getattr(os, "SCHED_IDLE", None)


def test_why_a_stopped_live_view_wrote_no_file():
    assert missing_output_reason(stopped_while_starting=False, frames=40, written=2, exitcode=0) is None
    assert "still starting" in missing_output_reason(stopped_while_starting=True, frames=0, written=0, exitcode=-15)
    assert missing_output_reason(stopped_while_starting=False, frames=0, written=0, exitcode=0) == (
        "it rendered no frame before training ended"
    )
    assert missing_output_reason(stopped_while_starting=False, frames=3, written=0, exitcode=-9) == (
        "its process ended with exit code -9 after 3 frames"
    )


class _StopAfter:
    """The viewer's stop event, set after ``steps`` steps (its frame-rate wait returns at once)."""

    def __init__(self, steps: int) -> None:
        self.steps, self.checks = steps, 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks > self.steps

    def wait(self, _seconds: float) -> bool:
        return False


@needs_rendering
def test_live_view_reports_that_it_cannot_write_its_file_and_plays_on(tmp_path):
    """The viewer's loop, run here: a file that cannot be written is reported with the reason (once), not raised."""
    import multiprocessing
    import queue as queue_module

    report = _ViewerReport(multiprocessing.get_context("spawn"))
    config = {
        "output_path": str(tmp_path / "missing-folder" / "live.gif"),
        "fps": 1000.0,
        "seed": 0,
        "deterministic": True,
        "max_frames": 10,
        "downsample": 4,
        "max_episode_steps": 3,
        "parent_pid": os.getppid(),
    }
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    _view(_ppo(make_vec_env("CartPole-v1")).policy, env, config, queue_module.Queue(), _StopAfter(7), report)
    env.close()
    assert report.frames.value == 7 and report.written.value == 0  # two full episodes of 3 steps, then 1 step
    assert report.first_error().startswith("FileNotFoundError: ") and report.first_error() == report.first_error()
    report._errors.get()
    assert report._errors.empty()  # the first failure only was sent to the training process
    live = LiveViewCallback("CartPole-v1", mode="file", output_path=str(tmp_path / "live.gif"))
    live.resolved_mode, live._report = "file", report  # what the training process reads from that viewer
    with pytest.warns(UserWarning, match=r"LiveViewCallback could not write .*live\.gif: FileNotFoundError"):
        live._warn_if_write_failed()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        live._warn_if_nothing_written(False, 0)  # said once


def test_live_view_normalises_like_the_training_vecnormalize_without_updating_it():
    env = _normalized_env("Pendulum-v1")
    _ppo(env).learn(64)
    count = env.obs_rms.count
    state = _normalization_state(env)
    raw = np.random.default_rng(0).normal(size=3).astype(np.float32) * 20.0
    np.testing.assert_allclose(_normalize(raw, state), env.normalize_obs(raw), rtol=1e-6)
    assert env.obs_rms.count == count and state[0] is not env.obs_rms.mean  # a copy travels, not the live array
    assert _normalization_state(make_vec_env("Pendulum-v1")) is None
    np.testing.assert_array_equal(_normalize(raw, None), raw)


def test_live_view_bad_inputs(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="mode must be one of"):
        LiveViewCallback("CartPole-v1", mode="window", output_path=str(tmp_path / "v.gif"))
    with pytest.raises(ValueError, match=r"fps must be a finite number|fps must be > 0"):
        LiveViewCallback("CartPole-v1", fps=0, output_path=str(tmp_path / "v.gif"))
    with pytest.raises(ValueError, match="output_path must be a file path ending in one of"):
        LiveViewCallback("CartPole-v1", mode="file", output_path=str(tmp_path / "v.avi"))
    with pytest.raises(ValueError, match="env must be an env id string"):
        LiveViewCallback(gym.make("CartPole-v1"), output_path=str(tmp_path / "v.gif"))
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError, match="output_path's folder must be a folder that can be written"):
        LiveViewCallback("CartPole-v1", mode="file", output_path=str(tmp_path / "a_file" / "v.gif"))
    with pytest.raises(ValueError, match="niceness must be <= 19"):
        LiveViewCallback("CartPole-v1", niceness=40, output_path=str(tmp_path / "v.gif"))
    live = LiveViewCallback("CallbackTestNoRender-v0", mode="file", output_path=str(tmp_path / "v.gif"))
    with pytest.raises(ValueError, match="env must render in 'rgb_array' mode"):
        _ppo(make_vec_env("CartPole-v1")).learn(64, callback=live)
    assert live.process is None
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert resolve_mode("auto") == ("human" if sys.platform in ("darwin", "win32") else "file")
    monkeypatch.setenv("DISPLAY", ":0")
    assert resolve_mode("auto") == "human" and resolve_mode("file") == "file"


# --------------------------------------------------------------------- all together


@needs_rendering
def test_all_callbacks_together_with_progress_bar_csv_and_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    model = _ppo(env, n_steps=32, objective="clip_kl_penalty", tensorboard_log=str(tmp_path / "tb"))
    model.set_logger(configure(str(tmp_path / "log"), ["csv", "tensorboard", "stdout"]))
    callbacks = CallbackList(
        [
            RotatingCheckpointCallback(save_freq=64, save_path=str(tmp_path / "checkpoints"), keep_last=2),
            VideoRecorderCallback("Pendulum-v1", video_freq=128, video_folder=str(tmp_path / "videos"), max_steps=5),
            LiveViewCallback("Pendulum-v1", mode="file", output_path=str(tmp_path / "live.gif"), fps=100),
            LearningCurveCallback(plot_freq=64, plot_path=str(tmp_path / "curve.png")),
            FreezeNormalizationCallback(freeze_after_steps=128),
            ExportPolicyCallback(str(tmp_path / "export"), formats="onnx,torchscript"),
        ]
    )
    model.learn(256, callback=callbacks, progress_bar=True)
    assert [checkpoint.num_timesteps for checkpoint in list_checkpoints(str(tmp_path / "checkpoints"))] == [192, 256]
    assert sorted(os.listdir(tmp_path / "videos")) == ["policy-step-128.mp4", "policy-step-256.mp4"]
    assert os.path.exists(tmp_path / "curve.png")
    assert sorted(os.listdir(tmp_path / "export")) == ["policy.onnx", "policy.pt"]
    assert env.training is False
    assert not _live_threads()
    with open(tmp_path / "log" / "progress.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 256 // 64 and {"train/kl", "train/kl_coef", "normalization/frozen_at_step"} <= set(rows[0])
    assert glob.glob(str(tmp_path / "log" / "events.out.tfevents.*"))


def test_zoo_yaml_callback_entries_build_every_callback(tmp_path):
    """rl-zoo3 builds `module.ClassName(**kwargs)` from the YAML `callback:` list: plain values must be enough."""
    yaml = pytest.importorskip("yaml")
    zoo_utils = pytest.importorskip("rl_zoo3.utils")
    config = yaml.safe_load(
        f"""
        callback:
          - sb3_ppo_ext.callbacks.RotatingCheckpointCallback:
              save_freq: 64
              save_path: {tmp_path}/checkpoints
              keep_last: 2
          - sb3_ppo_ext.callbacks.VideoRecorderCallback:
              env: Pendulum-v1
              env_kwargs: {{g: 9.81}}
              video_freq: 128
              video_folder: {tmp_path}/videos
              gif: true
          - sb3_ppo_ext.callbacks.LiveViewCallback:
              env: Pendulum-v1
              mode: file
              output_path: {tmp_path}/live.gif
          - sb3_ppo_ext.callbacks.LearningCurveCallback:
              plot_freq: 64
              plot_path: {tmp_path}/curve.png
          - sb3_ppo_ext.callbacks.FreezeNormalizationCallback:
              freeze_after_steps: 128
          - sb3_ppo_ext.callbacks.ExportPolicyCallback:
              output_dir: {tmp_path}/export
              formats: onnx,torchscript
        """
    )
    callbacks = zoo_utils.get_callback_list(config)
    assert [type(callback).__name__ for callback in callbacks] == [
        "RotatingCheckpointCallback",
        "VideoRecorderCallback",
        "LiveViewCallback",
        "LearningCurveCallback",
        "FreezeNormalizationCallback",
        "ExportPolicyCallback",
    ]
    assert callbacks[1].env_kwargs == {"g": 9.81} and callbacks[5].formats == ["onnx", "torchscript"]


def test_atomic_writes_keep_ordinary_file_modes(tmp_path):
    """New files get the mode a plain open() gives (not mkstemp's 0600); a replaced file keeps its mode."""
    from sb3_ppo_ext.files import atomic_write

    umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.bin"
        with atomic_write(str(fresh)) as handle:
            handle.write(b"x")
        assert fresh.stat().st_mode & 0o777 == 0o644
        fresh.chmod(0o640)
        with atomic_write(str(fresh)) as handle:
            handle.write(b"y")
        assert fresh.stat().st_mode & 0o777 == 0o640 and fresh.read_bytes() == b"y"
    finally:
        os.umask(umask)

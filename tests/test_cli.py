"""The ``sb3-ppo-ext`` command as a new user meets it: one-line user errors (``--debug`` for the traceback), help
texts that show our defaults, ``-n`` checked, runs of any algorithm found by env id, quiet headless rendering."""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from typing import Any

import gymnasium as gym
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.running_mean_std import RunningMeanStd

from sb3_ppo_ext import PPO
from sb3_ppo_ext.callbacks._render_env import headless_sdl_settings
from sb3_ppo_ext.cli import is_user_error, main
from sb3_ppo_ext.zoo.commands import NO_PROGRESS, amend_parser
from sb3_ppo_ext.zoo.run_selection import (
    Run,
    holds_model,
    holds_only_setup_files,
    list_runs,
    missing_run_message,
    model_file_pattern,
    newest_run,
)

#: A config whose budget is tiny, so that a train command that ignored -n would end quickly (and fail its test).
TINY_CONFIG = "CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 64\n  n_envs: 1\n  n_steps: 64\n  batch_size: 64\n"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def normalised_help(argv: list[str], capsys) -> str:
    """The ``--help`` text of a command with its line breaks and indentation removed."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def quiet(folder) -> list[str]:
    return ["-f", str(folder), "--seed", "0", "--eval-freq", "-1", "--no-progress", "--verbose", "0", "--num-threads", "1"]


# --- -n and one-line user errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_timesteps", ["-5", "0"])
def test_train_refuses_a_budget_below_one(n_timesteps, tmp_path, user_error):
    config = tmp_path / "tiny.yml"
    config.write_text(TINY_CONFIG)
    line = user_error(["train", "--env", "CartPole-v1", "-conf", str(config), "-n", n_timesteps, *quiet(tmp_path)])
    assert line.startswith(f"sb3-ppo-ext train: error: argument -n/--n-timesteps: must be >= 1, got {n_timesteps}")
    assert not os.path.exists(tmp_path / "ppo_ext")  # nothing trained


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--env", "CartPole-v2"], "CartPole-v2 not found in gym registry, you maybe meant CartPole-v1?"),
        (["--env", "CartPole-v1", "-n", "64", "--hyperparams", "n_steps:-5"], "n_steps"),
        (["--env", "CartPole-v1", "-n", "64", "--hyperparams", "n_step:64"], "unknown key 'n_step'"),
        (["--env", "CartPole-v1", "-conf", "missing.yml"], "No such file or directory: 'missing.yml'"),
        (["--env", "CartPole-v1", "-conf", "hyperparams.py"], "conf_file must be a YAML file"),
        (
            ["--env", "CartPole-v1", "--hyperparams", "objective:kl_penalty"],
            "string values need quotes: objective:\"'kl_penalty'\"",
        ),
        (
            ["--env", "CartPole-v1", "--n-timestpes", "64"],
            "unrecognized arguments: --n-timestpes 64 (did you mean --n-timesteps?)",
        ),
    ],
    ids=["env-id", "value", "key", "missing-config", "python-config", "unquoted-string", "misspelt-option"],
)
def test_user_errors_are_one_line(extra, message, tmp_path, user_error):
    line = user_error(["train", *extra, *quiet(tmp_path)])
    assert line.startswith("sb3-ppo-ext train: error: ")
    assert message in line


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(ValueError, match="CartPole-v2 not found in gym registry"):
        main(["train", "--env", "CartPole-v2", "--debug", *quiet(tmp_path)])


class _FailingCallback(BaseCallback):
    def _on_step(self) -> bool:
        raise ValueError("raised while training")


def test_errors_while_learning_and_other_types_are_not_user_errors():
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, policy_kwargs={"net_arch": [4]}, device="cpu")
    with pytest.raises(ValueError) as learning:
        model.learn(8, callback=_FailingCallback())
    assert not is_user_error(learning.value)
    with pytest.raises(gym.error.NameNotFound) as unknown_env:
        gym.make("CartPol-v1")
    assert is_user_error(unknown_env.value)
    assert is_user_error(ValueError("n_steps must be >= 1"))
    assert is_user_error(FileNotFoundError(2, "No such file or directory", "x.yml"))
    assert not is_user_error(AssertionError())  # nothing to say in one line
    assert not is_user_error(KeyError("n_steps"))
    assert not is_user_error(TypeError("unsupported operand"))


def test_an_internal_error_keeps_its_traceback(monkeypatch):
    from sb3_ppo_ext.zoo import commands

    def broken(argv):
        raise TypeError("a bug")

    monkeypatch.setattr(commands, "plot", broken)
    with pytest.raises(TypeError, match="a bug"):
        main(["plot", "--env", "CartPole-v1"])


# --- help texts ---------------------------------------------------------------------------------------------------


def test_train_help_shows_our_defaults_options_and_refusals(capsys):
    text = normalised_help(["train", "--help"], capsys)
    assert "--no-progress no progress bar" in text
    assert "--debug show the traceback of an error" in text
    assert "RL algorithm (default: ppo_ext, our PPO" in text
    assert "Python config files and packages are refused" in text
    assert "python package from which" not in text  # rl-zoo3's own -conf help
    assert "training steps, >= 1" in text


def test_enjoy_help_is_only_the_help(monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    text = normalised_help(["enjoy", "--help"], capsys)
    assert text.startswith("usage: sb3-ppo-ext enjoy")  # no "No display found" before it
    assert "default: the algorithm of the newest run of --env under --folder" in text
    assert "--debug" in text


def test_grid_is_a_command_of_sb3_ppo_ext(tmp_path, monkeypatch, capsys, user_error):
    """``sb3-ppo-ext grid``: the learning grids' subcommands through the main entry point, with their own help, a grid
    file's relative ``conf`` read from the current directory, and a mistake in one line."""
    text = normalised_help(["grid", "--help"], capsys)
    assert text.startswith("usage: sb3-ppo-ext grid")
    for subcommand in ("run", "snapshot", "evaluate", "failures", "collect", "report"):
        assert subcommand in text
    assert normalised_help(["grid", "run", "--help"], capsys).startswith("usage: sb3-ppo-ext grid run")
    main(["--help"])
    assert "sb3-ppo-ext grid run GRID.yml --root RUNS --jobs 2" in " ".join(capsys.readouterr().out.split())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yml").write_text(TINY_CONFIG)
    (tmp_path / "grid.yml").write_text(
        "variants: {tiny: {conf: my.yml}}\ntasks:\n  CartPole-v1: {seeds: [0, 1], n_timesteps: 64}\n"
    )
    main(["grid", "run", "grid.yml", "--root", "runs", "--jobs", "2", "--dry-run"])
    commands = capsys.readouterr().out.splitlines()
    assert len(commands) == 2
    for seed, command in enumerate(commands):
        assert command.startswith("sb3-ppo-ext train ")
        assert f"--conf-file {tmp_path / 'my.yml'}" in command
        assert f"--seed {seed}" in command
    assert not (tmp_path / "runs").exists()
    assert user_error(["grid", "run", "grid.yml", "--root", "runs", "--jobs", "0"]).startswith(
        "sb3-ppo-ext grid: error: --jobs must be >= 1"
    )
    assert user_error(["grid", "run", "missing.yml", "--root", "runs", "--dry-run"]).startswith("sb3-ppo-ext grid: error: ")


def test_no_progress_overrides_the_progress_default():
    parser = argparse.ArgumentParser()
    parser.add_argument("-P", "--progress", action="store_true", default=False)
    amend_parser(parser, {"--progress": {"help": "a bar"}}, [NO_PROGRESS])
    assert parser.parse_args(["--progress", "--no-progress"]).progress is False
    assert parser.parse_args(["--progress"]).progress is True
    assert parser._option_string_actions["--progress"].help == "a bar"


# --- runs of any algorithm ----------------------------------------------------------------------------------------


def test_the_newest_run_of_an_env_decides_the_algorithm(tmp_path):
    runs = [
        Run("ppo", "Pendulum-v1", 1, 10.0),
        Run("ddpg", "Pendulum-v1", 1, 20.0),
        Run("ppo", "Pendulum-v1", 2, 15.0),
        Run("ppo_ext", "CartPole-v1", 1, 30.0),
    ]
    assert newest_run(runs, "Pendulum-v1").algo == "ddpg"
    assert newest_run(runs, "Pendulum-v1", number=2).algo == "ppo"
    assert newest_run(runs, "Acrobot-v1") is None
    assert (
        missing_run_message(runs, "logs", "Pendulum-v1", 3)
        == "no run Pendulum-v1_3 under logs/<algo>/ (runs of Pendulum-v1: [1, 2])"
    )
    assert missing_run_message(runs, "logs", "Pendulum-v2").endswith("; did you mean Pendulum-v1?")
    assert missing_run_message([], "logs", "Pendulum-v1").startswith("no run under logs/")
    for name in ("ppo/Pendulum-v1_1", "ppo/Pendulum-v1_2", "ppo/Pendulum-v1_x", "ddpg/Pendulum-v1_1", "tb/Pendulum-v1_1"):
        (tmp_path / name).mkdir(parents=True)
    found = [(run.algo, run.env_name, run.number) for run in list_runs(str(tmp_path), ["ppo", "ddpg", "sac"])]
    assert found == [("ddpg", "Pendulum-v1", 1), ("ppo", "Pendulum-v1", 1), ("ppo", "Pendulum-v1", 2)]


@pytest.fixture(scope="module")
def sb3_ppo_run(tmp_path_factory):
    """A tiny run of SB3's PPO (``--algo ppo``) on Pendulum-v1, and an older, empty ``ppo_ext`` run of the same env."""
    folder = tmp_path_factory.mktemp("logs")
    older = folder / "ppo_ext" / "Pendulum-v1_1"
    older.mkdir(parents=True)
    os.utime(older, (0, 0))
    th.set_num_threads(1)
    hyperparams = [
        "--hyperparams",
        "n_envs:1",
        "n_steps:64",
        "batch_size:64",
        "n_epochs:1",
        "policy_kwargs:dict(net_arch=[8])",
    ]
    main(["train", "--algo", "ppo", "--env", "Pendulum-v1", "-n", "256", *quiet(folder), *hyperparams])  # one episode
    return folder


def test_enjoy_plays_the_newest_run_whatever_its_algorithm(sb3_ppo_run, capsys):
    main(["enjoy", "--env", "Pendulum-v1", "-f", str(sb3_ppo_run), "-n", "5", "--no-render"])
    output = capsys.readouterr().out
    # The older ppo_ext run holds no model: not a candidate, and not newer than the run played.
    assert f"Loading latest experiment with a model, id=1 ({sb3_ppo_run / 'ppo' / 'Pendulum-v1_1'})" in output
    assert os.path.join("ppo", "Pendulum-v1_1", "Pendulum-v1.zip") in output


def test_a_missing_run_names_the_runs_there(sb3_ppo_run, user_error):
    line = user_error(["enjoy", "--env", "Pendulum-v2", "-f", str(sb3_ppo_run)])
    assert line == (
        f"sb3-ppo-ext enjoy: error: no run of Pendulum-v2 under {sb3_ppo_run}/ (runs there: ppo/Pendulum-v1, "
        "ppo_ext/Pendulum-v1); did you mean Pendulum-v1?"
    )


def test_export_finds_the_algorithm_too(sb3_ppo_run, tmp_path):
    pytest.importorskip("onnx")
    output = tmp_path / "pendulum.onnx"
    main(["export", "--env", "Pendulum-v1", "-f", str(sb3_ppo_run), "-o", str(output)])
    assert output.stat().st_size > 0


def test_the_model_file_of_the_load_options_and_whether_a_run_holds_it(tmp_path):
    assert model_file_pattern("Pendulum-v1") == "Pendulum-v1.zip"
    assert model_file_pattern("Pendulum-v1", load_best=True) == "best_model.zip"
    assert model_file_pattern("Pendulum-v1", load_checkpoint=500) == "rl_model_500_steps.zip"
    assert model_file_pattern("Pendulum-v1", load_last_checkpoint=True) == "rl_model_*_steps.zip"
    (tmp_path / "0.monitor.csv").write_text("")
    assert not holds_model(str(tmp_path), "Pendulum-v1.zip") and not holds_model(str(tmp_path), "rl_model_*_steps.zip")
    (tmp_path / "rl_model_500_steps.zip").write_text("")
    assert holds_model(str(tmp_path), "rl_model_*_steps.zip") and not holds_model(str(tmp_path), "best_model.zip")


def test_only_what_set_up_writes_counts_as_an_unstarted_run(tmp_path):
    (tmp_path / "Pendulum-v1").mkdir()
    (tmp_path / "0.monitor.csv").write_text("")
    (tmp_path / "Pendulum-v1" / "config.yml").write_text("")
    (tmp_path / "progress.csv").write_text("")  # opened when training starts, written at the logger's first dump
    assert holds_only_setup_files(str(tmp_path), "Pendulum-v1")
    for extra in ("Pendulum-v1.zip", "evaluations.npz", "Pendulum-v1/notes.txt"):
        (tmp_path / extra).write_text("")
        assert not holds_only_setup_files(str(tmp_path), "Pendulum-v1"), extra
        (tmp_path / extra).unlink()
    (tmp_path / "progress.csv").write_text("time/total_timesteps\n64\n")
    assert not holds_only_setup_files(str(tmp_path), "Pendulum-v1")


def test_a_train_that_fails_before_its_first_step_leaves_no_run_folder(tmp_path, user_error, capsys):
    """The envs (and their monitor files) exist when the algorithm refuses its settings."""
    refused = [
        "--hyperparams",
        "n_envs:1",
        "n_steps:64",
        "batch_size:64",
        "objective:'kl_penalty'",
        "kl_coef:0.0",
        "kl_penalty_target:None",
    ]
    line = user_error(["train", "--env", "CartPole-v1", "-n", "64", *quiet(tmp_path), *refused])
    assert "neither clipping nor a penalty" in line
    assert os.listdir(tmp_path / "ppo_ext") == []
    kept = tmp_path / "ppo_ext" / "CartPole-v1_1"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")  # an earlier run folder: left alone
    user_error(["train", "--env", "CartPole-v1", "-n", "64", *quiet(tmp_path), *refused])
    assert sorted(os.listdir(tmp_path / "ppo_ext")) == ["CartPole-v1_1"]


def test_enjoy_and_export_play_the_newest_run_that_holds_a_model(sb3_ppo_run, tmp_path, capsys):
    """A newer run folder with monitor files only (what an ``optimize`` run leaves) is passed over, by name."""
    folder = tmp_path / "logs"
    shutil.copytree(sb3_ppo_run, folder)
    unfinished = folder / "ppo" / "Pendulum-v1_2"
    (unfinished / "Pendulum-v1").mkdir(parents=True)
    (unfinished / "0.monitor.csv").write_text('#{"t_start": 0.0, "env_id": "Pendulum-v1"}\nr,l,t\n')
    main(["enjoy", "--env", "Pendulum-v1", "-f", str(folder), "-n", "5", "--no-render"])
    output = capsys.readouterr().out
    assert (
        f"Loading latest experiment with a model, id=1 ({folder / 'ppo' / 'Pendulum-v1_1'}; passed over "
        "ppo/Pendulum-v1_2: no Pendulum-v1.zip in them)"
    ) in output
    assert os.path.join("ppo", "Pendulum-v1_1", "Pendulum-v1.zip") in output
    if importlib.util.find_spec("onnx") is not None:
        main(["export", "--env", "Pendulum-v1", "-f", str(folder), "-o", str(tmp_path / "pendulum.onnx")])
        assert "Exported " + os.path.join(str(folder), "ppo", "Pendulum-v1_1", "Pendulum-v1.zip") in capsys.readouterr().out


def test_enjoy_names_the_runs_when_none_holds_the_model(sb3_ppo_run, user_error):
    line = user_error(["enjoy", "--env", "Pendulum-v1", "-f", str(sb3_ppo_run), "--load-best"])
    assert line.startswith(
        f"sb3-ppo-ext enjoy: error: no run of Pendulum-v1 under {sb3_ppo_run}/ holds best_model.zip "
        "(runs: ppo/Pendulum-v1_1, ppo_ext/Pendulum-v1_1)"
    )


def test_plot_says_where_it_wrote(sb3_ppo_run, capsys):
    main(["plot", "--env", "Pendulum-v1", "-f", str(sb3_ppo_run), "-w", "1"])
    image = os.path.abspath(os.path.join(str(sb3_ppo_run), "ppo", "Pendulum-v1_curves.png"))
    assert f"into {image}; -o chooses the file" in capsys.readouterr().out
    assert os.path.getsize(image) > 1000


# --- headless rendering -------------------------------------------------------------------------------------------


def test_headless_sdl_settings(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(name, raising=False)
    assert headless_sdl_settings() == {"SDL_VIDEODRIVER": "dummy"}
    monkeypatch.setenv("SDL_VIDEODRIVER", "offscreen")
    assert headless_sdl_settings() == {}  # the user's choice stays
    monkeypatch.delenv("SDL_VIDEODRIVER")
    monkeypatch.setenv("DISPLAY", ":0")
    assert headless_sdl_settings() == {}


def test_record_video_prints_no_wayland_error_headless(sb3_ppo_run, tmp_path):
    """SDL's Wayland probe printed "error: XDG_RUNTIME_DIR is invalid or not set" (a fresh process: SDL starts once)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
    }
    command = [
        sys.executable,
        "-m",
        "sb3_ppo_ext",
        "record-video",
        "--algo",
        "ppo",
        "--env",
        "Pendulum-v1",
        "-f",
        str(sb3_ppo_run),
        "-n",
        "5",
        "-o",
        str(tmp_path),
    ]
    result = subprocess.run(
        command, env={**environment, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr + result.stdout
    assert glob.glob(str(tmp_path / "*.mp4"))


# --- off-policy runs that end before they learn -------------------------------------------------------------------


def test_ddpg_below_learning_starts_warns_that_it_trains_nothing(tmp_path):
    with pytest.warns(UserWarning, match=r"n_timesteps=200 <= learning_starts=10000: DDPG .* trains nothing"):
        main(["train", "--algo", "ddpg", "--env", "Pendulum-v1", "-n", "200", *quiet(tmp_path)])


def test_the_learning_starts_check_reads_the_config_then_the_default():
    from stable_baselines3 import DDPG, SAC

    from sb3_ppo_ext.zoo.experiment import warn_if_nothing_learns

    with pytest.warns(UserWarning, match="learning_starts=100:"):  # SAC's own default
        warn_if_nothing_learns(SAC, {}, 100)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_nothing_learns(DDPG, {"learning_starts": 50}, 51)
        warn_if_nothing_learns(PPO, {}, 1)  # on-policy: nothing to wait for


# --- no lost run: a worker killed, or SIGTERM, saves the model ---------------------------------------------------

#: A normalised Pendulum run on SharedMemoryVecEnv, small enough for a test: 4 envs in one worker and the driver.
SHORT_RUN_CONFIG = (
    "Pendulum-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 4096\n  n_envs: 4\n  n_steps: 64\n  batch_size: 128\n"
    "  n_epochs: 1\n  normalize: true\n  policy_kwargs: 'dict(net_arch=[8])'\n"
)


def train_and_stop_at(tmp_path, monkeypatch, capsys, stop, at_step: int) -> tuple[int, str, str]:
    """Train the short run with ``--vec-env shared`` and call ``stop(vec_env)`` before its ``at_step``-th step;
    returns the exit status, the last line on stderr and the run folder."""
    from sb3_ppo_ext.vec_env.shared_memory_vec_env import SharedMemoryVecEnv

    config = tmp_path / "short.yml"
    config.write_text(SHORT_RUN_CONFIG)
    original_step_async = SharedMemoryVecEnv.step_async
    steps = {"count": 0}

    def step_async(self, actions):
        steps["count"] += 1
        if steps["count"] == at_step:
            stop(self)
        return original_step_async(self, actions)

    monkeypatch.setattr(SharedMemoryVecEnv, "step_async", step_async)
    argv = ["train", "--env", "Pendulum-v1", "-conf", str(config), "--vec-env", "shared"]
    argv += ["--vec-env-kwargs", "n_workers:1", *quiet(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    monkeypatch.setattr(SharedMemoryVecEnv, "step_async", original_step_async)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert isinstance(exit_info.value.code, int)
    return exit_info.value.code, err.strip().splitlines()[-1], str(tmp_path / "ppo_ext" / "Pendulum-v1_1")


def saved_steps(run_folder: str) -> int:
    from sb3_ppo_ext.zoo.resume import saved_num_timesteps

    return saved_num_timesteps(os.path.join(run_folder, "Pendulum-v1.zip"))


def assert_resumes(run_folder: str, stopped_at: int, capsys) -> None:
    """``--resume`` continues the saved model and its statistics to the run's budget."""
    from sb3_ppo_ext.safe_loading import read_vecnormalize_statistics

    statistics = read_vecnormalize_statistics(os.path.join(run_folder, "Pendulum-v1", "vecnormalize.npz"))
    assert isinstance(statistics.obs_rms, RunningMeanStd) and statistics.obs_rms.count > stopped_at  # training saw them
    main(["train", "--resume", run_folder, "--no-progress", "--verbose", "0"])
    assert f"Resuming {run_folder} at {stopped_at} steps" in capsys.readouterr().out
    assert 4096 <= saved_steps(run_folder) < 4096 + 256  # SB3 completes the rollout (4 envs x 64 steps) under way


def test_a_killed_worker_saves_the_run_names_the_worker_and_resumes(tmp_path, monkeypatch, capsys):
    def kill_worker(vec_env):
        os.kill(vec_env.worker_pids[0], signal.SIGKILL)

    status, line, run_folder = train_and_stop_at(tmp_path, monkeypatch, capsys, kill_worker, at_step=40)
    assert status == 1
    assert line.startswith("sb3-ppo-ext train: stopped: worker 0 (pid ")
    # The kill lands just before the step's command is sent: whether the send already fails (the pipe closed) or the
    # wait for the answer sees the death depends on how soon the kernel has closed the dead worker's end.
    assert re.search(r"died \(exit code -9, killed by SIGKILL\) (before|during) step", line)
    stopped_at = saved_steps(run_folder)
    assert stopped_at >= 39 * 4  # the 8192 steps of the report were lost; here the 156 of this run are saved
    assert f"training stopped at {stopped_at} steps; the model and its VecNormalize statistics were saved to" in line
    assert line.endswith(f"continue with: sb3-ppo-ext train --resume {run_folder}")
    assert os.path.isfile(os.path.join(run_folder, "Pendulum-v1", "vecnormalize.pkl"))
    assert_resumes(run_folder, stopped_at, capsys)


def test_sigterm_saves_the_run_as_ctrl_c_does_and_resumes(tmp_path, monkeypatch, capsys):
    def terminate(vec_env):
        os.kill(os.getpid(), signal.SIGTERM)

    status, line, run_folder = train_and_stop_at(tmp_path, monkeypatch, capsys, terminate, at_step=40)
    assert status == 143
    stopped_at = saved_steps(run_folder)
    assert line.startswith(f"sb3-ppo-ext train: stopped: training was stopped by SIGTERM at {stopped_at} steps")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the caller's again
    assert_resumes(run_folder, stopped_at, capsys)


def test_sigterm_during_a_deferred_block_is_recorded_once_and_the_block_runs_to_its_end(tmp_path):
    """What holds SIGTERM back while the final model is saved: the block is not cut short, the signal is recorded
    (once, however many come) for the caller to act on afterwards, and the caller's handler is put back."""
    from sb3_ppo_ext.files import atomic_write
    from sb3_ppo_ext.zoo.stopping import sigterm_caught

    received = []
    before = signal.getsignal(signal.SIGTERM)
    path = tmp_path / "model.zip"
    with sigterm_caught(lambda: received.append("SIGTERM")), atomic_write(str(path)) as handle:
        handle.write(b"first half, ")
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        handle.write(b"second half")
    assert received == ["SIGTERM"]
    assert path.read_bytes() == b"first half, second half" and os.listdir(tmp_path) == ["model.zip"]
    assert signal.getsignal(signal.SIGTERM) is before


#: ``sb3-ppo-ext train`` whose final save pauses for 3 s once the zip is written to its temporary file, before it is
#: moved into place, after printing a line: a signal sent on that line lands in the middle of the save.
SLOW_FINAL_SAVE = """
import os, sys, time
from stable_baselines3.common import base_class
from sb3_ppo_ext.cli import main

write_zip = base_class.save_to_zip_file

def write_zip_slowly(save_path, *args, **kwargs):
    write_zip(save_path, *args, **kwargs)
    if os.path.basename(getattr(save_path, "name", "")).startswith(".CartPole-v1.zip."):
        print("final model written to its temporary file", flush=True)
        time.sleep(3)

base_class.save_to_zip_file = write_zip_slowly
main(sys.argv[1:])
"""


def signal_during_final_save(argv: list[str], signum: int, **popen_kwargs: Any) -> tuple[int, list[str]]:
    """Run ``argv`` (a ``train`` whose final save pauses, as :data:`SLOW_FINAL_SAVE`'s does), send it ``signum`` on
    the line that says its final model is in its temporary file, and return its exit status and output lines."""
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        **popen_kwargs,
    )
    assert process.stdout is not None
    output = []
    for line in process.stdout:
        output.append(line)
        if line.startswith("final model written to its temporary file"):
            process.send_signal(signum)
            break
    output.append(process.communicate(timeout=120)[0])
    return process.returncode, output


def test_sigterm_during_the_final_save_leaves_a_whole_final_model_and_a_stopped_run(tmp_path):
    """SIGTERM (a grid being stopped) that reaches ``train`` while it writes its final model: rl-zoo3's in-place save
    was killed half-way (a 0-byte ``<env>.zip`` that ``--resume`` refused); now the save ends first, then the command
    stops as a stopped run does (exit 143, one line), and the final model is whole."""
    from sb3_ppo_ext.zoo.resume import find_resume_point, saved_num_timesteps

    argv = [sys.executable, "-c", SLOW_FINAL_SAVE, "train", "--env", "CartPole-v1", "-n", "1024", *quiet(tmp_path)]
    argv += ["--hyperparams", "n_epochs:1"]
    returncode, output = signal_during_final_save(argv, signal.SIGTERM)
    assert returncode == 143, "".join(output)
    run = str(tmp_path / "ppo_ext" / "CartPole-v1_1")
    assert "".join(output).strip().splitlines()[-1] == (
        "sb3-ppo-ext train: stopped: SIGTERM came while the final model was being saved, at 1024 steps; the save was "
        f"finished first; the model was saved to {run}; continue with: sb3-ppo-ext train --resume {run}"
    )
    final_model = os.path.join(run, "CartPole-v1.zip")
    assert saved_num_timesteps(final_model) == 1024
    assert not [name for name in os.listdir(run) if name.endswith((".tmp", ".tmp.zip"))]
    assert find_resume_point(run, "CartPole-v1").model_path == final_model


#: ``sb3-ppo-ext train`` that presses Ctrl-C itself (SIGINT to its own process) at its 40th step, and whose final save
#: then pauses as :data:`SLOW_FINAL_SAVE`'s does: a second Ctrl-C sent on its line lands while the stopped run saves.
CTRL_C_THEN_SLOW_FINAL_SAVE = (
    """
import os, signal
from stable_baselines3.common.vec_env import DummyVecEnv
steps = {"count": 0}
step_async = DummyVecEnv.step_async

def step_async_pressing_ctrl_c(self, actions):
    steps["count"] += 1
    if steps["count"] == 40:
        os.kill(os.getpid(), signal.SIGINT)
    return step_async(self, actions)

DummyVecEnv.step_async = step_async_pressing_ctrl_c
"""
    + SLOW_FINAL_SAVE
)


def sigint_as_in_a_terminal() -> None:
    """In a process about to start Python: SIGINT to its default, so that Python raises ``KeyboardInterrupt`` on it
    (a suite started in the background of a non-interactive shell ignores SIGINT, and its processes inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_second_ctrl_c_while_training_stops_ends_train_with_status_1_once_the_model_is_saved(tmp_path):
    """Ctrl-C stops training (the model saved, exit status 0, as in rl-zoo3); a second Ctrl-C while the stopped run
    saves does not kill it (exit status -2): the save ends, then one line says so, with exit status 1."""
    from sb3_ppo_ext.zoo.resume import saved_num_timesteps

    argv = [sys.executable, "-c", CTRL_C_THEN_SLOW_FINAL_SAVE, "train", "--env", "CartPole-v1", "-n", "100000"]
    argv += [*quiet(tmp_path), "--hyperparams", "n_epochs:1", "n_envs:1"]
    returncode, output = signal_during_final_save(argv, signal.SIGINT, preexec_fn=sigint_as_in_a_terminal)
    assert returncode == 1, "".join(output)
    run = str(tmp_path / "ppo_ext" / "CartPole-v1_1")
    steps = saved_num_timesteps(os.path.join(run, "CartPole-v1.zip"))  # the 39 steps before the first Ctrl-C
    assert steps == 39
    assert "".join(output).strip().splitlines()[-1] == (
        f"sb3-ppo-ext train: stopped: a second Ctrl-C came while training stopped at {steps} steps; the model was "
        f"saved to {run}; continue with: sb3-ppo-ext train --resume {run}"
    )


# --- every command-line value named ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--env", "CartPole-v1", "--env-kwargs", "nonexistent_kw:1"],
            r"--env-kwargs \(or the config's env_kwargs\) \{'nonexistent_kw': 1\}: CartPole-v1 refuses them \(TypeError: ",
        ),
        (
            ["--env", "sb3_ppo_ext/Walker2D-v0", "--env-kwargs", "push_probability:2.0"],
            r"sb3_ppo_ext/Walker2D-v0 refuses them \(ValueError: push_probability must be a probability in \[0, 1\], "
            r"got 2.0\)",
        ),
        (
            ["--env", "CartPole-v1", "--vec-env", "shared", "--vec-env-kwargs", "timeout_s:'abc'"],
            "--vec-env-kwargs: timeout_s must be a finite number, got 'abc'",
        ),
        (
            ["--env", "CartPole-v1", "--vec-env", "shared", "--vec-env-kwargs", "timeout_s:1e-9"],
            r"--vec-env-kwargs: timeout_s must be >= 1.0, got 1e-09",
        ),
        (
            ["--env", "CartPole-v1", "--vec-env", "shared", "--vec-env-kwargs", "start_timeout_s:True"],
            "--vec-env-kwargs: start_timeout_s must be a finite number, got True",
        ),
        (
            ["--env", "CartPole-v1", "--hyperparams", "rollout_buffer_class:'RolloutBuffer'"],
            "rollout_buffer_class must be a class deriving from stable_baselines3.common.buffers.RolloutBuffer",
        ),
        (
            [
                "--env",
                "CartPole-v1",
                "--hyperparams",
                "env_wrapper:[{'gymnasium.wrappers.TimeLimit':{'max_episode_steps':nn.ReLU}}]",
            ],
            "env_wrapper: the argument max_episode_steps of gymnasium.wrappers.TimeLimit must be a plain value",
        ),
        (
            ["--env", "CartPole-v1", "--hyperparams", "env_wrapper:{'sb3_ppo_ext.wrappers.FrameSkip':{'skipp':2}}"],
            r"env_wrapper: sb3_ppo_ext.wrappers.FrameSkip cannot be built with the arguments \{'skipp': 2\}",
        ),
        (
            ["--env", "CartPole-v1", "--hyperparams", "callback:['sb3_ppo_ext.callbacks.RotatingCheckpointCallback']"],
            "callback: sb3_ppo_ext.callbacks.RotatingCheckpointCallback cannot be built with the arguments {}: missing a "
            "required argument: 'save_freq'",
        ),
        (
            ["--env", "CartPole-v1", "--hyperparams", "callback:\"['sb3_ppo_ext.callbacks.RotatingCheckpointCallback']\""],
            r"callback: \"\['sb3_ppo_ext.callbacks.RotatingCheckpointCallback'\]\" is not an allow-listed class import path",
        ),
        (
            ["--env", "sb3_ppo_ext/RocketLander-v0", "--env-kwargs", "frame_skip:10**9"],
            "is not allowed in a config value",
        ),
        (
            ["--env", "sb3_ppo_ext/RocketLander-v0", "--env-kwargs", "frame_skip:1000000000"],
            r"frame_skip must be <= 1000 \(MAX_FRAME_SKIP\)",
        ),
    ],
)
def test_every_bad_value_is_a_one_line_error_naming_its_option(extra, message, tmp_path, user_error):
    import re

    line = user_error(["train", *extra, "-n", "256", *quiet(tmp_path)])
    assert re.search(message, line), line
    assert not glob.glob(str(tmp_path / "ppo_ext" / "*"))  # no run folder left behind

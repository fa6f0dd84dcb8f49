"""``sb3-ppo-ext train --resume RUN``: a stopped or finished run continues in its folder, with its settings, where its
newest checkpoint left it (step count, schedules, VecNormalize statistics, adaptive-KL state, evaluation history)."""

from __future__ import annotations

import csv
import glob
import os
import re
import shutil

import numpy as np
import pytest
import torch as th
import yaml
from stable_baselines3.common.logger import CSVOutputFormat, Logger
from stable_baselines3.common.monitor import load_results

from sb3_ppo_ext import PPO
from sb3_ppo_ext.cli import main
from sb3_ppo_ext.grid import run as grid_run
from sb3_ppo_ext.safe_loading import load_bounded_npz, read_vecnormalize_statistics
from sb3_ppo_ext.zoo import resume as resume_module
from sb3_ppo_ext.zoo.progress_csv import MAX_HEADER_BYTES, AppendingCSVOutputFormat
from sb3_ppo_ext.zoo.resume import (
    ContinuedMonitor,
    ResumeError,
    continuable_monitor,
    find_resume_point,
    restore_evaluation_history,
    successes_by_evaluation,
)
from sb3_ppo_ext.zoo.run_text_files import MAX_LINE_CHARACTERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV = "Pendulum-v1"
#: 2 envs x 256 steps: a rollout is 512 steps; checkpoints and evaluations every rollout.
SETTINGS = [
    "--hyperparams",
    "n_envs:2",
    "n_steps:256",
    "batch_size:128",
    "n_epochs:2",
    "normalize:True",
    "learning_rate:'lin_1e-3'",
    "objective:'clip_kl_penalty'",
    "kl_penalty_target:1e-5",
    "lr_kl_target:0.002",
]


def first_run(folder, n_timesteps: int) -> str:
    main(
        [
            "train",
            "--env",
            ENV,
            "-n",
            str(n_timesteps),
            "-f",
            str(folder),
            "--seed",
            "3",
            "--save-freq",
            "512",
            "--eval-freq",
            "512",
            "--eval-episodes",
            "1",
            "--no-progress",
            "--verbose",
            "0",
            "--num-threads",
            "1",
            *SETTINGS,
        ]
    )
    return os.path.join(str(folder), "ppo_ext", f"{ENV}_1")


def resume(run: str, *extra: str) -> None:
    main(["train", "--resume", run, "--no-progress", *extra])


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def evaluation_steps(run: str) -> list[int]:
    with np.load(os.path.join(run, "evaluations.npz")) as saved:
        return [int(step) for step in saved["timesteps"]]


def simulate_a_stop_after(run: str, steps: int) -> None:
    """What a run killed after its checkpoint at ``steps`` leaves: no final model, newer checkpoints gone."""
    os.unlink(os.path.join(run, f"{ENV}.zip"))
    for path in glob.glob(os.path.join(run, "rl_model_*_steps*")):
        if int(os.path.basename(path).split("_")[-2]) > steps:
            os.unlink(path)


def test_a_stopped_run_resumes_from_its_checkpoint_with_every_counter_and_statistic(tmp_path):
    run = first_run(tmp_path, 2048)
    simulate_a_stop_after(run, 1024)
    checkpoint = PPO.load(os.path.join(run, "rl_model_1024_steps.zip"))
    config_before = read_text(os.path.join(run, ENV, "config.yml"))

    resume(run, "-n", "1024")  # nothing left to train: the final model is the state the run resumed with

    resumed = PPO.load(os.path.join(run, f"{ENV}.zip"))
    assert resumed.num_timesteps == 1024
    assert resumed.adaptive_lr.learning_rate == checkpoint.adaptive_lr.learning_rate
    assert resumed.kl_penalty.coef == checkpoint.kl_penalty.coef != 1.0  # beta moved during the first run
    for name, tensor in checkpoint.policy.state_dict().items():
        assert th.equal(resumed.policy.state_dict()[name], tensor), name
    saved = read_vecnormalize_statistics(os.path.join(run, "rl_model_vecnormalize_1024_steps.npz"))
    final = read_vecnormalize_statistics(os.path.join(run, ENV, "vecnormalize.npz"))
    assert final.obs_rms.count == saved.obs_rms.count > 1000
    np.testing.assert_array_equal(final.obs_rms.mean, saved.obs_rms.mean)
    assert read_text(os.path.join(run, ENV, "config.yml")) == config_before
    assert len(read_text(os.path.join(run, ENV, "command.txt")).splitlines()) == 2
    assert os.listdir(os.path.join(str(tmp_path), "ppo_ext")) == [f"{ENV}_1"]  # no new run folder


def progress_rows(run: str) -> list[dict[str, str]]:
    with open(os.path.join(run, "progress.csv"), newline="") as stream:
        return list(csv.DictReader(stream))


def test_a_stopped_run_continues_its_schedules_evaluations_and_monitor_files(tmp_path, monkeypatch):
    run = first_run(tmp_path, 2048)
    assert evaluation_steps(run) == [512, 1024, 1536, 2048]
    simulate_a_stop_after(run, 1024)
    rows_before = len(load_results(run))
    logged_before = progress_rows(run)
    cut_short = sorted(glob.glob(os.path.join(run, "*.monitor.csv")))[0]
    with open(cut_short, "a", encoding="utf-8") as stream:
        stream.write("-12.5,3")  # the row the stop cut short: no t, no line end
    reads = []
    monkeypatch.setattr(resume_module, "load_bounded_npz", lambda *args: reads.append(args) or load_bounded_npz(*args))

    resume(run, "-n", "2560")

    assert len(reads) == 1  # evaluations.npz read once, checked before training and restored from that reading

    final = PPO.load(os.path.join(run, f"{ENV}.zip"))
    assert final.num_timesteps == 2560
    assert final._total_timesteps == 2560  # rl-zoo3's -i would restart: learn(2560) from 0
    # The evaluations after the checkpoint were of a policy the resumed run does not continue: replaced.
    assert evaluation_steps(run) == [512, 1024, 1536, 2048, 2560]
    episodes = load_results(run)
    assert len(episodes) > rows_before
    for path in glob.glob(os.path.join(run, "*.monitor.csv")):
        times = np.loadtxt(path, delimiter=",", skiprows=2, usecols=2, ndmin=1)
        assert np.all(np.diff(times) >= 0), path  # one clock: no restart at 0
    # SB3's logger rows: those of the first session kept as they were, the resumed session's appended after them.
    logged = progress_rows(run)
    assert [{key: row[key] for key in logged_before[0]} for row in logged[: len(logged_before)]] == logged_before
    resumed_steps = [int(row["time/total_timesteps"]) for row in logged[len(logged_before) :]]
    assert resumed_steps and min(resumed_steps) > 1024 and max(resumed_steps) == 2560


def test_a_finished_run_trains_on_to_a_larger_budget(tmp_path):
    run = first_run(tmp_path, 1024)
    resume(run, "-n", "2048")
    final = PPO.load(os.path.join(run, f"{ENV}.zip"))
    assert final.num_timesteps == 2048 and final._total_timesteps == 2048
    assert evaluation_steps(run) == [512, 1024, 1536, 2048]


def test_a_final_model_cut_short_to_0_bytes_resumes_from_the_newest_intact_checkpoint(tmp_path):
    """A process stopped while rl-zoo3 wrote the final model in place left it 0 bytes long: ``--resume`` warns, naming
    it, and continues from the newest intact checkpoint, and the grid resumes such a cell instead of failing it at
    every ``run``; with no intact checkpoint either, the grid starts the cell again."""
    cell = tmp_path / "cell"
    run = first_run(cell, 1024)  # checkpoint at 512 steps, final model at 1024
    final_model = os.path.join(run, f"{ENV}.zip")
    open(final_model, "wb").close()  # what a SIGTERM during rl-zoo3's in-place save left behind

    with pytest.warns(UserWarning, match=f"skipping the final model {re.escape(final_model)}: it is not a readable zip"):
        point = find_resume_point(run, ENV)
    assert point.model_path == os.path.join(run, "rl_model_512_steps.zip") and point.num_timesteps == 512
    assert grid_run._resumable_run(str(cell)) == run
    assert grid_run._why_unfinished(str(cell)).startswith(f"its final model {final_model} is damaged: it is not a readable")

    with pytest.warns(UserWarning, match="skipping the final model"):
        resume(run, "--verbose", "0")
    assert PPO.load(final_model).num_timesteps == 1024  # written again, whole
    assert grid_run._why_unfinished(str(cell)) is None

    open(final_model, "wb").close()
    for path in glob.glob(os.path.join(run, "rl_model_*")):
        os.unlink(path)
    with pytest.warns(UserWarning, match="skipping the final model"), pytest.raises(ResumeError, match="damaged final"):
        find_resume_point(run, ENV)
    assert grid_run._resumable_run(str(cell)) is None  # nothing to continue from: the cell starts again, no FAIL


def checkpoint_names(run: str) -> list[str]:
    return sorted(os.path.basename(path) for path in glob.glob(os.path.join(run, "rl_model_*_steps.zip")))


def test_a_resume_with_a_new_budget_and_checkpoints_keeps_them_for_the_next_resume(tmp_path):
    main(
        [
            "train",
            "--env",
            ENV,
            "-n",
            "512",
            "-f",
            str(tmp_path),
            "--seed",
            "3",
            "--eval-freq",
            "-1",
            "--no-progress",
            "--verbose",
            "0",
            "--num-threads",
            "1",
            *SETTINGS,
        ]
    )
    run = os.path.join(str(tmp_path), "ppo_ext", f"{ENV}_1")
    assert not checkpoint_names(run)
    resume(run, "-n", "2048", "--save-freq", "512")  # checkpoints at rollout starts, the final model at the end
    assert checkpoint_names(run) == ["rl_model_1024_steps.zip", "rl_model_1536_steps.zip"]
    assert PPO.load(os.path.join(run, f"{ENV}.zip")).num_timesteps == 2048
    saved = yaml.safe_load(read_text(os.path.join(run, ENV, "args.yml")))
    assert saved["n_timesteps"] == 2048 and saved["save_freq"] == 512 and saved["seed"] == 3
    simulate_a_stop_after(run, 1024)
    resume(run)  # no options: the budget and the checkpoints of the last resume
    assert checkpoint_names(run) == ["rl_model_1024_steps.zip", "rl_model_1536_steps.zip"]
    assert PPO.load(os.path.join(run, f"{ENV}.zip")).num_timesteps == 2048


def test_options_that_change_the_training_are_refused_with_resume(tmp_path, user_error):
    run = first_run(tmp_path, 512)
    line = user_error(["train", "--resume", run, "--hyperparams", "n_epochs:3"])
    assert "--hyperparams cannot be given with it" in line and "-i" in line
    line = user_error(["train", "--resume", run, "--env", "CartPole-v1"])
    assert "--env cannot be given" in line


def test_resume_names_what_is_missing(tmp_path, user_error):
    assert "is not a folder" in user_error(["train", "--resume", str(tmp_path / "nowhere")])
    assert "has no <env>/args.yml" in user_error(["train", "--resume", str(tmp_path)])
    run = first_run(tmp_path, 512)
    os.unlink(os.path.join(run, f"{ENV}.zip"))
    for path in glob.glob(os.path.join(run, "rl_model_*")):
        os.unlink(path)
    line = user_error(["train", "--resume", run])
    assert "no checkpoint (train with --save-freq" in line


def test_resume_uses_the_settings_the_run_was_trained_with(tmp_path):
    config = tmp_path / "mine.yml"
    config.write_text(
        yaml.safe_dump(
            {ENV: {"n_envs": 2, "n_steps": 256, "batch_size": 128, "n_epochs": 1, "n_timesteps": 1024, "policy": "MlpPolicy"}}
        )
    )
    main(
        [
            "train",
            "--env",
            ENV,
            "-conf",
            str(config),
            "-f",
            str(tmp_path),
            "--save-freq",
            "512",
            "--eval-freq",
            "-1",
            "--no-progress",
            "--verbose",
            "0",
        ]
    )
    run = os.path.join(str(tmp_path), "ppo_ext", f"{ENV}_1")
    config.write_text(yaml.safe_dump({ENV: {"n_envs": 4, "n_timesteps": 1024, "policy": "MlpPolicy"}}))
    resume(run, "-n", "1536")
    final = PPO.load(os.path.join(run, f"{ENV}.zip"))
    assert final.n_envs == 2 and final.n_steps == 256 and final.num_timesteps == 1536


def play_one_episode(env, seed: int) -> None:
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(0)
        done = terminated or truncated
    env.close()


def test_successes_belong_to_the_last_evaluations():
    assert successes_by_evaluation(3, [[1, 0]]) == [None, None, [1, 0]]
    assert successes_by_evaluation(2, [[0], [1]]) == [[0], [1]]
    assert successes_by_evaluation(2, []) == [None, None]
    assert successes_by_evaluation(1, [[0], [1]]) == [None]  # more rows than evaluations: none can be placed


def test_resume_keeps_the_successes_of_the_kept_evaluations_where_only_the_last_ones_have_them(tmp_path):
    """The task began reporting ``is_success`` at the third of four evaluations; the run resumes from the third."""
    log_path = str(tmp_path / "evaluations")
    np.savez(
        log_path,
        timesteps=np.array([100, 200, 300, 400]),
        results=np.ones((4, 2)),
        ep_lengths=np.ones((4, 2), dtype=int),
        successes=np.array([[True, False], [True, True]]),
    )

    class Callback:
        def __init__(self):
            self.log_path = log_path
            self.evaluations_successes = []

    callback = Callback()
    assert restore_evaluation_history(callback, num_timesteps=300, n_envs=4) == 3
    assert callback.evaluations_timesteps == [100, 200, 300]
    assert callback.evaluations_successes == [[True, False]]


def test_continued_monitor_resumes_the_clock_of_an_existing_file(tmp_path):
    import gymnasium as gym

    filename = str(tmp_path / "0")
    shutil.copy(os.devnull, filename + ".monitor.csv")  # an empty file is started afresh
    play_one_episode(ContinuedMonitor(gym.make("CartPole-v1"), filename), seed=0)
    first = last_elapsed_time(filename + ".monitor.csv")
    play_one_episode(ContinuedMonitor(gym.make("CartPole-v1"), filename), seed=1)
    results = load_results(str(tmp_path))
    assert len(results) == 2 and results["t"].iloc[1] >= first


def dump_all(writer, dumps: list[dict[str, object]]) -> None:
    """Dump each mapping of ``dumps`` through an SB3 logger writing to ``writer`` (``time/`` keys not sent to it)."""
    logger = Logger(folder=None, output_formats=[writer])
    for values in dumps:
        for key, value in values.items():
            logger.record(key, value, exclude="csv" if key.startswith("time/") else None)
        logger.dump()
    logger.close()


def read_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_appending_csv_output_format_continues_a_file_and_adds_the_columns_of_later_keys(tmp_path):
    """A new file reads as SB3's own CSV writer's (columns added as keys appear, earlier rows left empty there); a
    file opened again keeps every row and goes on after them, new keys included."""
    first = [{"a": 1.5, "time/fps": 9}, {"a": 0.1 + 0.2, "b": "x,y"}, {"c": 3}]
    dump_all(CSVOutputFormat(str(tmp_path / "sb3.csv")), first)
    dump_all(AppendingCSVOutputFormat(str(tmp_path / "ours.csv")), first)
    assert read_rows(tmp_path / "ours.csv") == read_rows(tmp_path / "sb3.csv")
    assert read_rows(tmp_path / "ours.csv")[1] == {"a": repr(0.1 + 0.2), "b": "x,y", "c": ""}  # full precision

    dump_all(AppendingCSVOutputFormat(str(tmp_path / "ours.csv")), [{"b": "z"}, {"a": 2, "d": 4}])
    assert read_rows(tmp_path / "ours.csv") == [{**row, "d": ""} for row in read_rows(tmp_path / "sb3.csv")] + [
        {"a": "", "b": "z", "c": "", "d": ""},
        {"a": "2", "b": "", "c": "", "d": "4"},
    ]


def test_appending_csv_output_format_starts_its_rows_on_a_line_of_their_own(tmp_path):
    """A file whose last row was cut short (a stop in the middle of a write) keeps it; the next row follows on a new
    line."""
    path = tmp_path / "progress.csv"
    path.write_text("a,b\n1,2\n3")
    dump_all(AppendingCSVOutputFormat(str(path)), [{"a": 5, "b": 6}])
    assert path.read_text() == "a,b\n1,2\n3\n5,6\n"


def test_resume_names_a_damaged_evaluation_history_or_progress_csv_in_one_line(tmp_path, user_error):
    run = first_run(tmp_path, 1024)
    simulate_a_stop_after(run, 512)
    evaluations = os.path.join(run, "evaluations.npz")
    whole = open(evaluations, "rb").read()
    with open(evaluations, "wb") as stream:
        stream.write(whole[: len(whole) // 2])
    assert "evaluations.npz: not a readable .npz file" in user_error(["train", "--resume", run, "--no-progress"])
    with open(evaluations, "wb") as stream:
        stream.write(whole)
    progress = os.path.join(run, "progress.csv")
    with open(progress, "rb") as stream:
        rows = stream.read()
    for damaged, message in (
        (b"\xff\xfe rollout/ep_rew_mean\n", "progress.csv: its header is not UTF-8 text"),
        (rows + b"\xff\xfe,1\n", "progress.csv: not UTF-8 text"),  # a row, read when a new column rewrites them
        (b"a" * (MAX_HEADER_BYTES + 2), f"progress.csv: its header is longer than {MAX_HEADER_BYTES} bytes"),
    ):
        with open(progress, "wb") as stream:
            stream.write(damaged)
        line = user_error(["train", "--resume", run, "--no-progress"])
        assert message in line, line
    with open(progress, "wb") as stream:  # a row too long to hold, refused before it is read whole
        stream.write(rows + b"1" * (MAX_LINE_CHARACTERS + 1) + b"\n")
    assert "progress.csv, line" in user_error(["train", "--resume", run, "--no-progress"])


def last_elapsed_time(path: str) -> float:
    """The elapsed time ``t`` of a monitor file's last whole row, as a resumed run continues its clock from it."""
    monitor = continuable_monitor(path)
    assert monitor is not None and monitor.episodes, path
    return monitor.episodes[-1][0]


def test_a_monitor_file_is_read_once_within_bounded_memory_to_continue_it(tmp_path):
    """:func:`continuable_monitor` keeps one row of the file at a time: a long run's monitor file is not held in
    memory."""
    import tracemalloc

    path = tmp_path / "0.monitor.csv"
    rows = "".join(f"10.0,10,{step / 10:.1f}\r\n" for step in range(100_000))  # about 1.5 MB, as SB3 writes them
    path.write_text('#{"t_start": 1.0}\nr,l,t\n' + rows, newline="")
    tracemalloc.start()
    try:
        assert last_elapsed_time(str(path)) == 9999.9
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak

"""benchmarks/time_to_score.py: reading the evaluations as they are written, the first evaluation to reach the
threshold, the ratio table, the contenders' commands, stopping a process tree, and one real run to a threshold."""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import time_to_score

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")


def write_evaluations(run_folder: Path, timesteps: list[int], results: list[list[float]]) -> Path:
    """An ``evaluations.npz`` as SB3's ``EvalCallback`` writes it."""
    run_folder.mkdir(parents=True)
    path = run_folder / "evaluations.npz"
    np.savez(path, timesteps=np.asarray(timesteps), results=np.asarray(results), ep_lengths=np.full(np.shape(results), 200))
    return path


def result(contender: str, seed: int, to_threshold: float | None, run: float) -> Any:
    return time_to_score.RunResult(
        task="T",
        seed=seed,
        contender=contender,
        vec_env="dummy",
        steps_at_threshold=None if to_threshold is None else 1000,
        wall_s_to_threshold=to_threshold,
        wall_s_run=run,
        peak_rss_mib=100.0,
        best_eval=1.0,
        best_eval_steps=1000,
        outcome="reached" if to_threshold is not None else "budget spent",
        command="sb3-ppo-ext train",
        pid=0,
    )


def test_the_evaluations_are_read_from_the_run_folder_and_the_first_reaching_one_found(tmp_path):
    seed_folder = tmp_path / "ours" / "seed_0"
    assert time_to_score.read_evaluations(time_to_score.cell_run_folder(str(seed_folder)))[0].size == 0
    path = write_evaluations(seed_folder / "ppo_ext" / "T-v0_1", [1000, 2000, 3000], [[10, 12], [20, 30], [40, 50]])
    timesteps, means = time_to_score.read_evaluations(time_to_score.cell_run_folder(str(seed_folder)))
    np.testing.assert_array_equal(timesteps, [1000, 2000, 3000])
    np.testing.assert_allclose(means, [11.0, 25.0, 45.0])
    assert time_to_score.first_reaching(means, 25.0) == 1  # at least the threshold counts
    assert time_to_score.first_reaching(means, 11.5) == 1
    assert time_to_score.first_reaching(means, -5.0) == 0
    assert time_to_score.first_reaching(means, 45.5) is None
    # A file caught while the callback rewrites it reads as no evaluations yet, not as an error.
    path.write_bytes(path.read_bytes()[:100])
    assert time_to_score.read_evaluations(str(path.parent))[1].size == 0


def test_the_ratio_table_bounds_seeds_where_one_side_missed_and_takes_the_median_of_the_others():
    results = [
        result("ours", 0, 100.0, 100.0),
        result("sb3", 0, 200.0, 200.0),
        result("sb3", 1, 200.0, 200.0),
        result("ours", 1, 300.0, 300.0),
        result("ours", 2, 50.0, 50.0),
        result("sb3", 2, None, 400.0),
        result("ours", 3, None, 900.0),
        result("sb3", 3, 300.0, 300.0),
    ]
    table = time_to_score.ratio_table(results)
    assert "| T | 0 | 100 | 200 | 0.50 |" in table
    assert "| T | 1 | 300 | 200 | 1.50 |" in table
    assert "| T | 2 | 50 | - | < 0.12 (SB3 did not reach it) |" in table
    assert "| T | 3 | - | 300 | > 3.00 (ours did not reach it) |" in table
    assert "Median ratio ours / sb3: 1.00 (over the 2 of 4 seeds where both reached it)" in table
    assert time_to_score.ratio_table(results[:1]) == ""
    rows = time_to_score.results_table(results).splitlines()
    assert len(rows) == 2 + len(results)
    assert rows[8] == "| T | 3 | ours | dummy | no | - | not in 900 | 100 | 1.0 (1000) | budget spent |"


def test_the_contenders_commands_and_their_order():
    args = time_to_score.parse_args(
        [
            "--env",
            "E-v0",
            "--threshold",
            "1",
            "--root",
            "r",
            "--ours-args",
            "--vec-env shared",
            "--sb3-args",
            "-params n_envs:8",
        ]
    )
    ours, sb3 = time_to_score.contenders_of(args)
    ours_argv = ours.train_argv("E-v0", 3, "f", 500, 10, None)
    sb3_argv = sb3.train_argv("E-v0", 3, "f", 500, 10, 7000)
    assert ours_argv[:2] == ["train", "--algo"] and ours_argv[2] == "ppo_ext"
    assert "--conf-file" not in ours_argv and "-n" not in ours_argv
    assert ours_argv[-2:] == ["--vec-env", "shared"] and ours_argv.count("--vec-env") == 1
    assert sb3_argv[2] == "ppo" and sb3_argv[sb3_argv.index("--conf-file") + 1] == time_to_score.REFERENCE_CONF
    assert sb3_argv[sb3_argv.index("-n") + 1] == "7000"
    assert sb3_argv[-4:] == ["--vec-env", "subproc", "-params", "n_envs:8"] and "dummy" not in sb3_argv
    assert time_to_score.vec_env_of(sb3_argv, "E-v0") == "subproc"
    assert time_to_score.vec_env_of(ours_argv, "E-v0") == "shared"
    assert time_to_score.vec_env_of(["--vec-env=ray"], "E-v0") == "ray"
    assert time_to_score.vec_env_of([], "sb3_ppo_ext/Humanoid-v0") == "shared (task's default)"
    # As a user runs it: neither the grid's one thread nor OMP_NUM_THREADS=1 unless asked for.
    for argv, contender in ((ours_argv, ours), (sb3_argv, sb3)):
        assert "--num-threads" not in argv
        assert contender.environment().get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")
    one_thread = time_to_score.contenders_of(
        time_to_score.parse_args(["--env", "E-v0", "--threshold", "1", "--root", "r", "--one-thread"])
    )
    for contender in one_thread:
        argv = contender.train_argv("E-v0", 3, "f", 500, 10, None)
        assert argv[argv.index("--num-threads") + 1] == "1"
        assert contender.environment()["OMP_NUM_THREADS"] == "1"
    assert [c.name for c in time_to_score.running_order([ours, sb3], 0)] == ["ours", "sb3"]
    assert [c.name for c in time_to_score.running_order([ours, sb3], 1)] == ["sb3", "ours"]
    assert [c.name for c in time_to_score.running_order([ours, sb3], 1, ours_first=True)] == ["ours", "sb3"]
    with pytest.raises(SystemExit):
        time_to_score.parse_args(["--env", "E", "--threshold", "1", "--root", "r", "--eval-freq", "0"])
    with pytest.raises(SystemExit):
        time_to_score.parse_args(["--env", "E", "--threshold", "1", "--root", "r", "--sb3-stop-multiple", "0"])


def test_sb3s_run_stops_at_the_multiple_of_ours_or_the_time_limit_whichever_is_first():
    ours = result("ours", 0, 120.0, 125.0)
    assert time_to_score.sb3_time_limit(None, 4.0, ours) == (8.0, "stopped at 4 x ours")
    assert time_to_score.sb3_time_limit(30.0, 4.0, ours) == (8.0, "stopped at 4 x ours")
    assert time_to_score.sb3_time_limit(5.0, 4.0, ours) == (5.0, "time limit")
    # No multiple asked for, or ours never reached the threshold (nothing to take a multiple of): the time limit alone.
    assert time_to_score.sb3_time_limit(30.0, None, ours) == (30.0, "time limit")
    assert time_to_score.sb3_time_limit(30.0, 4.0, result("ours", 0, None, 600.0)) == (30.0, "time limit")
    assert time_to_score.sb3_time_limit(None, 4.0, None) == (None, "time limit")
    # SB3 stopped at 4x ours without reaching it: the ratio is a bound near 1/4.
    stopped = result("sb3", 0, None, 481.0)
    assert time_to_score.seed_ratio(ours, stopped) == ("< 0.25 (SB3 did not reach it)", None)


def test_a_process_tree_is_measured_and_stopped_whole():
    # The background sleep of a non-interactive shell ignores SIGINT: it outlives the shell and needs the SIGTERM to
    # the group.
    process = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(time_to_score.process_tree(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = time_to_score.process_tree(process.pid)
        assert len(tree) == 2 and tree[0] == process.pid
        # not compared with a sum of separate reads: the child's memory changes while it turns from a shell into sleep
        assert time_to_score.tree_resident_kib(process.pid) > time_to_score.resident_kib(process.pid) > 0
        start = time.monotonic()
        time_to_score.stop_process_group(process, grace_seconds=1.0)
        assert time.monotonic() - start < 5
        assert process.returncode is not None and not time_to_score.group_alive(process.pid)
    finally:
        if process.poll() is None or time_to_score.group_alive(process.pid):
            os.killpg(process.pid, 9)


def test_a_real_run_is_stopped_at_the_threshold(tmp_path, monkeypatch, capsys):
    """Our PPO on CartPole with two SubprocVecEnv workers reaches a mean return of 15 within a few updates; the run
    stops at the first evaluation that does, its workers with it."""
    runs = []
    run_benchmark = time_to_score.run_benchmark
    monkeypatch.setattr(time_to_score, "run_benchmark", lambda args: runs.extend(run_benchmark(args)) or runs)
    csv_path = tmp_path / "out.csv"
    argv = ["--env", "CartPole-v1", "--threshold", "15", "--seeds", "0", "--contenders", "ours", "--eval-freq", "256"]
    argv += ["--max-steps", "20000", "--max-minutes", "2", "--poll-seconds", "0.5", "--grace-seconds", "5"]
    argv += ["--root", str(tmp_path / "runs"), "--csv", str(csv_path), "--ours-args", "--vec-env subproc -params n_envs:2"]
    assert time_to_score.main(argv) == 0
    (run,) = runs
    assert run.reached and run.outcome == "reached" and run.vec_env == "subproc"
    assert run.steps_at_threshold % 256 == 0 and 0 < run.steps_at_threshold < 20000
    assert 0 < run.wall_s_to_threshold <= run.wall_s_run < 120
    assert run.best_eval >= 15
    assert run.peak_rss_mib > 100  # torch alone is more
    assert not time_to_score.group_alive(run.pid)
    run_folder = time_to_score.cell_run_folder(str(tmp_path / "runs" / "ours" / "seed_0"))
    timesteps, means = time_to_score.read_evaluations(run_folder)
    assert timesteps[time_to_score.first_reaching(means, 15)] == run.steps_at_threshold
    (row,) = csv.DictReader(csv_path.open())
    assert row["reached"] == "True" and int(row["steps_at_threshold"]) == run.steps_at_threshold
    out = capsys.readouterr().out
    assert out.startswith("    python benchmarks/time_to_score.py --env CartPole-v1 --threshold 15")
    assert f"| CartPole-v1 | 0 | ours | subproc | yes | {run.steps_at_threshold} |" in out


def test_with_a_stop_multiple_ours_runs_first_and_sb3_gets_that_multiple_of_our_time(monkeypatch):
    calls = []

    def fake_run(contender, env_id, seed, root, **kwargs):
        calls.append((contender.name, seed, kwargs["max_minutes"], kwargs["time_limit_outcome"]))
        return result(contender.name, seed, 60.0 if contender.name == "ours" else None, 240.0)

    monkeypatch.setattr(time_to_score, "run_contender", fake_run)
    argv = ["--env", "E-v0", "--threshold", "1", "--root", "r", "--seeds", "0", "1", "--sb3-stop-multiple", "4"]
    time_to_score.run_benchmark(time_to_score.parse_args([*argv, "--max-minutes", "30"]))
    assert calls == [
        ("ours", 0, 30.0, "time limit"),
        ("sb3", 0, 4.0, "stopped at 4 x ours"),
        ("ours", 1, 30.0, "time limit"),
        ("sb3", 1, 4.0, "stopped at 4 x ours"),
    ]

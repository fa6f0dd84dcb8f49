"""One trainer per run folder at a time (``sb3_ppo_ext/zoo/run_lock.py``): ``train`` holds its run folder's lock while
it trains, a second trainer of the folder stops with exit status 2 and one line, the operating system releases the lock
of a killed trainer, and a grid leaves a cell whose folder is held alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sb3_ppo_ext import grid
from sb3_ppo_ext.grid.run import sb3_ppo_ext_command
from sb3_ppo_ext.zoo.run_lock import RunFolderBusy, RunFolderLock, run_folder_trainer
from sb3_ppo_ext.zoo.run_selection import LOCK_FILE, holds_only_setup_files

#: A process holding a folder's lock as a trainer does (``flock`` on its lock file, its pid written in it), without the
#: seconds a real ``train`` takes to start; it prints a line once it holds the lock.
HOLD_THE_LOCK = """
import fcntl, os, sys, time
stream = open(sys.argv[1], "a+")
fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
stream.truncate(0)
stream.write(f"{os.getpid()}\\n")
stream.flush()
print("held", flush=True)
time.sleep(120)
"""


def hold_the_lock(run_folder: Path) -> subprocess.Popen:
    """Start a process that holds ``run_folder``'s lock until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(run_folder / LOCK_FILE)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(30)


def test_a_held_folder_names_its_trainer_and_is_free_again_once_that_process_is_killed(tmp_path):
    run = tmp_path / "ppo_ext" / "CartPole-v1_1"
    run.mkdir(parents=True)
    assert run_folder_trainer(str(run)) is None  # no lock file yet
    holder = hold_the_lock(run)
    try:
        assert run_folder_trainer(str(run)) == holder.pid
        with pytest.raises(RunFolderBusy) as refused:
            RunFolderLock(str(run)).acquire()
        assert str(refused.value) == (
            f"{run} is being trained by another trainer (pid {holder.pid}), which holds its lock file {LOCK_FILE}: one "
            f"trainer per run folder at a time; wait for that one to end or stop it (kill {holder.pid}), then run this "
            "command again"
        )
    finally:
        kill(holder)
    assert run_folder_trainer(str(run)) is None  # released by the operating system: never stuck
    lock = RunFolderLock(str(run))
    lock.acquire()
    try:
        assert lock.held and (run / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    finally:
        lock.release()
    assert not lock.held and (run / LOCK_FILE).exists()  # the file stays; unlocked, it means nothing


def test_the_lock_file_is_not_taken_for_a_file_of_the_run(tmp_path):
    """A new run that fails before its first step is removed when it holds nothing but what set-up wrote: the lock
    file, written first, is part of that."""
    (tmp_path / "CartPole-v1").mkdir()
    (tmp_path / "CartPole-v1" / "config.yml").write_text("")
    (tmp_path / "0.monitor.csv").write_text("")
    (tmp_path / LOCK_FILE).write_text("123\n")
    assert holds_only_setup_files(str(tmp_path), "CartPole-v1")


def test_a_grid_reports_a_cell_another_trainer_holds_as_busy_and_leaves_it_alone(tmp_path):
    """A grid killed with SIGKILL leaves its trainers running (each in a session of its own): the next ``run`` must
    neither start a second trainer on the cell, nor move its folder aside, nor count it failed or done."""
    path = tmp_path / "grid.yml"
    path.write_text("tasks:\n  CartPole-v1: {seeds: [0], n_timesteps: 16384, save_freq: 2048}\n")
    (cell,) = grid.load_grid(str(path))
    root = str(tmp_path / "runs")
    folder = Path(cell.folder(root))
    run = folder / "ppo_ext" / "CartPole-v1_1"
    run.mkdir(parents=True)
    holder = hold_the_lock(run)
    try:
        line = grid.run_cell(cell, root)
        assert line == f"busy  {folder} (trained by pid {holder.pid}; `run` takes it up once that trainer has ended)"
        assert not grid.run_grid([cell], root, jobs=1)  # not done
    finally:
        kill(holder)
    assert sorted(os.listdir(folder)) == ["ppo_ext"] and sorted(os.listdir(run)) == [LOCK_FILE]
    assert not [name for name in os.listdir(folder.parent) if ".interrupted-" in name]


def tiny_train(*argv: str) -> list[str]:
    """``sb3-ppo-ext train`` of a tiny CartPole run (one epoch per update, no evaluation, one thread)."""
    return [*sb3_ppo_ext_command(), "train", *argv, "--no-progress", "--verbose", "0", "--num-threads", "1"]


def test_a_second_trainer_of_a_run_folder_exits_2_and_a_killed_trainer_leaves_the_folder_free(tmp_path):
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    log = tmp_path / "first.log"
    long_run = ["--env", "CartPole-v1", "-n", "1000000", "-f", str(tmp_path), "--eval-freq", "-1", "--save-freq", "2048"]
    with open(log, "w") as output:
        # At the lowest priority, so that its training leaves the CPU to the second trainer's start.
        first = subprocess.Popen(
            tiny_train(*long_run, "--hyperparams", "n_epochs:1"),
            cwd=tmp_path,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.nice(19),
        )
    run = tmp_path / "ppo_ext" / "CartPole-v1_1"
    try:
        deadline = time.time() + 90
        # Its settings written (what --resume reads) and its lock held: set-up is over, it trains.
        while not ((run / "CartPole-v1" / "args.yml").is_file() and run_folder_trainer(str(run)) == first.pid):
            assert first.poll() is None, log.read_text()
            assert time.time() < deadline, "the first trainer did not start training"
            time.sleep(0.2)

        second = subprocess.run(
            tiny_train("--resume", str(run)), cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines()[-1] == (
            f"sb3-ppo-ext train: error: {run} is being trained by another trainer (pid {first.pid}), which holds its "
            f"lock file {LOCK_FILE}: one trainer per run folder at a time; wait for that one to end or stop it "
            f"(kill {first.pid}), then run this command again"
        )
        assert first.poll() is None  # the first trains on, untouched
    finally:
        kill(first)
    assert run_folder_trainer(str(run)) is None
    lock = RunFolderLock(str(run))
    lock.acquire()  # the folder is free for the next trainer: a killed trainer's lock is never left behind
    lock.release()

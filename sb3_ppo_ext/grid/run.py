"""Running a grid: each cell through ``sb3-ppo-ext train`` in its own process, resumable, stoppable by SIGTERM or
Ctrl-C; and snapshots of unfinished cells to carry them to another machine."""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sb3_ppo_ext.callbacks.checkpoint import find_latest_checkpoint, model_zip_defect
from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.grid.cells import DONE_FILE, Cell, cell_folders, cell_run_folders
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE
from sb3_ppo_ext.zoo.resume import run_settings, saved_num_timesteps
from sb3_ppo_ext.zoo.run_lock import run_folder_trainer
from sb3_ppo_ext.zoo.run_text_files import bounded_lines


def sb3_ppo_ext_command() -> list[str]:
    """The command that starts this package's CLI: the venv's ``sb3-ppo-ext`` script, else ``python -m sb3_ppo_ext``."""
    script = shutil.which("sb3-ppo-ext", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "sb3_ppo_ext"]


#: The signals that stop a grid (:func:`stop_training`): a scheduler's SIGTERM, a terminal's Ctrl-C (SIGINT), and the
#: terminal closing (SIGHUP).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

#: Set when the grid is told to stop (one of :data:`STOP_SIGNALS`): no further cell starts.
_STOPPING = threading.Event()


#: The training processes running now, so that a stop reaches them.
_TRAINING: set[subprocess.Popen] = set()


def stop_training(signum: int = signal.SIGTERM, frame: Any = None) -> None:
    """The grid's handler of :data:`STOP_SIGNALS`: start no further cell and send SIGTERM to the training processes,
    which save the model trained so far and exit (``train`` handles SIGTERM as Ctrl-C). They run in sessions of their
    own, so that a terminal's Ctrl-C or hang-up reaches them once, through here. Each cell then records its session
    (wall clock, exit code) before the grid exits, so that an interrupted cell's time is counted when it is resumed;
    without this the grid died before writing it. A stop signal that comes while the grid stops changes nothing: each
    trainer had its SIGTERM and is saving (a second one would end it at once, before its model is saved)."""
    if _STOPPING.is_set():
        return
    _STOPPING.set()
    for process in list(_TRAINING):
        process.send_signal(signal.SIGTERM)


def run_cell(cell: Cell, root: str) -> str:
    """Train one cell unless it is done; returns what happened (one line for the log)."""
    folder = cell.folder(root)
    done_path = os.path.join(folder, DONE_FILE)
    if os.path.isfile(done_path):
        return f"skip  {folder} (done)"
    if _STOPPING.is_set():
        return f"stop  {folder} (not started: the grid was stopped)"
    busy = _busy_line(folder)
    if busy is not None:  # a trainer left running (by a grid killed with SIGKILL) still trains the cell: leave it be
        return busy
    run_folder = _resumable_run(folder)
    if run_folder is not None:
        argv = cell.resume_argv(run_folder)
    else:
        if cell.trained_agent is not None and not os.path.isfile(cell.trained_agent):
            return f"FAIL  {folder} (its trained_agent {cell.trained_agent} does not exist)"
        if os.path.isdir(folder):
            aside = f"{folder}.interrupted-{int(time.time())}"
            os.replace(folder, aside)
        os.makedirs(folder)
        argv = cell.train_argv(folder)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.time()
    with open(os.path.join(folder, "train.log"), "a", encoding="utf-8") as log:
        log.write(shlex.join(["sb3-ppo-ext", *argv]) + "\n")
        log.flush()
        process = subprocess.Popen(
            [*sb3_ppo_ext_command(), *argv], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        _TRAINING.add(process)
        if _STOPPING.is_set():  # stopped while this cell was starting, before the signal could reach it
            process.send_signal(signal.SIGTERM)
        try:
            returncode = process.wait()
        finally:
            _TRAINING.discard(process)
    wall = time.time() - start
    busy = _busy_line(folder) if returncode != 0 else None
    if busy is not None:  # another trainer took the run folder between the check above and this start
        return busy
    sessions_path = os.path.join(folder, SESSIONS_FILE)
    append_session(sessions_path, {"wall_s": round(wall, 1), "exit": returncode, "command": argv})
    if returncode != 0:
        if _STOPPING.is_set():
            return f"stop  {folder} (stopped after {wall:.0f} s; `run` takes it up again)"
        return f"FAIL  {folder} (exit {returncode}, see train.log)"
    unfinished = _why_unfinished(folder)
    if unfinished is not None:
        return f"stop  {folder} ({unfinished}; `run` takes it up again)"
    total = sessions_wall_seconds(sessions_path)
    with atomic_write(done_path, "w") as stream:  # a stop mid-write leaves no half done.json
        json.dump(
            {**dataclasses.asdict(cell), "wall_s": total, "command": ["sb3-ppo-ext", *cell.train_argv(folder)]},
            stream,
            indent=1,
        )
    resumed = " in several sessions" if run_folder is not None else ""
    return f"done  {folder} ({total:.0f} s{resumed})"


#: A cell's log of its training sessions, one JSON line each (wall clock, exit status, command).
SESSIONS_FILE = "sessions.jsonl"


def append_session(path: str, session: dict[str, Any]) -> None:
    """Add one training session's line to a cell's ``sessions.jsonl``, on a line of its own even when the file ends
    in a line cut short (the grid killed while it wrote one)."""
    with open(path, "a+b") as stream:  # "a": every write goes to the end, wherever the last read left the position
        cut_short = False
        if stream.seek(0, os.SEEK_END) > 0:
            stream.seek(-1, os.SEEK_END)
            cut_short = stream.read(1) != b"\n"
        stream.write((("\n" if cut_short else "") + json.dumps(session) + "\n").encode("utf-8"))


def sessions_wall_seconds(path: str) -> float:
    """The wall clock of a cell's training sessions, summed over the lines of its ``sessions.jsonl``; a line that is
    not a session's (cut short by a kill, or edited) counts for nothing, so one damaged line costs its session's
    seconds, not the cell."""
    total = 0.0
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in bounded_lines(stream, path, skip_long=True):
            try:
                session = json.loads(line)
            except ValueError:
                continue
            seconds = session.get("wall_s") if isinstance(session, dict) else None
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds):
                total += max(float(seconds), 0.0)
    return total


def _busy_line(cell_folder: str) -> str | None:
    """The line of a cell whose run folder another trainer holds now (its lock, :mod:`~sb3_ppo_ext.zoo.run_lock`),
    else ``None``. Such a cell is neither failed nor done: the next ``run`` takes it up once that trainer has ended."""
    for run_folder in cell_run_folders(cell_folder):
        pid = run_folder_trainer(run_folder)
        if pid is not None:
            trainer = f"pid {pid}" if pid else "a trainer starting up"
            return f"busy  {cell_folder} (trained by {trainer}; `run` takes it up once that trainer has ended)"
    return None


def _why_unfinished(cell_folder: str) -> str | None:
    """Why a cell whose ``train`` exited 0 is not done: its run saved its final model before spending its budget
    (stopped by Ctrl-C, which ends ``train`` as rl-zoo3 does: the model saved, exit status 0), or its final model is
    damaged (``--resume`` then continues from the newest intact checkpoint). ``None`` for a finished run, or one
    whose settings or final model cannot be found (then ``train``'s exit status stands)."""
    for run_folder in cell_run_folders(cell_folder):
        try:
            params_path, arguments, config = run_settings(run_folder)
        except (OSError, ValueError):  # ResumeError is a ValueError
            continue
        final_model = params_path + ".zip"
        if not os.path.isfile(final_model):
            continue
        defect = model_zip_defect(final_model)
        if defect is not None:
            return f"its final model {final_model} is damaged: {defect}"
        try:
            steps = saved_num_timesteps(final_model)
        except ValueError:  # no step count in the zip: not a model this package's `train` wrote
            continue
        budget = arguments.get("n_timesteps")
        if not isinstance(budget, int) or budget <= 0:  # rl-zoo3's -n default (-1): the config's budget
            budget = config.get("n_timesteps")
        if isinstance(budget, (int, float)) and steps < int(budget):
            return f"stopped at {steps} of {int(budget)} steps"
    return None


def _resumable_run(cell_folder: str) -> str | None:
    """The rl-zoo3 run folder of an unfinished cell when it saved an intact checkpoint or final model to continue from
    (a cell stopped mid-run, or a finished run copied in to be trained on to a larger budget), else ``None``. A
    damaged model (a file cut short by a process killed while writing it) does not count: a run with nothing intact
    to continue from starts again rather than failing at every ``run``."""
    for run_folder in cell_run_folders(cell_folder):
        for args_path in sorted(glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml"))):
            final_model = os.path.dirname(args_path) + ".zip"
            intact_final_model = os.path.isfile(final_model) and model_zip_defect(final_model) is None
            if intact_final_model or find_latest_checkpoint(run_folder) is not None:
                return run_folder
    return None


def snapshot_cells(root: str, destination: str) -> list[str]:
    """Copy what each unfinished cell under ``root`` needs to be resumed elsewhere into ``destination``, same layout.

    For a run of more than one session on a machine that may not come back: its newest intact checkpoint (model zip
    and ``VecNormalize`` statistics, pickle and plain twin), the run's settings (``<env>/`` with ``args.yml``,
    ``config.yml``), ``evaluations.npz``, ``progress.csv``, the monitor files, and the cell's ``train.log`` /
    ``sessions.jsonl``. Older snapshots of a cell are replaced. Copy ``destination`` back under a root (any files
    missing there) and ``run`` resumes the cell. Finished cells are left out: collect their results instead.

    :returns: one line per cell copied.
    """
    check_snapshot_destination(root, destination)
    snapshots = []  # every target checked before any older snapshot is deleted
    for cell_folder in cell_folders(root):
        run_folder = _resumable_run(cell_folder)
        if run_folder is None or os.path.isfile(os.path.join(cell_folder, DONE_FILE)):
            continue
        checkpoint = find_latest_checkpoint(run_folder)
        if checkpoint is None:
            continue
        snapshots.append(
            (cell_folder, run_folder, checkpoint, _snapshot_target(destination, os.path.relpath(cell_folder, root)))
        )
    lines = []
    for cell_folder, run_folder, checkpoint, target_cell in snapshots:
        if os.path.isdir(target_cell):
            shutil.rmtree(target_cell)
        target_run = os.path.join(target_cell, os.path.relpath(run_folder, cell_folder))
        os.makedirs(target_run)
        files = [
            checkpoint.model_path,
            checkpoint.vecnormalize_path,
            checkpoint.statistics_path,
            os.path.join(run_folder, "evaluations.npz"),
            os.path.join(run_folder, PROGRESS_FILE),
            *glob.glob(os.path.join(glob.escape(run_folder), "*.monitor.csv")),
        ]
        for path in files:
            if path is not None and os.path.isfile(path):
                shutil.copy2(path, target_run)
        for name in ("train.log", SESSIONS_FILE):
            if os.path.isfile(os.path.join(cell_folder, name)):
                shutil.copy2(os.path.join(cell_folder, name), target_cell)
        for params in glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml")):
            shutil.copytree(
                os.path.dirname(params),
                os.path.join(target_run, os.path.basename(os.path.dirname(params))),
                ignore=shutil.ignore_patterns("*.pkl", "*.npz"),
            )
        lines.append(f"saved {target_cell} at {checkpoint.num_timesteps} steps")
    return lines


def _snapshot_target(destination: str, relative: str) -> str:
    """The folder of a cell's snapshot, ``destination/relative``, after checking that neither it nor a folder between
    ``destination`` and it is a symbolic link: the older snapshot replaced there must be ``--to``'s own, not a folder a
    link points to (another run, the grid's root).

    :raises ValueError: naming the link.
    """
    path = destination
    for part in relative.split(os.sep):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise ValueError(
                f"{path} is a symbolic link (to {os.path.realpath(path)}); snapshot writes and replaces only folders of "
                "--to's own, reached through no link"
            )
    return path


def check_snapshot_destination(root: str, destination: str) -> None:
    """Refuse a snapshot folder that is the grid's root, lies inside it or holds it, or is a symbolic link: replacing
    a cell's older snapshot there would delete the cell itself (or another cell, or a folder the link points to)
    before copying it.

    :raises ValueError: naming both folders, or the link.
    """
    if os.path.islink(os.path.normpath(destination)):
        raise ValueError(f"--to {destination} is a symbolic link (to {os.path.realpath(destination)}); give the folder itself")
    real_root, real_destination = os.path.realpath(root), os.path.realpath(destination)
    if os.path.commonpath([real_root, real_destination]) in (real_root, real_destination):
        raise ValueError(
            f"--to {destination} must be a folder outside the grid's root {root}, neither inside it nor holding it "
            "(a snapshot replaces the older one of each cell: here, the cells themselves)"
        )


def ignore_stop_signals_once_stopped() -> None:
    """After :func:`run_grid` on the command line: when the grid was stopped (one of :data:`STOP_SIGNALS`), ignore
    those signals for the rest of the process, which ends now. A second Ctrl-C pressed while the grid stops would
    otherwise kill it as the interpreter shuts down (Python gives SIGINT back to the system's default then), with exit
    status -2 / 130 instead of the grid's 1. A signal the grid was started to ignore stays ignored; off the main thread
    nothing changes."""
    if not _STOPPING.is_set() or threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def run_grid(cells: Sequence[Cell], root: str, jobs: int) -> bool:
    """Run the cells, ``jobs`` at a time; True when every cell is done. SIGTERM or Ctrl-C stops it cleanly
    (:func:`stop_training`)."""
    _STOPPING.clear()
    in_main_thread = threading.current_thread() is threading.main_thread()
    # A signal the grid was started to ignore stays ignored (`nohup` ignores SIGHUP).
    handled = [signum for signum in STOP_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN] if in_main_thread else []
    previous_handlers = {signum: signal.signal(signum, stop_training) for signum in handled}
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes = []
            for line in pool.map(lambda cell: run_cell(cell, root), cells):
                print(line, flush=True)
                outcomes.append(line)
    finally:
        for signum, previous in previous_handlers.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    return not any(line.startswith(("FAIL", "stop", "busy")) for line in outcomes)

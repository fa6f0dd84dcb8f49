"""Time to score: the wall clock from starting a training run until its periodic evaluation first reaches a threshold,
our PPO against Stable-Baselines3's, same task and seeds, with the peak memory of each run.

What it measures. For each seed, each *contender* trains once through the command line, ``sb3-ppo-ext train`` in a
process of its own, as a user runs it: torch's and OpenMP's threads left as the environment sets them (no
``--num-threads``; with ``--one-thread``, ``--num-threads 1`` and ``OMP_NUM_THREADS=1`` for both, the setting of
runs side by side on one core each), and rl-zoo3's periodic deterministic evaluation every ``--eval-freq`` steps
over ``--eval-episodes`` episodes:

- ``ours``: ``--algo ppo_ext`` with its bundled config and the task's preferred VecEnv, plus ``--ours-args`` (its
  fastest local setting, e.g. ``--ours-args "--vec-env shared"``);
- ``sb3``: SB3's own PPO (``--algo ppo``) with rl-zoo3's block for the task (``--sb3-conf``, by default
  ``benchmarks/configs/reference_ppo.yml``) on ``--vec-env subproc``, one process per env (the block's ``n_envs``;
  fewer where memory is short: ``--sb3-args "--hyperparams n_envs:8"``), plus ``--sb3-args``. ``--sb3-conf
  zoo_configs/ppo_ext.yml`` gives SB3's PPO our own block instead, for a task whose block names only SB3's PPO
  arguments and zoo keys (the Humanoid block does): then the two differ in their PPO and VecEnv only.

The command lines are those of the learning grids (:meth:`sb3_ppo_ext.grid.cells.Cell.train_argv`), with the
grid's fixed ``--vec-env dummy`` replaced by each contender's VecEnv and, unless ``--one-thread``, the grid's
``--num-threads 1`` left out.

How. The runs go one after another, each with the whole machine; per seed both contenders run back to back, ours
first on even seeds and SB3 first on odd ones, so that a drift in the machine's load hits both alike. With
``--sb3-stop-multiple K`` ours runs first on every seed and SB3's run on that seed stops at K times our time to the
threshold (or at ``--max-minutes``, whichever comes first): where SB3 has not reached it by then, the seed's ratio is
the bound ``< 1/K`` (SB3's run may stop at a multiple of ours; the ratio printed is ours over SB3's whole run). While a run
goes, its ``evaluations.npz`` (written by rl-zoo3's evaluation callback) is read every ``--poll-seconds``; the first
poll that finds an evaluation whose mean return is at least the threshold gives the run's time to score (seconds from
starting the process, so the imports and the set-up count, to that poll) and the evaluation's step count; the run is
then stopped (SIGINT to the training process, which closes its envs, then SIGTERM and at last SIGKILL to its whole
process group, VecEnv workers included). A run that spends its budget (the config's ``n_timesteps``, or
``--max-steps``) or runs past ``--max-minutes`` first counts as not reached, with its best evaluation and its wall
clock. At each poll the resident memory of the process tree (the training process and all its descendants) is
summed; the peak of those sums is reported. psutil is not a dependency of the package, so the tree and its memory are
read from ``/proc`` (``/proc/<pid>/task/*/children`` and ``VmRSS`` of ``/proc/<pid>/status``): Linux only. A sum of
RSS counts pages shared between the processes (libraries, shared-memory buffers) once per process, so it is an upper
bound on what the tree holds.

The printout starts with the command, the machine's CPU count and load; then a Markdown table, one row per run; then,
per seed, the ratio of the two wall clocks (ours / SB3) and their median over the seeds where both reached the
threshold. ``--csv`` writes the rows to a file too. Each run's folder is ``<root>/<contender>/seed_<S>/`` with its
``train.log``; a folder left by an earlier run is moved aside first.

The full run for Walker2D (seeds 0 and 1 on the 2-core development machine with the Walker2D block bundled since
2026-12-05: 180 s and 174 s for ours, 991 s and 807 s for SB3; docs/results/walker2d_results.md). The Humanoid
against SB3's PPO with rl-zoo3's HumanoidBulletEnv-v0 block, SB3's run stopped at 4 times our time to 2500 (hours
per run); ``--sb3-conf zoo_configs/ppo_ext.yml`` instead gives SB3's PPO our block (64 PyBullet processes for SB3,
about 14 GB)::

    python benchmarks/time_to_score.py --env sb3_ppo_ext/Walker2D-v0 --threshold 2000 --seeds 0 1 2 \\
        --eval-freq 50000 --root ~/runs/time_to_score/walker --csv docs/results/time_to_score_walker.csv
    python benchmarks/time_to_score.py --env sb3_ppo_ext/Humanoid-v0 --threshold 2500 --seeds 0 1 \\
        --eval-freq 100000 --sb3-stop-multiple 4 --root ~/runs/time_to_score/humanoid \\
        --csv docs/results/time_to_score_humanoid.csv

A smoke run (seconds; our PPO only, since the reference config has no CartPole block)::

    python benchmarks/time_to_score.py --env CartPole-v1 --threshold 15 --seeds 0 --contenders ours \\
        --eval-freq 256 --max-steps 20000 --root /tmp/time_to_score_smoke
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import glob
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

import numpy as np

from sb3_ppo_ext.grid.cells import CELL_THREADS, CELL_VEC_ENV, Cell
from sb3_ppo_ext.grid.collect import cell_run_folder
from sb3_ppo_ext.grid.run import sb3_ppo_ext_command
from sb3_ppo_ext.zoo.resume import read_evaluations as read_run_evaluations
from sb3_ppo_ext.zoo.vec_env_choice import preferred_vec_env

#: The repository root: where the default reference config's path starts.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: rl-zoo3's tuned PPO blocks, for SB3's PPO.
REFERENCE_CONF = os.path.join(REPOSITORY, "benchmarks", "configs", "reference_ppo.yml")
#: The contenders, in the order they run on even seeds (reversed on odd seeds).
CONTENDERS = ("ours", "sb3")
#: The columns of ``--csv``.
CSV_FIELDS = (
    "task",
    "seed",
    "contender",
    "vec_env",
    "reached",
    "steps_at_threshold",
    "wall_s_to_threshold",
    "wall_s_run",
    "peak_rss_mib",
    "best_eval",
    "best_eval_steps",
    "outcome",
    "command",
)


@dataclasses.dataclass(frozen=True)
class Contender:
    """One side of the comparison: how its training command is made.

    :param name: its name in the printout (``ours`` or ``sb3``).
    :param algo: the ``sb3-ppo-ext train --algo``.
    :param conf: the config file (``--conf-file``), or ``None`` for the algorithm's bundled one.
    :param vec_env: the ``--vec-env`` arguments (empty: the task's preferred VecEnv).
    :param extra_args: more ``sb3-ppo-ext train`` arguments, after all others (so they override them).
    :param one_thread: keep the grid's ``--num-threads 1`` (and run with ``OMP_NUM_THREADS=1``); otherwise the run
        has the threads a user's plain command gets.
    """

    name: str
    algo: str
    conf: str | None
    vec_env: tuple[str, ...]
    extra_args: tuple[str, ...]
    one_thread: bool = False

    def train_argv(
        self, env_id: str, seed: int, folder: str, eval_freq: int, eval_episodes: int, max_steps: int | None
    ) -> list[str]:
        """The ``sb3-ppo-ext train`` arguments of this contender's run on ``env_id`` with ``seed`` into ``folder``
        (``-n max_steps`` unless it is ``None``)."""
        cell = Cell(
            task=env_id,
            variant=self.name,
            seed=seed,
            algo=self.algo,
            conf=self.conf,
            n_timesteps=max_steps,
            eval_freq=eval_freq,
            eval_episodes=eval_episodes,
        )
        argv = without_arguments(cell.train_argv(folder), CELL_VEC_ENV)
        if not self.one_thread:
            argv = without_arguments(argv, CELL_THREADS)
        return [*argv, *self.vec_env, *self.extra_args]

    def environment(self) -> dict[str, str]:
        """The environment of this contender's training process: this one's, with ``OMP_NUM_THREADS=1`` where it
        runs on one thread."""
        return {**os.environ, "OMP_NUM_THREADS": "1"} if self.one_thread else dict(os.environ)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What one training run gave.

    :param task: the env id.
    :param seed: the run's seed.
    :param contender: the contender's name.
    :param vec_env: the ``--vec-env`` type it trained on (the last one its command gives, else the task's preferred).
    :param steps_at_threshold: the step count of the first evaluation reaching the threshold, or ``None``.
    :param wall_s_to_threshold: seconds from starting the process to the poll that saw that evaluation, or ``None``.
    :param wall_s_run: seconds from starting the process until it was told to stop or ended.
    :param peak_rss_mib: the largest sum of resident memory over the process tree seen at a poll, in MiB.
    :param best_eval: the best evaluation's mean return, or ``None`` if there was no evaluation.
    :param best_eval_steps: that evaluation's step count, or ``None``.
    :param outcome: ``reached``, ``budget spent``, ``time limit``, ``stopped at K x ours`` or ``failed (exit N)``.
    :param command: the training command, shell-quoted.
    :param pid: the training process's id, also its process group's and session's.
    """

    task: str
    seed: int
    contender: str
    vec_env: str
    steps_at_threshold: int | None
    wall_s_to_threshold: float | None
    wall_s_run: float
    peak_rss_mib: float
    best_eval: float | None
    best_eval_steps: int | None
    outcome: str
    command: str
    pid: int

    @property
    def reached(self) -> bool:
        """Whether an evaluation reached the threshold."""
        return self.wall_s_to_threshold is not None


def without_arguments(argv: Sequence[str], fixed: tuple[str, ...]) -> list[str]:
    """``argv`` without the run of arguments ``fixed`` (one of the learning grid's fixed settings,
    :data:`CELL_VEC_ENV` or :data:`CELL_THREADS`).

    :raises ValueError: if ``argv`` does not hold them.
    """
    argv = list(argv)
    width = len(fixed)
    for start in range(len(argv) - width + 1):
        if tuple(argv[start : start + width]) == fixed:
            return argv[:start] + argv[start + width :]
    raise ValueError(f"the grid's training arguments no longer hold {fixed}: {argv}")


def vec_env_of(argv: Sequence[str], env_id: str) -> str:
    """The ``--vec-env`` type a training command trains on: its last ``--vec-env``, else the task's preferred one."""
    chosen = None
    for index, argument in enumerate(argv):
        if argument == "--vec-env" and index + 1 < len(argv):
            chosen = argv[index + 1]
        elif argument.startswith("--vec-env="):
            chosen = argument.partition("=")[2]
    return chosen if chosen is not None else f"{preferred_vec_env(env_id)} (task's default)"


def read_evaluations(run_folder: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The step counts and mean returns of the evaluations in ``<run_folder>/evaluations.npz`` so far, read as the
    grid reads them (:func:`sb3_ppo_ext.zoo.resume.read_evaluations`).

    Empty arrays when there is no run folder or file yet, or when the file is being rewritten as it is read (rl-zoo3's
    callback rewrites it in place at each evaluation; the next poll reads it whole).
    """
    if run_folder is not None:
        try:
            evaluations = read_run_evaluations(run_folder)
        except ValueError:  # no file yet, or one caught half-written
            pass
        else:
            return evaluations["timesteps"].astype(int), evaluations["results"].mean(axis=1)
    return np.zeros(0, dtype=int), np.zeros(0)


def first_reaching(means: np.ndarray, threshold: float) -> int | None:
    """The index of the first evaluation whose mean return is at least ``threshold``, or ``None``."""
    reaching = np.flatnonzero(means >= threshold)
    return int(reaching[0]) if reaching.size else None


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants alive now, read from ``/proc/<pid>/task/*/children`` (Linux)."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        for children_path in glob.glob(f"/proc/{current}/task/*/children"):
            with contextlib.suppress(OSError):
                with open(children_path) as children:
                    pending.extend(int(child) for child in children.read().split())
    return tree


def resident_kib(pid: int) -> int:
    """``VmRSS`` of ``/proc/<pid>/status`` in KiB; 0 when the process is gone or has no memory (a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_resident_kib(pid: int) -> int:
    """The resident memory of ``pid`` and its descendants, summed, in KiB."""
    return sum(resident_kib(member) for member in process_tree(pid))


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is still alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process_group(process: subprocess.Popen, grace_seconds: float) -> None:
    """Stop a training process started in a session of its own and every process of its group.

    SIGINT to the training process first: rl-zoo3 catches the ``KeyboardInterrupt`` and closes its envs (and their
    worker processes). Whatever of the group is still alive after ``grace_seconds`` gets SIGTERM, and SIGKILL after
    another ``grace_seconds``.
    """
    pgid = process.pid
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    for stop_signal in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and (process.poll() is None or group_alive(pgid)):
            time.sleep(0.1)
        if process.poll() is None or group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, stop_signal)
    process.wait()
    deadline = time.monotonic() + grace_seconds
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def run_contender(
    contender: Contender,
    env_id: str,
    seed: int,
    root: str,
    *,
    threshold: float,
    eval_freq: int,
    eval_episodes: int,
    max_steps: int | None,
    max_minutes: float | None,
    poll_seconds: float,
    grace_seconds: float,
    time_limit_outcome: str = "time limit",
) -> RunResult:
    """Train one contender on ``env_id`` with ``seed`` until its evaluation reaches ``threshold``, its budget is spent
    or ``max_minutes`` pass; see the module's docstring.

    :param contender: what to run.
    :param env_id: the task.
    :param seed: the run's seed.
    :param root: the benchmark's folder; the run's is ``<root>/<contender>/seed_<seed>``.
    :param threshold: the mean evaluation return to reach.
    :param eval_freq: steps between evaluations.
    :param eval_episodes: episodes per evaluation.
    :param max_steps: the training budget (``-n``), or ``None`` for the config's.
    :param max_minutes: the wall-clock limit of the run, or ``None`` for none.
    :param poll_seconds: seconds between reads of the evaluations and the memory.
    :param grace_seconds: seconds a stopping process gets before the next, harder signal.
    :param time_limit_outcome: the outcome of a run stopped at ``max_minutes``.
    """
    folder = os.path.join(root, contender.name, f"seed_{seed}")
    if os.path.exists(folder):
        os.replace(folder, f"{folder}.previous-{int(time.time())}")
    os.makedirs(folder)
    argv = contender.train_argv(env_id, seed, folder, eval_freq, eval_episodes, max_steps)
    command = shlex.join(["sb3-ppo-ext", *argv])
    deadline = None if max_minutes is None else max_minutes * 60.0
    peak_kib = 0
    reached_at: tuple[int, float] | None = None
    timesteps, means = read_evaluations(None)
    with open(os.path.join(folder, "train.log"), "w", encoding="utf-8") as log:
        log.write(command + "\n")
        log.flush()
        start = time.monotonic()
        process = subprocess.Popen(
            [*sb3_ppo_ext_command(), *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=contender.environment(),
            start_new_session=True,
        )
        outcome: str | None = None
        try:
            while outcome is None:
                try:
                    returncode = process.wait(timeout=poll_seconds)
                    outcome = "budget spent" if returncode == 0 else f"failed (exit {returncode})"
                except subprocess.TimeoutExpired:
                    peak_kib = max(peak_kib, tree_resident_kib(process.pid))
                elapsed = time.monotonic() - start
                timesteps, means = read_evaluations(cell_run_folder(folder))
                index = first_reaching(means, threshold)
                if index is not None:
                    reached_at, outcome = (int(timesteps[index]), elapsed), "reached"
                elif outcome is None and deadline is not None and elapsed >= deadline:
                    outcome = time_limit_outcome
            wall_s_run = time.monotonic() - start
        finally:
            stop_process_group(process, grace_seconds)
    best = int(np.argmax(means)) if means.size else None
    return RunResult(
        task=env_id,
        seed=seed,
        contender=contender.name,
        vec_env=vec_env_of(argv, env_id),
        steps_at_threshold=None if reached_at is None else reached_at[0],
        wall_s_to_threshold=None if reached_at is None else reached_at[1],
        wall_s_run=wall_s_run,
        peak_rss_mib=peak_kib / 1024,
        best_eval=None if best is None else float(means[best]),
        best_eval_steps=None if best is None else int(timesteps[best]),
        outcome=outcome or "stopped",
        command=command,
        pid=process.pid,
    )


def running_order(contenders: Sequence[Contender], seed: int, *, ours_first: bool = False) -> list[Contender]:
    """The contenders in the order they run for ``seed``: as given on even seeds, reversed on odd ones; as given on
    every seed with ``ours_first`` (SB3's stop then depends on our run)."""
    return list(contenders) if ours_first or seed % 2 == 0 else list(reversed(contenders))


def sb3_time_limit(max_minutes: float | None, stop_multiple: float | None, ours: RunResult | None) -> tuple[float | None, str]:
    """SB3's wall-clock limit on one seed, in minutes, and the outcome its run gets when it passes it.

    :param max_minutes: ``--max-minutes``, or ``None``.
    :param stop_multiple: ``--sb3-stop-multiple``, or ``None``.
    :param ours: our run on the same seed, or ``None`` when it did not run.
    :returns: the smaller of ``max_minutes`` and ``stop_multiple`` times our time to the threshold (where both are
        given and ours reached it), and ``"time limit"`` or ``"stopped at K x ours"`` for the limit that applies.
    """
    if stop_multiple is None or ours is None or ours.wall_s_to_threshold is None:
        return max_minutes, "time limit"
    multiple_minutes = stop_multiple * ours.wall_s_to_threshold / 60.0
    if max_minutes is not None and max_minutes <= multiple_minutes:
        return max_minutes, "time limit"
    return multiple_minutes, f"stopped at {stop_multiple:g} x ours"


def _number(value: float | int | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def results_table(results: Sequence[RunResult]) -> str:
    """A Markdown table, one row per run."""
    lines = [
        "| task | seed | contender | VecEnv | reached? | steps at threshold | wall s to threshold | peak RSS MiB | "
        "best eval (at steps) | run ended |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        wall = _number(result.wall_s_to_threshold) if result.reached else f"not in {result.wall_s_run:.0f}"
        best = f"{_number(result.best_eval, 1)} ({_number(result.best_eval_steps)})"
        lines.append(
            f"| {result.task} | {result.seed} | {result.contender} | {result.vec_env} | "
            f"{'yes' if result.reached else 'no'} | {_number(result.steps_at_threshold)} | {wall} | "
            f"{result.peak_rss_mib:.0f} | {best} | {result.outcome} |"
        )
    return "\n".join(lines)


def seed_ratio(ours: RunResult, sb3: RunResult) -> tuple[str, float | None]:
    """Our wall clock to the threshold over SB3's for one seed: the text to print and the ratio, ``None`` unless both
    reached it. Where only one reached it, the other's whole run bounds the ratio (``<`` or ``>``)."""
    if ours.wall_s_to_threshold is not None and sb3.wall_s_to_threshold is not None:
        ratio = ours.wall_s_to_threshold / sb3.wall_s_to_threshold
        return f"{ratio:.2f}", ratio
    if ours.wall_s_to_threshold is not None:
        return f"< {ours.wall_s_to_threshold / sb3.wall_s_run:.2f} (SB3 did not reach it)", None
    if sb3.wall_s_to_threshold is not None:
        return f"> {ours.wall_s_run / sb3.wall_s_to_threshold:.2f} (ours did not reach it)", None
    return "- (neither reached it)", None


def ratio_table(results: Sequence[RunResult]) -> str:
    """Per seed, both wall clocks to the threshold and their ratio ours / SB3, then the median ratio over the seeds
    where both reached it; empty unless some seed has both contenders."""
    by_seed = {(result.task, result.seed, result.contender): result for result in results}
    pairs = [
        (by_seed[task, seed, "ours"], by_seed[task, seed, "sb3"])
        for task, seed, contender in by_seed
        if contender == "ours" and (task, seed, "sb3") in by_seed
    ]
    if not pairs:
        return ""
    lines = ["| task | seed | ours wall s | sb3 wall s | ours / sb3 |", "|---|---|---|---|---|"]
    ratios = []
    for ours, sb3 in pairs:
        text, ratio = seed_ratio(ours, sb3)
        if ratio is not None:
            ratios.append(ratio)
        lines.append(
            f"| {ours.task} | {ours.seed} | {_number(ours.wall_s_to_threshold)} | {_number(sb3.wall_s_to_threshold)} | "
            f"{text} |"
        )
    median = f"{statistics.median(ratios):.2f}" if ratios else "-"
    lines += ["", f"Median ratio ours / sb3: {median} (over the {len(ratios)} of {len(pairs)} seeds where both reached it)"]
    return "\n".join(lines)


def write_csv(results: Sequence[RunResult], path: str) -> None:
    """Write ``results`` to the CSV file ``path`` with the columns :data:`CSV_FIELDS`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for result in results:
            writer.writerow({**dataclasses.asdict(result), "reached": result.reached})


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--env", required=True, help="the task's env id")
    parser.add_argument("--threshold", type=float, required=True, help="the mean evaluation return to reach")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the seeds (default: 0)")
    parser.add_argument("--root", required=True, help="the folder of the runs: <root>/<contender>/seed_<S>")
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS), help="default: both")
    parser.add_argument("--eval-freq", type=int, default=50_000, help="steps between evaluations (default: 50000)")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation (default: 10)")
    parser.add_argument("--max-steps", type=int, help="training budget of every run (default: its config's)")
    parser.add_argument("--max-minutes", type=float, help="wall-clock limit of every run (default: none)")
    parser.add_argument(
        "--sb3-stop-multiple",
        type=float,
        help="stop SB3's run on a seed at this multiple of our time to the threshold (ours then runs first); "
        "where SB3 has not reached it, the ratio is a bound (default: no such stop)",
    )
    parser.add_argument("--ours-args", default="", help='more `train` arguments for ours, e.g. "--vec-env shared"')
    parser.add_argument("--sb3-args", default="", help='more `train` arguments for SB3, e.g. "--hyperparams n_envs:8"')
    parser.add_argument("--sb3-conf", default=REFERENCE_CONF, help="SB3's config file (default: %(default)s)")
    parser.add_argument("--poll-seconds", type=float, default=2.0, help="seconds between polls (default: 2)")
    parser.add_argument("--grace-seconds", type=float, default=10.0, help="seconds a stopping run gets (default: 10)")
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    parser.add_argument(
        "--one-thread",
        action="store_true",
        help="run both contenders with --num-threads 1 and OMP_NUM_THREADS=1 (default: the threads a plain command gets)",
    )
    args = parser.parse_args(argv)
    for name in ("eval_freq", "eval_episodes", "max_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    for name in ("max_minutes", "poll_seconds", "grace_seconds", "sb3_stop_multiple"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    return args


def contenders_of(args: argparse.Namespace) -> list[Contender]:
    """The contenders the command line asks for, in :data:`CONTENDERS` order."""
    available = {
        "ours": Contender("ours", "ppo_ext", None, (), tuple(shlex.split(args.ours_args)), args.one_thread),
        "sb3": Contender(
            "sb3",
            "ppo",
            os.path.abspath(args.sb3_conf),
            ("--vec-env", "subproc"),
            tuple(shlex.split(args.sb3_args)),
            args.one_thread,
        ),
    }
    return [available[name] for name in CONTENDERS if name in args.contenders]


def run_benchmark(args: argparse.Namespace) -> list[RunResult]:
    """Every contender on every seed, one run at a time, in :func:`running_order`; a line on stderr per run."""
    results = []
    for seed in args.seeds:
        ours: RunResult | None = None
        for contender in running_order(contenders_of(args), seed, ours_first=args.sb3_stop_multiple is not None):
            max_minutes, time_limit_outcome = args.max_minutes, "time limit"
            if contender.name == "sb3":
                max_minutes, time_limit_outcome = sb3_time_limit(args.max_minutes, args.sb3_stop_multiple, ours)
            result = run_contender(
                contender,
                args.env,
                seed,
                os.path.abspath(os.path.expanduser(args.root)),
                threshold=args.threshold,
                eval_freq=args.eval_freq,
                eval_episodes=args.eval_episodes,
                max_steps=args.max_steps,
                max_minutes=max_minutes,
                poll_seconds=args.poll_seconds,
                grace_seconds=args.grace_seconds,
                time_limit_outcome=time_limit_outcome,
            )
            if contender.name == "ours":
                ours = result
            print(
                f"seed {seed} {contender.name}: {result.outcome} after {result.wall_s_run:.0f} s, "
                f"peak RSS {result.peak_rss_mib:.0f} MiB",
                file=sys.stderr,
                flush=True,
            )
            results.append(result)
    return results


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def report(argv: Sequence[str], args: argparse.Namespace, results: Sequence[RunResult], load_at_start: str) -> str:
    """The printout: the command, the machine, the training commands, the runs' table and the ratios.

    :param argv: the benchmark's arguments.
    :param args: those arguments parsed.
    :param results: the runs.
    :param load_at_start: :func:`load_average` before the first run.
    """
    lines = [
        "    " + shlex.join(["python", "benchmarks/time_to_score.py", *argv]),
        "",
        f"Machine: {os.cpu_count()} CPUs, load average {load_at_start} at the start, {load_average()} at the end. "
        f"Threshold {args.threshold:g} on {args.env}; "
        f"an evaluation every {args.eval_freq} steps ({args.eval_episodes} episodes), polled every "
        f"{args.poll_seconds:g} s.",
        "",
        "Training commands (first seed):",
        *(f"    {result.command}" for result in results if result.seed == results[0].seed),
        "",
        results_table(results),
    ]
    ratios = ratio_table(results)
    if ratios:
        lines += ["", ratios]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print its report, write the CSV if asked; 0 when every run ended without failing."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    load_at_start = load_average()
    results = run_benchmark(args)
    print(report(argv, args, results, load_at_start), flush=True)
    if args.csv:
        write_csv(results, args.csv)
    return 1 if any(result.outcome.startswith("failed") for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())

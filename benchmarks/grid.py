"""Learning grids: run (task, variant, seed) cells from zoo configs, collect one CSV, report with rliable.

The steps, each a subcommand:

    python benchmarks/grid.py run benchmarks/grids/classic.yml --root ~/runs/grid --jobs 2
    python benchmarks/grid.py evaluate --root ~/runs/grid --episodes 100       # optional
    python benchmarks/grid.py collect --root ~/runs/grid --csv docs/results/classic.csv
    python benchmarks/grid.py report docs/results/classic.csv --plot docs/results/classic.png

``run`` trains every cell of a grid file through ``sb3-ppo-ext train`` (rl-zoo3's machinery: the variant's
``--algo``, config file and ``--hyperparams`` overrides, one torch thread, rl-zoo3's periodic deterministic
evaluation) into ``<root>/<task>/<variant>/seed_<S>/``. It is resumable: a cell that finished has a ``done.json``
and is skipped; a cell that was interrupted continues from its newest checkpoint with ``sb3-ppo-ext train --resume``
(step count, schedules, statistics, adaptive-KL state and evaluations carry on) when it saved one (``save_freq`` in
the grid file), else it is started again after moving its partial folder aside. A cell copied in from another
root with its ``done.json`` removed (e.g. a screening run to be trained on to a larger ``n_timesteps``) continues
from its final model the same way. ``--jobs`` cells run at once, one process each. The wall-clock of a cell is the
sum of its sessions' (``sessions.jsonl``); SIGTERM to ``run`` stops its training processes, records
their sessions and starts no further cell.

``snapshot`` copies the newest checkpoint and settings of every unfinished cell into a folder, to carry a run of
several sessions to another machine (copy it back under the root and ``run`` resumes it).

``evaluate`` plays the final model of every finished cell for many deterministic episodes from one fixed env seed
(the same starts for every cell; through the plain-data agent files that a shipped agent uses) into the cell's
``final_eval.json``: periodic evaluations of 10 episodes are too noisy to rank near-solved tasks such as Pendulum.

``failures`` lists, per task and variant, the starts of those final evaluations that every seed failed (tasks that
report success, e.g. the rocket's landings): hard starts rather than one policy's slips.

``collect`` reads every cell's ``evaluations.npz`` (and ``final_eval.json``) into one CSV, one row per evaluation
(``kind`` periodic or final): task, variant, seed, timesteps, the number of episodes, the mean and standard
deviation over them, the wall-clock seconds of training until that step (from the training envs' monitor files, so
it includes the evaluations before it), whether the run has finished, the episodes' mean length, and the training
values SB3 logged last before it (``train.log``: action std, learning rate, ``approx_kl``, beta).

``report`` prints, per task and variant (finished runs only, unless ``--include-unfinished``), each seed's score
(its final evaluation where every seed has one, else its last periodic one), their mean, the interquartile mean
(IQM) and 95% stratified-bootstrap confidence intervals of both (``rliable``), optionally the wall-clock time to a
score; and plots the learning curves (IQM over seeds with their bootstrap band).

A grid file (YAML)::

    defaults: {eval_freq: 50000, eval_episodes: 10}  # optional, per-task keys override them; also save_freq
    variants:
      ppo_ext: {}                                      # our PPO with the bundled zoo_configs/ppo_ext.yml
      sb3_ppo: {algo: ppo, conf: benchmarks/configs/reference_ppo.yml}
      clip_kl: {hyperparams: {objective: clip_kl_penalty}}
      tuned: {trained_agent: run_state/start/rl_model_1000_steps.zip}  # fine-tune: `train -i` from this model
    tasks:
      Pendulum-v1: {seeds: [0, 1, 2], variants: [ppo_ext, sb3_ppo, clip_kl], n_timesteps: 100000}

Relative ``conf`` and ``trained_agent`` paths are relative to the repository root. A ``trained_agent`` cell starts
from that model (rl-zoo3's ``-i``: its weights and, for a checkpoint ``rl_model_<steps>_steps.zip``, the
``VecNormalize`` statistics saved beside it; the step count, schedules and optimiser start anew), then resumes from
its own checkpoints like any cell.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import yaml

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELL_KEYS = {"seeds", "variants", "n_timesteps", "eval_freq", "eval_episodes", "env_kwargs", "save_freq"}
VARIANT_KEYS = {"algo", "conf", "hyperparams", "trained_agent"}
#: SB3's logged training values that ``collect`` adds to each evaluation (the last logged before it).
TRAIN_LOG_KEYS = ("std", "learning_rate", "approx_kl", "kl_coef")
CSV_FIELDS = ("task", "variant", "seed", "kind", "timesteps", "episodes", "eval_mean", "eval_std", "wall_s", "finished",
              "success_rate", "eval_length", *(f"train_{key}" for key in TRAIN_LOG_KEYS))
#: The env seed of ``evaluate``'s final evaluations: one for every cell, so that every policy meets the same starts.
FINAL_EVAL_SEED = 10_000
FINAL_EVAL_FILE = "final_eval.json"


@dataclasses.dataclass(frozen=True)
class Cell:
    """One training run of the grid: a task, a variant of the algorithm or its settings, and a seed."""

    task: str
    variant: str
    seed: int
    algo: str = "ppo_ext"
    conf: str | None = None
    hyperparams: tuple[tuple[str, Any], ...] = ()
    n_timesteps: int | None = None
    eval_freq: int = 50_000
    eval_episodes: int = 10
    save_freq: int | None = None
    trained_agent: str | None = None

    def folder(self, root: str) -> str:
        """``<root>/<task>/<variant>/seed_<S>``, the task id's ``/`` written as ``-`` (as rl-zoo3 does)."""
        return os.path.join(root, self.task.replace("/", "-"), self.variant, f"seed_{self.seed}")

    def train_argv(self, folder: str) -> list[str]:
        """The ``sb3-ppo-ext train`` arguments of this cell."""
        argv = ["train", "--algo", self.algo, "--env", self.task, "--seed", str(self.seed), "-f", folder,
                "--num-threads", "1", "--eval-freq", str(self.eval_freq), "--eval-episodes", str(self.eval_episodes),
                "--no-progress"]
        if self.conf is not None:
            argv += ["--conf-file", self.conf]
        if self.trained_agent is not None:
            argv += ["-i", self.trained_agent]
        if self.n_timesteps is not None:
            argv += ["-n", str(self.n_timesteps)]
        if self.save_freq is not None:
            argv += ["--save-freq", str(self.save_freq)]
        if self.hyperparams:
            argv += ["--hyperparams", *(f"{key}:{value!r}" for key, value in self.hyperparams)]
        return argv

    def resume_argv(self, run_folder: str) -> list[str]:
        """The ``sb3-ppo-ext train`` arguments that continue this cell's interrupted run from its newest checkpoint."""
        argv = ["train", "--resume", run_folder, "--num-threads", "1", "--no-progress"]
        if self.n_timesteps is not None:
            argv += ["-n", str(self.n_timesteps)]
        if self.save_freq is not None:
            argv += ["--save-freq", str(self.save_freq)]
        return argv


def _check_keys(where: str, given: Iterable[str], allowed: set[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def load_grid(path: str) -> list[Cell]:
    """The cells of a grid file, in file order (task, then variant, then seed).

    :raises ValueError: naming the task or variant whose entry is malformed.
    """
    with open(path, encoding="utf-8") as stream:
        spec = yaml.safe_load(stream)
    if not isinstance(spec, dict) or not isinstance(spec.get("tasks"), dict) or not spec["tasks"]:
        raise ValueError(f"{path}: a grid file needs a non-empty 'tasks' mapping")
    _check_keys(path, spec, {"defaults", "variants", "tasks"})
    defaults = spec.get("defaults") or {}
    _check_keys(f"{path}: defaults", defaults, CELL_KEYS - {"seeds", "variants"})
    variants = spec.get("variants") or {"ppo_ext": {}}
    for name, variant in variants.items():
        _check_keys(f"{path}: variant {name!r}", variant or {}, VARIANT_KEYS)
    cells = []
    for task, entry in spec["tasks"].items():
        entry = {**defaults, **(entry or {})}
        _check_keys(f"{path}: task {task!r}", entry, CELL_KEYS)
        seeds = entry.get("seeds", [0])
        if not isinstance(seeds, list) or not all(isinstance(seed, int) and seed >= 0 for seed in seeds):
            raise ValueError(f"{path}: task {task!r}: seeds must be a list of non-negative integers, got {seeds!r}")
        for name in entry.get("variants", list(variants)):
            if name not in variants:
                raise ValueError(f"{path}: task {task!r} names variant {name!r}, not one of {sorted(variants)}")
            variant = variants[name] or {}
            conf = variant.get("conf")
            if conf is not None and not os.path.isabs(conf):
                conf = os.path.join(REPOSITORY, conf)
            trained_agent = variant.get("trained_agent")
            if trained_agent is not None:
                trained_agent = os.path.join(REPOSITORY, os.path.expanduser(str(trained_agent)))
                if not trained_agent.endswith(".zip"):
                    raise ValueError(f"{path}: variant {name!r}: trained_agent must be a model .zip, got "
                                     f"{variant['trained_agent']!r}")
            hyperparams = dict(variant.get("hyperparams") or {})
            if "env_kwargs" in entry:
                hyperparams["env_kwargs"] = entry["env_kwargs"]
            n_timesteps = entry.get("n_timesteps")
            for seed in seeds:
                cells.append(Cell(
                    task=task, variant=name, seed=seed, algo=variant.get("algo", "ppo_ext"), conf=conf,
                    hyperparams=tuple(sorted(hyperparams.items())),
                    n_timesteps=None if n_timesteps is None else int(float(n_timesteps)),
                    eval_freq=int(float(entry.get("eval_freq", 50_000))),
                    eval_episodes=int(entry.get("eval_episodes", 10)),
                    save_freq=None if entry.get("save_freq") is None else int(float(entry["save_freq"])),
                    trained_agent=trained_agent,
                ))
    return cells


def _sb3_ppo_ext_command() -> list[str]:
    script = shutil.which("sb3-ppo-ext", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "sb3_ppo_ext"]


#: Set when the grid is told to stop (SIGTERM): no further cell starts.
_STOPPING = threading.Event()
#: The training processes running now, so that a stop reaches them.
_TRAINING: set[subprocess.Popen] = set()


def stop_training(signum: int = signal.SIGTERM, frame: Any = None) -> None:
    """The grid's SIGTERM handler: start no further cell and pass the signal on to the training processes. Each cell
    then records its session (wall clock, exit code) before the grid exits, so that an interrupted cell's time is
    counted when it is resumed; without this the grid died before writing it."""
    _STOPPING.set()
    for process in list(_TRAINING):
        process.send_signal(signum)


def run_cell(cell: Cell, root: str) -> str:
    """Train one cell unless it is done; returns what happened (one line for the log)."""
    folder = cell.folder(root)
    done_path = os.path.join(folder, "done.json")
    if os.path.isfile(done_path):
        return f"skip  {folder} (done)"
    if _STOPPING.is_set():
        return f"stop  {folder} (not started: the grid was stopped)"
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
        process = subprocess.Popen([*_sb3_ppo_ext_command(), *argv], stdout=log, stderr=subprocess.STDOUT, env=env)
        _TRAINING.add(process)
        if _STOPPING.is_set():  # stopped while this cell was starting, before the signal could reach it
            process.send_signal(signal.SIGTERM)
        try:
            returncode = process.wait()
        finally:
            _TRAINING.discard(process)
    wall = time.time() - start
    sessions_path = os.path.join(folder, "sessions.jsonl")
    with open(sessions_path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps({"wall_s": round(wall, 1), "exit": returncode, "command": argv}) + "\n")
    if returncode != 0:
        if _STOPPING.is_set():
            return f"stop  {folder} (stopped after {wall:.0f} s; `run` takes it up again)"
        return f"FAIL  {folder} (exit {returncode}, see train.log)"
    with open(sessions_path, encoding="utf-8") as stream:
        total = sum(json.loads(line)["wall_s"] for line in stream if line.strip())
    with open(done_path, "w", encoding="utf-8") as stream:
        json.dump({**dataclasses.asdict(cell), "wall_s": total, "command": ["sb3-ppo-ext", *cell.train_argv(folder)]},
                  stream, indent=1)
    resumed = " in several sessions" if run_folder is not None else ""
    return f"done  {folder} ({total:.0f} s{resumed})"


def _resumable_run(cell_folder: str) -> str | None:
    """The rl-zoo3 run folder of an unfinished cell when it saved a checkpoint or a final model to continue from (a
    cell stopped mid-run, or a finished run copied in to be trained on to a larger budget), else ``None``."""
    for args_path in sorted(glob.glob(os.path.join(glob.escape(cell_folder), "*", "*", "*", "args.yml"))):
        params_folder = os.path.dirname(args_path)
        run_folder = os.path.dirname(params_folder)
        final_model = os.path.join(run_folder, os.path.basename(params_folder) + ".zip")
        if glob.glob(os.path.join(glob.escape(run_folder), "rl_model_*_steps.zip")) or os.path.isfile(final_model):
            return run_folder
    return None


def snapshot_cells(root: str, destination: str) -> list[str]:
    """Copy what each unfinished cell under ``root`` needs to be resumed elsewhere into ``destination``, same layout.

    For a run of more than one session on a machine that may not come back: its newest intact checkpoint (model zip
    and ``VecNormalize`` statistics, pickle and plain twin), the run's settings (``<env>/`` with ``args.yml``,
    ``config.yml``), ``evaluations.npz``, the monitor files, and the cell's ``train.log`` / ``sessions.jsonl``. Older
    snapshots of a cell are replaced. Copy ``destination`` back under a root (any files missing there) and ``run``
    resumes the cell. Finished cells are left out: collect their results instead.

    :returns: one line per cell copied.
    """
    from sb3_ppo_ext.callbacks.checkpoint import find_latest_checkpoint

    lines = []
    for cell_folder in sorted(glob.glob(os.path.join(glob.escape(root), "*", "*", "seed_*"))):
        run_folder = _resumable_run(cell_folder)
        if run_folder is None or os.path.isfile(os.path.join(cell_folder, "done.json")):
            continue
        checkpoint = find_latest_checkpoint(run_folder)
        if checkpoint is None:
            continue
        target_cell = os.path.join(destination, os.path.relpath(cell_folder, root))
        if os.path.isdir(target_cell):
            shutil.rmtree(target_cell)
        target_run = os.path.join(target_cell, os.path.relpath(run_folder, cell_folder))
        os.makedirs(target_run)
        files = [checkpoint.model_path, checkpoint.vecnormalize_path, checkpoint.statistics_path,
                 os.path.join(run_folder, "evaluations.npz"), *glob.glob(os.path.join(glob.escape(run_folder), "*.monitor.csv"))]
        for path in files:
            if path is not None and os.path.isfile(path):
                shutil.copy2(path, target_run)
        for name in ("train.log", "sessions.jsonl"):
            if os.path.isfile(os.path.join(cell_folder, name)):
                shutil.copy2(os.path.join(cell_folder, name), target_cell)
        for params in glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml")):
            shutil.copytree(os.path.dirname(params), os.path.join(target_run, os.path.basename(os.path.dirname(params))),
                            ignore=shutil.ignore_patterns("*.pkl", "*.npz"))
        lines.append(f"saved {target_cell} at {checkpoint.num_timesteps} steps")
    return lines


def run_grid(cells: Sequence[Cell], root: str, jobs: int) -> bool:
    """Run the cells, ``jobs`` at a time; True when every cell is done. SIGTERM stops it cleanly
    (:func:`stop_training`)."""
    _STOPPING.clear()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous_handler = signal.signal(signal.SIGTERM, stop_training) if in_main_thread else None
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes = []
            for line in pool.map(lambda cell: run_cell(cell, root), cells):
                print(line, flush=True)
                outcomes.append(line)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous_handler if previous_handler is not None else signal.SIG_DFL)
    return not any(line.startswith(("FAIL", "stop")) for line in outcomes)


def training_clock(run_folder: str) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative training steps over all envs against wall-clock seconds since the first env started.

    From the ``*.monitor.csv`` files of the training envs (episode end time and length); the steps of an episode
    are counted when it ends.
    """
    starts, ends, lengths = [], [], []
    for path in glob.glob(os.path.join(run_folder, "*.monitor.csv")):
        with open(path, encoding="utf-8") as stream:
            header = json.loads(stream.readline().lstrip("#"))
            rows = list(csv.DictReader(stream))
        starts.append(float(header["t_start"]))
        ends.extend(float(header["t_start"]) + float(row["t"]) for row in rows)
        lengths.extend(int(row["l"]) for row in rows)
    if not starts:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(ends)
    return np.cumsum(np.asarray(lengths)[order]), np.asarray(ends)[order] - min(starts)


def _run_folder(cell_folder: str) -> str | None:
    """rl-zoo3's ``<algo>/<env>_<n>`` folder inside a cell folder (the newest when there are several)."""
    candidates = sorted(glob.glob(os.path.join(cell_folder, "*", "*", "evaluations.npz")), key=os.path.getmtime)
    return os.path.dirname(candidates[-1]) if candidates else None


def _task_of_run(run_folder: str) -> str | None:
    """The env id an unfinished cell trains (``--env`` in its run's ``args.yml``), or ``None`` if unreadable."""
    from sb3_ppo_ext.zoo.hyperparams import load_run_yaml

    for path in glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml")):
        try:
            env_id = load_run_yaml(path).get("env")
        except (ValueError, OSError, AttributeError):
            continue
        if isinstance(env_id, str):
            return env_id
    return None


def train_log_values(path: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The training values SB3 printed in a cell's ``train.log`` (its ``verbose=1`` tables): the steps of each table
    that has ``total_timesteps`` and, per key of :data:`TRAIN_LOG_KEYS`, its value there (NaN where not logged)."""
    steps: list[int] = []
    values: dict[str, list[float]] = {key: [] for key in TRAIN_LOG_KEYS}
    table: dict[str, str] = {}
    if not os.path.isfile(path):
        return np.zeros(0, dtype=int), {key: np.zeros(0) for key in TRAIN_LOG_KEYS}
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if line.startswith("|    "):
                name, _, rest = line[1:].partition("|")
                table[name.strip()] = rest.strip(" |\n")
            elif line.startswith("---") and table:
                if "total_timesteps" in table and ("std" in table or "approx_kl" in table):
                    steps.append(int(float(table["total_timesteps"])))
                    for key in TRAIN_LOG_KEYS:
                        try:
                            values[key].append(float(table.get(key, "nan")))
                        except ValueError:
                            values[key].append(float("nan"))
                table = {}
    return np.asarray(steps, dtype=int), {key: np.asarray(series) for key, series in values.items()}


def collect(root: str) -> list[dict[str, Any]]:
    """One row per evaluation of every cell under ``root`` that has evaluations (finished or not), with the mean
    length of its episodes and the training values logged last before it (``train_std``: the action noise,
    ``train_learning_rate``, ``train_approx_kl``, ``train_kl_coef``: beta)."""
    rows = []
    for seed_folder in sorted(glob.glob(os.path.join(root, "*", "*", "seed_*"))):
        if not os.path.isdir(seed_folder) or ".interrupted-" in seed_folder:
            continue
        run_folder = _run_folder(seed_folder)
        if run_folder is None:
            continue
        task_folder, variant = os.path.split(os.path.dirname(seed_folder))
        done_path = os.path.join(seed_folder, "done.json")
        task = _task_of_run(run_folder) or os.path.basename(task_folder)
        finished = os.path.isfile(done_path)
        if finished:
            with open(done_path, encoding="utf-8") as stream:
                task = json.load(stream)["task"]
        evaluations = np.load(os.path.join(run_folder, "evaluations.npz"))
        clock_steps, clock_seconds = training_clock(run_folder)
        seed = int(seed_folder.rsplit("_", 1)[1])
        successes = evaluations["successes"] if "successes" in evaluations.files else np.empty((0, 0))
        log_steps, log_values = train_log_values(os.path.join(seed_folder, "train.log"))
        for index, (timesteps, results) in enumerate(zip(evaluations["timesteps"], evaluations["results"])):
            reached = np.searchsorted(clock_steps, timesteps)
            wall = float(clock_seconds[reached]) if reached < len(clock_seconds) else float("nan")
            success_rate = float(np.mean(successes[index])) if index < len(successes) and successes[index].size else None
            logged = np.searchsorted(log_steps, timesteps, side="right") - 1
            rows.append({"task": task, "variant": variant, "seed": seed, "kind": "periodic", "timesteps": int(timesteps),
                         "episodes": len(results), "eval_mean": float(np.mean(results)),
                         "eval_std": float(np.std(results)), "wall_s": round(wall, 1), "finished": finished,
                         "success_rate": success_rate, "eval_length": float(np.mean(evaluations["ep_lengths"][index])),
                         **{f"train_{key}": float(series[logged]) if logged >= 0 else float("nan")
                            for key, series in log_values.items()}})
        final_path = os.path.join(seed_folder, FINAL_EVAL_FILE)
        if finished and os.path.isfile(final_path):
            with open(final_path, encoding="utf-8") as stream:
                final = json.load(stream)
            rows.append({"task": task, "variant": variant, "seed": seed, "kind": "final", "timesteps": final["timesteps"],
                         "episodes": final["episodes"], "eval_mean": final["mean_return"],
                         "eval_std": final["std_return"], "wall_s": float("nan"), "finished": True,
                         "success_rate": final["successes"] / final["episodes"] if "successes" in final else None,
                         "eval_length": final.get("mean_length", float("nan")),
                         **{f"train_{key}": float("nan") for key in TRAIN_LOG_KEYS}})
    return rows


def evaluate_cells(root: str, episodes: int, tasks: Sequence[str] | None = None) -> list[str]:
    """Evaluate the final model of every finished cell on ``episodes`` deterministic episodes from env seed
    :data:`FINAL_EVAL_SEED` (the same starts for every cell), through the plain-data agent files a shipped agent
    uses; writes ``final_eval.json`` into the cell. Cells already evaluated with as many episodes are skipped."""
    import tempfile

    from sb3_ppo_ext.pretrained import evaluate_agent, save_pretrained_from_run

    lines = []
    for done_path in sorted(glob.glob(os.path.join(root, "*", "*", "seed_*", "done.json"))):
        seed_folder = os.path.dirname(done_path)
        with open(done_path, encoding="utf-8") as stream:
            task = json.load(stream)["task"]
        if tasks and task not in tasks:
            continue
        final_path = os.path.join(seed_folder, FINAL_EVAL_FILE)
        if os.path.isfile(final_path):
            with open(final_path, encoding="utf-8") as stream:
                if json.load(stream)["episodes"] == episodes:
                    lines.append(f"skip  {seed_folder} (evaluated)")
                    continue
        with tempfile.TemporaryDirectory() as agent:
            try:
                facts = save_pretrained_from_run(seed_folder, agent)
            except ValueError as error:  # e.g. an off-policy actor (DDPG): not an actor-critic policy to pack
                lines.append(f"skip  {seed_folder} (no final evaluation: {error}; report uses its periodic ones)")
                continue
            summary = {**evaluate_agent(agent, episodes, seed=FINAL_EVAL_SEED), "timesteps": facts["timesteps"]}
        with open(final_path, "w", encoding="utf-8") as stream:
            json.dump(summary, stream, indent=1)
        lines.append(f"eval  {seed_folder}: {summary['mean_return']:.1f} over {episodes} episodes")
    return lines


def shared_failures(root: str) -> list[str]:
    """Per task and variant, the starts of the final evaluations (``evaluate``: the same starts for every cell) that
    failed for every seed, and for all but one: hard starts rather than one policy's slips. From the
    ``failed_episodes`` of each finished cell's ``final_eval.json`` (tasks that report success)."""
    failed: dict[tuple[str, str], dict[int, dict[int, str]]] = {}
    for final_path in sorted(glob.glob(os.path.join(glob.escape(root), "*", "*", "seed_*", FINAL_EVAL_FILE))):
        seed_folder = os.path.dirname(final_path)
        with open(final_path, encoding="utf-8") as stream:
            final = json.load(stream)
        if "failed_episodes" not in final:
            continue
        with open(os.path.join(seed_folder, "done.json"), encoding="utf-8") as stream:
            task = json.load(stream)["task"]
        variant = os.path.basename(os.path.dirname(seed_folder))
        seed = int(seed_folder.rsplit("_", 1)[1])
        failed.setdefault((task, variant), {})[seed] = {int(index): why for index, why in final["failed_episodes"].items()}
    lines = []
    for (task, variant), per_seed in sorted(failed.items()):
        counts: dict[int, int] = {}
        for episodes in per_seed.values():
            for index in episodes:
                counts[index] = counts.get(index, 0) + 1
        seeds = len(per_seed)
        every = sorted(index for index, count in counts.items() if count == seeds)
        all_but_one = sorted(index for index, count in counts.items() if count == seeds - 1) if seeds > 2 else []
        lines.append(f"{task} {variant}: {seeds} seeds, {sum(map(len, per_seed.values()))} failed episodes on "
                     f"{len(counts)} starts; failed by every seed: {every}; by all but one: {all_but_one}")
    return lines


def write_csv(rows: Sequence[dict[str, Any]], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as stream:
        return [{**row, "seed": int(row["seed"]), "timesteps": int(row["timesteps"]), "episodes": int(row["episodes"]),
                 "eval_mean": float(row["eval_mean"]), "eval_std": float(row["eval_std"]),
                 "wall_s": float(row["wall_s"]), "finished": row["finished"] == "True",
                 "success_rate": float(row["success_rate"]) if row.get("success_rate") else None,
                 **{key: float(row.get(key) or "nan") for key in CSV_FIELDS if key.startswith(("train_", "eval_length"))}}
                for row in csv.DictReader(stream)]


def _groups(rows: Sequence[dict[str, Any]], kind: str = "periodic") -> dict[tuple[str, str], dict[int, list[dict[str, Any]]]]:
    """``{(task, variant): {seed: rows of that kind sorted by timesteps}}``."""
    groups: dict[tuple[str, str], dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        if row["kind"] != kind:
            continue
        groups.setdefault((row["task"], row["variant"]), {}).setdefault(row["seed"], []).append(row)
    for seeds in groups.values():
        for seed_rows in seeds.values():
            seed_rows.sort(key=lambda row: row["timesteps"])
    return groups


def final_scores(seed_rows: dict[int, list[dict[str, Any]]], at: int | None = None) -> dict[int, float]:
    """Per seed, the evaluation at the last step (or the last one at or before ``at`` steps)."""
    scores = {}
    for seed, rows in seed_rows.items():
        eligible = [row for row in rows if at is None or row["timesteps"] <= at]
        if eligible:
            scores[seed] = eligible[-1]["eval_mean"]
    return scores


def time_to_score(rows: Sequence[dict[str, Any]], threshold: float) -> tuple[float, int] | None:
    """Wall-clock seconds and steps at the first evaluation reaching ``threshold``; None if none does."""
    for row in rows:
        if row["eval_mean"] >= threshold:
            return row["wall_s"], row["timesteps"]
    return None


def interval_estimates(scores: dict[str, np.ndarray], reps: int, seed: int = 0) -> dict[str, dict[str, tuple]]:
    """Mean and IQM with 95% stratified-bootstrap confidence intervals (rliable), per key of ``scores``.

    :param scores: ``{name: array of shape (n_runs, 1)}`` (one task per call: the returns are not normalised).
    """
    from rliable import library as rly
    from rliable import metrics

    def aggregate(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_iqm(x)])

    np.random.seed(seed)  # rliable's bootstrap draws from numpy's global generator
    points, intervals = rly.get_interval_estimates(scores, aggregate, reps=reps)
    return {name: {"mean": (points[name][0], *intervals[name][:, 0]),
                   "iqm": (points[name][1], *intervals[name][:, 1])} for name in scores}


def report(rows: Sequence[dict[str, Any]], *, at: int | None, threshold: dict[str, float], reps: int) -> str:
    """A Markdown table per task: per-seed finals, mean and IQM with 95% CIs, time to ``threshold``.

    A seed's score is its ``final`` evaluation (``evaluate``) where every seed of the variant has one and no ``at``
    is given, else its last periodic evaluation (at or before ``at`` steps). The ``evaluation`` column says which.
    """
    periodic, final = _groups(rows, "periodic"), _groups(rows, "final")
    lines = []
    for task in sorted({task for task, _ in periodic}):
        variants = sorted(variant for t, variant in periodic if t == task)
        sources = {variant: final[task, variant] if at is None and set(final.get((task, variant), {})) ==
                   set(periodic[task, variant]) else periodic[task, variant] for variant in variants}
        finals = {variant: final_scores(sources[variant], at) for variant in variants}
        estimates = interval_estimates(
            {variant: np.array(list(finals[variant].values()), dtype=float)[:, None] for variant in variants
             if finals[variant]}, reps)
        lines += [f"### {task}", ""]
        header = "| variant | seeds | score per seed | steps | evaluation | mean [95% CI] | IQM [95% CI] |"
        with_successes = any(row.get("success_rate") is not None for row in rows if row["task"] == task)
        if with_successes:
            header += " successes per seed |"
        if task in threshold:
            header += f" wall-clock to {threshold[task]:g} per seed |"
        lines += [header, "|" + "---|" * (header.count("|") - 1)]
        for variant in variants:
            if not finals[variant]:
                continue
            seeds = sorted(finals[variant])
            used = [[row for row in sources[variant][seed] if at is None or row["timesteps"] <= at][-1] for seed in seeds]
            steps = sorted({row["timesteps"] for row in used})
            kind = "final" if sources[variant] is not periodic[task, variant] else "last periodic"
            episodes = "/".join(str(n) for n in sorted({row["episodes"] for row in used}))
            mean, iqm = estimates[variant]["mean"], estimates[variant]["iqm"]
            line = (f"| {variant} | {', '.join(map(str, seeds))} | "
                    f"{', '.join(f'{finals[variant][seed]:.0f}' for seed in seeds)} | "
                    f"{'/'.join(f'{s / 1e6:.3g}M' for s in steps)} | {kind}, {episodes} episodes | "
                    f"{mean[0]:.0f} [{mean[1]:.0f}, {mean[2]:.0f}] | {iqm[0]:.0f} [{iqm[1]:.0f}, {iqm[2]:.0f}] |")
            if with_successes:
                line += " " + ", ".join("-" if row.get("success_rate") is None else
                                        f"{round(row['success_rate'] * row['episodes'])}/{row['episodes']}"
                                        for row in used) + " |"
            if task in threshold:
                reached = [time_to_score(periodic[task, variant][seed], threshold[task]) for seed in seeds]
                line += " " + ", ".join("not reached" if r is None else f"{r[0] / 60:.1f} min ({r[1] / 1e6:.2f}M)"
                                        for r in reached) + " |"
            lines.append(line)
        lines.append("")
    return "\n".join(lines)


#: ``report --curve-value`` choices: the CSV column a curve table shows, and its format.
CURVE_VALUES = {"eval_mean": "{:.0f}", "eval_length": "{:.0f}", "train_std": "{:.3g}", "train_learning_rate": "{:.2g}",
                "train_approx_kl": "{:.3g}", "train_kl_coef": "{:.3g}"}


def curve_table(rows: Sequence[dict[str, Any]], steps: Sequence[int], value: str = "eval_mean") -> str:
    """A Markdown table per task: each run's ``value`` (a :data:`CURVE_VALUES` column; default the evaluation's
    mean return) at its periodic evaluation at the given steps (the last one at or before each; blank where the run
    has not got there), and at its last evaluation."""
    form = CURVE_VALUES[value]
    periodic = _groups(rows, "periodic")
    lines = []
    for task in sorted({task for task, _ in periodic}):
        header = "| variant | seed | " + " | ".join(f"{step / 1e6:.3g}M" for step in steps) + " | last |"
        lines += [f"### {task}", "", header, "|" + "---|" * (header.count("|") - 1)]
        for (t, variant), seeds in sorted(periodic.items()):
            if t != task:
                continue
            for seed, seed_rows in sorted(seeds.items()):
                cells = []
                for step in steps:
                    reached = [row for row in seed_rows if row["timesteps"] <= step]
                    cells.append(form.format(reached[-1][value]) if reached and seed_rows[-1]["timesteps"] >= step else "")
                last = seed_rows[-1]
                lines.append(f"| {variant} | {seed} | " + " | ".join(cells) +
                             f" | {form.format(last[value])} at {last['timesteps'] / 1e6:.3g}M |")
        lines.append("")
    return "\n".join(lines)


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """IQM over runs at each evaluation step of ``scores`` shaped (runs, 1, steps)."""
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(scores[..., step]) for step in range(scores.shape[-1])])


def plot(rows: Sequence[dict[str, Any]], output: str, reps: int) -> None:
    """Learning curves: IQM over seeds with 95% bootstrap bands, one panel per task, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly

    groups = _groups(rows)
    tasks = sorted({task for task, _ in groups})
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    np.random.seed(0)
    for axis, task in zip(axes[0], tasks):
        for variant in sorted(variant for t, variant in groups if t == task):
            seed_rows = groups[task, variant]
            steps = sorted(set.intersection(*({row["timesteps"] for row in r} for r in seed_rows.values())))
            if not steps:
                continue
            table = np.array([[next(row["eval_mean"] for row in r if row["timesteps"] == s) for s in steps]
                              for r in seed_rows.values()])  # (seeds, evaluations)
            points, intervals = rly.get_interval_estimates({variant: table[:, None, :]}, _iqm_per_step, reps=reps)
            x = np.array(steps) / 1e6
            axis.plot(x, points[variant], label=f"{variant} ({len(seed_rows)} seeds)")
            axis.fill_between(x, intervals[variant][0], intervals[variant][1], alpha=0.2)
        axis.set_title(task)
        axis.set_xlabel("environment steps (millions)")
        axis.set_ylabel("evaluation return (IQM over seeds)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    figure.savefig(output, dpi=100)


def _thresholds(pairs: Sequence[str]) -> dict[str, float]:
    thresholds = {}
    for pair in pairs:
        task, sep, value = pair.rpartition("=")
        if not sep or not task:
            raise argparse.ArgumentTypeError(f"--threshold takes TASK=SCORE, got {pair!r}")
        thresholds[task] = float(value)
    return thresholds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train the cells of a grid file (skips finished cells)")
    run.add_argument("grid", help="grid file (YAML)")
    run.add_argument("--root", required=True, help="folder of the runs (outside the repository)")
    run.add_argument("--jobs", type=int, default=1, help="cells trained at once (one process and core each)")
    run.add_argument("--only", nargs="+", default=None, help="run only these variants")
    run.add_argument("--tasks", nargs="+", default=None, help="run only these tasks")
    run.add_argument("--seeds", nargs="+", type=int, default=None, help="run only these seeds")
    run.add_argument("--dry-run", action="store_true", help="print each cell's command and exit")
    stash = commands.add_parser("snapshot", help="copy the newest checkpoint and settings of every unfinished cell "
                                "to a folder (e.g. in the repository), to resume it on another machine")
    stash.add_argument("--root", required=True)
    stash.add_argument("--to", required=True, help="destination folder (same layout as --root)")
    hard = commands.add_parser("failures", help="final-evaluation starts that failed for every seed (after evaluate)")
    hard.add_argument("--root", required=True)
    gather = commands.add_parser("collect", help="write one CSV of every evaluation under --root")
    gather.add_argument("--root", required=True)
    gather.add_argument("--csv", required=True)
    final = commands.add_parser("evaluate", help="evaluate the final model of every finished cell on many episodes")
    final.add_argument("--root", required=True)
    final.add_argument("--episodes", type=int, default=100)
    final.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    summary = commands.add_parser("report", help="mean, IQM and 95%% CIs per task and variant; learning curves")
    summary.add_argument("csv")
    summary.add_argument("--at", type=float, default=None, help="score at this step budget (default: last eval)")
    summary.add_argument("--threshold", nargs="+", default=[], metavar="TASK=SCORE",
                         help="also report the wall-clock time until the evaluation first reaches SCORE")
    summary.add_argument("--reps", type=int, default=10_000, help="bootstrap resamples")
    summary.add_argument("--plot", default=None, help="write the learning curves to this image")
    summary.add_argument("--include-unfinished", action="store_true", help="also report runs still going")
    summary.add_argument("--curve-steps", type=float, nargs="+", default=None,
                         help="also print each run's evaluation at these steps")
    summary.add_argument("--curve-value", choices=sorted(CURVE_VALUES), default="eval_mean",
                         help="what --curve-steps shows: the evaluation's mean return (default) or episode length, or "
                         "a training value logged before it")
    args = parser.parse_args(argv)

    if args.command == "run":
        if args.jobs < 1:
            parser.error(f"--jobs must be >= 1, got {args.jobs}")
        cells = load_grid(args.grid)
        for flag, wanted, known in (("--only", args.only, {cell.variant for cell in cells}),
                                    ("--tasks", args.tasks, {cell.task for cell in cells}),
                                    ("--seeds", args.seeds, {cell.seed for cell in cells})):
            unknown = [value for value in wanted or [] if value not in known]
            if unknown:
                parser.error(f"{flag}: {', '.join(map(str, unknown))} not in {args.grid} "
                             f"(it has {', '.join(map(str, sorted(known)))})")
        if args.only:
            cells = [cell for cell in cells if cell.variant in args.only]
        if args.tasks:
            cells = [cell for cell in cells if cell.task in args.tasks]
        if args.seeds is not None:
            cells = [cell for cell in cells if cell.seed in args.seeds]
        if args.dry_run:
            for cell in cells:
                print(shlex.join(["sb3-ppo-ext", *cell.train_argv(cell.folder(args.root))]))
            return 0
        return 0 if run_grid(cells, os.path.expanduser(args.root), args.jobs) else 1
    if args.command == "evaluate":
        if args.episodes < 1:
            parser.error(f"--episodes must be >= 1, got {args.episodes}")
        for line in evaluate_cells(os.path.expanduser(args.root), args.episodes, args.tasks):
            print(line, flush=True)
        return 0
    if args.command == "snapshot":
        for line in snapshot_cells(os.path.expanduser(args.root), args.to):
            print(line, flush=True)
        return 0
    if args.command == "failures":
        print("\n".join(shared_failures(os.path.expanduser(args.root))))
        return 0
    if args.command == "collect":
        rows = collect(os.path.expanduser(args.root))
        write_csv(rows, args.csv)
        print(f"{len(rows)} evaluations of {len({(r['task'], r['variant'], r['seed']) for r in rows})} runs -> {args.csv}")
        return 0
    rows = [row for row in read_csv(args.csv) if row["finished"] or args.include_unfinished]
    print(report(rows, at=None if args.at is None else int(args.at), threshold=_thresholds(args.threshold),
                 reps=args.reps))
    if args.curve_steps:
        print(curve_table(rows, [int(step) for step in args.curve_steps], args.curve_value))
    if args.plot:
        plot(rows, args.plot, reps=min(args.reps, 2000))
        print(f"learning curves -> {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

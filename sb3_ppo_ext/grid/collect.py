"""Collecting a grid's results: one row per evaluation of every cell (periodic and final), with the wall clock until it
and the training values logged before it; the CSV they are written to and read from."""

from __future__ import annotations

import csv
import glob
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sb3_ppo_ext.files import atomic_path
from sb3_ppo_ext.grid.cells import (
    DONE_FILE,
    FINAL_EVAL_FILE,
    MAX_SEED,
    cell_folders,
    cell_run_folders,
    cell_seed,
)
from sb3_ppo_ext.zoo.config.blocks import MAX_N_TIMESTEPS
from sb3_ppo_ext.zoo.config.run_files import load_run_yaml
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE
from sb3_ppo_ext.zoo.resume import read_evaluations, successes_by_evaluation
from sb3_ppo_ext.zoo.run_text_files import bounded_lines, checked_csv_rows, csv_rows, scan_monitor

#: SB3's logged training values that ``collect`` adds to each evaluation (the last logged before it), by their name
#: in SB3's printed tables; in ``progress.csv`` they are ``train/<name>``.
TRAIN_LOG_KEYS = ("std", "learning_rate", "approx_kl", "kl_coef")


CSV_FIELDS = (
    "task",
    "variant",
    "seed",
    "kind",
    "timesteps",
    "episodes",
    "eval_mean",
    "eval_std",
    "wall_s",
    "finished",
    "success_rate",
    "eval_length",
    *(f"train_{key}" for key in TRAIN_LOG_KEYS),
)


def training_clock(run_folder: str) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative training steps over all envs against wall-clock seconds since the first env started.

    From the ``*.monitor.csv`` files of the training envs (episode end time and length); the steps of an episode
    are counted when it ends. Read here rather than by SB3's ``monitor.load_results``, which needs each file's JSON
    header to start with ``#`` and raises where a run has no monitor file yet; this reads both.
    """
    starts: list[float] = []
    ends: list[float] = []
    lengths: list[int] = []
    for path in glob.glob(os.path.join(glob.escape(run_folder), "*.monitor.csv")):
        monitor = scan_monitor(path)
        starts.append(monitor.start)
        ends.extend(monitor.start + end for end, _ in monitor.episodes)
        lengths.extend(length for _, length in monitor.episodes)
    if not starts:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(ends)
    return np.cumsum(np.asarray(lengths)[order]), np.asarray(ends)[order] - min(starts)


def cell_run_folder(cell_folder: str) -> str | None:
    """rl-zoo3's ``<algo>/<env>_<n>`` folder inside a cell folder (the newest when there are several)."""
    evaluated = [run for run in cell_run_folders(cell_folder) if os.path.isfile(os.path.join(run, "evaluations.npz"))]
    return max(evaluated, key=lambda run: os.path.getmtime(os.path.join(run, "evaluations.npz")), default=None)


def _task_of_run(run_folder: str) -> str | None:
    """The env id an unfinished cell trains (``--env`` in its run's ``args.yml``), or ``None`` if unreadable."""
    for path in glob.glob(os.path.join(glob.escape(run_folder), "*", "args.yml")):
        try:
            env_id = load_run_yaml(path).get("env")
        except (ValueError, OSError, AttributeError):
            continue
        if isinstance(env_id, str):
            return env_id
    return None


def train_log_values(path: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The training values SB3 printed in a cell's ``train.log`` (its ``verbose=1`` tables, rounded to 3 or 4
    significant digits): the steps of each table that has ``total_timesteps`` and a training value and, per key of
    :data:`TRAIN_LOG_KEYS`, its value there (NaN where not logged). In the file's order."""
    steps: list[int] = []
    values: dict[str, list[float]] = {key: [] for key in TRAIN_LOG_KEYS}
    table: dict[str, str] = {}
    if not os.path.isfile(path):
        return np.zeros(0, dtype=int), {key: np.zeros(0) for key in TRAIN_LOG_KEYS}
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in bounded_lines(stream, path, skip_long=True):
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


def progress_values(path: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The training values in a run's ``progress.csv`` (SB3's logger as CSV, which ``train`` writes into the run
    folder; :mod:`~sb3_ppo_ext.zoo.progress_csv`), as :func:`train_log_values` reads them from the printed tables but
    exact: the steps (``time/total_timesteps``) of each row that has a training value (``train/std`` or
    ``train/approx_kl``) and, per key of :data:`TRAIN_LOG_KEYS`, its ``train/<key>`` there (NaN where not logged). In
    the file's order; a missing or empty file has no rows."""
    steps: list[int] = []
    values: dict[str, list[float]] = {key: [] for key in TRAIN_LOG_KEYS}
    if os.path.isfile(path):
        with open(path, encoding="utf-8", newline="") as stream:
            for row in csv_rows(stream, path):
                if not row.get("time/total_timesteps") or not (row.get("train/std") or row.get("train/approx_kl")):
                    continue
                steps.append(int(float(row["time/total_timesteps"])))
                for key in TRAIN_LOG_KEYS:
                    values[key].append(float(row.get(f"train/{key}") or "nan"))
    return np.asarray(steps, dtype=int), {key: np.asarray(series, dtype=float) for key, series in values.items()}


def logged_train_values(cell_folder: str, run_folder: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The training values SB3 logged during a cell's run, by step, ascending: exact from the run's ``progress.csv``
    (:func:`progress_values`), and from the cell's ``train.log`` (:func:`train_log_values`) for a run that has no
    ``progress.csv`` (trained before ``train`` wrote one) and for the steps before its first row (such a run resumed
    since).

    Both files are continued by each session of a resumed run, and a session starts again from the run's checkpoint:
    a row replaces the rows before it at its step or later, so that each step has the value of the session that
    went on from there.
    """
    log_steps, log_values = train_log_values(os.path.join(cell_folder, "train.log"))
    csv_steps, csv_values = progress_values(os.path.join(run_folder, PROGRESS_FILE))
    steps = np.concatenate([log_steps, csv_steps])
    kept: list[int] = []
    for index, step in enumerate(steps):
        while kept and steps[kept[-1]] >= step:
            kept.pop()
        kept.append(index)
    return steps[kept], {key: np.concatenate([log_values[key], csv_values[key]])[kept] for key in TRAIN_LOG_KEYS}


def collect(root: str) -> list[dict[str, Any]]:
    """One row per evaluation of every cell under ``root`` that has evaluations (finished or not), with the mean
    length of its episodes and the training values logged last before it (``train_std``: the action noise,
    ``train_learning_rate``, ``train_approx_kl``, ``train_kl_coef``: beta; from the run's ``progress.csv``, else
    from the cell's ``train.log``: :func:`logged_train_values`)."""
    rows = []
    for seed_folder in cell_folders(root):
        if not os.path.isdir(seed_folder) or ".interrupted-" in seed_folder:
            continue
        run_folder = cell_run_folder(seed_folder)
        if run_folder is None:
            continue
        try:
            cell = _CellOfRows.read(seed_folder, run_folder)
            rows.extend(_periodic_rows(cell, seed_folder, run_folder))
            final_path = os.path.join(seed_folder, FINAL_EVAL_FILE)
            if cell.finished and os.path.isfile(final_path):
                rows.append(_final_row(cell, final_path))
        except (KeyError, TypeError, ValueError, OverflowError, OSError) as error:  # one line, naming the cell
            raise ValueError(f"cell {seed_folder}: {type(error).__name__}: {error}") from None
    return rows


def read_json_object(
    path: str, required: dict[str, tuple[type, ...]], optional: dict[str, tuple[type, ...]] | None = None
) -> dict[str, Any]:
    """The JSON object in ``path`` (a cell's ``done.json`` or ``final_eval.json``), with each key of ``required``, and
    each key of ``optional`` it holds, of one of its types (a finite number where the types are numbers).

    :raises ValueError: naming the file and the key.
    """
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read(MAX_CELL_JSON_CHARACTERS + 1)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); not a file the grid wrote") from None
    if len(text) > MAX_CELL_JSON_CHARACTERS:
        raise ValueError(f"{path}: more than {MAX_CELL_JSON_CHARACTERS} characters; not a file the grid wrote")
    try:
        value = json.loads(text)
    except ValueError as error:  # json's errors, and Python's limit on the digits of an integer
        raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(value).__name__}")
    present = {key: types for key, types in (optional or {}).items() if key in value}
    for key, types in {**required, **present}.items():
        item = value.get(key)
        if isinstance(item, bool) or not isinstance(item, types):
            names = " or ".join(kind.__name__ for kind in types)
            raise ValueError(f"{path}: {key} must be {names}, got {item!r}")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{path}: {key} must be finite, got {item!r}")
    return value


#: Most characters of a cell's ``done.json`` or ``final_eval.json`` (a few kilobytes when the grid writes them).
MAX_CELL_JSON_CHARACTERS = 1 << 20


@dataclass(frozen=True)
class _CellOfRows:
    """What every row of one cell repeats: its task, variant and seed, and whether it finished."""

    task: str
    variant: str
    seed: int
    finished: bool

    @classmethod
    def read(cls, seed_folder: str, run_folder: str) -> _CellOfRows:
        """The cell of ``seed_folder``: its task from its ``done.json`` once finished, else from its run's
        ``args.yml``, else its task folder's name."""
        task_folder, variant = os.path.split(os.path.dirname(seed_folder))
        done_path = os.path.join(seed_folder, DONE_FILE)
        task = _task_of_run(run_folder) or os.path.basename(task_folder)
        finished = os.path.isfile(done_path)
        if finished:
            task = read_json_object(done_path, {"task": (str,)})["task"]
        return cls(task, variant, cell_seed(seed_folder), finished)

    def row(self, kind: str, values: dict[str, Any], train_values: dict[str, float]) -> dict[str, Any]:
        """One CSV row of this cell (:data:`CSV_FIELDS` order): ``kind``, the evaluation's ``values`` (``timesteps``
        to ``eval_length``) and the training values logged last before it (``train_<key>``)."""
        return {
            "task": self.task,
            "variant": self.variant,
            "seed": self.seed,
            "kind": kind,
            **values,
            **{f"train_{key}": train_values.get(key, float("nan")) for key in TRAIN_LOG_KEYS},
        }


def _periodic_rows(cell: _CellOfRows, seed_folder: str, run_folder: str) -> list[dict[str, Any]]:
    """The rows of the run's periodic evaluations (``evaluations.npz``), with the wall-clock time each was reached
    (:func:`training_clock`) and the training values logged last before it (:func:`logged_train_values`)."""
    evaluations = read_evaluations(run_folder)
    clock_steps, clock_seconds = training_clock(run_folder)
    successes = successes_by_evaluation(len(evaluations["timesteps"]), list(evaluations.get("successes", [])))
    log_steps, log_values = logged_train_values(seed_folder, run_folder)
    rows = []
    for index, (timesteps, results) in enumerate(zip(evaluations["timesteps"], evaluations["results"], strict=True)):
        reached = np.searchsorted(clock_steps, timesteps)
        wall = float(clock_seconds[reached]) if reached < len(clock_seconds) else float("nan")
        row = successes[index]
        success_rate = float(np.mean(row)) if row is not None and len(row) else None
        logged = np.searchsorted(log_steps, timesteps, side="right") - 1
        values = {
            "timesteps": int(timesteps),
            "episodes": len(results),
            "eval_mean": float(np.mean(results)),
            "eval_std": float(np.std(results)),
            "wall_s": round(wall, 1),
            "finished": cell.finished,
            "success_rate": success_rate,
            "eval_length": float(np.mean(evaluations["ep_lengths"][index])),
        }
        train_values = {key: float(series[logged]) for key, series in log_values.items()} if logged >= 0 else {}
        rows.append(cell.row("periodic", values, train_values))
    return rows


def _final_row(cell: _CellOfRows, final_path: str) -> dict[str, Any]:
    """The row of a finished cell's final evaluation (``final_eval.json``); it has no training values."""
    number = (int, float)
    final = read_json_object(
        final_path,
        {"timesteps": (int,), "episodes": (int,), "mean_return": number, "std_return": number},
        optional={"successes": (int,), "mean_length": number},
    )
    if final["episodes"] < 1 or not 0 <= final["timesteps"] <= MAX_N_TIMESTEPS:
        raise ValueError(f"{final_path}: episodes must be >= 1 and timesteps in [0, {MAX_N_TIMESTEPS}]")
    if not 0 <= final.get("successes", 0) <= final["episodes"]:
        raise ValueError(f"{final_path}: successes must lie in [0, episodes ({final['episodes']})], got {final['successes']}")
    if final["std_return"] < 0 or final.get("mean_length", 0) < 0:
        raise ValueError(f"{final_path}: std_return and mean_length must be >= 0")
    values = {
        "timesteps": final["timesteps"],
        "episodes": final["episodes"],
        "eval_mean": final["mean_return"],
        "eval_std": final["std_return"],
        "wall_s": float("nan"),
        "finished": True,
        "success_rate": final["successes"] / final["episodes"] if "successes" in final else None,
        "eval_length": final.get("mean_length", float("nan")),
    }
    return cell.row("final", values, {})


def run_key(row: dict[str, Any]) -> tuple[str, str, int]:
    """The run a row of :func:`collect` or :func:`read_csv` belongs to: (task, variant, seed)."""
    return str(row["task"]), str(row["variant"]), int(row["seed"])


def merge_rows(existing: Sequence[dict[str, Any]], collected: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` rows (a CSV read back) with every run that ``collected`` holds replaced by its collected rows.

    A run is a (task, variant, seed); its collected rows take the place of its first existing row, so the CSV keeps
    its order, and runs new to it follow at the end. Runs that ``collected`` lacks (trained under another root or
    on another machine) keep their rows. The columns ``existing`` has beyond :data:`CSV_FIELDS` (a user's notes,
    pandas' index) stay: a collected row takes their values from the existing row of its run, kind and step, and is
    empty in them where there is none.
    """
    added = list(dict.fromkeys(key for row in existing for key in row if key not in CSV_FIELDS))
    notes = {_evaluation_key(row): {key: row.get(key, "") for key in added} for row in existing}
    by_run: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in collected:
        by_run.setdefault(run_key(row), []).append({**notes.get(_evaluation_key(row), dict.fromkeys(added, "")), **row})
    merged: list[dict[str, Any]] = []
    placed: set[tuple[str, str, int]] = set()
    for row in existing:
        run = run_key(row)
        if run not in by_run:
            merged.append(row)
        elif run not in placed:
            merged.extend(by_run[run])
            placed.add(run)
    for run, rows in by_run.items():
        if run not in placed:
            merged.extend(rows)
    return merged


def _evaluation_key(row: dict[str, Any]) -> tuple[tuple[str, str, int], str, int]:
    """The evaluation a row of :func:`collect` or :func:`read_csv` holds: its run, kind and step."""
    return run_key(row), str(row.get("kind")), int(row["timesteps"])


def write_csv(rows: Sequence[dict[str, Any]], path: str) -> None:
    """Write ``rows`` (from :func:`collect`, or merged with a CSV read back) to the CSV file ``path``: the columns
    ``CSV_FIELDS``, then any other column the rows hold (one a user or a spreadsheet added to a CSV read back, such as
    notes or pandas' index), empty where a row has none. Written atomically: a failure leaves ``path`` as it was."""
    extra: list[str] = []
    for row in rows:
        extra += [key for key in row if key not in CSV_FIELDS and key not in extra]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as temporary, open(temporary, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=[*CSV_FIELDS, *extra], restval="")
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: str) -> list[dict[str, Any]]:
    """The rows of a CSV written by :func:`write_csv` (or joined from several by a spreadsheet or pandas, which write
    NaN as an empty cell): the numeric columns as numbers, ``finished`` as a bool, an empty ``success_rate`` as
    ``None``, and an empty ``wall_s``, evaluation length or training value as NaN."""
    rows = []
    with open(path, encoding="utf-8", newline="") as stream:
        reader = csv.DictReader(bounded_lines(stream, path))
        missing = [key for key in _READ_COLUMNS if key not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a CSV of grid collect: it has no column {', '.join(missing)}")
        for row in checked_csv_rows(reader, path):
            if None in row:
                raise ValueError(f"{path}, line {reader.line_num}: more cells than the header has columns")
            try:
                rows.append(_typed_row(row))
            except (TypeError, ValueError) as error:
                raise ValueError(f"{path}, line {reader.line_num}: {error}") from None
    return rows


#: The columns :func:`read_csv` needs.
_READ_COLUMNS = ("task", "variant", "seed", "kind", "timesteps", "episodes", "eval_mean", "eval_std", "wall_s", "finished")
#: The values of the CSV's ``kind`` and ``finished`` columns.
_KINDS, _FINISHED = ("periodic", "final"), {"True": True, "False": False}


def _whole_number(key: str, text: str, maximum: int, minimum: int = 0) -> int:
    """A CSV cell holding a whole number from ``minimum`` to ``maximum``."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= maximum:
        raise ValueError(f"{key} must be a whole number from {minimum} to {maximum}, got {text!r}")
    return value


def _number(
    key: str, text: str | None, *, empty: float | None, minimum: float = -math.inf, maximum: float = math.inf
) -> float | None:
    """A CSV cell holding a finite number from ``minimum`` to ``maximum``; an empty cell is ``empty`` (refused where
    ``empty`` is ``None``), and NaN is taken where ``empty`` is NaN (unknown: how collect writes a value it lacks)."""
    if not text:
        if empty is None:
            raise ValueError(f"{key} must be a number, got an empty cell")
        return empty
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{key} must be a number, got {text!r}") from None
    if math.isnan(value) and empty is not None and math.isnan(empty):
        return value
    if not (math.isfinite(value) and minimum <= value <= maximum):
        bounds = [f">= {minimum:g}"] * math.isfinite(minimum) + [f"<= {maximum:g}"] * math.isfinite(maximum)
        raise ValueError(f"{key} must be a finite number{' ' if bounds else ''}{' and '.join(bounds)}, got {text!r}")
    return value


def _typed_row(row: dict[str, str]) -> dict[str, Any]:
    """One row of :func:`read_csv` with its values typed and checked: the evaluation's mean and spread finite, the
    step count, episodes and seed whole numbers in range, ``kind`` and ``finished`` as :func:`write_csv` writes them,
    the success rate empty or in [0, 1], the wall clock, length and training values finite or unknown (NaN)."""
    nan = math.nan
    if row["kind"] not in _KINDS or row["finished"] not in _FINISHED:
        raise ValueError(
            f"kind must be periodic or final and finished True or False, got {row['kind']!r}, {row['finished']!r}"
        )
    return {
        **row,
        "seed": _whole_number("seed", row["seed"], MAX_SEED),
        "timesteps": _whole_number("timesteps", row["timesteps"], MAX_N_TIMESTEPS),
        "episodes": _whole_number("episodes", row["episodes"], MAX_N_TIMESTEPS, minimum=1),
        "eval_mean": _number("eval_mean", row["eval_mean"], empty=None),
        "eval_std": _number("eval_std", row["eval_std"], empty=None, minimum=0.0),
        "wall_s": _number("wall_s", row["wall_s"], empty=nan, minimum=0.0),
        "finished": _FINISHED[row["finished"]],
        "success_rate": _number("success_rate", row.get("success_rate"), empty=None, minimum=0.0, maximum=1.0)
        if row.get("success_rate")
        else None,
        "eval_length": _number("eval_length", row.get("eval_length"), empty=nan, minimum=0.0),
        **{key: _number(key, row.get(key), empty=nan) for key in CSV_FIELDS if key.startswith("train_")},
    }

"""Learning grids: run (task, variant, seed) cells from zoo configs, collect one CSV, report with rliable.

A grid file names tasks, variants (of the algorithm or its settings) and seeds; each combination is a cell, one
``sb3-ppo-ext train`` run in its own folder, resumable. The command line (``python -m sb3_ppo_ext.zoo.grid`` or, in
the repository, ``python benchmarks/grid.py``) and the grid file's format are documented in
:mod:`~sb3_ppo_ext.zoo.grid.cli`.

The modules, one job each: :mod:`~sb3_ppo_ext.zoo.grid.cells` (the grid file and its cells),
:mod:`~sb3_ppo_ext.zoo.grid.run` (training and snapshots), :mod:`~sb3_ppo_ext.zoo.grid.evaluate` (final
evaluations), :mod:`~sb3_ppo_ext.zoo.grid.collect` (the CSV), :mod:`~sb3_ppo_ext.zoo.grid.report` (tables and
plots) and :mod:`~sb3_ppo_ext.zoo.grid.cli` (the command line). ``report`` needs the ``bench`` extra (rliable).
"""

from sb3_ppo_ext.zoo.grid.cells import CELL_KEYS, DONE_FILE, FINAL_EVAL_FILE, FINAL_EVAL_SEED, VARIANT_KEYS, Cell, load_grid
from sb3_ppo_ext.zoo.grid.cli import main
from sb3_ppo_ext.zoo.grid.collect import (
    CSV_FIELDS,
    TRAIN_LOG_KEYS,
    collect,
    logged_train_values,
    merge_rows,
    progress_values,
    read_csv,
    run_key,
    train_log_values,
    training_clock,
    write_csv,
)
from sb3_ppo_ext.zoo.grid.evaluate import evaluate_cells, shared_failures
from sb3_ppo_ext.zoo.grid.report import (
    CURVE_VALUES,
    curve_table,
    final_scores,
    interval_estimates,
    plot,
    report,
    time_to_score,
)
from sb3_ppo_ext.zoo.grid.run import run_cell, run_grid, snapshot_cells, stop_training

__all__ = [
    "CELL_KEYS",
    "CSV_FIELDS",
    "CURVE_VALUES",
    "DONE_FILE",
    "FINAL_EVAL_FILE",
    "FINAL_EVAL_SEED",
    "TRAIN_LOG_KEYS",
    "VARIANT_KEYS",
    "Cell",
    "collect",
    "curve_table",
    "evaluate_cells",
    "final_scores",
    "interval_estimates",
    "load_grid",
    "logged_train_values",
    "main",
    "merge_rows",
    "plot",
    "progress_values",
    "read_csv",
    "report",
    "run_cell",
    "run_grid",
    "run_key",
    "shared_failures",
    "snapshot_cells",
    "stop_training",
    "time_to_score",
    "train_log_values",
    "training_clock",
    "write_csv",
]

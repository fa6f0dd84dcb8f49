"""Learning grids: run (task, variant, seed) cells from zoo configs, collect one CSV, report with rliable.

A grid file names tasks, variants (of the algorithm or its settings) and seeds; each combination is a cell, one
``sb3-ppo-ext train`` run in its own folder, resumable. The command line (``python -m sb3_ppo_ext.grid`` or, in
the repository, ``python benchmarks/grid.py``) and the grid file's format are documented in
:mod:`~sb3_ppo_ext.grid.cli`.

The modules, one job each: :mod:`~sb3_ppo_ext.grid.cells` (the grid file and its cells),
:mod:`~sb3_ppo_ext.grid.run` (training and snapshots), :mod:`~sb3_ppo_ext.grid.evaluate` (final
evaluations), :mod:`~sb3_ppo_ext.grid.collect` (the CSV), :mod:`~sb3_ppo_ext.grid.report` (tables and
plots) and :mod:`~sb3_ppo_ext.grid.cli` (the command line). ``report`` needs the ``bench`` extra (rliable).

The grid sits beside :mod:`sb3_ppo_ext.zoo`, not inside it: it does not wrap rl-zoo3, but runs ``sb3-ppo-ext train``
in subprocesses and reads their run folders through the zoo's readers.
"""

from sb3_ppo_ext.grid.cells import DONE_FILE, FINAL_EVAL_FILE, FINAL_EVAL_SEED, load_grid
from sb3_ppo_ext.grid.cli import main
from sb3_ppo_ext.grid.collect import CSV_FIELDS, collect, read_csv, train_log_values, write_csv
from sb3_ppo_ext.grid.evaluate import evaluate_cells, shared_failures
from sb3_ppo_ext.grid.report import curve_table, plot, report, time_to_score
from sb3_ppo_ext.grid.run import run_cell, run_grid, snapshot_cells, stop_training

__all__ = [
    "CSV_FIELDS",
    "DONE_FILE",
    "FINAL_EVAL_FILE",
    "FINAL_EVAL_SEED",
    "collect",
    "curve_table",
    "evaluate_cells",
    "load_grid",
    "main",
    "plot",
    "read_csv",
    "report",
    "run_cell",
    "run_grid",
    "shared_failures",
    "snapshot_cells",
    "stop_training",
    "time_to_score",
    "train_log_values",
    "write_csv",
]

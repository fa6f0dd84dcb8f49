"""The learning grids' command line: run (task, variant, seed) cells from zoo configs, collect one CSV, report with
rliable.

The steps, each a subcommand of ``sb3-ppo-ext grid`` (also ``python -m sb3_ppo_ext.grid``, and in the repository
``python benchmarks/grid.py``, which resolves a grid file's relative paths against the repository root instead of the
current directory)::

    sb3-ppo-ext grid run benchmarks/grids/classic.yml --root ~/runs/grid --jobs 2
    sb3-ppo-ext grid evaluate --root ~/runs/grid --episodes 100       # optional
    sb3-ppo-ext grid collect --root ~/runs/grid --csv docs/results/classic.csv
    sb3-ppo-ext grid report docs/results/classic.csv --plot docs/results/classic.png

``run`` trains every cell of a grid file through ``sb3-ppo-ext train`` (rl-zoo3's machinery: the variant's
``--algo``, config file and ``--hyperparams`` overrides, one torch thread, rl-zoo3's periodic deterministic
evaluation) into ``<root>/<task>/<variant>/seed_<S>/``. It is resumable: a cell that finished has a ``done.json``
and is skipped; a cell that was interrupted continues from its newest checkpoint with ``sb3-ppo-ext train --resume``
(step count, schedules, statistics, adaptive-KL state and evaluations carry on) when it saved one (``save_freq`` in
the grid file), else it is started again after moving its partial folder aside. A cell copied in from another
root with its ``done.json`` removed (e.g. a screening run to be trained on to a larger ``n_timesteps``) continues
from its final model the same way. ``--jobs`` cells run at once, one process each. The wall-clock of a cell is the
sum of its sessions' (``sessions.jsonl``); SIGTERM to ``run`` stops its training processes (each saves its model
where it stopped, which the next ``run`` resumes), records their sessions and starts no further cell (Ctrl-C and
SIGHUP too; more of them while it stops change nothing, and it exits with status 1). Task and
variant names become folders under ``--root`` only once checked as folder names; a grid reads, writes and moves
nothing outside ``--root``.

``snapshot`` copies the newest checkpoint and settings of every unfinished cell into a folder, to carry a run of
several sessions to another machine (copy it back under the root and ``run`` resumes it).

``evaluate`` plays the final model of every finished cell for many deterministic episodes from one fixed env seed
(the same starts for every cell; through the plain-data agent files that a shipped agent uses) into the cell's
``final_eval.json``: periodic evaluations of 10 episodes are too noisy to rank near-solved tasks such as Pendulum.
``evaluate`` and ``failures`` report a cell whose ``done.json`` or ``final_eval.json`` is damaged in a ``FAIL`` line
and go on with the others (exit status 1).

``failures`` lists, per task and variant, the starts of those final evaluations that every seed failed (tasks that
report success, e.g. the rocket's landings): hard starts rather than one policy's slips.

``collect`` reads every cell's ``evaluations.npz`` (and ``final_eval.json``) into one CSV, one row per evaluation
(``kind`` periodic or final): task, variant, seed, timesteps, the number of episodes, the mean and standard
deviation over them, the wall-clock seconds of training until that step (from the training envs' monitor files, so
it includes the evaluations before it), whether the run has finished, the episodes' mean length, and the training
values SB3 logged last before it (action std, learning rate, ``approx_kl``, beta: exact from the run's
``progress.csv``, else as printed in the cell's ``train.log`` for runs trained before ``train`` wrote that file).
Into an existing CSV it merges: the runs found under ``--root`` replace their rows, and the CSV's other runs (trained
under another root, or on another machine in an earlier session) keep theirs; columns the CSV has beyond collect's
(notes, pandas' index) are kept, with their values on the rows collected again; ``--replace`` writes the root's runs
alone.

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

Relative ``conf`` and ``trained_agent`` paths are relative to the folder :func:`~sb3_ppo_ext.grid.cells.load_grid`
is given (the command line's: the current directory, or the repository root for ``benchmarks/grid.py``). A
``trained_agent`` cell starts from that model (rl-zoo3's ``-i``: its weights and, for a checkpoint
``rl_model_<steps>_steps.zip``, the ``VecNormalize`` statistics saved beside it; the step count, schedules and
optimiser start anew), then resumes from its own checkpoints like any cell.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

from sb3_ppo_ext.grid.cells import load_grid
from sb3_ppo_ext.grid.collect import collect, merge_rows, read_csv, run_key, write_csv
from sb3_ppo_ext.grid.evaluate import evaluate_cells, shared_failures
from sb3_ppo_ext.grid.report import CURVE_VALUES, curve_table, plot, report
from sb3_ppo_ext.grid.run import ignore_stop_signals_once_stopped, run_grid, snapshot_cells
from sb3_ppo_ext.zoo.config.blocks import MAX_N_TIMESTEPS


def _threshold(pair: str) -> tuple[str, float]:
    """One of ``report --threshold``'s ``TASK=SCORE`` pairs, the score a finite number (an argparse type)."""
    task, sep, value = pair.rpartition("=")
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not sep or not task or not math.isfinite(score):
        raise argparse.ArgumentTypeError(f"takes TASK=SCORE with a finite SCORE, got {pair!r}")
    return task, score


def _step_count(text: str) -> int:
    """A step budget given on the command line (``1e6`` counts): a whole number from 0 to ``MAX_N_TIMESTEPS``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_N_TIMESTEPS or value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number of steps from 0 to {MAX_N_TIMESTEPS}, got {text!r}")
    return int(value)


#: Most bootstrap resamples ``report`` draws per interval: rliable's default is 2000, and 100,000 take about a minute.
MAX_BOOTSTRAP_REPS = 100_000


def _reps(text: str) -> int:
    """``report --reps``: a whole number from 1 to :data:`MAX_BOOTSTRAP_REPS`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_BOOTSTRAP_REPS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_BOOTSTRAP_REPS}, got {text!r}")
    return value


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The parser of the grid's subcommands (its description is this module's documentation).

    :param prog: the program name its messages show (default: argparse's, from ``sys.argv[0]``).
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train the cells of a grid file (skips finished cells)")
    run.add_argument("grid", help="grid file (YAML)")
    run.add_argument("--root", required=True, help="folder of the runs (outside the repository)")
    run.add_argument("--jobs", type=int, default=1, help="cells trained at once (one process and core each)")
    run.add_argument("--only", nargs="+", default=None, help="run only these variants")
    run.add_argument("--tasks", nargs="+", default=None, help="run only these tasks")
    run.add_argument("--seeds", nargs="+", type=int, default=None, help="run only these seeds")
    run.add_argument("--dry-run", action="store_true", help="print each cell's command and exit")
    stash = commands.add_parser(
        "snapshot",
        help="copy the newest checkpoint and settings of every unfinished cell "
        "to a folder (e.g. in the repository), to resume it on another machine",
    )
    stash.add_argument("--root", required=True)
    stash.add_argument("--to", required=True, help="destination folder (same layout as --root)")
    hard = commands.add_parser("failures", help="final-evaluation starts that failed for every seed (after evaluate)")
    hard.add_argument("--root", required=True)
    gather = commands.add_parser(
        "collect",
        help="write one CSV of every evaluation under --root; runs already in an existing CSV that --root "
        "does not hold keep their rows",
    )
    gather.add_argument("--root", required=True)
    gather.add_argument("--csv", required=True)
    gather.add_argument(
        "--replace", action="store_true", help="write only the runs under --root, dropping the CSV's other runs"
    )
    final = commands.add_parser("evaluate", help="evaluate the final model of every finished cell on many episodes")
    final.add_argument("--root", required=True)
    final.add_argument("--episodes", type=int, default=100)
    final.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    summary = commands.add_parser("report", help="mean, IQM and 95%% CIs per task and variant; learning curves")
    summary.add_argument("csv", nargs="+", help="one or more CSVs of `collect` (e.g. two grids' variants side by side)")
    summary.add_argument("--at", type=_step_count, default=None, help="score at this step budget (default: last eval)")
    summary.add_argument(
        "--threshold",
        type=_threshold,
        nargs="+",
        default=[],
        metavar="TASK=SCORE",
        help="also report the wall-clock time until the evaluation first reaches SCORE",
    )
    summary.add_argument("--reps", type=_reps, default=10_000, help="bootstrap resamples")
    summary.add_argument("--plot", default=None, help="write the learning curves to this image")
    summary.add_argument("--include-unfinished", action="store_true", help="also report runs still going")
    summary.add_argument(
        "--curve-steps", type=_step_count, nargs="+", default=None, help="also print each run's evaluation at these steps"
    )
    summary.add_argument(
        "--curve-value",
        choices=sorted(CURVE_VALUES),
        default="eval_mean",
        help="what --curve-steps shows: the evaluation's mean return (default) or episode length, or "
        "a training value logged before it",
    )
    return parser


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser, relative_to: str | None) -> int:
    """``run``: train the chosen cells of the grid file (or print their commands with ``--dry-run``)."""
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    root = os.path.expanduser(args.root)
    try:
        cells = load_grid(args.grid, relative_to)
        for cell in cells:
            cell.folder(root)  # every name a folder under the root, before any cell runs
    except (OSError, ValueError) as error:
        parser.error(" ".join(line.strip() for line in str(error).splitlines() if line.strip()))  # one line
    for flag, wanted, known in (
        ("--only", args.only, {cell.variant for cell in cells}),
        ("--tasks", args.tasks, {cell.task for cell in cells}),
        ("--seeds", args.seeds, {cell.seed for cell in cells}),
    ):
        unknown = [value for value in wanted or [] if value not in known]
        if unknown:
            parser.error(
                f"{flag}: {', '.join(map(str, unknown))} not in {args.grid} (it has {', '.join(map(str, sorted(known)))})"
            )
    if args.only:
        cells = [cell for cell in cells if cell.variant in args.only]
    if args.tasks:
        cells = [cell for cell in cells if cell.task in args.tasks]
    if args.seeds is not None:
        cells = [cell for cell in cells if cell.seed in args.seeds]
    if args.dry_run:
        for cell in cells:
            print(shlex.join(["sb3-ppo-ext", *cell.train_argv(cell.folder(root))]))
        return 0
    finished = run_grid(cells, root, args.jobs)
    ignore_stop_signals_once_stopped()
    return 0 if finished else 1


def _report(args: argparse.Namespace) -> int:
    """``report``: the tables of the CSVs' runs (finished ones unless ``--include-unfinished``), and the plot. A run
    (task, variant, seed) in two of the CSVs is refused: their evaluations would be read as one run's."""
    rows: list[dict[str, Any]] = []
    found_in: dict[tuple[str, str, int], int] = {}  # run -> position of its CSV among the arguments
    for position, path in enumerate(args.csv):
        for row in read_csv(path):
            run = run_key(row)
            if found_in.setdefault(run, position) != position:
                raise SystemExit(
                    f"grid.py report: the run {run[0]} / {run[1]} / seed {run[2]} is in {args.csv[found_in[run]]} and "
                    f"again in {path}; give each run's CSV once (or rename a variant)"
                )
            if row["finished"] or args.include_unfinished:
                rows.append(row)
    print(report(rows, at=args.at, threshold=dict(args.threshold), reps=args.reps))
    if args.curve_steps:
        print(curve_table(rows, args.curve_steps, args.curve_value))
    if args.plot:
        plot(rows, args.plot, reps=min(args.reps, 2000))
        print(f"learning curves -> {args.plot}")
    return 0


def main(argv: Sequence[str] | None = None, relative_to: str | None = None, prog: str | None = None) -> int:
    """Run one subcommand of the grid's command line.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :param relative_to: the folder that a grid file's relative ``conf`` and ``trained_agent`` paths start from
        (default: the current directory).
    :param prog: the program name in usage and error messages (``sb3-ppo-ext grid`` from the main command; default:
        argparse's, from ``sys.argv[0]``).
    :returns: the exit status.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args, parser, relative_to)
    if args.command == "evaluate":
        if args.episodes < 1:
            parser.error(f"--episodes must be >= 1, got {args.episodes}")
        lines = evaluate_cells(os.path.expanduser(args.root), args.episodes, args.tasks)
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0
    if args.command == "snapshot":
        for line in snapshot_cells(os.path.expanduser(args.root), args.to):
            print(line, flush=True)
        return 0
    if args.command == "failures":
        lines = shared_failures(os.path.expanduser(args.root))
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0
    if args.command == "collect":
        rows = collect(os.path.expanduser(args.root))
        collected_runs = len({run_key(row) for row in rows})
        if os.path.isfile(args.csv) and not args.replace:
            rows = merge_rows(read_csv(args.csv), rows)
        all_runs = len({run_key(row) for row in rows})
        write_csv(rows, args.csv)
        kept = f" (and {all_runs - collected_runs} runs kept from the CSV)" if all_runs > collected_runs else ""
        print(f"{len(rows)} evaluations: {collected_runs} runs from {args.root}{kept} -> {args.csv}")
        return 0
    return _report(args)

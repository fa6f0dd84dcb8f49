"""The largest ``approx_kl`` of any update, per grid cell: how far the worst single update moved each run's policy.

    python benchmarks/research/update_kl.py ~/runs/walker_final            # every cell under the grid root
    python benchmarks/research/update_kl.py ~/runs/walker_final --above 0.15

Read from each run's ``progress.csv`` (every update's ``train/approx_kl``, as SB3's logger wrote it); ``grid collect``
keeps only the update logged last before each evaluation, which can miss a blow-up between two evaluations.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
from collections.abc import Sequence

from sb3_ppo_ext.grid.cells import cell_folders, cell_run_folders
from sb3_ppo_ext.zoo.progress_csv import PROGRESS_FILE


def update_kls(progress_csv: str) -> list[tuple[int, float]]:
    """``(total_timesteps, approx_kl)`` of every update a ``progress.csv`` logged, in the file's order."""
    updates = []
    with open(progress_csv, encoding="utf-8", newline="") as stream:
        for row in csv.DictReader(stream):
            kl, step = row.get("train/approx_kl"), row.get("time/total_timesteps")
            if kl and step and math.isfinite(float(kl)):
                updates.append((int(float(step)), float(kl)))
    return updates


def largest_update_kl(cell_folder: str) -> tuple[int, float, int] | None:
    """``(step, approx_kl, updates)`` of the cell's update with the largest ``approx_kl``, or ``None`` without a
    ``progress.csv``."""
    for run_folder in cell_run_folders(cell_folder):
        path = os.path.join(run_folder, PROGRESS_FILE)
        if os.path.isfile(path):
            updates = update_kls(path)
            if updates:
                step, kl = max(updates, key=lambda update: update[1])
                return step, kl, len(updates)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="a grid root (benchmarks/grid.py run --root)")
    parser.add_argument("--above", type=float, default=None, help="also say which cells had an update above this")
    args = parser.parse_args(argv)
    print("| cell | updates | largest approx_kl | at step |\n|---|---|---|---|")
    for cell in cell_folders(os.path.expanduser(args.root)):
        largest = largest_update_kl(cell)
        if largest is None:
            continue
        step, kl, count = largest
        flag = " (above)" if args.above is not None and kl > args.above else ""
        print(f"| {os.path.relpath(cell, args.root)} | {count} | {kl:.4f}{flag} | {step} |")


if __name__ == "__main__":
    main()

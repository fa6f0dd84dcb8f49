"""The objectives guide's plots (``docs/guide/objectives.md``), one per option, from learning grids on Pendulum-v1
with the shipped block, 3 seeds per variant: ``benchmarks/grids/objectives.yml`` (collected into
``docs/results/objectives.csv``) and, for the separate critic rate, ``benchmarks/grids/classic.yml``
(``docs/results/classic.csv``). Each figure compares variants of one grid, so of one version of the code.

    python tools/objective_plots.py   # -> docs/results/objectives_{objective,lr_kl,critic}.png

- ``objectives_objective.png``: the clipped surrogate, the KL penalty without clipping, and both; with the penalty's
  coefficient beta and the measured KL.
- ``objectives_lr_kl.png``: the clipped surrogate with its fixed rate against the KL-adaptive rate; with the rate the
  rule set and the KL it reacted to.
- ``objectives_critic.png``: one rate for both networks against a separate critic rate.

Each panel shows every seed (thin) and their mean (thick) at the periodic evaluations; the training values are the
ones SB3 logged last before each evaluation (``grid.py collect``'s ``train_*`` columns).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from model_cards import save_small_png  # tools/model_cards.py, beside this script

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPOSITORY, "docs", "results")
TASK = "Pendulum-v1"
#: figure -> (the grid's CSV in docs/results, its grid file, the variants compared, the training values shown beside
#: the return: (CSV column, axis label, log scale)).
FIGURES: dict[str, tuple[str, str, tuple[str, ...], tuple[tuple[str, str, bool], ...]]] = {
    "objective": (
        "objectives.csv",
        "objectives.yml",
        ("clip", "kl_penalty", "clip_kl_penalty"),
        (("train_kl_coef", "KL penalty coefficient beta", True), ("train_approx_kl", "approx_kl (SB3's log)", True)),
    ),
    "lr_kl": (
        "objectives.csv",
        "objectives.yml",
        ("clip", "lr_kl"),
        (("train_learning_rate", "learning rate", True), ("train_approx_kl", "approx_kl (SB3's log)", True)),
    ),
    "critic": ("classic.csv", "classic.yml", ("ppo_ext", "ppo_ext_vf_3e-3"), ()),  # that CSV has no train_* columns
}
#: The variants whose loss has the KL penalty (and so a beta that adapts).
PENALTY_VARIANTS = frozenset({"kl_penalty", "clip_kl_penalty"})
LABELS = {
    "clip": "clip (default)",
    "ppo_ext": "one rate, 1e-3 (default)",
    "lr_kl": "lr_kl_target=0.01",
    "ppo_ext_vf_3e-3": "critic 3e-3, each clipped to 0.5",
}


def _series(rows: Sequence[dict[str, Any]], variant: str, column: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per seed: the steps of the variant's periodic evaluations and ``column`` at each."""
    seeds: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if row["task"] == TASK and row["variant"] == variant and row["kind"] == "periodic":
            seeds.setdefault(row["seed"], []).append(row)
    return {
        seed: (
            np.array([row["timesteps"] for row in sorted(seed_rows, key=lambda row: row["timesteps"])]),
            np.array([row[column] for row in sorted(seed_rows, key=lambda row: row["timesteps"])], dtype=float),
        )
        for seed, seed_rows in sorted(seeds.items())
    }


def plot_figure(rows: Sequence[dict[str, Any]], name: str, output: str) -> None:
    """One figure of :data:`FIGURES` into ``output``, from the rows of its CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, grid_file, variants, extras = FIGURES[name]
    panels = (("eval_mean", "evaluation return (10 episodes)", False), *extras)
    figure, axes = plt.subplots(1, len(panels), figsize=(max(4.2 * len(panels), 6.0), 3.3), squeeze=False)
    for axis, (column, label, log) in zip(axes[0], panels, strict=True):
        for index, variant in enumerate(variants):
            color = f"C{index}"
            if column == "train_kl_coef" and variant not in PENALTY_VARIANTS:
                continue  # beta is logged, unused, by the clipped surrogate alone
            series = _series(rows, variant, column)
            if not series or all(np.isnan(values).all() for _, values in series.values()):
                continue
            for steps, values in series.values():
                axis.plot(steps / 1e3, values, color=color, linewidth=0.7, alpha=0.45)
            common = sorted(set.intersection(*(set(steps.tolist()) for steps, _ in series.values())))
            mean = [np.mean([values[list(steps).index(step)] for steps, values in series.values()]) for step in common]
            axis.plot(
                np.array(common) / 1e3,
                mean,
                color=color,
                linewidth=2.0,
                label=f"{LABELS.get(variant, variant)} ({len(series)} seeds)",
            )
        if column == "train_approx_kl" and name == "lr_kl":
            # The rule reacts to the closed-form KL of each minibatch; SB3's approx_kl (k3, mean over the update) is
            # the logged stand-in for it.
            axis.axhspan(0.01 / 2, 0.01 * 2, color="0.85", zorder=0, label="the rule's band: target / 2 to x 2")
        if log:
            axis.set_yscale("log")
        axis.set_xlabel("environment steps (thousands)", fontsize=9)
        axis.set_ylabel(label, fontsize=9)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    figure.suptitle(f"{TASK}, the shipped block (benchmarks/grids/{grid_file})", fontsize=10)
    figure.tight_layout()
    save_small_png(figure, output)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=RESULTS, help="folder of the CSVs")
    parser.add_argument("--output-folder", default=RESULTS)
    args = parser.parse_args(argv)

    from sb3_ppo_ext.grid.collect import read_csv

    for name, (csv_name, *_) in FIGURES.items():
        output = os.path.join(args.output_folder, f"objectives_{name}.png")
        plot_figure(read_csv(os.path.join(args.results, csv_name)), name, output)
        print(f"wrote {output} ({os.path.getsize(output) / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

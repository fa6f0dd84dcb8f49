"""Reporting a grid's CSV: per task and variant, each seed's score, mean and interquartile mean with 95%
stratified-bootstrap confidence intervals (rliable), the wall clock to a score, curve tables and learning-curve
plots."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np


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
    # rliable: the bench extra, needed by report and plot only.
    from rliable import library as rly
    from rliable import metrics

    def aggregate(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_iqm(x)])

    np.random.seed(seed)  # rliable's bootstrap draws from numpy's global generator
    points, intervals = rly.get_interval_estimates(scores, aggregate, reps=reps)
    return {
        name: {"mean": (points[name][0], *intervals[name][:, 0]), "iqm": (points[name][1], *intervals[name][:, 1])}
        for name in scores
    }


def report(rows: Sequence[dict[str, Any]], *, at: int | None, threshold: dict[str, float], reps: int) -> str:
    """A Markdown table per task: per-seed finals, mean and IQM with 95% CIs, time to ``threshold``.

    A seed's score is its ``final`` evaluation (``evaluate``) where every seed of the variant has one and no ``at``
    is given, else its last periodic evaluation (at or before ``at`` steps). The ``evaluation`` column says which.
    """
    periodic, final = _groups(rows, "periodic"), _groups(rows, "final")
    lines = []
    for task in sorted({task for task, _ in periodic}):
        task_rows = [row for row in rows if row["task"] == task]
        lines += _task_table(task, task_rows, periodic, final, at=at, threshold=threshold.get(task), reps=reps)
    return "\n".join(lines)


def _task_table(
    task: str,
    task_rows: Sequence[dict[str, Any]],
    periodic: dict[tuple[str, str], dict[int, list[dict[str, Any]]]],
    final: dict[tuple[str, str], dict[int, list[dict[str, Any]]]],
    *,
    at: int | None,
    threshold: float | None,
    reps: int,
) -> list[str]:
    """The lines of one task's section of :func:`report`: its title, the table header and one line per variant."""
    variants = sorted(variant for t, variant in periodic if t == task)
    uses_final = {
        variant: at is None and set(final.get((task, variant), {})) == set(periodic[task, variant]) for variant in variants
    }
    sources = {variant: final[task, variant] if uses_final[variant] else periodic[task, variant] for variant in variants}
    finals = {variant: final_scores(sources[variant], at) for variant in variants}
    estimates = interval_estimates(
        {variant: np.array(list(scores.values()), dtype=float)[:, None] for variant, scores in finals.items() if scores},
        reps,
    )
    with_successes = any(row.get("success_rate") is not None for row in task_rows)
    header = "| variant | seeds | score per seed | steps | evaluation | mean [95% CI] | IQM [95% CI] |"
    if with_successes:
        header += " successes per seed |"
    if threshold is not None:
        header += f" wall-clock to {threshold:g} per seed |"
    lines = [f"### {task}", "", header, "|" + "---|" * (header.count("|") - 1)]
    for variant in variants:
        if not finals[variant]:
            continue
        used = {
            seed: [row for row in sources[variant][seed] if at is None or row["timesteps"] <= at][-1]
            for seed in sorted(finals[variant])
        }
        line = _variant_line(
            variant, used, finals[variant], estimates[variant], "final" if uses_final[variant] else "last periodic"
        )
        if with_successes:
            line += " " + ", ".join(_successes(row) for row in used.values()) + " |"
        if threshold is not None:
            reached = [time_to_score(periodic[task, variant][seed], threshold) for seed in used]
            line += " " + ", ".join(_time_to_score_cell(time) for time in reached) + " |"
        lines.append(line)
    lines.append("")
    return lines


def _variant_line(
    variant: str,
    used: dict[int, dict[str, Any]],
    scores: dict[int, float],
    estimate: dict[str, Any],
    kind: str,
) -> str:
    """The first seven cells of a variant's line: its seeds and their scores, the steps and evaluation they come from
    (``used``: each seed's row), and the mean and IQM with their confidence intervals."""
    steps = sorted({row["timesteps"] for row in used.values()})
    episodes = "/".join(str(n) for n in sorted({row["episodes"] for row in used.values()}))
    mean, iqm = estimate["mean"], estimate["iqm"]
    return (
        f"| {variant} | {', '.join(map(str, used))} | "
        f"{', '.join(f'{scores[seed]:.0f}' for seed in used)} | "
        f"{'/'.join(f'{s / 1e6:.3g}M' for s in steps)} | {kind}, {episodes} episodes | "
        f"{mean[0]:.0f} [{mean[1]:.0f}, {mean[2]:.0f}] | {iqm[0]:.0f} [{iqm[1]:.0f}, {iqm[2]:.0f}] |"
    )


def _successes(row: dict[str, Any]) -> str:
    """``successes/episodes`` of an evaluation row, ``-`` where the task reports no success."""
    if row.get("success_rate") is None:
        return "-"
    return f"{round(row['success_rate'] * row['episodes'])}/{row['episodes']}"


def _time_to_score_cell(reached: tuple[float, int] | None) -> str:
    """A seed's wall-clock time (and steps) to the threshold, from :func:`time_to_score`."""
    return "not reached" if reached is None else f"{reached[0] / 60:.1f} min ({reached[1] / 1e6:.2f}M)"


#: ``report --curve-value`` choices: the CSV column a curve table shows, and its format.
CURVE_VALUES = {
    "eval_mean": "{:.0f}",
    "eval_length": "{:.0f}",
    "train_std": "{:.3g}",
    "train_learning_rate": "{:.2g}",
    "train_approx_kl": "{:.3g}",
    "train_kl_coef": "{:.3g}",
}


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
                lines.append(
                    f"| {variant} | {seed} | "
                    + " | ".join(cells)
                    + f" | {form.format(last[value])} at {last['timesteps'] / 1e6:.3g}M |"
                )
        lines.append("")
    return "\n".join(lines)


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """IQM over runs at each evaluation step of ``scores`` shaped (runs, 1, steps)."""
    from rliable import metrics  # the bench extra

    return np.array([metrics.aggregate_iqm(scores[..., step]) for step in range(scores.shape[-1])])


def plot(rows: Sequence[dict[str, Any]], output: str, reps: int) -> None:
    """Learning curves: IQM over seeds with 95% bootstrap bands, one panel per task, one line per variant.

    A variant's curve runs over the evaluation steps all its seeds have reached; its IQM and band at each step come
    from rliable's ``get_interval_estimates`` and are drawn by rliable's ``plot_sample_efficiency_curve``. A variant
    has the same colour in every panel.
    """
    # matplotlib (video extra) and rliable (bench extra): for plots only.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the video extra
    from rliable import library as rly  # the bench extra
    from rliable import plot_utils  # the bench extra

    groups = _groups(rows)
    tasks = sorted({task for task, _ in groups})
    variants = sorted({variant for _, variant in groups})
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]  # matplotlib's colours, in its order
    palette = {variant: cycle[index % len(cycle)] for index, variant in enumerate(variants)}
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    np.random.seed(0)  # rliable's bootstrap draws from numpy's global generator
    for axis, task in zip(axes[0], tasks, strict=True):
        axis.set_title(task)
        for variant in sorted(variant for t, variant in groups if t == task):
            seed_rows = groups[task, variant]
            steps = sorted(set.intersection(*({row["timesteps"] for row in r} for r in seed_rows.values())))
            if not steps:
                continue
            table = np.array(
                [[next(row["eval_mean"] for row in r if row["timesteps"] == s) for s in steps] for r in seed_rows.values()]
            )  # (seeds, evaluations)
            label = f"{variant} ({len(seed_rows)} seeds)"
            points, intervals = rly.get_interval_estimates({label: table[:, None, :]}, _iqm_per_step, reps=reps)
            plot_utils.plot_sample_efficiency_curve(
                np.array(steps) / 1e6,
                points,
                intervals,
                colors={label: palette[variant]},
                xlabel="environment steps (millions)",
                ylabel="evaluation return (IQM over seeds)",
                ax=axis,
                labelsize="medium",
                ticklabelsize="small",
                marker="",
                linewidth=1.5,
            )
        axis.legend(fontsize=8)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    figure.savefig(output, dpi=100)
    plt.close(figure)

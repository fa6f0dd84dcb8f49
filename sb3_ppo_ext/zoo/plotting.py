"""Learning curves of zoo runs from their monitor files (rl-zoo3's plot scripts need seaborn and a display)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from huggingface_sb3 import EnvironmentName
from stable_baselines3.common.monitor import LoadMonitorResultsError, get_monitor_files, load_results

from sb3_ppo_ext.callbacks.plot import moving_average
from sb3_ppo_ext.zoo.run_selection import list_runs, run_path
from sb3_ppo_ext.zoo.run_text_files import scan_monitor

X_AXES = ("steps", "episodes", "time")


def find_runs(log_folder: str, algo: str, env_id: str) -> list[str]:
    """Run folders ``<log_folder>/<algo>/<env>_<n>`` of ``env_id``, in run-number order."""
    env_name = str(EnvironmentName(env_id))
    return [run_path(log_folder, run) for run in list_runs(log_folder, [algo]) if run.env_name == env_name]


def load_monitor_results(run_folder: str) -> Any:
    """SB3's ``load_results`` of a run folder (a pandas ``DataFrame`` of its episodes' ``r``, ``l`` and ``t``), or
    ``None`` where it has no monitor file; each file is checked first, since ``load_results`` fails on a damaged one
    with a bare ``AssertionError`` or a parser error that names no file.

    :raises ValueError: naming the file and what is wrong with it (:func:`~sb3_ppo_ext.zoo.run_text_files.scan_monitor`).
    """
    for path in get_monitor_files(run_folder):
        with open(path, encoding="utf-8", errors="replace") as stream:
            if stream.read(1) != "#":  # what load_results asserts
                raise ValueError(f"{path}: line 1 is not a Monitor header (# and a JSON object with a t_start)")
        scan_monitor(path)
    try:
        frame = load_results(run_folder)
    except LoadMonitorResultsError:
        return None
    except (AssertionError, ValueError, KeyError, TypeError) as error:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{run_folder}: a monitor file there is not one SB3's Monitor wrote ({error})") from None
    if len(frame) and "r" not in frame.columns:
        raise ValueError(f"{run_folder}: a monitor file there has no r (episode return) column")
    return frame


def plot_runs(run_folders: list[str], output: str, *, x_axis: str = "steps", window: int = 20, title: str = "") -> int:
    """Plot the smoothed training episode return of each run folder into ``output`` (PNG, PDF, SVG ...).

    :param run_folders: folders holding SB3 ``*.monitor.csv`` files.
    :param output: image path to write.
    :param x_axis: ``"steps"``, ``"episodes"`` or ``"time"`` (hours).
    :param window: episodes in the moving average.
    :param title: figure title.
    :return: number of runs plotted (folders without finished episodes are skipped).
    :raises ValueError: naming the file, for a monitor file that is not one SB3's ``Monitor`` wrote.
    """
    if x_axis not in X_AXES:
        raise ValueError(f"x_axis must be one of {list(X_AXES)}, got {x_axis!r}")
    import matplotlib  # the video extra, needed only to draw

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # after choosing the Agg backend, which needs no display

    # Plain matplotlib: rliable's curves draw an aggregate over runs with its bootstrap band, which one run lacks.
    figure, axes = plt.subplots(figsize=(7, 4.5))
    plotted = 0
    for folder in run_folders:
        frame = load_monitor_results(folder)
        if frame is None or len(frame) == 0:
            continue
        x = {"steps": np.cumsum(frame.l.values), "episodes": np.arange(1, len(frame) + 1), "time": frame.t.values / 3600.0}[
            x_axis
        ]
        axes.plot(x, moving_average(frame.r.values, window), label=os.path.basename(os.path.normpath(folder)))
        plotted += 1
    axes.set_xlabel({"steps": "Timesteps", "episodes": "Episodes", "time": "Wall time (hours)"}[x_axis])
    axes.set_ylabel(f"Training episode return (mean of {window})")
    axes.set_title(title)
    if plotted:
        axes.legend()
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    figure.savefig(output)
    plt.close(figure)
    return plotted

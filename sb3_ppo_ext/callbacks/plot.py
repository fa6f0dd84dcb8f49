"""A learning-curve PNG refreshed during training: episode return, success rate, KL, beta and learning rate."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from sb3_ppo_ext.callbacks._dependencies import require_module
from sb3_ppo_ext.callbacks._schedule import StepSchedule, check_frequency
from sb3_ppo_ext.files import atomic_path, check_writable_dir
from sb3_ppo_ext.validation import check_int

#: Logger keys read after each update, and their axis labels; keys an algorithm does not log are not plotted.
TRAIN_CURVES = {
    "train/kl": "KL(old || new)",
    "train/kl_coef": "KL penalty beta",
    "train/learning_rate": "learning rate",
}


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start), same length as ``values``: the package's
    one moving average (learning-curve PNGs; zoo run plots).

    >>> moving_average(np.array([1.0, 3.0, 5.0]), 2).tolist()
    [1.0, 2.0, 4.0]

    :raises ValueError: when ``window`` < 1.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return values
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(0, ends - window)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


@dataclass
class Series:
    """A curve as (environment step, value) pairs."""

    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, step: int, value: float) -> None:
        """Append one point."""
        self.steps.append(int(step))
        self.values.append(float(value))

    def __len__(self) -> int:
        return len(self.steps)


class LearningCurveCallback(BaseCallback):
    """Refresh a PNG of the learning curves every ``plot_freq`` environment steps and when training ends.

    Panels, each drawn only when it has data: the raw episode return (from ``Monitor``'s ``info["episode"]``, so
    before any reward normalisation) with its moving average; the success rate (moving average of
    ``info["is_success"]`` at episode ends) for tasks that report it; and, after every update, the logger values
    ``train/kl``, ``train/kl_coef`` (beta) and ``train/learning_rate`` (SB3's PPO logs only the last).
    The image is written with matplotlib's Agg canvas (no display needed) and replaced atomically.

    :param plot_freq: refresh every ``plot_freq`` environment steps (>= 1).
    :param plot_path: the PNG file to write; its folder is created and must be writable.
    :param window: episodes in the moving averages (>= 1).
    :param title: figure title; ``None`` uses the env id when known.
    :param dpi: image resolution (>= 10).
    :param verbose: verbosity level.
    """

    def __init__(
        self,
        plot_freq: int,
        plot_path: str,
        window: int = 20,
        title: str | None = None,
        dpi: int = 100,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.plot_freq = check_frequency("plot_freq", plot_freq)
        if not isinstance(plot_path, (str, os.PathLike)) or not os.fspath(plot_path).lower().endswith(".png"):
            raise ValueError(f"plot_path must be a path ending in .png, got {plot_path!r}")
        self.plot_path = os.fspath(plot_path)
        check_writable_dir("plot_path's folder", os.path.dirname(os.path.abspath(self.plot_path)))
        self.window = check_int("window", window, minimum=1)
        self.dpi = check_int("dpi", dpi, minimum=10)
        self.title = title
        require_module("matplotlib", "LearningCurveCallback")
        self.episode_returns = Series()
        self.successes = Series()
        self.train_curves = {key: Series() for key in TRAIN_CURVES}
        self._schedule = StepSchedule(self.plot_freq)
        self._last_update_step: int | None = None

    def _init_callback(self) -> None:
        check_writable_dir("plot_path's folder", os.path.dirname(os.path.abspath(self.plot_path)))

    def _on_training_start(self) -> None:
        self._schedule.start(self.num_timesteps)
        self._last_update_step = self.num_timesteps  # logger values present now belong to an earlier run

    def _on_rollout_start(self) -> None:
        self._read_update_values()

    def _on_step(self) -> bool:
        infos = self.locals.get("infos", ())
        dones = self.locals.get("dones")
        for index, info in enumerate(infos):
            episode = info.get("episode")
            if episode is not None:
                self.episode_returns.add(self.num_timesteps, episode["r"])
            episode_ended = bool(dones[index]) if dones is not None else episode is not None
            if episode_ended and info.get("is_success") is not None:
                self.successes.add(self.num_timesteps, float(info["is_success"]))
        if self._schedule.due(self.num_timesteps):
            self.save_plot()
        return True

    def _on_training_end(self) -> None:
        self._read_update_values()
        self.save_plot()

    def _read_update_values(self) -> None:
        """Take the values ``train()`` recorded for the update that followed the last rollout (once per update)."""
        if self._last_update_step is not None and self.num_timesteps <= self._last_update_step:
            return
        recorded = self.model.logger.name_to_value
        if not any(key in recorded for key in TRAIN_CURVES):
            return
        self._last_update_step = self.num_timesteps
        for key, series in self.train_curves.items():
            if key in recorded:
                series.add(self.num_timesteps, recorded[key])

    def panels(self) -> list[tuple[str, Series, bool]]:
        """The panels that have data: (y label, series, smoothed)."""
        found = []
        if len(self.episode_returns):
            found.append(("episode return (raw)", self.episode_returns, True))
        if len(self.successes):
            found.append(("success rate", self.successes, True))
        for key, label in TRAIN_CURVES.items():
            if len(self.train_curves[key]):
                found.append((label, self.train_curves[key], False))
        return found

    def save_plot(self) -> str | None:
        """Draw the panels that have data into ``plot_path``; return the path, or ``None`` when nothing to draw yet."""
        panels = self.panels()
        if not panels:
            return None
        # The video extra: the callback checks for matplotlib when it is built (require_module), imports it here.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        figure = Figure(figsize=(8, 2.2 * len(panels)), dpi=self.dpi)
        FigureCanvasAgg(figure)
        axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for axis, (label, series, smoothed) in zip(axes, panels, strict=True):
            steps, values = np.asarray(series.steps), np.asarray(series.values)
            if smoothed:
                axis.plot(steps, values, ".", alpha=0.3, markersize=3, label="episode")
                axis.plot(steps, moving_average(values, self.window), label=f"mean of last {self.window}")
                axis.legend(loc="best", fontsize="small")
            else:
                axis.plot(steps, values, "-", marker=".", markersize=3)
            if label in ("learning rate", "KL penalty beta") and np.all(values > 0):
                axis.set_yscale("log")
            axis.set_ylabel(label)
            axis.grid(alpha=0.3)
        axes[-1].set_xlabel("environment steps")
        figure.suptitle(self._title())
        figure.tight_layout()
        with atomic_path(self.plot_path) as temporary:
            figure.savefig(temporary, format="png")
        return self.plot_path

    def _title(self) -> str:
        if self.title is not None:
            return self.title
        try:
            env_id = self.training_env.get_attr("spec", 0)[0].id
        except (AttributeError, IndexError):
            env_id = None
        return f"{type(self.model).__name__} on {env_id}" if env_id else type(self.model).__name__

"""The line ``train`` ends with: the last periodic evaluation of the final model beside that of the best model
(``best_model.zip``), and, where the final model is clearly worse, how to play the best one.

Every command that plays a run (``enjoy``, ``record-video``, ``export``, packing it as an agent) takes its final model
unless told ``--load-best``; a late update that damaged the policy leaves a final model worse than the run's best,
which the user sees here rather than when the agent falls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The final model is "clearly worse" when its last evaluation's mean is below the best one's by more than this share
#: of the best's magnitude (as well as by more than the evaluations' noise): a best evaluation is the maximum of many
#: noisy ones, so a final model a few per cent below it is as good.
CLEARLY_WORSE_SHARE = 0.1


@dataclass(frozen=True)
class Evaluation:
    """One periodic evaluation: its step, the mean and standard deviation of its episodes' returns, its episodes."""

    timesteps: int
    mean: float
    std: float
    episodes: int

    @classmethod
    def of(cls, timesteps: int, returns: Sequence[float]) -> Evaluation:
        """The evaluation at ``timesteps`` whose episodes returned ``returns``."""
        count = len(returns)
        mean = math.fsum(returns) / count
        return cls(int(timesteps), mean, math.sqrt(math.fsum((value - mean) ** 2 for value in returns) / count), count)


def last_and_best(timesteps: Sequence[int], results: Sequence[Sequence[float]]) -> tuple[Evaluation, Evaluation] | None:
    """The last evaluation and the best one (the first with the highest mean, the one ``best_model.zip`` was saved
    at, as SB3's ``EvalCallback`` keeps it) of an evaluation history, or ``None`` when there is none."""
    evaluations = [Evaluation.of(step, returns) for step, returns in zip(timesteps, results, strict=True) if len(returns)]
    if not evaluations:
        return None
    best = evaluations[0]
    for evaluation in evaluations[1:]:
        if evaluation.mean > best.mean:
            best = evaluation
    return evaluations[-1], best


def clearly_worse(last: Evaluation, best: Evaluation) -> bool:
    """Whether ``last`` is below ``best`` by more than :data:`CLEARLY_WORSE_SHARE` of the best's magnitude and by more
    than twice the standard error of the difference of the two means."""
    gap = best.mean - last.mean
    noise = 2 * math.sqrt(last.std**2 / last.episodes + best.std**2 / best.episodes)
    return gap > CLEARLY_WORSE_SHARE * abs(best.mean) and gap > noise


def end_of_training_line(last: Evaluation, best: Evaluation, play_best: str) -> str:
    """What ``train`` prints once it saved the final model: both models' last evaluations and, where the final one is
    :func:`clearly_worse`, the command ``play_best`` that plays the best model."""
    line = (
        f"Final model: last evaluation {last.mean:.2f} +/- {last.std:.2f} at {last.timesteps} steps; best model "
        f"(best_model.zip): {best.mean:.2f} +/- {best.std:.2f} at {best.timesteps} steps."
    )
    if clearly_worse(last, best):
        line += (
            " The final model is clearly worse than the best, and every command plays the final one by default: "
            f"play the best with `{play_best}` (--load-best works for record-video and export too)."
        )
    return line

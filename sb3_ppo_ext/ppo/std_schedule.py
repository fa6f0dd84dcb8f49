"""An action noise that follows a schedule instead of being learned: the PPO paper's Roboschool humanoid runs
(Schulman et al. 2017, sec. 6.3) anneal the Gaussian policy's log-std from -0.7 to -1.6 over training, with the
step size adapted from the KL.

A learned log-std can collapse: with the clipped objective alone the humanoid's action std falls from 0.37 to 0.08
within 4M steps while the KL of each update climbs to about 3 (docs/results/humanoid_results.md). A scheduled std keeps
exploration where the schedule puts it, and leaves the KL of an update to the mean alone.

With ``log_std_schedule`` set, PPO freezes the policy's ``log_std`` (no gradient, so the optimiser leaves it alone)
and writes the scheduled value into it before each rollout. The value for the next rollout is set after each
update, so that a rollout and the update on it use the same std (the update's probability ratios are those of the
policy that collected the data). Saved models keep the current value in their weights; a loaded model continues from
it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch as th
from stable_baselines3.common.distributions import DiagGaussianDistribution
from stable_baselines3.common.policies import BasePolicy

#: What ``log_std_schedule`` takes: a constant, a ``(start, end)`` pair (linear in the training progress, as SB3's
#: schedules), or a function of SB3's ``progress_remaining`` (1 at the start, 0 at the end).
LogStdSetting = float | Sequence[float] | Callable[[float], float]


def linear_log_std(start: float, end: float, progress_remaining: float) -> float:
    """The log-std of a linear schedule from ``start`` (progress remaining 1) to ``end`` (progress remaining 0)."""
    return end + (start - end) * progress_remaining


class LogStdSchedule:
    """The scheduled action log-std of a diagonal Gaussian policy (see the module docstring).

    :param setting: a number, a ``(start, end)`` pair of numbers, or a function of ``progress_remaining``.
    :raises ValueError: for anything else, or non-finite numbers.
    """

    def __init__(self, setting: LogStdSetting) -> None:
        self.setting = setting
        if callable(setting):
            self._value = setting
        elif isinstance(setting, (int, float)) and not isinstance(setting, bool):
            constant = _finite(setting)
            self._value = lambda _progress: constant
        elif isinstance(setting, Sequence) and not isinstance(setting, str) and len(setting) == 2:
            start, end = (_finite(value) for value in setting)
            self._value = lambda progress: linear_log_std(start, end, progress)
        else:
            raise ValueError(
                "log_std_schedule must be a number, a [start, end] pair of numbers (linear over training, e.g. "
                f"[-0.7, -1.6] as in the PPO paper's humanoid runs) or a function of progress_remaining, got {setting!r}"
            )

    def value(self, progress_remaining: float) -> float:
        """The log-std at this point of training (checked finite)."""
        return _finite(self._value(progress_remaining))

    @staticmethod
    def check_policy(policy: BasePolicy) -> None:
        """Raise ``ValueError`` unless ``policy`` acts with a state-independent diagonal Gaussian (its ``log_std``)."""
        if not isinstance(getattr(policy, "action_dist", None), DiagGaussianDistribution):
            kind = type(getattr(policy, "action_dist", None)).__name__
            raise ValueError(
                f"log_std_schedule needs a diagonal Gaussian policy with a state-independent log_std (a Box action "
                f"space, use_sde=False); this policy's action distribution is {kind}"
            )

    def freeze(self, policy: BasePolicy, progress_remaining: float) -> None:
        """Stop ``policy.log_std`` from learning and set it for ``progress_remaining``."""
        self.check_policy(policy)
        policy.log_std.requires_grad_(False)
        policy.log_std.grad = None
        self.apply(policy, progress_remaining)

    def apply(self, policy: BasePolicy, progress_remaining: float) -> None:
        """Write the scheduled log-std into every action dimension of ``policy.log_std``."""
        log_std: th.Tensor = policy.log_std  # type: ignore[assignment]  # a Gaussian policy's (check_policy)
        with th.no_grad():
            log_std.fill_(self.value(progress_remaining))


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"log_std_schedule values must be finite numbers, got {value!r}")
    return float(value)

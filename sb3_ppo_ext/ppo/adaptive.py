"""The two adaptive-KL rules: each a pure function with every constant a parameter, and a small controller object
that holds its settings and its state, validates them, and applies the rule in ``update(kl)``.

* :func:`adapt_kl_coef` / :class:`KLPenaltyController`: the adaptive KL penalty of the PPO paper (Schulman et al.
  2017, sec. 4).
* :func:`adapt_learning_rate` / :class:`KLAdaptiveLearningRate`: the KL-adaptive learning rate of rsl_rl /
  legged_gym (and rl_games, Brax).

The controllers' field defaults are the defaults of PPO's flat keywords (``kl_penalty_tolerance``, ``lr_kl_factor``,
...); :attr:`KLPenaltyController.KEYWORDS` and :attr:`KLAdaptiveLearningRate.KEYWORDS` name the keyword of each field,
which is also the name their validation errors give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch as th

from sb3_ppo_ext.validation import HyperparameterError, check_choice, check_number, check_positive

LR_KL_CADENCES = ("minibatch", "epoch")


@dataclass
class KLPenaltyController:
    """The KL penalty coefficient beta and the paper's rule that adapts it after every update (:func:`adapt_kl_coef`).

    :param coef: beta now (the state; PPO's ``kl_coef`` is its initial value).
    :param target: KL per update that beta adapts towards (the paper's ``d_targ``); ``None``: beta stays fixed.
    :param tolerance: band factor around the target inside which beta is left alone (paper: 1.5), > 1.
    :param factor: multiplicative step (paper: 2), > 1.
    :param coef_min: lower bound of beta.
    :param coef_max: upper bound of beta.
    """

    coef: float = 1.0
    target: float | None = 0.01
    tolerance: float = 1.5
    factor: float = 2.0
    coef_min: float = 1e-4
    coef_max: float = 100.0

    #: PPO's constructor keyword of each field.
    KEYWORDS: ClassVar[dict[str, str]] = {
        "coef": "kl_coef",
        "target": "kl_penalty_target",
        "tolerance": "kl_penalty_tolerance",
        "factor": "kl_penalty_factor",
        "coef_min": "kl_coef_min",
        "coef_max": "kl_coef_max",
    }

    def __post_init__(self) -> None:
        self.check(self.coef, self.target, self.tolerance, self.factor, self.coef_min, self.coef_max)

    @classmethod
    def check(
        cls, coef: float, target: float | None, tolerance: float, factor: float, coef_min: float, coef_max: float
    ) -> None:
        """Raise :class:`~sb3_ppo_ext.validation.HyperparameterError`, naming PPO's keyword, unless these fields make a
        valid controller (what building one checks)."""
        name = cls.KEYWORDS
        check_positive(name["coef_min"], coef_min)
        check_positive(name["coef_max"], coef_max)
        if coef_min > coef_max:
            raise HyperparameterError(f"{name['coef_min']} must be <= {name['coef_max']}, got {coef_min} > {coef_max}")
        check_number(name["coef"], coef, low=0.0)
        if target is not None:
            check_positive(name["target"], target)
            check_number(name["coef"], coef, low=coef_min, high=coef_max)
        check_number(name["tolerance"], tolerance, low=1.0, low_inclusive=False)
        check_number(name["factor"], factor, low=1.0, low_inclusive=False)

    @classmethod
    def check_keywords(cls, settings: Any) -> None:
        """:meth:`check` the flat keywords of an object holding PPO's settings as attributes, building nothing."""
        cls.check(**_fields(cls.KEYWORDS, settings))

    @classmethod
    def from_keywords(cls, settings: Any, **state: Any) -> KLPenaltyController:
        """The controller of an object holding PPO's flat keywords as attributes; ``state`` overrides fields."""
        return cls(**_fields(cls.KEYWORDS, settings) | state)

    @property
    def adaptive(self) -> bool:
        """Whether beta adapts (a target is set)."""
        return self.target is not None

    def update(self, kl: float) -> float:
        """Adapt beta to the KL of the update just made (nothing when there is no target); return the new beta."""
        if self.target is not None:
            self.coef = adapt_kl_coef(kl, self.coef, self.target, self.tolerance, self.factor, self.coef_min, self.coef_max)
        return self.coef


@dataclass
class KLAdaptiveLearningRate:
    """The learning rate set by rsl_rl's KL rule after every minibatch or epoch (:func:`adapt_learning_rate`).

    :param target: desired KL (rsl_rl's ``desired_kl``: 0.01); ``None``: off (the learning-rate schedule rules).
    :param tolerance: band factor around the target (rsl_rl: 2), > 1.
    :param factor: multiplicative step (rsl_rl: 1.5), > 1.
    :param lr_min: lower bound of the learning rate.
    :param lr_max: upper bound of the learning rate.
    :param cadence: ``"minibatch"`` (rsl_rl) or ``"epoch"`` (the mean KL of the epoch's minibatches).
    :param learning_rate: the learning rate now (the state); ``None`` until :meth:`start`.

    During an update, :meth:`observe` takes each minibatch's KL and :meth:`end_epoch` closes each epoch; the rule
    runs at its cadence (after every minibatch, or on the mean KL of each epoch).
    """

    target: float | None = None
    tolerance: float = 2.0
    factor: float = 1.5
    lr_min: float = 1e-5
    lr_max: float = 1e-2
    cadence: str = "minibatch"
    learning_rate: float | None = None
    _epoch_kls: list[th.Tensor] = field(default_factory=list, init=False, repr=False, compare=False)

    #: PPO's constructor keyword of each setting (the state, ``learning_rate``, starts from PPO's ``learning_rate``).
    KEYWORDS: ClassVar[dict[str, str]] = {
        "target": "lr_kl_target",
        "tolerance": "lr_kl_tolerance",
        "factor": "lr_kl_factor",
        "lr_min": "lr_min",
        "lr_max": "lr_max",
        "cadence": "lr_kl_cadence",
    }

    def __post_init__(self) -> None:
        self.check(self.target, self.tolerance, self.factor, self.lr_min, self.lr_max, self.cadence)

    @classmethod
    def check(cls, target: float | None, tolerance: float, factor: float, lr_min: float, lr_max: float, cadence: str) -> None:
        """Raise :class:`~sb3_ppo_ext.validation.HyperparameterError`, naming PPO's keyword, unless these settings make
        a valid controller (what building one checks)."""
        name = cls.KEYWORDS
        if target is not None:
            check_positive(name["target"], target)
        check_number(name["tolerance"], tolerance, low=1.0, low_inclusive=False)
        check_number(name["factor"], factor, low=1.0, low_inclusive=False)
        check_positive(name["lr_min"], lr_min)
        check_positive(name["lr_max"], lr_max)
        if lr_min > lr_max:
            raise HyperparameterError(f"{name['lr_min']} must be <= {name['lr_max']}, got {lr_min} > {lr_max}")
        check_choice(name["cadence"], cadence, LR_KL_CADENCES)

    @classmethod
    def check_keywords(cls, settings: Any) -> None:
        """:meth:`check` the flat keywords of an object holding PPO's settings as attributes, and, while the rule is
        on, that a constant ``learning_rate`` lies within its bounds (:meth:`check_start`); builds nothing."""
        fields = _fields(cls.KEYWORDS, settings)
        cls.check(**fields)
        if not callable(settings.learning_rate):
            _check_start(settings.learning_rate, fields["target"], fields["lr_min"], fields["lr_max"])

    @classmethod
    def from_keywords(cls, settings: Any, **state: Any) -> KLAdaptiveLearningRate:
        """The controller of an object holding PPO's flat keywords as attributes; ``state`` overrides fields."""
        return cls(**_fields(cls.KEYWORDS, settings) | state)

    @property
    def active(self) -> bool:
        """Whether the rule sets the learning rate (a target is set)."""
        return self.target is not None

    def check_start(self, learning_rate: float) -> None:
        """Raise unless the rule, when active, can start from ``learning_rate`` (PPO's): it lies within the bounds."""
        _check_start(learning_rate, self.target, self.lr_min, self.lr_max)

    def start(self, learning_rate: float) -> None:
        """Start from ``learning_rate`` (clamped to the bounds) unless a state is already there (a loaded model)."""
        if self.active and self.learning_rate is None:
            self.learning_rate = min(max(float(learning_rate), self.lr_min), self.lr_max)

    def update(self, kl: float) -> float:
        """Adapt the learning rate to one KL measurement; return the new rate."""
        self.learning_rate = adapt_learning_rate(
            kl,
            self.learning_rate,  # type: ignore[arg-type]
            self.target,  # type: ignore[arg-type]
            self.tolerance,
            self.factor,
            self.lr_min,
            self.lr_max,
        )
        return self.learning_rate

    def observe(self, kl: th.Tensor) -> bool:
        """Take one minibatch's KL (a 0-d tensor); return whether the learning rate was adapted now (cadence
        ``"minibatch"``; ``"epoch"`` keeps it for :meth:`end_epoch`). Nothing while the rule is off."""
        if not self.active:
            return False
        if self.cadence == "epoch":
            self._epoch_kls.append(kl)
            return False
        self.update(kl.item())
        return True

    def end_epoch(self) -> bool:
        """Close an epoch; return whether the learning rate was adapted now (cadence ``"epoch"``: to the mean KL of
        the minibatches observed in the epoch, if any)."""
        if not self._epoch_kls:
            return False
        self.update(th.stack(self._epoch_kls).mean().item())
        self._epoch_kls.clear()
        return True


def _fields(keywords: dict[str, str], settings: Any) -> dict[str, Any]:
    """Each field of ``keywords`` (a controller's :attr:`KEYWORDS`) with the value of its PPO keyword in ``settings``."""
    return {name: getattr(settings, keyword) for name, keyword in keywords.items()}


def _check_start(learning_rate: float, target: float | None, lr_min: float, lr_max: float) -> None:
    """Raise unless the KL-adaptive rule, when on (``target`` set), can start from ``learning_rate``: within bounds."""
    if target is not None:
        check_number("learning_rate", learning_rate, low=lr_min, high=lr_max)


def adapt_kl_coef(
    kl: float,
    kl_coef: float,
    target: float,
    tolerance: float = KLPenaltyController.tolerance,
    factor: float = KLPenaltyController.factor,
    coef_min: float = KLPenaltyController.coef_min,
    coef_max: float = KLPenaltyController.coef_max,
) -> float:
    """Return the KL penalty coefficient (beta) for the next update.

    PPO paper, sec. 4: with ``d`` the KL divergence of the update,
    ``d < target / tolerance`` => ``beta / factor``; ``d > target * tolerance`` => ``beta * factor``;
    otherwise unchanged. The result is clamped to ``[coef_min, coef_max]``.

    :param kl: measured KL divergence of the update (old policy to new policy).
    :param kl_coef: current coefficient.
    :param target: desired KL per update (the paper's ``d_targ``).
    :param tolerance: band around the target inside which beta is left alone (paper: 1.5).
    :param factor: multiplicative step (paper: 2).
    :param coef_min: lower bound of the coefficient.
    :param coef_max: upper bound of the coefficient.
    :return: the new coefficient.
    """
    if kl > target * tolerance:
        kl_coef = kl_coef * factor
    elif kl < target / tolerance:
        kl_coef = kl_coef / factor
    return min(max(kl_coef, coef_min), coef_max)


def adapt_learning_rate(
    kl: float,
    learning_rate: float,
    target: float,
    tolerance: float = KLAdaptiveLearningRate.tolerance,
    factor: float = KLAdaptiveLearningRate.factor,
    lr_min: float = KLAdaptiveLearningRate.lr_min,
    lr_max: float = KLAdaptiveLearningRate.lr_max,
) -> float:
    """Return the learning rate after one KL measurement (rsl_rl's rule).

    ``kl > tolerance * target`` => ``lr / factor``; ``0 < kl < target / tolerance`` => ``lr * factor``;
    otherwise unchanged (a KL of exactly zero, e.g. before any gradient step, leaves it alone).
    The result is clamped to ``[lr_min, lr_max]``.

    :param kl: measured KL divergence (old policy to current policy).
    :param learning_rate: current learning rate.
    :param target: desired KL (rsl_rl's ``desired_kl``).
    :param tolerance: band factor around the target (rsl_rl: 2).
    :param factor: multiplicative step (rsl_rl: 1.5).
    :param lr_min: lower bound of the learning rate.
    :param lr_max: upper bound of the learning rate.
    :return: the new learning rate.
    """
    if kl > target * tolerance:
        learning_rate = learning_rate / factor
    elif 0.0 < kl < target / tolerance:
        learning_rate = learning_rate * factor
    return min(max(learning_rate, lr_min), lr_max)

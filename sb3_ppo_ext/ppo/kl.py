"""KL divergences between the policy that collected a rollout and the policy being trained.

Closed forms where they exist (diagonal Gaussian summed over action dimensions, categorical, multi-categorical,
Bernoulli), the k3 sample estimate elsewhere. Every function returns one value per sample: ``KL(old || new)``.

A Gaussian squashed by tanh (``squash_output=True``) has the same KL as the Gaussian under it, because KL is
invariant under an invertible change of variables, so the Gaussian closed form serves it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch as th
import torch.nn.functional as F
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)

DistributionParams = tuple[th.Tensor, ...]


def gaussian_kl(mean_p: th.Tensor, std_p: th.Tensor, mean_q: th.Tensor, std_q: th.Tensor) -> th.Tensor:
    """``KL(N(mean_p, std_p) || N(mean_q, std_q))`` for diagonal Gaussians, summed over the last axis."""
    variance_ratio = (std_p / std_q) ** 2
    mean_term = ((mean_p - mean_q) / std_q) ** 2
    return 0.5 * (variance_ratio + mean_term - 1.0 - th.log(variance_ratio)).sum(dim=-1)


def categorical_kl(logits_p: th.Tensor, logits_q: th.Tensor) -> th.Tensor:
    """``KL(Cat(logits_p) || Cat(logits_q))`` over the last axis (logits need not be normalised)."""
    log_p = F.log_softmax(logits_p, dim=-1)
    log_q = F.log_softmax(logits_q, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


def multi_categorical_kl(logits_p: th.Tensor, logits_q: th.Tensor, action_dims: Sequence[int]) -> th.Tensor:
    """Sum of :func:`categorical_kl` over independent sub-actions whose logits are concatenated on the last axis."""
    split = list(action_dims)
    return sum(
        (categorical_kl(p, q) for p, q in zip(th.split(logits_p, split, dim=-1), th.split(logits_q, split, dim=-1))),
        th.zeros(logits_p.shape[:-1], dtype=logits_p.dtype, device=logits_p.device),
    )


def bernoulli_kl(logits_p: th.Tensor, logits_q: th.Tensor) -> th.Tensor:
    """``KL(Bernoulli(logits_p) || Bernoulli(logits_q))`` summed over the last axis."""
    prob_p = th.sigmoid(logits_p)
    log_p1, log_p0 = F.logsigmoid(logits_p), F.logsigmoid(-logits_p)
    log_q1, log_q0 = F.logsigmoid(logits_q), F.logsigmoid(-logits_q)
    return (prob_p * (log_p1 - log_q1) + (1.0 - prob_p) * (log_p0 - log_q0)).sum(dim=-1)


def k3_kl(log_ratio: th.Tensor) -> th.Tensor:
    """Per-sample k3 estimate of ``KL(old || new)`` from ``log_ratio = log pi_new(a) - log pi_old(a)``, a ~ pi_old.

    Unbiased and never negative (Schulman, "Approximating KL divergence"); SB3 logs its mean as ``approx_kl``.
    """
    return th.expm1(log_ratio) - log_ratio


@dataclass(frozen=True)
class AnalyticKL:
    """Closed-form KL for one SB3 distribution family.

    :param kind: ``"gaussian"``, ``"categorical"``, ``"multi_categorical"`` or ``"bernoulli"``.
    :param action_dims: sub-action sizes (multi-categorical only).
    """

    kind: str
    action_dims: tuple[int, ...] = ()

    @classmethod
    def for_distribution(cls, distribution: Distribution) -> AnalyticKL | None:
        """The closed form for ``distribution``, or ``None`` when it has none here (use :func:`k3_kl`)."""
        if isinstance(distribution, (DiagGaussianDistribution, StateDependentNoiseDistribution)):
            return cls("gaussian")
        if isinstance(distribution, CategoricalDistribution):
            return cls("categorical")
        if isinstance(distribution, MultiCategoricalDistribution):
            return cls("multi_categorical", tuple(int(n) for n in distribution.action_dims))
        if isinstance(distribution, BernoulliDistribution):
            return cls("bernoulli")
        return None

    def params(self, distribution: Distribution) -> DistributionParams:
        """The tensors that define ``distribution`` (after ``proba_distribution`` was called on it)."""
        torch_dist = distribution.distribution
        if self.kind == "gaussian":
            return torch_dist.loc, torch_dist.scale.expand_as(torch_dist.loc)
        if self.kind == "multi_categorical":
            return (th.cat([categorical.logits for categorical in torch_dist], dim=-1),)
        return (torch_dist.logits,)

    def __call__(self, old: DistributionParams, new: DistributionParams) -> th.Tensor:
        """Per-sample ``KL(old || new)``."""
        if self.kind == "gaussian":
            return gaussian_kl(old[0], old[1], new[0], new[1])
        if self.kind == "categorical":
            return categorical_kl(old[0], new[0])
        if self.kind == "multi_categorical":
            return multi_categorical_kl(old[0], new[0], self.action_dims)
        return bernoulli_kl(old[0], new[0])

"""The KL divergence that the update measures between the policy that collected a rollout and the policy being
trained: each family's closed form (:mod:`~sb3_ppo_ext.ppo.distributions`) where SB3's distribution has one, the k3
sample estimate elsewhere. Every function returns one value per sample: ``KL(old || new)``.

A Gaussian squashed by tanh (``squash_output=True``) has the same KL as the Gaussian under it, because KL is
invariant under an invertible change of variables, so the Gaussian closed form serves it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)

from sb3_ppo_ext.ppo.distributions import (
    DistributionParams,
    bernoulli_kl,
    bernoulli_params,
    categorical_kl,
    categorical_params,
    gaussian_kl,
    gaussian_params,
    multi_categorical_kl,
    multi_categorical_params,
)

__all__ = ["AnalyticKL", "k3_kl"]


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
        torch_dist: Any = distribution.distribution  # a torch distribution (a list of them: multi-categorical)
        if self.kind == "gaussian":
            return gaussian_params(torch_dist)
        if self.kind == "categorical":
            return categorical_params(torch_dist)
        if self.kind == "multi_categorical":
            return multi_categorical_params(torch_dist)
        return bernoulli_params(torch_dist)

    def __call__(self, old: DistributionParams, new: DistributionParams) -> th.Tensor:
        """Per-sample ``KL(old || new)``."""
        if self.kind == "gaussian":
            return gaussian_kl(old[0], old[1], new[0], new[1])
        if self.kind == "categorical":
            return categorical_kl(old[0], new[0])
        if self.kind == "multi_categorical":
            return multi_categorical_kl(old[0], new[0], self.action_dims)
        return bernoulli_kl(old[0], new[0])

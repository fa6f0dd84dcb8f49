"""The action-distribution families, each in one place: its parameters, log-probability, entropy and closed-form KL
in torch (the update), with the numpy twin beside it (collection, :mod:`~sb3_ppo_ext.ppo.numpy_policy`).

The families are SB3's (``stable_baselines3.common.distributions``):

- diagonal Gaussian: ``DiagGaussianDistribution`` (state-independent std ``exp(log_std)``) and
  ``StateDependentNoiseDistribution`` (gSDE, std from the latent features: :func:`gsde_std`). A Gaussian squashed
  by tanh has the KL of the Gaussian under it (KL is invariant under an invertible change of variables).
- categorical: ``CategoricalDistribution``.
- multi-categorical: ``MultiCategoricalDistribution``, independent categoricals with their logits concatenated on
  the last axis.
- Bernoulli: ``BernoulliDistribution``, independent per dimension.

A family's parameters are a :data:`DistributionParams` tuple: ``(mean, std)`` for a Gaussian, ``(logits,)`` for the
others. Log-probabilities and KLs are summed over the action dimensions, one value per sample. Which callers use
what: :mod:`~sb3_ppo_ext.ppo.kl` (the KL of the update, per family), :mod:`~sb3_ppo_ext.ppo.direct_evaluation`
(the update's log-probabilities and entropy without ``torch.distributions``) and
:mod:`~sb3_ppo_ext.ppo.numpy_policy` (the log-probabilities of the actions it samples).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import torch as th
import torch.nn.functional as F
from torch.distributions import Bernoulli, Categorical, Normal

DistributionParams = tuple[th.Tensor, ...]

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
"""``log(sqrt(2 pi))``, the constant of the Gaussian log-density and entropy."""

# ------------------------------------------------------------------------------------------- diagonal Gaussian


def gaussian_params(distribution: Normal) -> DistributionParams:
    """``(mean, std)`` of a ``torch.distributions.Normal`` (the std broadcast to the mean's shape)."""
    return distribution.loc, distribution.scale.expand_as(distribution.loc)


def gsde_std(latent_sde: th.Tensor, sde_std: th.Tensor, epsilon: float) -> th.Tensor:
    """gSDE's standard deviation per sample, as ``StateDependentNoiseDistribution.proba_distribution`` computes it:
    ``sqrt(latent_sde**2 @ sde_std**2 + epsilon)``.

    :param latent_sde: the latent features, one row per sample (detached unless gSDE learns its features).
    :param sde_std: ``StateDependentNoiseDistribution.get_std(log_std)``, shape ``(latent, actions)``.
    :param epsilon: the distribution's ``epsilon``.
    """
    variance = th.mm(latent_sde**2, sde_std**2)
    return th.sqrt(variance + epsilon)


def gaussian_log_prob(scaled: th.Tensor, log_std: th.Tensor) -> th.Tensor:
    """The log-density of ``mean + std * scaled`` under ``N(mean, std)``, summed over the last axis (equal to
    ``Normal.log_prob`` to float32 rounding: no ``log(exp(log_std))``).

    :param scaled: ``(action - mean) / std``.
    """
    return (-0.5 * scaled**2 - log_std - HALF_LOG_2PI).sum(dim=-1)


def gaussian_entropy(log_std: th.Tensor) -> th.Tensor:
    """The entropy of ``N(mean, exp(log_std))``, summed over the last axis."""
    return (0.5 + HALF_LOG_2PI + log_std).sum(dim=-1)


def gaussian_kl(mean_p: th.Tensor, std_p: th.Tensor, mean_q: th.Tensor, std_q: th.Tensor) -> th.Tensor:
    """``KL(N(mean_p, std_p) || N(mean_q, std_q))`` for diagonal Gaussians, summed over the last axis."""
    variance_ratio = (std_p / std_q) ** 2
    mean_term = ((mean_p - mean_q) / std_q) ** 2
    return 0.5 * (variance_ratio + mean_term - 1.0 - th.log(variance_ratio)).sum(dim=-1)


def gsde_std_numpy(latent_sde: np.ndarray, sde_std: np.ndarray, epsilon: float) -> np.ndarray:
    """Numpy twin of :func:`gsde_std`."""
    return np.sqrt((latent_sde * latent_sde) @ (sde_std * sde_std) + epsilon)


def gaussian_log_prob_numpy(scaled: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Numpy twin of :func:`gaussian_log_prob` (``scaled``: the standard-normal noise of a sampled action)."""
    return -(0.5 * scaled * scaled + log_std + HALF_LOG_2PI).sum(axis=-1)


# ------------------------------------------------------------------------------------------------ categorical


def categorical_params(distribution: Categorical) -> DistributionParams:
    """``(logits,)`` of a ``torch.distributions.Categorical`` (normalised: ``logits - logsumexp(logits)``)."""
    return (distribution.logits,)


def categorical_log_prob_entropy(logits: th.Tensor, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """Log-probabilities of ``actions`` and the entropy under ``Categorical(logits=logits)``, from ``log_softmax``
    (equal to ``Categorical``'s to float32 rounding).

    :param logits: one row per sample (need not be normalised).
    :param actions: one category index per sample, flat.
    """
    log_p = F.log_softmax(logits, dim=-1)
    log_prob = log_p.gather(1, actions.long().view(-1, 1)).squeeze(1)
    entropy = -(log_p.exp() * log_p).sum(dim=-1)
    return log_prob, entropy


def categorical_kl(logits_p: th.Tensor, logits_q: th.Tensor) -> th.Tensor:
    """``KL(Cat(logits_p) || Cat(logits_q))`` over the last axis (logits need not be normalised)."""
    log_p = F.log_softmax(logits_p, dim=-1)
    log_q = F.log_softmax(logits_q, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


def categorical_log_probs_numpy(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of every category as ``torch.distributions.Categorical`` normalises its logits:
    ``logits - logsumexp(logits)``, with torch's ``logsumexp`` (``log(sum(exp(x - max))) + max``)."""
    maximum = logits.max(axis=-1, keepdims=True)
    return logits - (np.log(np.exp(logits - maximum).sum(axis=-1, keepdims=True)) + maximum)


# ------------------------------------------------------------------------------------------ multi-categorical


def multi_categorical_params(distributions: Sequence[Categorical]) -> DistributionParams:
    """``(logits,)``: the sub-actions' logits concatenated on the last axis (SB3 keeps a list of ``Categorical``)."""
    return (th.cat([categorical.logits for categorical in distributions], dim=-1),)


def multi_categorical_kl(logits_p: th.Tensor, logits_q: th.Tensor, action_dims: Sequence[int]) -> th.Tensor:
    """Sum of :func:`categorical_kl` over independent sub-actions whose logits are concatenated on the last axis."""
    split = list(action_dims)
    return sum(
        (
            categorical_kl(p, q)
            for p, q in zip(th.split(logits_p, split, dim=-1), th.split(logits_q, split, dim=-1), strict=True)
        ),
        th.zeros(logits_p.shape[:-1], dtype=logits_p.dtype, device=logits_p.device),
    )


def split_logits_numpy(logits: np.ndarray, action_dims: Sequence[int]) -> list[np.ndarray]:
    """The sub-actions' logits (views), each to go through :func:`categorical_log_probs_numpy`."""
    bounds = np.cumsum([0, *action_dims])
    return [logits[:, start:stop] for start, stop in pairwise(bounds)]


# -------------------------------------------------------------------------------------------------- Bernoulli


def bernoulli_params(distribution: Bernoulli) -> DistributionParams:
    """``(logits,)`` of a ``torch.distributions.Bernoulli``."""
    return (distribution.logits,)


def bernoulli_kl(logits_p: th.Tensor, logits_q: th.Tensor) -> th.Tensor:
    """``KL(Bernoulli(logits_p) || Bernoulli(logits_q))`` summed over the last axis."""
    prob_p = th.sigmoid(logits_p)
    log_p1, log_p0 = F.logsigmoid(logits_p), F.logsigmoid(-logits_p)
    log_q1, log_q0 = F.logsigmoid(logits_q), F.logsigmoid(-logits_q)
    return (prob_p * (log_p1 - log_q1) + (1.0 - prob_p) * (log_p0 - log_q0)).sum(dim=-1)


def bernoulli_probs_numpy(logits: np.ndarray) -> np.ndarray:
    """``sigmoid(logits)``: the probability of a 1 in each dimension."""
    return 1.0 / (1.0 + np.exp(-logits))


def bernoulli_log_prob_numpy(logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The log-probability of the 0/1 ``actions`` under ``Bernoulli(logits=logits)``, summed over the last axis
    (``log sigmoid(+-logits)`` as ``-logaddexp(0, -+logits)``)."""
    log_p1 = -np.logaddexp(0.0, -logits)
    log_p0 = -np.logaddexp(0.0, logits)
    return np.where(actions > 0.5, log_p1, log_p0).sum(axis=-1)

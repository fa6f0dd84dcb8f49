"""Analytic KL against torch.distributions, and the estimator choice for each SB3 distribution."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import make_proba_distribution
from torch.distributions import Bernoulli, Categorical, Normal, kl_divergence

from sb3_ppo_ext.ppo.distributions import bernoulli_kl, categorical_kl, gaussian_kl, multi_categorical_kl
from sb3_ppo_ext.ppo.kl import AnalyticKL, k3_kl

th.manual_seed(0)


def test_gaussian_matches_torch_summed_over_action_dims():
    mean_p, mean_q = th.randn(7, 3), th.randn(7, 3)
    std_p, std_q = th.rand(7, 3) + 0.1, th.rand(7, 3) + 0.1
    expected = kl_divergence(Normal(mean_p, std_p), Normal(mean_q, std_q)).sum(-1)
    assert th.allclose(gaussian_kl(mean_p, std_p, mean_q, std_q), expected, atol=1e-5)


def test_categorical_matches_torch():
    logits_p, logits_q = th.randn(9, 5), th.randn(9, 5) * 3
    expected = kl_divergence(Categorical(logits=logits_p), Categorical(logits=logits_q))
    assert th.allclose(categorical_kl(logits_p, logits_q), expected, atol=1e-5)


def test_multi_categorical_is_sum_of_parts():
    dims = (3, 2, 4)
    logits_p, logits_q = th.randn(6, 9), th.randn(6, 9)
    expected = sum(
        kl_divergence(Categorical(logits=p), Categorical(logits=q))
        for p, q in zip(th.split(logits_p, dims, -1), th.split(logits_q, dims, -1), strict=True)
    )
    assert th.allclose(multi_categorical_kl(logits_p, logits_q, dims), expected, atol=1e-5)


def test_bernoulli_matches_torch():
    logits_p, logits_q = th.randn(5, 4) * 2, th.randn(5, 4) * 2
    expected = kl_divergence(Bernoulli(logits=logits_p), Bernoulli(logits=logits_q)).sum(-1)
    assert th.allclose(bernoulli_kl(logits_p, logits_q), expected, atol=1e-5)


def test_k3_is_unbiased_for_gaussian():
    p, q = Normal(th.tensor(0.0), th.tensor(1.0)), Normal(th.tensor(0.3), th.tensor(0.8))
    samples = p.sample((400_000,))
    estimate = k3_kl(q.log_prob(samples) - p.log_prob(samples)).mean()
    assert estimate.item() == pytest.approx(kl_divergence(p, q).item(), rel=0.02)
    assert (k3_kl(th.linspace(-3, 3, 101)) >= 0).all()


@pytest.mark.parametrize(
    "space, kind",
    [
        (spaces.Box(-1, 1, (3,)), "gaussian"),
        (spaces.Discrete(4), "categorical"),
        (spaces.MultiDiscrete([3, 2]), "multi_categorical"),
        (spaces.MultiBinary(3), "bernoulli"),
    ],
)
def test_params_round_trip_through_sb3_distributions(space, kind):
    dist_old = make_proba_distribution(space)
    dist_new = make_proba_distribution(space)
    analytic = AnalyticKL.for_distribution(dist_old)
    assert analytic is not None and analytic.kind == kind
    n_params = int(np.sum(space.nvec)) if isinstance(space, spaces.MultiDiscrete) else int(np.prod(space.shape) or space.n)
    if kind == "gaussian":
        dist_old.proba_distribution(th.randn(4, 3), th.randn(3) * 0.3)
        dist_new.proba_distribution(th.randn(4, 3), th.randn(3) * 0.3)
    else:
        dist_old.proba_distribution(action_logits=th.randn(4, n_params))
        dist_new.proba_distribution(action_logits=th.randn(4, n_params))
    analytic_value = analytic(analytic.params(dist_old), analytic.params(dist_new))
    if kind == "multi_categorical":
        expected = sum(kl_divergence(p, q) for p, q in zip(dist_old.distribution, dist_new.distribution, strict=True))
    else:
        expected = kl_divergence(dist_old.distribution, dist_new.distribution)
        expected = expected.sum(-1) if expected.dim() > 1 else expected
    assert analytic_value.shape == (4,)
    assert th.allclose(analytic_value, expected, atol=1e-5)


def test_gsde_is_gaussian_and_unknown_falls_back():
    gsde = make_proba_distribution(spaces.Box(-1, 1, (2,)), use_sde=True)
    assert AnalyticKL.for_distribution(gsde).kind == "gaussian"

    class Custom:
        pass

    assert AnalyticKL.for_distribution(Custom()) is None

"""Each family's maths (sb3_ppo_ext.ppo.distributions) against torch.distributions and SB3's distributions, and
each numpy twin against its torch function."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.distributions import StateDependentNoiseDistribution
from torch.distributions import Bernoulli, Categorical, Normal

from sb3_ppo_ext.ppo.distributions import (
    bernoulli_log_prob_numpy,
    bernoulli_probs_numpy,
    categorical_log_prob_entropy,
    categorical_log_probs_numpy,
    gaussian_entropy,
    gaussian_log_prob,
    gaussian_log_prob_numpy,
    gsde_std,
    gsde_std_numpy,
    split_logits_numpy,
)

ATOL = 1e-5


@pytest.fixture
def generator():
    return th.Generator().manual_seed(0)


def test_gaussian_log_prob_and_entropy_match_normal(generator):
    mean, log_std = th.randn(6, 3, generator=generator), th.randn(6, 3, generator=generator) * 0.5
    actions = th.randn(6, 3, generator=generator)
    normal = Normal(mean, log_std.exp())
    log_prob = gaussian_log_prob((actions - mean) / log_std.exp(), log_std)
    assert th.allclose(log_prob, normal.log_prob(actions).sum(-1), atol=ATOL)
    assert th.allclose(gaussian_entropy(log_std), normal.entropy().sum(-1), atol=ATOL)
    twin = gaussian_log_prob_numpy(((actions - mean) / log_std.exp()).numpy(), log_std.numpy())
    np.testing.assert_allclose(twin, log_prob.numpy(), rtol=0, atol=ATOL)


def test_gsde_std_matches_sb3_and_its_twin(generator):
    distribution = StateDependentNoiseDistribution(2)
    distribution.proba_distribution_net(latent_dim=4, log_std_init=-0.5)
    log_std = th.randn(4, 2, generator=generator) * 0.3
    latent = th.randn(5, 4, generator=generator)
    distribution.proba_distribution(th.zeros(5, 2), log_std, latent)
    std = gsde_std(latent, distribution.get_std(log_std), distribution.epsilon)
    assert th.allclose(std, distribution.distribution.scale, atol=1e-6)
    twin = gsde_std_numpy(latent.numpy(), distribution.get_std(log_std).numpy(), distribution.epsilon)
    np.testing.assert_allclose(twin, std.numpy(), rtol=1e-6)


def test_categorical_log_prob_entropy_match_categorical(generator):
    logits = th.randn(7, 4, generator=generator) * 2
    actions = th.tensor([0, 3, 1, 2, 2, 0, 3])
    categorical = Categorical(logits=logits)
    log_prob, entropy = categorical_log_prob_entropy(logits, actions)
    assert th.allclose(log_prob, categorical.log_prob(actions), atol=ATOL)
    assert th.allclose(entropy, categorical.entropy(), atol=ATOL)
    np.testing.assert_allclose(categorical_log_probs_numpy(logits.numpy()), categorical.logits.numpy(), rtol=0, atol=ATOL)


def test_multi_categorical_logits_split_by_sub_action():
    logits = np.arange(18, dtype=np.float32).reshape(2, 9)
    parts = split_logits_numpy(logits, [3, 2, 4])
    assert [part.shape for part in parts] == [(2, 3), (2, 2), (2, 4)]
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), logits)


def test_bernoulli_numpy_twins_match_bernoulli(generator):
    logits = th.randn(5, 3, generator=generator) * 3
    actions = th.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    bernoulli = Bernoulli(logits=logits)
    np.testing.assert_allclose(bernoulli_probs_numpy(logits.numpy()), bernoulli.probs.numpy(), rtol=0, atol=1e-6)
    expected = bernoulli.log_prob(actions).sum(-1).numpy()
    np.testing.assert_allclose(bernoulli_log_prob_numpy(logits.numpy(), actions.numpy()), expected, rtol=0, atol=ATOL)

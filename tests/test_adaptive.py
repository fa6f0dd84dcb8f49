"""The adaptive rules, called on hand-picked KL values (expected values worked out by hand)."""

import pytest

from sb3_ppo_ext.ppo.adaptive import adapt_kl_coef, adapt_learning_rate


@pytest.mark.parametrize(
    "kl, expected",
    [
        (0.0151, 2.0),  # above 1.5 * 0.01 -> doubled
        (0.015, 1.0),  # exactly on the upper edge -> unchanged
        (0.01, 1.0),  # on target -> unchanged
        (0.0067, 1.0),  # inside the band (0.01 / 1.5 = 0.00667)
        (0.0066, 0.5),  # below 0.01 / 1.5 -> halved
        (0.0, 0.5),
    ],
)
def test_kl_coef_paper_rule(kl, expected):
    assert adapt_kl_coef(kl, 1.0, target=0.01, tolerance=1.5, factor=2.0, coef_min=1e-4, coef_max=100.0) == pytest.approx(expected)


def test_kl_coef_constants_are_parameters():
    # modular_rl style: x1.5 outside a 1.3 band
    assert adapt_kl_coef(0.014, 1.0, target=0.01, tolerance=1.3, factor=1.5) == pytest.approx(1.5)
    assert adapt_kl_coef(0.0075, 1.0, target=0.01, tolerance=1.3, factor=1.5) == pytest.approx(1 / 1.5)


def test_kl_coef_clamped_to_bounds():
    assert adapt_kl_coef(1.0, 80.0, target=0.01, coef_max=100.0) == 100.0
    assert adapt_kl_coef(0.0, 1.5e-4, target=0.01, coef_min=1e-4) == 1e-4


@pytest.mark.parametrize(
    "kl, expected",
    [
        (0.021, 1e-3 / 1.5),  # above 2 * 0.01
        (0.02, 1e-3),  # on the edge: unchanged
        (0.01, 1e-3),
        (0.005, 1e-3),  # exactly target / 2: unchanged
        (0.004, 1.5e-3),  # below target / 2: raised
        (0.0, 1e-3),  # zero KL (no step taken yet): unchanged, as in rsl_rl
    ],
)
def test_learning_rate_rsl_rl_rule(kl, expected):
    assert adapt_learning_rate(kl, 1e-3, target=0.01, tolerance=2.0, factor=1.5, lr_min=1e-5, lr_max=1e-2) == pytest.approx(expected)


def test_learning_rate_clamped():
    assert adapt_learning_rate(0.001, 9e-3, target=0.01, lr_max=1e-2) == 1e-2
    assert adapt_learning_rate(1.0, 1.2e-5, target=0.01, lr_min=1e-5) == 1e-5

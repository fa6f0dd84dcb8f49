"""The adaptive rules, called on hand-picked KL values (expected values worked out by hand)."""

import pytest
import torch as th

from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController, adapt_kl_coef, adapt_learning_rate


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
    new_coef = adapt_kl_coef(kl, 1.0, target=0.01, tolerance=1.5, factor=2.0, coef_min=1e-4, coef_max=100.0)
    assert new_coef == pytest.approx(expected)


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
    new_rate = adapt_learning_rate(kl, 1e-3, target=0.01, tolerance=2.0, factor=1.5, lr_min=1e-5, lr_max=1e-2)
    assert new_rate == pytest.approx(expected)


def test_learning_rate_clamped():
    assert adapt_learning_rate(0.001, 9e-3, target=0.01, lr_max=1e-2) == 1e-2
    assert adapt_learning_rate(1.0, 1.2e-5, target=0.01, lr_min=1e-5) == 1e-5


# ------------------------------------------------------------------ controllers


def test_kl_penalty_controller_follows_the_kl_of_each_update():
    controller = KLPenaltyController(coef=1.0, target=0.01, tolerance=1.5, factor=2.0, coef_min=0.3, coef_max=3.0)
    # above 0.015: x2; inside the band: kept; below 0.00667: /2 (twice, the second clamped at 0.3)
    assert [controller.update(kl) for kl in (0.02, 0.012, 0.001, 0.001)] == [2.0, 2.0, 1.0, 0.5]
    assert controller.update(0.0) == 0.3 and controller.coef == 0.3
    assert controller.update(1.0) == 0.6 and controller.update(1.0) == 1.2 and controller.update(1.0) == 2.4
    assert controller.update(1.0) == 3.0  # clamped at coef_max


def test_kl_penalty_controller_without_target_keeps_beta_fixed():
    controller = KLPenaltyController(coef=0.05, target=None)
    assert controller.update(10.0) == controller.update(0.0) == 0.05


def test_kl_adaptive_learning_rate_starts_clamped_and_follows_each_kl():
    controller = KLAdaptiveLearningRate(target=0.01, tolerance=2.0, factor=2.0, lr_min=1e-4, lr_max=1e-3)
    controller.start(5e-3)
    assert controller.learning_rate == 1e-3  # clamped to lr_max
    controller.start(2e-4)
    assert controller.learning_rate == 1e-3  # a state is kept (a loaded model resumes from it)
    # above 0.02: /2; inside the band: kept; zero: kept; below 0.005: x2
    assert [controller.update(kl) for kl in (0.03, 0.01, 0.0, 0.001)] == [5e-4, 5e-4, 5e-4, 1e-3]


def test_kl_adaptive_learning_rate_runs_at_its_cadence():
    """``observe`` takes each minibatch's KL and ``end_epoch`` closes the epoch: cadence "minibatch" adapts at every
    KL, "epoch" once per epoch on the mean KL of its minibatches; off, neither does anything."""
    per_minibatch = KLAdaptiveLearningRate(target=0.01, tolerance=2.0, factor=2.0, lr_min=1e-5, lr_max=1e-2)
    per_minibatch.start(1e-3)
    assert [per_minibatch.observe(th.tensor(kl)) for kl in (0.03, 0.03)] == [True, True]
    assert per_minibatch.learning_rate == 2.5e-4 and not per_minibatch.end_epoch()

    per_epoch = KLAdaptiveLearningRate(target=0.01, tolerance=2.0, factor=2.0, lr_min=1e-5, lr_max=1e-2, cadence="epoch")
    per_epoch.start(1e-3)
    # 0.001 and 0.03 each would move the rate; their mean, 0.0155, lies inside the band (0.005, 0.02).
    assert [per_epoch.observe(th.tensor(kl)) for kl in (0.001, 0.03)] == [False, False]
    assert per_epoch.learning_rate == 1e-3
    assert per_epoch.end_epoch() and per_epoch.learning_rate == 1e-3
    assert not per_epoch.end_epoch()  # an epoch without minibatches (an early stop before the first) leaves it
    per_epoch.observe(th.tensor(0.001))
    per_epoch.observe(th.tensor(0.003))  # mean 0.002 < 0.005: x2
    assert per_epoch.end_epoch() and per_epoch.learning_rate == 2e-3

    off = KLAdaptiveLearningRate(target=None)
    off.start(3e-4)
    assert not off.observe(th.tensor(1.0)) and not off.end_epoch() and off.learning_rate is None


def test_kl_adaptive_learning_rate_off_has_no_state():
    controller = KLAdaptiveLearningRate(target=None)
    controller.start(3e-4)
    assert not controller.active and controller.learning_rate is None
    controller.check_start(0.5)  # off: any learning rate is fine


@pytest.mark.parametrize(
    "make, names",
    [
        (lambda: KLPenaltyController(coef_min=1.0, coef_max=0.1), ["kl_coef_min", "kl_coef_max"]),
        (lambda: KLPenaltyController(coef=200.0), ["kl_coef", "<= 100.0"]),
        (lambda: KLPenaltyController(tolerance=1.0), ["kl_penalty_tolerance", "> 1.0"]),
        (lambda: KLPenaltyController(target=-1.0), ["kl_penalty_target"]),
        (lambda: KLAdaptiveLearningRate(target=0.0), ["lr_kl_target"]),
        (lambda: KLAdaptiveLearningRate(factor=1.0), ["lr_kl_factor"]),
        (lambda: KLAdaptiveLearningRate(lr_min=1e-2, lr_max=1e-3), ["lr_min", "lr_max"]),
        (lambda: KLAdaptiveLearningRate(cadence="update"), ["lr_kl_cadence", "update"]),
        (lambda: KLAdaptiveLearningRate(target=0.01).check_start(0.5), ["learning_rate", "<= 0.01"]),
    ],
)
def test_controllers_validate_their_settings_by_ppo_keyword(make, names):
    with pytest.raises(ValueError) as error:
        make()
    for name in names:
        assert name in str(error.value)


def test_ppo_keyword_defaults_are_the_controllers():
    import inspect

    from sb3_ppo_ext import PPO

    parameters = inspect.signature(PPO.__init__).parameters
    for controller in (KLPenaltyController(), KLAdaptiveLearningRate()):
        for field, keyword in controller.KEYWORDS.items():
            assert parameters[keyword].default == getattr(controller, field), keyword

"""The two adaptive-KL rules, as small pure functions with every constant a parameter.

* :func:`adapt_kl_coef`: the adaptive KL penalty of the PPO paper (Schulman et al. 2017, sec. 4).
* :func:`adapt_learning_rate`: the KL-adaptive learning rate of rsl_rl / legged_gym (and rl_games, Brax).
"""

from __future__ import annotations


def adapt_kl_coef(
    kl: float,
    kl_coef: float,
    target: float,
    tolerance: float = 1.5,
    factor: float = 2.0,
    coef_min: float = 1e-4,
    coef_max: float = 100.0,
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
    tolerance: float = 2.0,
    factor: float = 1.5,
    lr_min: float = 1e-5,
    lr_max: float = 1e-2,
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

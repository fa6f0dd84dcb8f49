"""Optuna search space of ``ppo_ext``: SB3 PPO's settings plus the KL-penalty and KL-adaptive learning-rate settings.

Follows rl-zoo3's convention: :func:`sample_ppo_ext_params` suggests raw parameters (``n_steps_pow``,
``one_minus_gamma``, ...) and returns constructor arguments; :func:`convert_ppo_ext_params` turns a finished
trial's raw ``params`` into the same arguments (rl-zoo3 uses it to load a trial with ``--trial-id``).
Settings pinned on the command line (``--hyperparams n_steps:64``) are not searched: see ``pinned``. The
defaults (no ``lr_kl_target``: off; ``objective``: ``"clip"``) are among the choices, so plain PPO is in the space.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna
from torch import nn

from sb3_ppo_ext.ppo.loss import OBJECTIVES

NET_ARCHS: dict[str, dict[str, list[int]]] = {
    "tiny": {"pi": [64], "vf": [64]},
    "small": {"pi": [64, 64], "vf": [64, 64]},
    "medium": {"pi": [256, 256], "vf": [256, 256]},
}
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}
#: ``None`` keeps beta fixed / switches the KL-adaptive learning rate off.
KL_PENALTY_TARGETS = (None, 0.003, 0.01, 0.02, 0.05)
LR_KL_TARGETS = (None, 0.005, 0.01, 0.02)


def sample_ppo_ext_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict, pinned: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Suggest one ``ppo_ext`` configuration (rl-zoo3's ``HYPERPARAMS_SAMPLER`` signature).

    :param trial: the Optuna trial.
    :param n_actions: size of a Box action space (unused; part of rl-zoo3's signature).
    :param n_envs: number of environments (unused; part of rl-zoo3's signature).
    :param additional_args: rl-zoo3's extra arguments (unused).
    :param pinned: constructor arguments fixed by the user (name -> value); they are not suggested, and a pinned
        ``objective`` / ``lr_kl_target`` decides which dependent settings are searched.
    :return: constructor keyword arguments.
    """
    del n_actions, n_envs, additional_args
    pinned = pinned or {}

    def wanted(name: str) -> bool:
        return name not in pinned

    # The order of the suggestions is the order of a trial's parameters: keep it.
    _suggest_sb3_settings(trial, wanted)
    _suggest_objective_settings(trial, wanted, pinned)
    _suggest_learning_rates(trial, wanted, pinned)

    for name, value in (
        ("gamma", 1 - trial.params.get("one_minus_gamma", 0.0)),
        ("n_steps", 2 ** trial.params.get("n_steps_pow", 0)),
        ("batch_size", 2 ** trial.params.get("batch_size_pow", 0)),
    ):
        if wanted(name):
            trial.set_user_attr(name, value)
    return convert_ppo_ext_params(trial.params)


def _suggest_sb3_settings(trial: optuna.Trial, wanted: Callable[[str], bool]) -> None:
    """Suggest SB3 PPO's own settings (those not pinned): sizes, discounting, entropy, epochs, gradient clip, networks."""
    if wanted("batch_size"):
        trial.suggest_int("batch_size_pow", 5, 10)
    if wanted("n_steps"):
        trial.suggest_int("n_steps_pow", 5, 12)
    if wanted("gamma"):
        trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True)
    if wanted("gae_lambda"):
        trial.suggest_float("one_minus_gae_lambda", 0.0001, 0.1, log=True)
    if wanted("ent_coef"):
        trial.suggest_float("ent_coef", 1e-8, 0.1, log=True)
    if wanted("n_epochs"):
        trial.suggest_categorical("n_epochs", [1, 5, 10, 20])
    if wanted("max_grad_norm"):
        trial.suggest_float("max_grad_norm", 0.3, 2.0)
    if wanted("policy_kwargs"):
        trial.suggest_categorical("net_arch", list(NET_ARCHS))
        trial.suggest_categorical("activation_fn", list(ACTIVATIONS))


def _suggest_objective_settings(trial: optuna.Trial, wanted: Callable[[str], bool], pinned: Mapping[str, Any]) -> None:
    """Suggest the objective (unless pinned) and the settings it uses: the clip range, the KL penalty's."""
    objective = trial.suggest_categorical("objective", list(OBJECTIVES)) if wanted("objective") else pinned["objective"]
    if objective != "kl_penalty" and wanted("clip_range"):  # the pure penalty objective does not clip
        trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3, 0.4])
    if objective in ("kl_penalty", "clip_kl_penalty"):
        if wanted("kl_coef"):
            trial.suggest_float("kl_coef", 0.01, 10.0, log=True)
        if wanted("kl_penalty_target"):
            trial.suggest_categorical("kl_penalty_target", list(KL_PENALTY_TARGETS))


def _suggest_learning_rates(trial: optuna.Trial, wanted: Callable[[str], bool], pinned: Mapping[str, Any]) -> None:
    """Suggest the KL-adaptive rate's target (unless pinned) and cadence, the learning rate and the critic's own."""
    lr_kl_target = (
        trial.suggest_categorical("lr_kl_target", list(LR_KL_TARGETS)) if wanted("lr_kl_target") else pinned["lr_kl_target"]
    )
    if wanted("learning_rate"):
        # The adaptive rule clamps the rate to [lr_min, lr_max] = [1e-5, 1e-2]: keep the initial value inside.
        trial.suggest_float("learning_rate", 1e-5, 0.002, log=True)
    if lr_kl_target is not None and wanted("lr_kl_cadence"):
        trial.suggest_categorical("lr_kl_cadence", ["minibatch", "epoch"])
    if wanted("vf_learning_rate") and trial.suggest_categorical("separate_vf_learning_rate", [False, True]):
        trial.suggest_float("vf_learning_rate", 1e-5, 0.01, log=True)


def convert_ppo_ext_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Turn raw sampled parameters into ``ppo_ext`` constructor arguments (rl-zoo3's ``HYPERPARAMS_CONVERTER``).

    ``batch_size_pow`` / ``n_steps_pow`` -> powers of two, ``one_minus_gamma`` / ``one_minus_gae_lambda`` ->
    ``gamma`` / ``gae_lambda``, ``net_arch`` + ``activation_fn`` names -> ``policy_kwargs``, the
    ``separate_vf_learning_rate`` switch dropped (``vf_learning_rate`` is then present or not); the rest unchanged.
    """
    params = dict(sampled_params)
    params.pop("separate_vf_learning_rate", None)
    converted: dict[str, Any] = {}
    for name in ("batch_size", "n_steps"):
        if f"{name}_pow" in params:
            converted[name] = 2 ** params.pop(f"{name}_pow")
    for name in ("gamma", "gae_lambda"):
        if f"one_minus_{name}" in params:
            converted[name] = 1 - params.pop(f"one_minus_{name}")
    if "net_arch" in params or "activation_fn" in params:
        policy_kwargs: dict[str, Any] = {}
        if "net_arch" in params:
            policy_kwargs["net_arch"] = NET_ARCHS[params.pop("net_arch")]
        if "activation_fn" in params:
            policy_kwargs["activation_fn"] = ACTIVATIONS[params.pop("activation_fn")]
        converted["policy_kwargs"] = policy_kwargs
    converted.update(params)
    return converted

"""The settings of :class:`~sb3_ppo_ext.ppo.ppo.PPO`, checked when it is built: each invalid value is a
:class:`~sb3_ppo_ext.validation.HyperparameterError` naming the parameter, the value and the rule (SB3 asserts some of
them, and takes the others as they come)."""

from __future__ import annotations

import warnings
from typing import Any

from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController
from sb3_ppo_ext.ppo.loss import OBJECTIVES
from sb3_ppo_ext.ppo.std_schedule import LogStdSchedule, LogStdSetting
from sb3_ppo_ext.validation import (
    MAX_N_EPOCHS,
    MAX_ROLLOUT_TRANSITIONS,
    HyperparameterError,
    check_choice,
    check_int,
    check_kwargs,
    check_number,
    check_policy_kwargs,
    check_positive,
    check_schedule,
    check_subclass,
)


class CheckedSettings(OnPolicyAlgorithm):
    """The settings part of :class:`~sb3_ppo_ext.ppo.ppo.PPO`: the settings it adds to SB3's on-policy algorithm, as
    its ``__init__`` stores them, and their checks (``_validate_hyperparameters``, which SB3's set-up calls)."""

    batch_size: int
    n_epochs: int
    clip_range: Any
    clip_range_vf: Any
    normalize_advantage: bool
    target_kl: float | None
    objective: str
    kl_coef: float
    kl_penalty_target: float | None
    kl_penalty_tolerance: float
    kl_penalty_factor: float
    kl_coef_min: float
    kl_coef_max: float
    lr_kl_target: float | None
    lr_kl_tolerance: float
    lr_kl_factor: float
    lr_min: float
    lr_max: float
    lr_kl_cadence: str
    vf_learning_rate: Any
    vf_max_grad_norm: float | None
    log_std_schedule: LogStdSetting | None
    fast_collect: bool
    direct_evaluation: bool
    compile_update: bool

    def _validate_hyperparameters(self) -> None:
        """Raise :class:`HyperparameterError` (a ``ValueError`` and, like SB3's asserts, an ``AssertionError``) naming
        the parameter, the value and the rule for any invalid setting. Integer settings given as integral floats
        (``2048.0``, ``1e3``: YAML) are stored as ints; nothing else is set (the adaptive rules' controllers are
        built by ``_setup_model``, from the settings checked here). Schedules are checked at the start and the end of
        training (:func:`~sb3_ppo_ext.validation.check_schedule`); sizes against the limits of
        :mod:`sb3_ppo_ext.validation`."""
        self._validate_sb3_settings()
        self._validate_added_settings()
        if self.env is not None:
            self._validate_rollout_size(self.env.num_envs)

    def _validate_sb3_settings(self) -> None:
        """The checks of the settings SB3's PPO has (which it asserts, or takes as they come)."""
        check_schedule("learning_rate", self.learning_rate)
        rollout = "a rollout holds n_steps * n_envs transitions, e.g. 2048 * 1"
        self.n_steps = check_int(
            "n_steps",
            self.n_steps,
            minimum=1,
            maximum=MAX_ROLLOUT_TRANSITIONS,
            limit="MAX_ROLLOUT_TRANSITIONS",
            hint=f"the steps per env in a rollout; {rollout}",
        )
        self.batch_size = check_int(
            "batch_size",
            self.batch_size,
            minimum=1,
            maximum=MAX_ROLLOUT_TRANSITIONS,
            limit="MAX_ROLLOUT_TRANSITIONS",
            hint=f"the minibatch size, at most a rollout; {rollout}",
        )
        self.n_epochs = check_int(
            "n_epochs",
            self.n_epochs,
            minimum=1,
            maximum=MAX_N_EPOCHS,
            limit="MAX_N_EPOCHS",
            hint="the passes over each rollout, 3 to 30 in practice (the length of training is learn(total_timesteps))",
        )
        self.sde_sample_freq = check_int("sde_sample_freq", self.sde_sample_freq, minimum=-1)
        self._stats_window_size = check_int("stats_window_size", self._stats_window_size, minimum=1)
        check_number("gamma", self.gamma, low=0.0, high=1.0)
        check_number("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        check_schedule("clip_range", self.clip_range)
        if self.clip_range_vf is not None:
            check_schedule("clip_range_vf", self.clip_range_vf)
        check_policy_kwargs(self.policy_kwargs, policy_class=self.policy_class)
        if self.rollout_buffer_class is not None:
            check_subclass(
                "rollout_buffer_class",
                self.rollout_buffer_class,
                "stable_baselines3.common.buffers.RolloutBuffer",
                "stable_baselines3.common.buffers.RolloutBuffer",
            )
        check_kwargs("rollout_buffer_kwargs", self.rollout_buffer_kwargs)
        check_number("ent_coef", self.ent_coef)
        check_number("vf_coef", self.vf_coef, low=0.0)
        check_positive("max_grad_norm", self.max_grad_norm)
        if self.target_kl is not None:
            check_positive("target_kl", self.target_kl)
        if self.normalize_advantage and self.batch_size < 2:
            raise HyperparameterError(
                f"batch_size must be > 1 when normalize_advantage=True (advantages are normalised per minibatch), "
                f"got {self.batch_size}"
            )

    def _validate_added_settings(self) -> None:
        """The checks of the settings this PPO adds: the objective and its adaptive rules (each controller's checks,
        without building it), the critic's own rate and clip, the schedule of the action std and the switches."""
        check_choice("objective", self.objective, OBJECTIVES)
        if self.log_std_schedule is not None:
            try:
                LogStdSchedule(self.log_std_schedule)
            except ValueError as error:
                raise HyperparameterError(str(error)) from None
        KLPenaltyController.check_keywords(self)
        if self.objective == "kl_penalty" and self.kl_coef == 0.0 and self.kl_penalty_target is None:
            raise HyperparameterError(
                "objective='kl_penalty' with kl_coef=0 and kl_penalty_target=None has neither clipping nor a penalty: "
                "set kl_coef > 0, a kl_penalty_target, or objective='clip'"
            )
        KLAdaptiveLearningRate.check_keywords(self)  # a constant learning_rate too: the rule starts from it
        if self.vf_learning_rate is not None:
            check_schedule("vf_learning_rate", self.vf_learning_rate)
        if self.vf_max_grad_norm is not None:
            check_positive("vf_max_grad_norm", self.vf_max_grad_norm)
        for name in ("fast_collect", "direct_evaluation", "compile_update", "normalize_advantage"):
            if not isinstance(getattr(self, name), bool):
                raise HyperparameterError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def _validate_rollout_size(self, n_envs: int) -> None:
        """The checks of ``n_steps * n_envs`` against the limits and the minibatch size (SB3's, as errors or warnings)."""
        buffer_size = n_envs * self.n_steps
        if buffer_size > MAX_ROLLOUT_TRANSITIONS:
            raise HyperparameterError(
                f"n_steps * n_envs must be <= {MAX_ROLLOUT_TRANSITIONS} transitions per rollout "
                f"(MAX_ROLLOUT_TRANSITIONS), got {self.n_steps} * {n_envs} = {buffer_size}: lower n_steps"
            )
        if self.normalize_advantage and buffer_size < 2:
            raise HyperparameterError(
                f"n_steps * n_envs must be > 1 when normalize_advantage=True (advantages are normalised per "
                f"minibatch), got n_steps={self.n_steps} and n_envs={n_envs}"
            )
        # As SB3: a batch_size above the rollout size only warns (below); each epoch is then one minibatch of the
        # whole rollout.
        if buffer_size % self.batch_size > 0:
            warnings.warn(
                f"You have specified a mini-batch size of {self.batch_size}, but because the `RolloutBuffer` is of "
                f"size `n_steps * n_envs = {buffer_size}`, after every {buffer_size // self.batch_size} untruncated "
                f"mini-batches, there will be a truncated mini-batch of size {buffer_size % self.batch_size}\n"
                f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                f"Info: (n_steps={self.n_steps} and n_envs={n_envs})"
            )

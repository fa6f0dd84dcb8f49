"""Proximal Policy Optimization with an adaptive KL penalty and a KL-adaptive learning rate."""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, RolloutBufferSamples, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

from sb3_ppo_ext.ppo import actor_critic_groups, direct_evaluation
from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController
from sb3_ppo_ext.ppo.compiled import CompiledOrEager
from sb3_ppo_ext.ppo.distributions import DistributionParams
from sb3_ppo_ext.ppo.kl import AnalyticKL, k3_kl
from sb3_ppo_ext.ppo.non_finite import CollectionGuard, check_filled_buffer, check_policy_values
from sb3_ppo_ext.ppo.numpy_policy import NumpyActorCritic
from sb3_ppo_ext.ppo.optim import ClippedStep, NonFiniteGradientError, fused_adam
from sb3_ppo_ext.ppo.rollout import UpdateRollout, add_to_rollout_buffer, take_rows
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
)

SelfPPO = TypeVar("SelfPPO", bound="PPO")


OBJECTIVES = ("clip", "kl_penalty", "clip_kl_penalty")


class LossStats(NamedTuple):
    """The terms of one minibatch's loss, detached (0-d tensors), or their means over an update (floats)."""

    policy_gradient_loss: Any
    value_loss: Any
    entropy_loss: Any
    kl_penalty_loss: Any
    loss: Any
    kl: Any  # KL(pi_old || pi), the penalty's estimate (analytic where there is a closed form, else k3)
    approx_kl: Any  # SB3's k3 estimate (its early stop and log key)
    clip_fraction: Any

    @classmethod
    def mean(cls, stats: list[LossStats]) -> LossStats:
        """The mean of each statistic over ``stats`` as floats (one device sync for all); NaN for an empty list."""
        if not stats:
            return cls(*[float("nan")] * len(cls._fields))
        return cls(*th.stack([th.stack(minibatch) for minibatch in stats]).mean(dim=0).tolist())


class PPO(OnPolicyAlgorithm):
    """Proximal Policy Optimization (Schulman et al. 2017, https://arxiv.org/abs/1707.06347), a drop-in for SB3's PPO.

    Objectives (``objective``): ``"clip"`` is the clipped surrogate, exactly SB3's PPO (the default);
    ``"kl_penalty"`` is the paper's sec. 4 surrogate ``E[ratio * A] - beta * KL[pi_old, pi]`` without clipping;
    ``"clip_kl_penalty"`` is the clipped surrogate plus the same penalty. With ``kl_penalty_target`` set, beta
    adapts after every update: ``d > tolerance * target`` => ``beta * factor``, ``d < target / tolerance`` =>
    ``beta / factor`` (paper: 1.5 and 2), where ``d`` is the KL between the policy that collected the rollout
    and the updated policy, measured on the whole rollout after the update as in the paper.

    Independently, ``lr_kl_target`` switches on the KL-adaptive learning rate of rsl_rl / legged_gym: after
    every minibatch (or epoch) ``kl > tolerance * target`` => ``lr / factor``, ``0 < kl < target / tolerance`` =>
    ``lr * factor``, clamped to ``[lr_min, lr_max]``. It replaces the learning-rate schedule while it is on.

    KL is computed in closed form against the distribution that collected the data (Gaussian, gSDE, categorical,
    multi-categorical, Bernoulli), with the k3 sample estimate for any other distribution.

    Collection and update are written for speed with identical maths: a numpy copy of standard MLP policies acts
    during collection, the update computes Gaussian and categorical log-probabilities directly and iterates over
    tensors built once per update, and Adam runs its fused kernel when available (one module per trick, each saying
    what it mirrors: :mod:`~sb3_ppo_ext.ppo.numpy_policy`, :mod:`~sb3_ppo_ext.ppo.rollout`,
    :mod:`~sb3_ppo_ext.ppo.direct_evaluation`, :mod:`~sb3_ppo_ext.ppo.optim`). Every random number is drawn as SB3's
    PPO draws it (action noise from torch's generator, minibatch order from numpy's), so the same seed gives SB3's run
    to float32 rounding (``tests/test_parity.py``).

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy, or a policy class)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
    :param batch_size: Minibatch size
    :param n_epochs: Number of epochs when optimizing the surrogate loss
    :param gamma: Discount factor
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param clip_range: Clipping parameter, it can be a function of the current progress remaining (from 1 to 0).
    :param clip_range_vf: Clipping parameter for the value function (None: no clipping, SB3's meaning).
    :param normalize_advantage: Whether to normalize or not the advantage
    :param ent_coef: Entropy coefficient for the loss calculation
    :param vf_coef: Value function coefficient for the loss calculation
    :param max_grad_norm: The maximum value for the gradient clipping
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE (-1: only at rollout start)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, it will be automatically selected.
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param target_kl: SB3's early stopping: stop the epochs of an update at the first minibatch whose k3 KL
        estimate exceeds ``1.5 * target_kl`` (that minibatch's step is skipped). ``None``: off.
    :param objective: ``"clip"``, ``"kl_penalty"`` or ``"clip_kl_penalty"`` (see above).
    :param kl_coef: Initial KL penalty coefficient beta (used by the penalty objectives); beta now is
        ``kl_penalty.coef`` (:class:`~sb3_ppo_ext.ppo.adaptive.KLPenaltyController`, which the ``kl_*`` keywords set up;
        the ``lr_*`` keywords set up ``adaptive_lr``, a :class:`~sb3_ppo_ext.ppo.adaptive.KLAdaptiveLearningRate`).
    :param kl_penalty_target: KL per update that beta adapts towards; ``None`` keeps beta fixed.
    :param kl_penalty_tolerance: Band factor around ``kl_penalty_target`` (paper: 1.5), > 1.
    :param kl_penalty_factor: Multiplicative step of beta (paper: 2), > 1.
    :param kl_coef_min: Lower bound of beta.
    :param kl_coef_max: Upper bound of beta.
    :param lr_kl_target: Desired KL of the KL-adaptive learning rate (rsl_rl: 0.01); ``None``: off.
    :param lr_kl_tolerance: Band factor around ``lr_kl_target`` (rsl_rl: 2), > 1.
    :param lr_kl_factor: Multiplicative step of the learning rate (rsl_rl: 1.5), > 1.
    :param lr_min: Lower bound of the adaptive learning rate.
    :param lr_max: Upper bound of the adaptive learning rate.
    :param lr_kl_cadence: ``"minibatch"`` (rsl_rl) or ``"epoch"`` (mean KL of the epoch's minibatches).
    :param vf_learning_rate: The critic's own learning rate (value head, value network and an unshared critic
        features extractor), a number or a function of the progress remaining; ``None``: the critic shares
        ``learning_rate`` (SB3's behaviour). The KL-adaptive learning rate then adapts the actor's rate only.
    :param vf_max_grad_norm: Clip the critic's gradients to this norm on their own and the actor's (and a shared
        features extractor's) to ``max_grad_norm``; ``None``: one clip of all gradients to ``max_grad_norm``.
    :param log_std_schedule: The Gaussian action log-std as a schedule instead of a learned parameter (the PPO paper's
        humanoid runs anneal it from -0.7 to -1.6): a number, a ``[start, end]`` pair (linear over training) or a
        function of the progress remaining; ``None``: learned (SB3's behaviour). Needs a Box action space without
        gSDE (:mod:`~sb3_ppo_ext.ppo.std_schedule`).
    :param fast_collect: Act with a numpy copy of the policy during collection when the policy allows it.
    :param compile_update: Compile the minibatch loss (forward and backward) with ``torch.compile``; if compiling
        fails (no C++ compiler, unsupported platform), warn once and run eagerly.
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: Verbosity level: 0 for no output, 1 for info messages (such as device or wrappers used), 2 for
        debug messages
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
        "MultiInputPolicy": MultiInputActorCriticPolicy,
    }
    policy: ActorCriticPolicy

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule = 0.2,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = None,
        objective: str = "clip",
        kl_coef: float = KLPenaltyController.coef,
        kl_penalty_target: float | None = KLPenaltyController.target,
        kl_penalty_tolerance: float = KLPenaltyController.tolerance,
        kl_penalty_factor: float = KLPenaltyController.factor,
        kl_coef_min: float = KLPenaltyController.coef_min,
        kl_coef_max: float = KLPenaltyController.coef_max,
        lr_kl_target: float | None = KLAdaptiveLearningRate.target,
        lr_kl_tolerance: float = KLAdaptiveLearningRate.tolerance,
        lr_kl_factor: float = KLAdaptiveLearningRate.factor,
        lr_min: float = KLAdaptiveLearningRate.lr_min,
        lr_max: float = KLAdaptiveLearningRate.lr_max,
        lr_kl_cadence: str = KLAdaptiveLearningRate.cadence,
        vf_learning_rate: float | Schedule | None = None,
        vf_max_grad_norm: float | None = None,
        log_std_schedule: LogStdSetting | None = None,
        fast_collect: bool = True,
        compile_update: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            seed=seed,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.objective = objective
        self.kl_coef = kl_coef
        self.kl_penalty_target = kl_penalty_target
        self.kl_penalty_tolerance = kl_penalty_tolerance
        self.kl_penalty_factor = kl_penalty_factor
        self.kl_coef_min = kl_coef_min
        self.kl_coef_max = kl_coef_max
        self.lr_kl_target = lr_kl_target
        self.lr_kl_tolerance = lr_kl_tolerance
        self.lr_kl_factor = lr_kl_factor
        self.lr_min = lr_min
        self.lr_max = lr_max
        self.lr_kl_cadence = lr_kl_cadence
        self.vf_learning_rate = vf_learning_rate
        self.vf_max_grad_norm = vf_max_grad_norm
        self.log_std_schedule = log_std_schedule
        self.std_schedule: LogStdSchedule | None = None
        self.fast_collect = fast_collect
        self.compile_update = compile_update
        #: The training env as collection steps it (:meth:`_collection_guard`); built at the first rollout.
        self.collection_guard: CollectionGuard | None = None
        self.kl_estimator: str | None = None
        # The adaptive rules with their state (beta, the learning rate), built from the flat keywords above, which
        # stay the settings as given; saved as plain numbers (``save``) and carried across learn() calls.
        self.kl_penalty: KLPenaltyController
        self.adaptive_lr: KLAdaptiveLearningRate
        self._validate_hyperparameters()
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ set-up

    def _validate_hyperparameters(self) -> None:
        """Raise :class:`HyperparameterError` (a ``ValueError`` and, like SB3's asserts, an ``AssertionError``) naming
        the parameter, the value and the rule for any invalid setting. Integer settings given as integral floats
        (``2048.0``, ``1e3``: YAML) are stored as ints. Schedules are checked at the start and the end of training
        (:func:`~sb3_ppo_ext.validation.check_schedule`); sizes against the limits of :mod:`sb3_ppo_ext.validation`."""
        check_schedule("learning_rate", self.learning_rate)
        rollout = "a rollout holds n_steps * n_envs transitions, e.g. 2048 * 1"
        self.n_steps = check_int("n_steps", self.n_steps, minimum=1, maximum=MAX_ROLLOUT_TRANSITIONS,
                                 limit="MAX_ROLLOUT_TRANSITIONS", hint=f"the steps per env in a rollout; {rollout}")
        self.batch_size = check_int("batch_size", self.batch_size, minimum=1, maximum=MAX_ROLLOUT_TRANSITIONS,
                                    limit="MAX_ROLLOUT_TRANSITIONS", hint=f"the minibatch size, at most a rollout; {rollout}")
        self.n_epochs = check_int("n_epochs", self.n_epochs, minimum=1, maximum=MAX_N_EPOCHS, limit="MAX_N_EPOCHS",
                                  hint="the passes over each rollout, 3 to 30 in practice (the length of training is "
                                       "learn(total_timesteps))")
        self.sde_sample_freq = check_int("sde_sample_freq", self.sde_sample_freq, minimum=-1)
        self._stats_window_size = check_int("stats_window_size", self._stats_window_size, minimum=1)
        check_number("gamma", self.gamma, low=0.0, high=1.0)
        check_number("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        check_schedule("clip_range", self.clip_range)
        if self.clip_range_vf is not None:
            check_schedule("clip_range_vf", self.clip_range_vf)
        check_policy_kwargs(self.policy_kwargs, policy_class=self.policy_class)
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
        check_choice("objective", self.objective, OBJECTIVES)
        if self.log_std_schedule is not None:
            try:
                LogStdSchedule(self.log_std_schedule)
            except ValueError as error:
                raise HyperparameterError(str(error)) from None
        self.kl_penalty = KLPenaltyController.from_keywords(self)
        if self.objective == "kl_penalty" and self.kl_coef == 0.0 and self.kl_penalty_target is None:
            raise HyperparameterError(
                "objective='kl_penalty' with kl_coef=0 and kl_penalty_target=None has neither clipping nor a penalty: "
                "set kl_coef > 0, a kl_penalty_target, or objective='clip'"
            )
        self.adaptive_lr = KLAdaptiveLearningRate.from_keywords(self)
        if not callable(self.learning_rate):
            self.adaptive_lr.check_start(self.learning_rate)
        if self.vf_learning_rate is not None:
            check_schedule("vf_learning_rate", self.vf_learning_rate)
        if self.vf_max_grad_norm is not None:
            check_positive("vf_max_grad_norm", self.vf_max_grad_norm)
        for name in ("fast_collect", "compile_update", "normalize_advantage"):
            if not isinstance(getattr(self, name), bool):
                raise HyperparameterError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.env is not None:
            buffer_size = self.env.num_envs * self.n_steps
            if buffer_size > MAX_ROLLOUT_TRANSITIONS:
                raise HyperparameterError(
                    f"n_steps * n_envs must be <= {MAX_ROLLOUT_TRANSITIONS} transitions per rollout "
                    f"(MAX_ROLLOUT_TRANSITIONS), got {self.n_steps} * {self.env.num_envs} = {buffer_size}: lower n_steps"
                )
            if self.normalize_advantage and buffer_size < 2:
                raise HyperparameterError(
                    f"n_steps * n_envs must be > 1 when normalize_advantage=True (advantages are normalised per "
                    f"minibatch), got n_steps={self.n_steps} and n_envs={self.env.num_envs}"
                )
            # As SB3: a batch_size above the rollout size only warns (below); each epoch is then one minibatch of the
            # whole rollout.
            if buffer_size % self.batch_size > 0:
                warnings.warn(
                    f"You have specified a mini-batch size of {self.batch_size}, but because the `RolloutBuffer` is of "
                    f"size `n_steps * n_envs = {buffer_size}`, after every {buffer_size // self.batch_size} untruncated "
                    f"mini-batches, there will be a truncated mini-batch of size {buffer_size % self.batch_size}\n"
                    f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                    f"Info: (n_steps={self.n_steps} and n_envs={self.env.num_envs})"
                )

    def _excluded_save_params(self) -> list[str]:
        # The controllers are saved as their state (``save``); the compiled loss and the guard around the env are rebuilt.
        excluded = ["kl_penalty", "adaptive_lr", "update_loss", "std_schedule", "collection_guard"]
        return [*super()._excluded_save_params(), *excluded]

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """SB3's, with the adaptive rules' state saved as plain numbers (``adaptive_state``, readable without
        unpickling) in place of the controller objects."""
        self.adaptive_state = {"kl_coef": self.kl_penalty.coef, "learning_rate": self.adaptive_lr.learning_rate}
        try:
            super().save(path, exclude=exclude, include=include)
        finally:
            del self.adaptive_state

    def _setup_model(self) -> None:
        super()._setup_model()
        self.clip_range = FloatSchedule(self.clip_range)
        if self.clip_range_vf is not None:
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)
        # The adaptive rules from the settings, with a loaded model's state: ``adaptive_state`` (``save``), or, in
        # models saved before the controllers, the attributes ``kl_coef`` (then beta now) and ``adaptive_learning_rate``.
        state = self.__dict__.pop("adaptive_state", None) or {}
        saved_learning_rate = self.__dict__.pop("adaptive_learning_rate", None)
        self.__dict__.pop("_compile_failed", None)  # saved before the compile wrapper; it retries after a load
        self.kl_penalty = KLPenaltyController.from_keywords(self, coef=state.get("kl_coef", self.kl_coef))
        self.adaptive_lr = KLAdaptiveLearningRate.from_keywords(
            self, learning_rate=state.get("learning_rate", saved_learning_rate)
        )
        self.adaptive_lr.start(self.lr_schedule(1.0))
        self.update_loss = CompiledOrEager(self._minibatch_loss, self.compile_update, self.device)
        if self.vf_learning_rate is not None:
            self.vf_learning_rate = FloatSchedule(self.vf_learning_rate)
        if self.separate_critic:
            actor_lr = self.lr_schedule(1.0)
            self.policy.optimizer = actor_critic_groups.build_optimizer(self.policy, actor_lr, self._critic_lr(actor_lr))
        self.std_schedule = None if self.log_std_schedule is None else LogStdSchedule(self.log_std_schedule)
        if self.std_schedule is not None:
            try:
                self.std_schedule.freeze(self.policy, self._current_progress_remaining)
            except ValueError as error:
                raise HyperparameterError(str(error)) from None

    @property
    def separate_critic(self) -> bool:
        """Whether the critic has its own learning rate or gradient clip (its own optimizer parameter group)."""
        return self.vf_learning_rate is not None or self.vf_max_grad_norm is not None

    def _critic_lr(self, actor_lr: float) -> float:
        """The critic's learning rate now: its own schedule, or the actor's rate."""
        if self.vf_learning_rate is None:
            return actor_lr
        return float(self.vf_learning_rate(self._current_progress_remaining))  # type: ignore[operator]

    def get_parameters(self) -> dict[str, dict]:
        """SB3's, with a separate critic's two-group optimizer state written as SB3's one group (see
        :mod:`~sb3_ppo_ext.ppo.actor_critic_groups`), so that SB3's PPO can load the saved model."""
        params = super().get_parameters()
        if self.separate_critic and "policy.optimizer" in params:
            params["policy.optimizer"] = actor_critic_groups.to_single_group(params["policy.optimizer"], self.policy)
        return params

    def set_parameters(
        self, load_path_or_dict: str | dict[str, Any], exact_match: bool = True, device: th.device | str = "auto"
    ) -> None:
        """SB3's; a one-group optimizer state (ours saved by :meth:`get_parameters`, or SB3's) goes into a separate
        critic's two groups, each Adam moment to its own parameter."""
        if self.separate_critic:
            if isinstance(load_path_or_dict, dict):
                params = dict(load_path_or_dict)
            else:
                _, params, _ = load_from_zip_file(load_path_or_dict, device=device)
            state = params.get("policy.optimizer")
            if state is not None and len(state["param_groups"]) == 1:
                critic_lr = self.policy.optimizer.param_groups[1]["lr"]
                params["policy.optimizer"] = actor_critic_groups.to_groups(state, self.policy, critic_lr)
            load_path_or_dict = params
        super().set_parameters(load_path_or_dict, exact_match=exact_match, device=device)

    @property
    def adaptive_learning_rate(self) -> float | None:
        """The KL-adaptive learning rate now (``adaptive_lr.learning_rate``); ``None`` while the rule is off."""
        return self.adaptive_lr.learning_rate

    @property
    def uses_clipping(self) -> bool:
        return self.objective in ("clip", "clip_kl_penalty")

    @property
    def uses_kl_penalty(self) -> bool:
        return self.objective in ("kl_penalty", "clip_kl_penalty")

    # ------------------------------------------------------------- collection

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """Collect ``n_rollout_steps`` per env into ``rollout_buffer``, with SB3's semantics.

        Overridden for speed: acts with a numpy copy of the policy (:class:`NumpyActorCritic`) when the policy allows
        it, and otherwise defers to SB3's loop. Both loops step the env through a
        :class:`~sb3_ppo_ext.ppo.non_finite.CollectionGuard`, so a NaN or an infinity stops collection within its step
        (:class:`~sb3_ppo_ext.ppo.non_finite.NonFiniteCollectionError`) with VecNormalize's statistics as before it.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        first_step = self.num_timesteps
        guard = self._collection_guard(env)
        guard.num_timesteps = first_step
        guard.check_observations(self._last_obs)
        actor = None
        if self.fast_collect and not isinstance(self._last_obs, dict):
            actor = NumpyActorCritic.from_policy(self.policy)  # draws its noise from torch's generator, as SB3's policy
        if actor is None:
            # SB3's loop reads only ``num_envs`` and ``step`` of the env; it computes the values inside itself, so they
            # are checked in the filled buffer (before any update uses it).
            if not super().collect_rollouts(guard, callback, rollout_buffer, n_rollout_steps):
                return False
            check_filled_buffer(rollout_buffer, first_step)
            return True

        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
            actor.refresh_noise()
        callback.on_rollout_start()

        clip_box = isinstance(self.action_space, spaces.Box)
        is_discrete = isinstance(self.action_space, spaces.Discrete)
        low = self.action_space.low if clip_box else None
        high = self.action_space.high if clip_box else None
        resample_noise = self.use_sde and self.sde_sample_freq > 0
        sb3_buffer = type(rollout_buffer) is RolloutBuffer

        while n_steps < n_rollout_steps:
            if resample_noise and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
                actor.refresh_noise()

            actions, values_np, log_probs_np = actor.act(self._last_obs)  # type: ignore[arg-type]
            check_policy_values("value", values_np, self.num_timesteps)  # the observations were checked at their step
            clipped_actions = np.minimum(np.maximum(actions, low), high) if clip_box else actions  # np.clip, faster
            new_obs, rewards, dones, infos = guard.step(clipped_actions)
            self.num_timesteps += env.num_envs
            values, log_probs = th.from_numpy(values_np), th.from_numpy(log_probs_np)

            callback.update_locals(locals())
            if not callback.on_step():
                return False

            self._update_info_buffer(infos, dones)
            n_steps += 1

            if is_discrete:
                actions = actions.reshape(-1, 1)

            if dones.any():
                for idx in np.flatnonzero(dones):
                    terminal_obs = infos[idx].get("terminal_observation")
                    if terminal_obs is not None and infos[idx].get("TimeLimit.truncated", False):
                        terminal_value = actor.predict_values(np.asarray(terminal_obs)[None])
                        check_policy_values("terminal_value", terminal_value, self.num_timesteps, env_indices=[idx])
                        rewards[idx] += self.gamma * terminal_value[0]

            if sb3_buffer:
                add_to_rollout_buffer(rollout_buffer, self._last_obs, actions, rewards, self._last_episode_starts, values_np, log_probs_np)
            else:
                rollout_buffer.add(self._last_obs, actions, rewards, self._last_episode_starts, values, log_probs)  # type: ignore[arg-type]
            self._last_obs = new_obs  # type: ignore[assignment]
            self._last_episode_starts = dones

        last_values = actor.predict_values(new_obs)
        check_policy_values("last_value", last_values, self.num_timesteps)
        values = th.from_numpy(last_values)
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _collection_guard(self, env: VecEnv) -> CollectionGuard:
        """The :class:`~sb3_ppo_ext.ppo.non_finite.CollectionGuard` around ``env``, built at its first rollout."""
        if self.collection_guard is None or self.collection_guard.venv is not env:
            self.collection_guard = CollectionGuard(env)
        return self.collection_guard

    # ----------------------------------------------------------------- update

    def _direct_head(self) -> str | None:
        """Which action head the update evaluates with direct tensor maths (:mod:`~sb3_ppo_ext.ppo.direct_evaluation`);
        ``None``: through ``policy.evaluate_actions``, as SB3 does."""
        return direct_evaluation.direct_head(self.policy)

    def _evaluate(
        self, observations: Any, actions: th.Tensor, head: str | None, analytic: AnalyticKL | None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None, DistributionParams | None]:
        """Values, log-probabilities, entropy and the distribution parameters (for the analytic KL) of a minibatch,
        as ``ActorCriticPolicy.evaluate_actions`` computes them (directly for the heads it mirrors)."""
        if head is not None:
            return direct_evaluation.evaluate_actions(self.policy, head, observations, actions)
        values, log_prob, entropy = self.policy.evaluate_actions(observations, actions)
        params = analytic.params(self.policy.action_dist) if analytic is not None else None
        return values.flatten(), log_prob, entropy, params

    def _distribution_params(self, analytic: AnalyticKL, observations: Any, chunk: int = 4096) -> DistributionParams:
        """Parameters of the current policy's action distribution on ``observations``, without gradients."""
        size = len(next(iter(observations.values())) if isinstance(observations, dict) else observations)
        parts: list[DistributionParams] = []
        with th.no_grad():
            for start in range(0, size, chunk):
                obs = take_rows(observations, slice(start, start + chunk))
                parts.append(tuple(t.detach() for t in analytic.params(self.policy.get_distribution(obs))))
        return tuple(th.cat(columns) for columns in zip(*parts))

    def _set_learning_rate(self, learning_rate: float) -> None:
        """Set the actor's learning rate (every group's, unless the critic has its own)."""
        groups = self.policy.optimizer.param_groups
        if self.separate_critic:
            actor_group, critic_group = groups
            actor_group["lr"] = learning_rate
            critic_group["lr"] = self._critic_lr(learning_rate)
            return
        for group in groups:
            group["lr"] = learning_rate

    def _minibatch_loss(
        self,
        rollout_data: RolloutBufferSamples,
        old_params: DistributionParams | None,
        head: str | None,
        analytic: AnalyticKL | None,
        clip_range: float | th.Tensor,
        clip_range_vf: float | th.Tensor | None,
        kl_coef: float | th.Tensor,
    ) -> tuple[th.Tensor, LossStats]:
        """The loss of one minibatch and its statistics.

        :param old_params: the collecting policy's distribution on these samples (analytic KL), or ``None`` (k3).
        :return: the loss to minimise and its terms, detached.
        """
        actions = rollout_data.actions
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        values, log_prob, entropy, new_params = self._evaluate(rollout_data.observations, actions, head, analytic)

        advantages = rollout_data.advantages
        if self.normalize_advantage and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        log_ratio = log_prob - rollout_data.old_log_prob
        ratio = th.exp(log_ratio)
        if self.uses_clipping:
            policy_loss = -th.min(advantages * ratio, advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)).mean()
        else:
            policy_loss = -(advantages * ratio).mean()

        with th.set_grad_enabled(self.uses_kl_penalty and th.is_grad_enabled()):  # no graph when only logged
            if analytic is not None and old_params is not None and new_params is not None:
                kl = analytic(old_params, new_params).mean()
            else:
                kl = k3_kl(log_ratio).mean()
        kl_penalty_loss = kl_coef * kl if self.uses_kl_penalty else th.zeros((), device=kl.device)

        if clip_range_vf is None:
            values_pred = values
        else:
            values_pred = rollout_data.old_values + th.clamp(values - rollout_data.old_values, -clip_range_vf, clip_range_vf)
        value_loss = F.mse_loss(rollout_data.returns, values_pred)
        entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)

        surrogate = policy_loss + kl_penalty_loss if self.uses_kl_penalty else policy_loss  # "clip": SB3's sum
        loss = surrogate + self.ent_coef * entropy_loss + self.vf_coef * value_loss

        with th.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # k3 written as SB3 writes it: the early stop decides alike
            clip_fraction = (th.abs(ratio - 1) > clip_range).float().mean()
            stats = LossStats(policy_loss.detach(), value_loss.detach(), entropy_loss.detach(), kl_penalty_loss.detach(),
                              loss.detach(), kl.detach(), approx_kl, clip_fraction)
        return loss, stats

    def train(self) -> None:
        """Update policy using the currently gathered rollout buffer."""
        self.policy.set_training_mode(True)
        if self.adaptive_lr.active:
            self._set_learning_rate(self.adaptive_lr.learning_rate)  # type: ignore[arg-type]
        else:
            self._update_learning_rate(self.policy.optimizer)  # SB3: every group to lr_schedule(progress), logged
            if self.separate_critic:
                self._set_learning_rate(self.lr_schedule(self._current_progress_remaining))
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]
        kl_coef = self.kl_penalty.coef  # the beta of this update (logged); adapted after it

        analytic = AnalyticKL.for_distribution(self.policy.action_dist)
        head = self._direct_head()
        if self.kl_estimator is None:
            self.kl_estimator = "analytic" if analytic is not None else "k3"
            self.logger.info(f"KL(old || new) estimator: {self.kl_estimator} ({type(self.policy.action_dist).__name__})")
        # With the collecting policy's distribution on every sample (weights still pre-update) for the analytic KL.
        rollout = UpdateRollout(self.rollout_buffer, partial(self._distribution_params, analytic) if analytic else None)
        constants = self.update_loss.constants(clip_range, clip_range_vf, kl_coef)  # tensors when compiled

        optimizer = self.policy.optimizer
        stats: list[LossStats] = []  # kept as tensors, averaged once at the end (one sync instead of many)
        learning_rates: list[float] = []
        continue_training = True
        with fused_adam(optimizer):
            clipped_step = self._clipped_step(optimizer)  # inside: it takes its direct path for fused Adam only
            for epochs_done in range(self.n_epochs):
                epoch_kls: list[th.Tensor] = []
                for rollout_data, old_params in rollout.minibatches(self.batch_size):
                    loss, minibatch_stats = self.update_loss(
                        rollout_data, old_params, head, analytic if old_params else None, *constants
                    )
                    approx_kl = minibatch_stats.approx_kl
                    if self.target_kl is not None and approx_kl.item() > 1.5 * self.target_kl:
                        continue_training = False
                        if self.verbose >= 1:
                            self.logger.info(f"Early stopping at step {epochs_done} due to reaching max kl: {approx_kl.item():.2f}")
                        break

                    clipped_step.zero_grad()
                    loss.backward()
                    try:
                        clipped_step.step()  # clip_grad_norm_(parameters, max_grad_norm), then optimizer.step()
                    except NonFiniteGradientError as error:
                        raise FloatingPointError(
                            f"non-finite gradients in update {self._n_updates + 1} (epoch {epochs_done + 1}, loss "
                            f"{loss.item():.6g}): {error}. No step was taken, so the weights and the optimizer state "
                            "are those before it; look for non-finite observations, rewards or normalisation "
                            "statistics, or a learning rate too high"
                        ) from None

                    learning_rates.append(optimizer.param_groups[0]["lr"])
                    stats.append(minibatch_stats)
                    if self.adaptive_lr.active:
                        if self.adaptive_lr.cadence == "minibatch":
                            self._adapt_learning_rate(minibatch_stats.kl.item())
                        else:
                            epoch_kls.append(minibatch_stats.kl)
                if epoch_kls:  # cadence "epoch": the mean KL of the epoch's minibatches
                    self._adapt_learning_rate(th.stack(epoch_kls).mean().item())
                self._n_updates += 1
                if not continue_training:
                    break

        means = LossStats.mean(stats)
        update_kl = self._update_kl(rollout, analytic, means if stats else None) if self.uses_kl_penalty else None
        if update_kl is not None:
            self.kl_penalty.update(update_kl)

        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self.logger.record("train/entropy_loss", means.entropy_loss)
        self.logger.record("train/policy_gradient_loss", means.policy_gradient_loss)
        self.logger.record("train/value_loss", means.value_loss)
        self.logger.record("train/approx_kl", means.approx_kl)
        self.logger.record("train/clip_fraction", means.clip_fraction)
        self.logger.record("train/loss", means.loss)
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/kl", means.kl)
        self.logger.record("train/kl_coef", kl_coef)
        self.logger.record("train/kl_penalty_loss", means.kl_penalty_loss)
        if update_kl is not None:
            self.logger.record("train/kl_update", update_kl)
        if learning_rates:
            self.logger.record("train/learning_rate", float(np.mean(learning_rates)))
        if self.vf_learning_rate is not None:
            self.logger.record("train/vf_learning_rate", optimizer.param_groups[1]["lr"])
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
        if self.std_schedule is not None:  # the std of the next rollout, and of the update on it
            self.std_schedule.apply(self.policy, self._current_progress_remaining)

    def _clipped_step(self, optimizer: th.optim.Optimizer) -> ClippedStep:
        """Gradient clipping and the optimizer step of this update (each group's own clip for a separate critic)."""
        clip_groups = None
        if self.separate_critic:
            # The optimizer's order (actor, then critic), so that each group's gradients can be clipped on their own.
            parameters = [parameter for group in optimizer.param_groups for parameter in group["params"]]
            if self.vf_max_grad_norm is not None:
                n_actor = len(optimizer.param_groups[0]["params"])
                clip_groups = [(n_actor, self.max_grad_norm), (len(parameters) - n_actor, self.vf_max_grad_norm)]
        else:
            parameters = list(self.policy.parameters())  # policy.parameters() walks every module: once per update
        return ClippedStep(optimizer, parameters, self.max_grad_norm, clip_groups, error_if_nonfinite=True)

    def _update_kl(self, rollout: UpdateRollout, analytic: AnalyticKL | None, means: LossStats | None) -> float | None:
        """The paper's d, the KL that beta adapts to: ``None`` when beta is fixed, or without a closed form when no
        minibatch was trained (``means``: the update's mean statistics)."""
        if self.kl_penalty.target is None:
            return None
        if analytic is not None and rollout.old_params is not None:
            # KL(pi_rollout || pi_updated) averaged over the whole rollout after the update.
            new_params = self._distribution_params(analytic, rollout.samples.observations)  # type: ignore[union-attr]
            return float(analytic(rollout.old_params, new_params).mean())
        if means is None:
            return None
        return means.approx_kl  # no closed form: the mean k3 estimate over the update stands in for d

    def _adapt_learning_rate(self, kl: float) -> None:
        self._set_learning_rate(self.adaptive_lr.update(kl))

    def learn(
        self: SelfPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "PPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

"""Proximal Policy Optimization with an adaptive KL penalty and a KL-adaptive learning rate."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from stable_baselines3.common.vec_env import VecEnv

from sb3_ppo_ext.ppo import actor_critic_groups
from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController
from sb3_ppo_ext.ppo.collection import collect_with_numpy_actor
from sb3_ppo_ext.ppo.evaluation import ActionEvaluator
from sb3_ppo_ext.ppo.loss import LossCoefficients, LossStats, UpdateLoss
from sb3_ppo_ext.ppo.non_finite import CollectionGuard, check_filled_buffer
from sb3_ppo_ext.ppo.numpy_policy import NumpyActorCritic, one_blas_thread
from sb3_ppo_ext.ppo.optimizer_groups import OptimizerGroups
from sb3_ppo_ext.ppo.rollout import UpdateRollout
from sb3_ppo_ext.ppo.saved_state import SavedState
from sb3_ppo_ext.ppo.settings import CheckedSettings
from sb3_ppo_ext.ppo.std_schedule import LogStdSchedule, LogStdSetting
from sb3_ppo_ext.ppo.threads import (
    AUTO,
    UpdateThreads,
    check_update_threads,
    intra_op_threads,
    update_thread_count,
)
from sb3_ppo_ext.validation import (
    HyperparameterError,
)
from sb3_ppo_ext.vec_env.shared_memory_vec_env import usable_cores

SelfPPO = TypeVar("SelfPPO", bound="PPO")


class PPO(SavedState, CheckedSettings):
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

    Its settings are checked by :class:`~sb3_ppo_ext.ppo.settings.CheckedSettings` and its saving and loading
    extended by :class:`~sb3_ppo_ext.ppo.saved_state.SavedState`; this class holds the algorithm (the path of one update
    is drawn at the top of :mod:`sb3_ppo_ext.ppo`). The update reads like SB3's ``train()``: the minibatch loss is a
    :class:`~sb3_ppo_ext.ppo.loss.UpdateLoss` built once per policy, which evaluates the actions through the policy's
    :class:`~sb3_ppo_ext.ppo.evaluation.ActionEvaluator`; the optimizer steps through
    :class:`~sb3_ppo_ext.ppo.optimizer_groups.OptimizerGroups`, built once per optimizer; the adaptive rules are
    :class:`~sb3_ppo_ext.ppo.adaptive.KLPenaltyController` and :class:`~sb3_ppo_ext.ppo.adaptive.KLAdaptiveLearningRate`.

    Collection and update are written for speed with identical maths: a numpy copy of standard MLP policies acts
    during collection (``fast_collect``, :mod:`~sb3_ppo_ext.ppo.collection`), the update computes Gaussian and
    categorical log-probabilities directly (``direct_evaluation``) and iterates over tensors built once per update,
    and Adam runs its fused kernel when available (one module per trick, each saying what it mirrors and what it
    gains: :mod:`~sb3_ppo_ext.ppo.numpy_policy`, :mod:`~sb3_ppo_ext.ppo.rollout`,
    :mod:`~sb3_ppo_ext.ppo.direct_evaluation`, :mod:`~sb3_ppo_ext.ppo.optim`). Every random number is drawn as SB3's
    PPO draws it (action noise from torch's generator, minibatch order from numpy's), so the same seed gives SB3's run
    to float32 rounding, and bit for bit with ``fast_collect=False``, ``direct_evaluation=False`` and
    ``policy_kwargs=dict(optimizer_kwargs=dict(fused=False))`` (``tests/test_parity.py``).

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
    :param direct_evaluation: Compute the update's log-probabilities and entropy directly for the Gaussian, gSDE and
        categorical heads of SB3's policies (equal to ``policy.evaluate_actions``' to float32 rounding); ``False``:
        through ``policy.evaluate_actions`` always, as SB3 does.
    :param compile_update: Compile the minibatch loss (forward and backward) with ``torch.compile``; if compiling
        fails (no C++ compiler, unsupported platform), warn once and run eagerly.
    :param update_threads: torch intra-op threads of the update, the caller's count given back after it
        (:mod:`~sb3_ppo_ext.ppo.threads`): ``"auto"`` one thread per 4096 rows of a minibatch (one below that), at
        most torch's setting and the usable cores, so that small minibatches do not slow down on a busy machine; an
        int: that many (at most the usable cores); ``None``: torch's setting (SB3's behaviour).
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
        direct_evaluation: bool = True,
        compile_update: bool = False,
        update_threads: UpdateThreads = AUTO,
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
        self.direct_evaluation = direct_evaluation
        self.compile_update = compile_update
        self.update_threads = check_update_threads(update_threads)
        #: The training env as collection steps it (:meth:`_collection_guard`); built at the first rollout.
        self.collection_guard: CollectionGuard | None = None
        #: The minibatch loss of the current policy (:meth:`_update_loss`); built at its first update.
        self.update_loss: UpdateLoss | None = None
        #: The policy's optimizer as the update steps it (:meth:`_optimizer_groups`); built at its first update.
        self.optimizer_groups: OptimizerGroups | None = None
        # The adaptive rules with their state (beta, the learning rate), built by _setup_model from the flat keywords
        # above, which stay the settings as given; saved as plain numbers (``save``) and carried across learn() calls.
        self.kl_penalty: KLPenaltyController
        self.adaptive_lr: KLAdaptiveLearningRate
        self._validate_hyperparameters()
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ set-up

    def _setup_model(self) -> None:
        super()._setup_model()
        self.clip_range = FloatSchedule(self.clip_range)
        if self.clip_range_vf is not None:
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)
        # The adaptive rules from the settings (checked in __init__), with a loaded model's state (``save``:
        # ``adaptive_state``); here is the one place they are built.
        state = self.__dict__.pop("adaptive_state", None) or {}
        # Zips saved by earlier versions hold the KL estimator's name, now read from the policy (``kl_estimator``).
        self.__dict__.pop("kl_estimator", None)
        self.kl_penalty = KLPenaltyController.from_keywords(self, coef=state.get("kl_coef", self.kl_coef))
        self.adaptive_lr = KLAdaptiveLearningRate.from_keywords(self, learning_rate=state.get("learning_rate"))
        self.adaptive_lr.start(self.lr_schedule(1.0))
        # Built at the first update, for the policy and the optimizer it finds then.
        self.update_loss = None
        self.optimizer_groups = None
        if self.vf_learning_rate is not None:
            self.vf_learning_rate = FloatSchedule(self.vf_learning_rate)
        if self.separate_critic:
            actor_lr, critic_lr = self.lr_schedule(1.0), self._critic_own_lr()
            self.policy.optimizer = actor_critic_groups.build_optimizer(
                self.policy, actor_lr, actor_lr if critic_lr is None else critic_lr
            )
        self.std_schedule = None if self.log_std_schedule is None else LogStdSchedule(self.log_std_schedule)
        if self.std_schedule is not None:
            try:
                self.std_schedule.freeze(self.policy, self._current_progress_remaining)
            except ValueError as error:
                raise HyperparameterError(str(error)) from None

    @property
    def separate_critic(self) -> bool:
        """Whether the critic has its own learning rate or gradient clip, and so its own optimizer parameter group
        (:func:`~sb3_ppo_ext.ppo.actor_critic_groups.separate_critic`)."""
        return actor_critic_groups.separate_critic(self.vf_learning_rate, self.vf_max_grad_norm)

    @property
    def adaptive_learning_rate(self) -> float | None:
        """The KL-adaptive learning rate now (``adaptive_lr.learning_rate``); ``None`` while the rule is off."""
        return self.adaptive_lr.learning_rate

    @property
    def kl_estimator(self) -> str:
        """The KL(old || new) estimator of the update: ``"analytic"`` (the closed form of the policy's distribution,
        against the collecting policy's distribution on every sample) or ``"k3"`` (the sample estimate: any other
        distribution, or a rollout buffer class other than SB3's two)."""
        closed_form = ActionEvaluator(self.policy, direct=False).kl_estimator == "analytic"
        return "analytic" if closed_form and UpdateRollout.supports(self.rollout_buffer) else "k3"

    @property
    def uses_clipping(self) -> bool:
        """Whether the objective clips the surrogate (``"clip"``, ``"clip_kl_penalty"``)."""
        return self.objective in ("clip", "clip_kl_penalty")

    @property
    def uses_kl_penalty(self) -> bool:
        """Whether the objective has the KL penalty (``"kl_penalty"``, ``"clip_kl_penalty"``)."""
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

        Overridden for speed: acts with a numpy copy of the policy (:mod:`~sb3_ppo_ext.ppo.collection`) when the
        policy allows it, and otherwise runs SB3's loop. Both loops step the env through a
        :class:`~sb3_ppo_ext.ppo.non_finite.CollectionGuard`, so a NaN or an infinity stops collection within its step
        (:class:`~sb3_ppo_ext.ppo.non_finite.NonFiniteCollectionError`) with VecNormalize's statistics as before it.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        first_step = self.num_timesteps
        guard = self._collection_guard(env)
        guard.num_timesteps = first_step
        guard.check_observations(self._last_obs)
        if self.fast_collect and not isinstance(self._last_obs, dict):
            actor = NumpyActorCritic.from_policy(self.policy)  # draws its noise from torch's generator, as SB3's policy
            if actor is not None:
                with one_blas_thread():
                    return collect_with_numpy_actor(self, guard, callback, rollout_buffer, n_rollout_steps, actor)
        # SB3's loop reads only ``num_envs`` and ``step`` of the env; it computes the values inside itself, so they are
        # checked in the filled buffer (before any update uses it).
        if not super().collect_rollouts(guard, callback, rollout_buffer, n_rollout_steps):
            return False
        check_filled_buffer(rollout_buffer, first_step)
        return True

    def _collection_guard(self, env: VecEnv) -> CollectionGuard:
        """The :class:`~sb3_ppo_ext.ppo.non_finite.CollectionGuard` around ``env``, built at its first rollout."""
        if self.collection_guard is None or self.collection_guard.venv is not env:
            self.collection_guard = CollectionGuard(env)
        return self.collection_guard

    # ----------------------------------------------------------------- update

    def train(self) -> None:
        """Update policy using the currently gathered rollout buffer (on ``update_threads`` intra-op threads)."""
        rows = min(self.batch_size, self.rollout_buffer.buffer_size * self.rollout_buffer.n_envs)
        threads = update_thread_count(self.update_threads, rows, th.get_num_threads(), usable_cores())
        with intra_op_threads(threads):
            self._update()

    def _update(self) -> None:
        """One update: ``n_epochs`` passes of minibatches over the rollout, then the adaptive rules and the logs."""
        self.policy.set_training_mode(True)
        learning_rate, critic_lr = self._learning_rate(), self._critic_own_lr()
        optimizer = self._optimizer_groups()
        optimizer.set_rates(learning_rate, critic_lr)
        coefficients = self._loss_coefficients()
        loss_function = self._update_loss()
        # With the collecting policy's distribution on every sample (weights still pre-update), for the analytic KL.
        rollout = UpdateRollout(self.rollout_buffer, loss_function.evaluator.distribution_params)

        stats: list[LossStats] = []  # kept as tensors, averaged once at the end (one sync instead of many)
        continue_training = True
        with optimizer.stepping(f"after {self.num_timesteps} env steps", self.max_grad_norm, self.vf_max_grad_norm) as step:
            for epoch in range(self.n_epochs):
                for minibatch in rollout.minibatches(self.batch_size):
                    loss, minibatch_stats = loss_function(minibatch, coefficients)
                    approx_kl = minibatch_stats.approx_kl
                    if self.target_kl is not None and approx_kl.item() > 1.5 * self.target_kl:
                        continue_training = False
                        if self.verbose >= 1:
                            self.logger.info(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl.item():.2f}")
                        break
                    step(loss)  # zero_grad, backward, clip_grad_norm_, optimizer.step
                    stats.append(minibatch_stats)
                    if self.adaptive_lr.observe(minibatch_stats.kl):  # the KL-adaptive rate, at its cadence
                        optimizer.set_rates(self._learning_rate(), critic_lr)
                if self.adaptive_lr.end_epoch():
                    optimizer.set_rates(self._learning_rate(), critic_lr)
                self._n_updates += 1
                if not continue_training:
                    break

        means = LossStats.mean(stats)
        update_kl = self._adapt_kl_coef(rollout, loss_function.evaluator, means)
        self._record_update(means, coefficients, learning_rate, optimizer, update_kl)
        if self.std_schedule is not None:  # the std of the next rollout, and of the update on it
            self.std_schedule.apply(self.policy, self._current_progress_remaining)

    def _optimizer_groups(self) -> OptimizerGroups:
        """The policy's optimizer as the update steps it, built at its first update: a policy or an optimizer replaced
        since (a loaded model's, a user's) gets its own."""
        built = self.optimizer_groups
        if built is None or not built.serves(self.policy, self.separate_critic):
            built = self.optimizer_groups = OptimizerGroups(self.policy, self.separate_critic)
        return built

    def _loss_coefficients(self) -> LossCoefficients:
        """What the minibatch loss reads from the settings in this update, as SB3 reads them at every update: the clip
        ranges from their schedules now, beta now, and the coefficients as they are set now."""
        progress = self._current_progress_remaining
        clip_range = self.clip_range(progress)  # type: ignore[operator]
        clip_range_vf = None if self.clip_range_vf is None else self.clip_range_vf(progress)  # type: ignore[operator]
        return LossCoefficients(
            clip_range, clip_range_vf, self.kl_penalty.coef, self.ent_coef, self.vf_coef, self.normalize_advantage
        )

    def _update_loss(self) -> UpdateLoss:
        """The minibatch loss of the current policy (compiled with ``compile_update``), built at its first update: a
        policy replaced after set-up (``model.policy = th.compile(model.policy)``) or ``direct_evaluation`` changed
        gets its own."""
        built = self.update_loss
        if built is None or not built.serves(self.policy, self.direct_evaluation):
            built = self.update_loss = UpdateLoss(
                self.objective, self.policy, self.direct_evaluation, self.compile_update, self.device
            )
            self.logger.info(f"KL(old || new) estimator: {self.kl_estimator} ({type(self.policy.action_dist).__name__})")
        return built

    def _learning_rate(self) -> float:
        """The actor's learning rate now: the KL-adaptive rule's while it is on, else the schedule's (SB3's)."""
        if self.adaptive_lr.active and self.adaptive_lr.learning_rate is not None:
            return self.adaptive_lr.learning_rate
        return self.lr_schedule(self._current_progress_remaining)

    def _critic_own_lr(self) -> float | None:
        """The critic's own learning rate in this update, or ``None`` when it follows the actor's."""
        if self.vf_learning_rate is None:
            return None
        return float(self.vf_learning_rate(self._current_progress_remaining))  # type: ignore[operator]

    def _adapt_kl_coef(self, rollout: UpdateRollout, evaluator: ActionEvaluator, means: LossStats) -> float | None:
        """Adapt beta to the paper's d, and return d; ``None`` when beta is fixed or without the penalty.

        d is ``KL(pi_rollout || pi_updated)`` averaged over the whole rollout after the update; without a closed form
        (or for a custom buffer class), the update's mean k3 estimate stands in (NaN when no minibatch was trained,
        which leaves beta as it is).
        """
        if not (self.uses_kl_penalty and self.kl_penalty.adaptive):
            return None
        if rollout.old_params is not None and rollout.samples is not None:
            update_kl = evaluator.mean_kl(rollout.old_params, rollout.samples.observations)
        else:
            update_kl = means.approx_kl
        self.kl_penalty.update(update_kl)
        return update_kl

    def _record_update(
        self,
        means: LossStats,
        coefficients: LossCoefficients,
        learning_rate: float,
        optimizer: OptimizerGroups,
        update_kl: float | None,
    ) -> None:
        """Log the update as SB3 does (every value a mean over the update's minibatches), plus our keys."""
        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self.logger.record("train/entropy_loss", means.entropy_loss)
        self.logger.record("train/policy_gradient_loss", means.policy_gradient_loss)
        self.logger.record("train/value_loss", means.value_loss)
        self.logger.record("train/approx_kl", means.approx_kl)
        self.logger.record("train/clip_fraction", means.clip_fraction)
        self.logger.record("train/loss", means.loss)
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/kl", means.kl)
        self.logger.record("train/kl_coef", coefficients.kl_coef)
        self.logger.record("train/kl_penalty_loss", means.kl_penalty_loss)
        if update_kl is not None:
            self.logger.record("train/kl_update", update_kl)
        # The scheduled rate (SB3's value), or the mean of the rates the KL-adaptive rule gave the steps.
        adapted = self.adaptive_lr.active and optimizer.step_rates
        self.logger.record("train/learning_rate", float(np.mean(optimizer.step_rates)) if adapted else learning_rate)
        if self.vf_learning_rate is not None:
            self.logger.record("train/vf_learning_rate", optimizer.optimizer.param_groups[1]["lr"])
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", coefficients.clip_range)
        if coefficients.clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", coefficients.clip_range_vf)

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

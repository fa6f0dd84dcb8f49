"""The loss of one minibatch, one line per term as SB3's ``PPO.train`` writes it, plus the KL penalty of the PPO paper.

:class:`PPOLoss` is built once per policy (``PPO`` rebuilds it when ``model.policy`` is replaced) from the objective
and the policy's :class:`~sb3_ppo_ext.ppo.evaluation.ActionEvaluator`, and called through :class:`UpdateLoss` (compiled
with ``compile_update``, else eager); what SB3 reads from the algorithm at every update (the clip ranges from their
schedules, the coefficients) comes in each call as :class:`LossCoefficients`, so that changing ``model.ent_coef``
between updates works as in SB3.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from torch.nn import functional as F

from sb3_ppo_ext.ppo.compiled import CompiledOrEager
from sb3_ppo_ext.ppo.evaluation import ActionEvaluator
from sb3_ppo_ext.ppo.rollout import Minibatch

#: The surrogate objectives: SB3's clipped surrogate, the paper's KL-penalised one (no clipping), or both.
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


class LossCoefficients(NamedTuple):
    """What the loss reads from the algorithm's settings, once per update (numbers; 0-d tensors when compiled).

    :param clip_range: the surrogate's clip range now (``clip_range`` schedule).
    :param clip_range_vf: the value clip range now, or ``None``: no value clipping (SB3's meaning).
    :param kl_coef: beta of this update (``kl_penalty.coef``); read only by the penalty objectives.
    :param ent_coef: entropy coefficient.
    :param vf_coef: value-loss coefficient.
    :param normalize_advantage: normalise the advantages per minibatch.
    """

    clip_range: Any
    clip_range_vf: Any
    kl_coef: Any
    ent_coef: Any
    vf_coef: Any
    normalize_advantage: bool


class PPOLoss:
    """The loss to minimise on one minibatch and its statistics (:meth:`__call__`).

    :param objective: one of :data:`OBJECTIVES`.
    :param evaluator: how the current policy evaluates the minibatch's actions (and its distribution, for the KL).
    """

    def __init__(self, objective: str, evaluator: ActionEvaluator) -> None:
        self.objective = objective
        self.evaluator = evaluator
        self.clipped = objective in ("clip", "clip_kl_penalty")
        self.penalised = objective in ("kl_penalty", "clip_kl_penalty")

    def __call__(self, minibatch: Minibatch, coefficients: LossCoefficients) -> tuple[th.Tensor, LossStats]:
        """The loss of ``minibatch`` and its terms, detached."""
        rollout_data, c = minibatch.samples, coefficients
        evaluation = self.evaluator(rollout_data.observations, rollout_data.actions)

        advantages = rollout_data.advantages
        if c.normalize_advantage and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        log_ratio = evaluation.log_prob - rollout_data.old_log_prob
        ratio = th.exp(log_ratio)
        if self.clipped:
            policy_loss = -th.min(advantages * ratio, advantages * th.clamp(ratio, 1 - c.clip_range, 1 + c.clip_range)).mean()
        else:
            policy_loss = -(advantages * ratio).mean()

        with th.set_grad_enabled(self.penalised and th.is_grad_enabled()):  # no graph when only logged
            kl = self.evaluator.kl(minibatch.old_params, evaluation.params, log_ratio).mean()
        kl_penalty_loss = c.kl_coef * kl if self.penalised else th.zeros((), device=kl.device)

        if c.clip_range_vf is None:
            values_pred = evaluation.values
        else:
            old_values = rollout_data.old_values
            values_pred = old_values + th.clamp(evaluation.values - old_values, -c.clip_range_vf, c.clip_range_vf)
        value_loss = F.mse_loss(rollout_data.returns, values_pred)
        entropy = evaluation.entropy
        entropy_loss = -th.mean(-evaluation.log_prob) if entropy is None else -th.mean(entropy)

        surrogate = policy_loss + kl_penalty_loss if self.penalised else policy_loss  # "clip": SB3's sum
        loss = surrogate + c.ent_coef * entropy_loss + c.vf_coef * value_loss

        with th.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # k3 written as SB3 writes it: the early stop decides alike
            clip_fraction = (th.abs(ratio - 1) > c.clip_range).float().mean()
            stats = LossStats(
                policy_loss.detach(),
                value_loss.detach(),
                entropy_loss.detach(),
                kl_penalty_loss.detach(),
                loss.detach(),
                kl.detach(),
                approx_kl,
                clip_fraction,
            )
        return loss, stats


class UpdateLoss(CompiledOrEager[PPOLoss]):
    """The minibatch loss as the update calls it: the :class:`PPOLoss` of one policy, compiled with ``torch.compile``
    when ``enabled`` (:class:`~sb3_ppo_ext.ppo.compiled.CompiledOrEager`), with the evaluator it was built on.

    :param objective: one of :data:`OBJECTIVES`.
    :param policy: the policy whose actions the loss evaluates.
    :param direct: compute log-probabilities directly where the policy allows it (PPO's ``direct_evaluation``).
    :param enabled: compile the loss (PPO's ``compile_update``).
    :param device: where the numbers handed to the compiled loss go as tensors.
    """

    def __init__(
        self, objective: str, policy: ActorCriticPolicy, direct: bool, enabled: bool, device: th.device | str
    ) -> None:
        super().__init__(PPOLoss(objective, ActionEvaluator(policy, direct=direct)), enabled, device)

    @property
    def evaluator(self) -> ActionEvaluator:
        """How the policy evaluates a minibatch's actions, and its action distribution for the KL."""
        return self.function.evaluator

    def serves(self, policy: ActorCriticPolicy, direct: bool) -> bool:
        """Whether this is the loss of ``policy`` with ``direct`` evaluation (a replaced policy, such as
        ``th.compile(model.policy)``, or a changed ``direct_evaluation`` needs a new one)."""
        return self.evaluator.policy is policy and self.evaluator.direct == direct

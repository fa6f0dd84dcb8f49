"""How the update evaluates a minibatch's actions under the current policy, chosen once per policy.

:class:`ActionEvaluator` returns what ``ActorCriticPolicy.evaluate_actions`` returns (values, log-probabilities,
entropy) and the parameters of the policy's action distribution, which the analytic KL compares with those of the
policy that collected the rollout (the reference distribution, :meth:`ActionEvaluator.distribution_params`). It
computes them directly (:mod:`~sb3_ppo_ext.ppo.direct_evaluation`) for the heads that module mirrors, unless asked
not to (``direct=False``, PPO's ``direct_evaluation=False``: SB3's ``policy.evaluate_actions`` for every policy, bit
for bit SB3's numbers), and through ``policy.evaluate_actions`` for everything else.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3_ppo_ext.ppo import direct_evaluation
from sb3_ppo_ext.ppo.distributions import DistributionParams
from sb3_ppo_ext.ppo.kl import AnalyticKL, k3_kl
from sb3_ppo_ext.ppo.rollout import take_rows


class Evaluation(NamedTuple):
    """A minibatch's actions under the current policy."""

    values: th.Tensor  # flat
    log_prob: th.Tensor
    entropy: th.Tensor | None  # None: no closed form (SB3 then uses -log_prob)
    params: DistributionParams | None  # the distribution's parameters; None where there is no closed-form KL


class ActionEvaluator:
    """The evaluation of actions and the KL of the update for one policy.

    :param policy: the policy (an ``ActorCriticPolicy``, or a wrapper of one such as ``th.compile(policy)``).
    :param direct: compute directly where :func:`~sb3_ppo_ext.ppo.direct_evaluation.direct_head` mirrors the policy.
    """

    def __init__(self, policy: ActorCriticPolicy, direct: bool = True) -> None:
        self.policy = policy
        self.direct = direct
        #: The head computed directly, or ``None``: through ``policy.evaluate_actions``.
        self.head = direct_evaluation.direct_head(policy) if direct else None
        #: The closed-form KL of the policy's distribution, or ``None``: the k3 estimate.
        self.analytic = AnalyticKL.for_distribution(policy.action_dist)
        self.discrete = isinstance(policy.action_space, spaces.Discrete)

    @property
    def kl_estimator(self) -> str:
        """``"analytic"`` or ``"k3"``: which KL the distribution allows."""
        return "k3" if self.analytic is None else "analytic"

    def __call__(self, observations: Any, actions: th.Tensor) -> Evaluation:
        """Values, log-probabilities, entropy and distribution parameters of ``actions`` (as stored in the buffer)."""
        if self.discrete:
            actions = actions.long().flatten()
        if self.head is not None:
            return Evaluation(*direct_evaluation.evaluate_actions(self.policy, self.head, observations, actions))
        values, log_prob, entropy = self.policy.evaluate_actions(observations, actions)
        params = self.analytic.params(self.policy.action_dist) if self.analytic is not None else None
        return Evaluation(values.flatten(), log_prob, entropy, params)

    def kl(self, old_params: DistributionParams | None, params: DistributionParams | None, log_ratio: th.Tensor) -> th.Tensor:
        """Per-sample ``KL(old || new)``: in closed form where both distributions' parameters are known, else the k3
        estimate from ``log_ratio`` (the parameters of the collecting policy are unknown for a custom buffer class)."""
        if self.analytic is not None and old_params is not None and params is not None:
            return self.analytic(old_params, params)
        return k3_kl(log_ratio)

    def distribution_params(self, observations: Any, chunk: int = 4096) -> DistributionParams | None:
        """The parameters of the policy's action distribution on ``observations``, without gradients (``None``
        without a closed-form KL)."""
        if self.analytic is None:
            return None
        size = len(next(iter(observations.values())) if isinstance(observations, dict) else observations)
        parts: list[DistributionParams] = []
        with th.no_grad():
            for start in range(0, size, chunk):
                distribution = self.policy.get_distribution(take_rows(observations, slice(start, start + chunk)))
                parts.append(tuple(t.detach() for t in self.analytic.params(distribution)))
        return tuple(th.cat(columns) for columns in zip(*parts, strict=True))

    def mean_kl(self, old_params: DistributionParams, observations: Any) -> float:
        """The closed-form ``KL(old || current policy)`` averaged over ``observations``, ``old_params`` being the
        reference distribution on them (:meth:`distribution_params` before the update)."""
        params = self.distribution_params(observations)
        if self.analytic is None or params is None:
            raise ValueError(f"no closed-form KL for {type(self.policy.action_dist).__name__}")
        return float(self.analytic(old_params, params).mean())

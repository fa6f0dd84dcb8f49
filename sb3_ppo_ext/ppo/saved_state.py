"""How :class:`~sb3_ppo_ext.ppo.ppo.PPO` is saved and loaded beyond SB3's own: the adaptive rules' state as plain numbers
(readable without unpickling), and a separate critic's two-group optimizer state in SB3's one-group form, so that
SB3's PPO loads the saved model (:mod:`~sb3_ppo_ext.ppo.actor_critic_groups`)."""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.save_util import load_from_zip_file

from sb3_ppo_ext.ppo import actor_critic_groups
from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController


class SavedState(OnPolicyAlgorithm):
    """The save / load part of :class:`~sb3_ppo_ext.ppo.ppo.PPO`."""

    policy: ActorCriticPolicy
    kl_penalty: KLPenaltyController
    adaptive_lr: KLAdaptiveLearningRate
    vf_learning_rate: Any
    vf_max_grad_norm: float | None

    def _excluded_save_params(self) -> list[str]:
        # The controllers are saved as their state (``save``); the loss and the guard around the env are rebuilt.
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

    @property
    def separate_critic(self) -> bool:
        """Whether the critic has its own learning rate or gradient clip (its own optimizer parameter group)."""
        return self.vf_learning_rate is not None or self.vf_max_grad_norm is not None

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

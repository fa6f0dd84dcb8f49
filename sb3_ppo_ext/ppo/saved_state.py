"""How :class:`~sb3_ppo_ext.ppo.ppo.PPO` is saved and loaded beyond SB3's own: the adaptive rules' state as plain numbers
(readable without unpickling), and a separate critic's two-group optimizer state in SB3's one-group form, so that
SB3's PPO loads the saved model (:mod:`~sb3_ppo_ext.ppo.actor_critic_groups`)."""

from __future__ import annotations

import io
import os
import pathlib
from typing import Any, TypeVar

import torch as th
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.type_aliases import GymEnv

from sb3_ppo_ext.ppo import actor_critic_groups
from sb3_ppo_ext.ppo.adaptive import KLAdaptiveLearningRate, KLPenaltyController
from sb3_ppo_ext.ppo.threads import UpdateThreads, check_update_threads
from sb3_ppo_ext.validation import HyperparameterError

SelfSavedState = TypeVar("SelfSavedState", bound="SavedState")


class SavedState(OnPolicyAlgorithm):
    """The save / load part of :class:`~sb3_ppo_ext.ppo.ppo.PPO`."""

    policy: ActorCriticPolicy
    kl_penalty: KLPenaltyController
    adaptive_lr: KLAdaptiveLearningRate
    vf_learning_rate: Any
    vf_max_grad_norm: float | None
    update_threads: UpdateThreads

    @classmethod
    def load(
        cls: type[SelfSavedState],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfSavedState:
        """SB3's, with ``update_threads`` checked as the constructor checks it: SB3 sets the saved settings on the
        model without passing them through ``__init__``, and the update reads this one only when it first runs.

        :raises HyperparameterError: naming the file and the value, for a saved ``update_threads`` the constructor
            would refuse.
        """
        model = super().load(
            path,
            env=env,
            device=device,
            custom_objects=custom_objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )
        try:
            check_update_threads(model.update_threads)
        except HyperparameterError as error:
            given = "update_threads" in kwargs or "update_threads" in (custom_objects or {})
            source = "the update_threads given to load" if given else _file_name(path)
            raise HyperparameterError(f"{source}: {error}") from None
        return model

    def _excluded_save_params(self) -> list[str]:
        # The controllers are saved as their state (``save``); the loss, the optimizer's groups and the guard around
        # the env are rebuilt.
        excluded = ["kl_penalty", "adaptive_lr", "update_loss", "optimizer_groups", "std_schedule", "collection_guard"]
        return [*super()._excluded_save_params(), *excluded]

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """SB3's, with the adaptive rules' state saved as plain numbers (``adaptive_state``, readable without
        unpickling) in place of the controller objects."""
        self.adaptive_state = {"kl_coef": self.kl_penalty.coef, "learning_rate": self.adaptive_lr.learning_rate}
        try:
            super().save(path, exclude=exclude, include=include)
        finally:
            del self.adaptive_state

    def _two_groups(self) -> bool:
        """Whether the policy's optimizer has the actor's and the critic's groups, which SB3's one-group layout
        replaces in the saved model (:func:`~sb3_ppo_ext.ppo.actor_critic_groups.separate_critic`)."""
        return actor_critic_groups.separate_critic(self.vf_learning_rate, self.vf_max_grad_norm)

    def get_parameters(self) -> dict[str, dict]:
        """SB3's, with a separate critic's two-group optimizer state written as SB3's one group (see
        :mod:`~sb3_ppo_ext.ppo.actor_critic_groups`), so that SB3's PPO can load the saved model."""
        params = super().get_parameters()
        if self._two_groups() and "policy.optimizer" in params:
            params["policy.optimizer"] = actor_critic_groups.to_single_group(params["policy.optimizer"], self.policy)
        return params

    def set_parameters(
        self, load_path_or_dict: str | dict[str, Any], exact_match: bool = True, device: th.device | str = "auto"
    ) -> None:
        """SB3's; a one-group optimizer state (ours saved by :meth:`get_parameters`, or SB3's) goes into a separate
        critic's two groups, each Adam moment to its own parameter."""
        if self._two_groups():
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


def _file_name(path: str | pathlib.Path | io.BufferedIOBase) -> str:
    """The model file ``path`` names, for messages (``"the model file"`` for a file object)."""
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else "the model file"

"""Separate learning rates and gradient clipping for the actor and the critic (as two-network PPO tutorials do: the
actor at 1e-3 and the critic at 3e-3, each clipped), inside SB3's one-optimizer design.

SB3's ``ActorCriticPolicy`` builds one optimizer over all its parameters. Here that optimizer is rebuilt with two
parameter groups, the actor's first and the critic's second, so that each group has its own learning rate while
the loss, the backward pass and the optimizer class stay SB3's. The critic is the value head, the value branch of
the MLP extractor and, when the policy does not share it, the critic's own features extractor; everything else
(the action head, ``log_std``, the policy branch and a shared features extractor) is the actor.

A two-group optimizer state cannot be loaded by SB3's PPO (one group). :func:`to_single_group` writes it as one
group in ``policy.parameters()`` order, which is exactly the layout SB3's optimizer has, so that a saved model loads
in SB3's PPO with every Adam moment on its own parameter; :func:`to_groups` turns it back. The saved group carries
the actor's learning rate; both rates are set again from their schedules before every update, as SB3 does.
"""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy


def separate_critic(vf_learning_rate: Any, vf_max_grad_norm: float | None) -> bool:
    """Whether the critic has its own optimizer parameter group (:func:`build_optimizer`): it has its own learning
    rate (PPO's ``vf_learning_rate``) or its own gradient clip (``vf_max_grad_norm``)."""
    return vf_learning_rate is not None or vf_max_grad_norm is not None


def critic_parameters(policy: ActorCriticPolicy) -> list[th.nn.Parameter]:
    """The critic's own parameters, in ``policy.parameters()`` order: the value head, the MLP extractor's value
    branch and, when not shared with the actor, the critic's features extractor.

    :raises ValueError: when the policy's MLP extractor has no ``value_net`` (a custom extractor whose critic
        layers cannot be told apart).
    """
    value_branch = getattr(policy.mlp_extractor, "value_net", None)
    if not isinstance(value_branch, th.nn.Module):
        raise ValueError(
            f"vf_learning_rate / vf_max_grad_norm need the critic's layers: the policy's mlp_extractor "
            f"({type(policy.mlp_extractor).__name__}) has no value_net module"
        )
    modules = [policy.value_net, value_branch]
    if not policy.share_features_extractor:
        modules.append(policy.vf_features_extractor)
    own = {id(parameter) for module in modules for parameter in module.parameters()}
    return [parameter for parameter in policy.parameters() if id(parameter) in own]


def split_parameters(policy: ActorCriticPolicy) -> tuple[list[th.nn.Parameter], list[th.nn.Parameter]]:
    """``(actor, critic)`` parameters, each in ``policy.parameters()`` order; together all of them."""
    critic = critic_parameters(policy)
    critic_ids = {id(parameter) for parameter in critic}
    actor = [parameter for parameter in policy.parameters() if id(parameter) not in critic_ids]
    return actor, critic


def build_optimizer(policy: ActorCriticPolicy, actor_lr: float, critic_lr: float) -> th.optim.Optimizer:
    """The policy's optimizer class and keyword arguments over two groups: the actor's at ``actor_lr``, then the
    critic's at ``critic_lr``."""
    actor, critic = split_parameters(policy)
    optimizer_class: Any = policy.optimizer_class  # an Optimizer subclass, which takes lr and parameter groups
    return optimizer_class([{"params": actor}, {"params": critic, "lr": critic_lr}], lr=actor_lr, **policy.optimizer_kwargs)


def _positions(policy: ActorCriticPolicy) -> tuple[list[int], int]:
    """For each parameter in group order (actor, then critic): its index in ``policy.parameters()``; and the number of
    the actor's parameters."""
    index = {id(parameter): position for position, parameter in enumerate(policy.parameters())}
    actor, critic = split_parameters(policy)
    return [index[id(parameter)] for parameter in (*actor, *critic)], len(actor)


def to_single_group(state_dict: dict[str, Any], policy: ActorCriticPolicy) -> dict[str, Any]:
    """A two-group (actor, critic) optimizer state dict as the one-group state dict SB3's optimizer has: parameters
    in ``policy.parameters()`` order, the actor group's settings."""
    actor_group, critic_group = state_dict["param_groups"]
    positions, _ = _positions(policy)
    group_order = [*actor_group["params"], *critic_group["params"]]
    state = {positions[rank]: state_dict["state"][key] for rank, key in enumerate(group_order) if key in state_dict["state"]}
    group = {key: value for key, value in actor_group.items() if key != "params"}
    group["params"] = list(range(len(positions)))
    return {"state": dict(sorted(state.items())), "param_groups": [group]}


def to_groups(state_dict: dict[str, Any], policy: ActorCriticPolicy, critic_lr: float) -> dict[str, Any]:
    """The inverse of :func:`to_single_group` for the two-group optimizer of :func:`build_optimizer`, the critic's
    group at ``critic_lr``; also reads a one-group state saved by SB3's PPO or by ours without a separate critic.

    :raises ValueError: when the state's parameter count is not the policy's.
    """
    (group,) = state_dict["param_groups"]
    positions, n_actor = _positions(policy)
    if len(group["params"]) != len(positions):
        raise ValueError(f"the saved optimizer state has {len(group['params'])} parameters, the policy has {len(positions)}")
    keys = group["params"]  # the state key of each parameter, in policy.parameters() order
    state = {
        rank: state_dict["state"][keys[position]]
        for rank, position in enumerate(positions)
        if keys[position] in state_dict["state"]
    }
    settings = {key: value for key, value in group.items() if key != "params"}
    critic_settings = dict(settings, lr=critic_lr)
    return {
        "state": state,
        "param_groups": [
            dict(settings, params=list(range(n_actor))),
            dict(critic_settings, params=list(range(n_actor, len(positions)))),
        ],
    }

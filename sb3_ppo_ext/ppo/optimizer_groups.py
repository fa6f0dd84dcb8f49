"""The policy's optimizer as the updates use it: its learning rates and each minibatch's step.

SB3's update sets every parameter group to the scheduled learning rate, then for each minibatch zeroes the
gradients, back-propagates, clips them with ``clip_grad_norm_(policy.parameters(), max_grad_norm)`` and steps.
:class:`OptimizerGroups` does the same for SB3's one group, or for the actor's and the critic's groups of
:mod:`~sb3_ppo_ext.ppo.actor_critic_groups` (each with its rate and, with ``vf_max_grad_norm``, its own clip). Its
:meth:`~OptimizerGroups.stepping` block runs Adam's fused kernel where torch has one and steps through
:class:`~sb3_ppo_ext.ppo.optim.ClippedStep` (both in :mod:`~sb3_ppo_ext.ppo.optim`), and turns non-finite
gradients into a ``FloatingPointError`` raised before the step, with the weights and the optimizer state untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch as th
from stable_baselines3.common.policies import BasePolicy

from sb3_ppo_ext.ppo.optim import ClippedStep, NonFiniteGradientError, fused_adam


class OptimizerGroups:
    """The policy's optimizer as the updates use it, built once per optimizer: its groups' learning rates
    (:meth:`set_rates`) and each minibatch's step (:meth:`stepping`).

    :param policy: the policy; its ``optimizer`` has one group, or two (actor, critic) when ``separate_critic``.
    :param separate_critic: whether the optimizer has the actor's and the critic's groups
        (:func:`~sb3_ppo_ext.ppo.actor_critic_groups.separate_critic`).
    """

    def __init__(self, policy: BasePolicy, separate_critic: bool = False) -> None:
        self.policy = policy
        self.optimizer: th.optim.Optimizer = policy.optimizer
        self.separate_critic = separate_critic
        if separate_critic:
            # The optimizer's order (actor, then critic), so that each group's gradients can be clipped on their own.
            self.parameters = [parameter for group in self.optimizer.param_groups for parameter in group["params"]]
        else:
            self.parameters = list(policy.parameters())  # policy.parameters() walks every module: once per optimizer
        #: The actor group's learning rate at each step of the last :meth:`stepping` block.
        self.step_rates: list[float] = []

    def serves(self, policy: BasePolicy, separate_critic: bool) -> bool:
        """Whether these are the groups of ``policy``'s optimizer as it is now (a loaded model, or a user, may have
        replaced the policy or its optimizer)."""
        return self.policy is policy and self.optimizer is policy.optimizer and self.separate_critic == separate_critic

    def set_rates(self, learning_rate: float, critic_learning_rate: float | None = None) -> None:
        """Set the actor's learning rate: every group's, except the critic group's when it has a rate of its own
        (``critic_learning_rate``; ``None``: it follows the actor's)."""
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        if critic_learning_rate is not None:
            self.optimizer.param_groups[1]["lr"] = critic_learning_rate

    @contextmanager
    def stepping(
        self, update: str, max_grad_norm: float, vf_max_grad_norm: float | None = None
    ) -> Iterator[Callable[[th.Tensor], None]]:
        """A block that gives ``step(loss)``: one minibatch's optimizer step (fused Adam where torch has it).

        :param update: which update this is, for the message of a non-finite gradient error.
        :param max_grad_norm: the gradient clip (of the actor's group alone when the critic has its own clip).
        :param vf_max_grad_norm: the critic group's own gradient clip, or ``None``: one clip of all gradients.
        """
        clip_groups = None
        if self.separate_critic and vf_max_grad_norm is not None:
            n_actor = len(self.optimizer.param_groups[0]["params"])
            clip_groups = [(n_actor, max_grad_norm), (len(self.parameters) - n_actor, vf_max_grad_norm)]
        self.step_rates = []
        with fused_adam(self.optimizer):
            # Built inside the block: ClippedStep takes its direct path for fused Adam only.
            clipped_step = ClippedStep(self.optimizer, self.parameters, max_grad_norm, clip_groups, error_if_nonfinite=True)
            yield partial(self._step, clipped_step, update)

    def _step(self, clipped_step: ClippedStep, update: str, loss: th.Tensor) -> None:
        """Zero the gradients, back-propagate ``loss``, clip them and step; raise before a non-finite step."""
        clipped_step.zero_grad()
        loss.backward()
        try:
            clipped_step.step()  # clip_grad_norm_(parameters, max_grad_norm), then optimizer.step()
        except NonFiniteGradientError as error:
            raise FloatingPointError(
                f"non-finite gradients in update {update} (minibatch step {len(self.step_rates) + 1}, loss "
                f"{loss.item():.6g}): {error}. No step was taken, so the weights and the optimizer state are those "
                "before it; look for non-finite observations, rewards or normalisation statistics, or a learning rate "
                "too high"
            ) from None
        self.step_rates.append(self.optimizer.param_groups[0]["lr"])

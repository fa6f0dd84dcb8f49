"""The rollout buffer's data for collection and update: direct writes, and the minibatches of one update.

Mirrors ``RolloutBuffer.add`` and ``RolloutBuffer.get(batch_size)`` of SB3's two buffers (``RolloutBuffer``,
``DictRolloutBuffer``), faster where the data allows it:

* :func:`add_to_rollout_buffer` writes one step of numpy values where ``add`` would convert tensors back to numpy
  and copy them.
* :class:`UpdateRollout` reads the whole rollout once as tensors (in buffer order) and cuts each epoch's minibatches
  from them by indexing, where ``get`` copies numpy to torch for every minibatch. The minibatch order is ``get``'s:
  one ``np.random.permutation`` per epoch from numpy's global generator, so that the same seed gives SB3's
  minibatches. (Packing the fields column-wise into one tensor, so that a minibatch is one indexing operation, was
  tried and removed: ``benchmarks/bench_ppo.py --ablation`` measured no gain, 1.00x per CPU second on SB3's defaults.)

Guarded: any other buffer class (a user's ``rollout_buffer_class``) is read through its own ``get``, and then the
collecting policy's distribution on each minibatch is unknown (``None``: the k3 KL estimate is used).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples

from sb3_ppo_ext.ppo.distributions import DistributionParams


def add_to_rollout_buffer(
    buffer: RolloutBuffer,
    observations: np.ndarray,
    actions: np.ndarray,
    rewards: np.ndarray,
    episode_starts: np.ndarray,
    values: np.ndarray,
    log_probs: np.ndarray,
) -> None:
    """``RolloutBuffer.add`` for numpy values (the same writes, without its tensor round trips and copies)."""
    if isinstance(buffer.observation_space, spaces.Discrete):
        observations = observations.reshape((buffer.n_envs, *buffer.obs_shape))
    position = buffer.pos
    buffer.observations[position] = observations
    buffer.actions[position] = actions.reshape((buffer.n_envs, buffer.action_dim))
    buffer.rewards[position] = rewards
    buffer.episode_starts[position] = episode_starts
    buffer.values[position] = values.reshape(-1)
    buffer.log_probs[position] = log_probs
    buffer.pos += 1
    if buffer.pos == buffer.buffer_size:
        buffer.full = True


def take_rows(value: Any, index: th.Tensor | slice) -> Any:
    """Rows ``index`` of a tensor or of every tensor in a dict of observations."""
    if isinstance(value, dict):
        return {key: tensor[index] for key, tensor in value.items()}
    return value[index]


def flatten_buffer(buffer: RolloutBuffer | DictRolloutBuffer) -> None:
    """What ``get`` does to the buffer on its first call, without drawing its permutation: every array from
    ``(n_steps, n_envs, ...)`` to ``(n_steps * n_envs, ...)``, in place."""
    if isinstance(buffer.observations, dict):
        for key, observations in buffer.observations.items():
            buffer.observations[key] = buffer.swap_and_flatten(observations)
    else:
        buffer.observations = buffer.swap_and_flatten(buffer.observations)
    for name in ("actions", "values", "log_probs", "advantages", "returns"):
        setattr(buffer, name, buffer.swap_and_flatten(getattr(buffer, name)))
    buffer.generator_ready = True


class Minibatch(NamedTuple):
    """One minibatch: the buffer's samples and the collecting policy's distribution on them (``None``: unknown)."""

    samples: RolloutBufferSamples
    old_params: DistributionParams | None


class UpdateRollout:
    """The rollout of one update, read once from the rollout buffer, and its minibatches (:meth:`minibatches`).

    :param buffer: the filled rollout buffer (returns and advantages computed).
    :param distribution_params: the collecting policy's distribution parameters on given observations, ``None``
        without a closed-form KL (:meth:`~sb3_ppo_ext.ppo.evaluation.ActionEvaluator.distribution_params`; called
        once, before any update step).
    """

    def __init__(
        self,
        buffer: RolloutBuffer,
        distribution_params: Callable[[Any], DistributionParams | None] | None = None,
    ) -> None:
        self.buffer = buffer
        #: The whole rollout in buffer order, or ``None`` for a buffer class other than SB3's two.
        self.samples: RolloutBufferSamples | None = None
        #: The collecting policy's distribution on every row of :attr:`samples` (``None``: unknown).
        self.old_params: DistributionParams | None = None
        if not self.supports(buffer):
            return
        if not buffer.generator_ready:
            flatten_buffer(buffer)
        self.samples = buffer._get_samples(np.arange(buffer.buffer_size * buffer.n_envs))
        if distribution_params is not None:
            self.old_params = distribution_params(self.samples.observations)

    @staticmethod
    def supports(buffer: RolloutBuffer) -> bool:
        """Whether the rollout is read from ``buffer``'s arrays (SB3's two buffer classes), with the collecting
        policy's distribution on every sample; any other class is read through its own ``get``."""
        return type(buffer) in (RolloutBuffer, DictRolloutBuffer)

    def minibatches(self, batch_size: int) -> Iterator[Minibatch]:
        """One epoch: ``RolloutBuffer.get(batch_size)``'s shuffled minibatches, each with the collecting policy's
        distribution on its rows."""
        if self.samples is None:
            for samples in self.buffer.get(batch_size):
                yield Minibatch(samples, None)
            return
        size = len(self.samples.advantages)
        # SB3's minibatch order: RolloutBuffer.get draws np.random.permutation once per epoch.
        permutation = th.as_tensor(np.random.permutation(size), device=self.samples.advantages.device)
        for start in range(0, size, batch_size):
            index = permutation[start : start + batch_size]
            old = tuple(column[index] for column in self.old_params) if self.old_params is not None else None
            fields = type(self.samples)  # RolloutBufferSamples or DictRolloutBufferSamples
            yield Minibatch(fields(*(take_rows(value, index) for value in self.samples)), old)

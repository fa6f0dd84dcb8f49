"""Rollout collection with the numpy actor: SB3's ``OnPolicyAlgorithm.collect_rollouts`` loop, acting with
:class:`~sb3_ppo_ext.ppo.numpy_policy.NumpyActorCritic` and writing the buffer directly
(:func:`~sb3_ppo_ext.ppo.rollout.add_to_rollout_buffer`).

The loop is SB3's step for step: the same gSDE noise resets, action clipping, callback calls (with the loop's
``locals()``, as SB3 passes them), info buffer, bootstrap of truncated episodes and returns; the actions and values
come from the numpy actor, which draws its noise from torch's generator as SB3's policy does. Every step goes through
the :class:`~sb3_ppo_ext.ppo.non_finite.CollectionGuard` the caller passes as ``env``, and the values the actor
computes are checked before they are used.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from sb3_ppo_ext.ppo.non_finite import check_policy_values
from sb3_ppo_ext.ppo.numpy_policy import NumpyActorCritic
from sb3_ppo_ext.ppo.rollout import add_to_rollout_buffer


def collect_with_numpy_actor(
    self: OnPolicyAlgorithm,
    env: VecEnv,
    callback: BaseCallback,
    rollout_buffer: RolloutBuffer,
    n_rollout_steps: int,
    actor: NumpyActorCritic,
) -> bool:
    """Collect ``n_rollout_steps`` per env into ``rollout_buffer`` acting with ``actor``, as SB3's loop does.

    :param self: the algorithm (named as in SB3's method, whose ``locals()`` callbacks read).
    :param env: the training env, wrapped in the algorithm's collection guard.
    :param actor: the numpy copy of ``self.policy`` for this rollout.
    :return: ``False`` when a callback stopped training, as SB3's ``collect_rollouts``.
    """
    self.policy.set_training_mode(False)
    n_steps = 0
    rollout_buffer.reset()
    if self.use_sde:
        self.policy.reset_noise(env.num_envs)
        actor.refresh_noise()
    callback.on_rollout_start()

    action_space = self.action_space
    clip_box, is_discrete = isinstance(action_space, spaces.Box), isinstance(action_space, spaces.Discrete)
    low, high = (action_space.low, action_space.high) if isinstance(action_space, spaces.Box) else (np.empty(0), np.empty(0))
    resample_noise = self.use_sde and self.sde_sample_freq > 0
    sb3_buffer = type(rollout_buffer) is RolloutBuffer

    while n_steps < n_rollout_steps:
        if resample_noise and n_steps % self.sde_sample_freq == 0:
            self.policy.reset_noise(env.num_envs)
            actor.refresh_noise()

        last_obs = cast(np.ndarray, self._last_obs)  # an array: the numpy actor serves array observations only
        actions, values_np, log_probs_np = actor.act(last_obs)
        check_policy_values("value", values_np, self.num_timesteps)  # the observations were checked at their step
        clipped_actions = np.minimum(np.maximum(actions, low), high) if clip_box else actions  # np.clip, faster
        new_obs, rewards, dones, infos = env.step(clipped_actions)
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
            bootstrap_truncated(actor, rewards, dones, infos, self.gamma, self.num_timesteps)

        if sb3_buffer:
            add_to_rollout_buffer(
                rollout_buffer,
                last_obs,
                actions,
                rewards,
                self._last_episode_starts,  # type: ignore[arg-type]
                values_np,
                log_probs_np,
            )
        else:
            rollout_buffer.add(last_obs, actions, rewards, self._last_episode_starts, values, log_probs)  # type: ignore[arg-type]
        self._last_obs = new_obs  # type: ignore[assignment]
        self._last_episode_starts = dones

    last_values = actor.predict_values(new_obs)  # type: ignore[arg-type]
    check_policy_values("last_value", last_values, self.num_timesteps)
    values = th.from_numpy(last_values)
    rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
    callback.update_locals(locals())
    callback.on_rollout_end()
    return True


def bootstrap_truncated(
    actor: NumpyActorCritic, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]], gamma: float, step: int
) -> None:
    """Add ``gamma * V(terminal observation)`` to the reward of each episode cut by a time limit, in place (SB3)."""
    for index in np.flatnonzero(dones):
        terminal_obs = infos[index].get("terminal_observation")
        if terminal_obs is not None and infos[index].get("TimeLimit.truncated", False):
            terminal_value = actor.predict_values(np.asarray(terminal_obs)[None])
            check_policy_values("terminal_value", terminal_value, step, env_indices=[int(index)])
            rewards[index] += gamma * terminal_value[0]

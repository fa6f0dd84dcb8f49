"""Saving an agent folder: the actor of a trained model and its normalisation statistics as plain data."""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env import VecNormalize, unwrap_vec_normalize

from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.plain_data import policy_kwargs_to_data, space_to_data
from sb3_ppo_ext.pretrained.format import (
    AGENT_FILE,
    CRITIC_PREFIXES,
    FORMAT_VERSION,
    WEIGHTS_FILE,
    check_agent_env_kwargs,
    read_agent,
    resolve_wrapper,
    wrapper_list,
)
from sb3_ppo_ext.validation import check_frame_stack


def _policy_alias(model: Any) -> str:
    """The ``policy_aliases`` name of the model's policy class (``MlpPolicy``...): the only policies we rebuild."""
    for alias, policy_class in getattr(model, "policy_aliases", {}).items():
        if type(model.policy) is policy_class:
            return alias
    raise ValueError(
        f"cannot ship a {type(model.policy).__name__}: only the algorithm's named policies "
        f"({sorted(getattr(model, 'policy_aliases', {}))}) are rebuilt from plain data"
    )


def recorded_env_kwargs(env_id: str, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``env_kwargs`` with the task's version-dependent defaults written out, so that the agent keeps playing the
    task it was trained on if a later version changes a default: what the task class's ``recorded_kwargs``
    returns (a locomotion task's ``foot_contacts``), unchanged for a task without one."""
    kwargs = dict(env_kwargs or {})
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    recorded_kwargs = getattr(creator, "recorded_kwargs", None)
    return dict(recorded_kwargs(kwargs)) if callable(recorded_kwargs) else kwargs


def save_pretrained(
    model: Any,
    destination: str,
    *,
    env_id: str,
    vec_normalize: VecNormalize | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env_wrapper: Any = None,
    frame_stack: int | None = None,
    hyperparams: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
) -> str:
    """Write ``model``'s actor and the normalisation statistics as an agent folder (``agent.json`` + ``policy.npz``).

    :param model: a trained actor-critic model (our PPO or SB3's PPO / A2C) with an ``MlpPolicy``-style policy.
    :param destination: the agent folder (created; an agent already there is replaced, each file atomically).
    :param env_id: the registered id of the task it plays.
    :param vec_normalize: the training ``VecNormalize`` (default: the model env's one, if any); only its observation
        statistics are kept (reward normalisation does not change actions).
    :param env_kwargs: keyword arguments of ``gym.make`` (no ``render_mode``: the player of the agent chooses it).
    :param env_wrapper: rl-zoo3's ``env_wrapper`` value of the config (allow-listed class paths).
    :param frame_stack: rl-zoo3's ``frame_stack`` value, if the run stacked frames (at most
        :data:`~sb3_ppo_ext.validation.MAX_FRAME_STACK`).
    :param hyperparams: the config the agent was trained with (kept for provenance, as JSON).
    :param provenance: seed, steps, score, wall clock, command... (kept as JSON).
    :returns: ``destination``.
    """
    gym.spec(env_id)  # raises for an unknown id
    agent_file = os.path.join(destination, AGENT_FILE)
    check_agent_env_kwargs(env_kwargs or {}, where=agent_file)
    check_frame_stack(f"{agent_file}: frame_stack", frame_stack)
    if vec_normalize is None and model.get_env() is not None:
        vec_normalize = unwrap_vec_normalize(model.get_env())
    normalization = None
    if vec_normalize is not None and vec_normalize.norm_obs:
        if isinstance(vec_normalize.obs_rms, dict):
            raise ValueError("cannot ship Dict-observation statistics as plain data yet")
        normalization = {
            "mean": vec_normalize.obs_rms.mean.tolist(),
            "var": vec_normalize.obs_rms.var.tolist(),
            "epsilon": float(vec_normalize.epsilon),
            "clip_obs": float(vec_normalize.clip_obs),
        }
    wrappers = wrapper_list(env_wrapper)
    for item in wrappers:
        resolve_wrapper(next(iter(item)), where=agent_file)
    weights = {
        name: tensor.detach().cpu().to(th.float32).numpy() if tensor.is_floating_point() else tensor.cpu().numpy()
        for name, tensor in model.policy.state_dict().items()
        if not name.startswith(CRITIC_PREFIXES)
    }
    agent = {
        "format_version": FORMAT_VERSION,
        "env_id": env_id,
        "env_kwargs": recorded_env_kwargs(env_id, env_kwargs),
        "env_wrapper": wrappers,
        "frame_stack": frame_stack,
        "policy": _policy_alias(model),
        "policy_kwargs": policy_kwargs_to_data(dict(model.policy_kwargs)),
        "use_sde": bool(getattr(model, "use_sde", False)),
        "observation_space": space_to_data(model.observation_space),
        "action_space": space_to_data(model.action_space),
        "normalization": normalization,
        "hyperparams": json.loads(json.dumps(hyperparams or {}, default=str)),
        "provenance": json.loads(json.dumps(provenance or {}, default=str)),
    }
    os.makedirs(destination, exist_ok=True)
    # Each file is replaced atomically (never half-written); the weights first, so a new folder becomes an agent
    # (has agent.json) only once its weights are there.
    with atomic_write(os.path.join(destination, WEIGHTS_FILE)) as stream:
        np.savez_compressed(stream, **weights)
    with atomic_write(agent_file, "w") as stream:
        json.dump(agent, stream, indent=1)
        stream.write("\n")
    return destination


def add_provenance(folder: str, entries: dict[str, Any]) -> dict[str, Any]:
    """Add ``entries`` to the provenance in an agent folder's ``agent.json`` (rewritten atomically); returns it."""
    folder, agent = read_agent(folder)
    agent["provenance"].update(json.loads(json.dumps(entries, default=str)))
    with atomic_write(os.path.join(folder, AGENT_FILE), "w") as stream:
        json.dump(agent, stream, indent=1)
        stream.write("\n")
    return agent["provenance"]

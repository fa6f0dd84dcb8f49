"""Loading an agent folder: a model holding the agent's actor and the env it plays, unpickling nothing."""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack, VecNormalize

from sb3_ppo_ext.plain_data import policy_kwargs_from_data, same_space, space_from_data
from sb3_ppo_ext.ppo import PPO
from sb3_ppo_ext.pretrained.format import (
    AGENT_FILE,
    CRITIC_PREFIXES,
    WEIGHTS_FILE,
    check_agent_task,
    read_agent,
    resolve_wrapper,
)
from sb3_ppo_ext.safe_loading import check_finite_tensors, check_zip_sizes, npz_headers


def make_pretrained_env(
    agent: dict[str, Any],
    *,
    n_envs: int = 1,
    seed: int | None = None,
    render_mode: str | None = None,
    where: str = AGENT_FILE,
) -> VecEnv:
    """The vectorised env an agent plays: its task, wrappers, frame stack and frozen observation normalisation.

    :param agent: the parsed ``agent.json`` (:func:`~sb3_ppo_ext.pretrained.format.read_agent`).
    :param where: the ``agent.json`` it was read from, used in messages.
    :raises ValueError: naming ``where``, for a task that is not installed, does not take the agent's ``env_kwargs``
        (:func:`~sb3_ppo_ext.pretrained.format.check_agent_task`) or cannot be built with them and its wrappers, and
        for normalisation statistics of another shape than its observations.
    """
    check_agent_task(agent, where=where)
    wrappers = [(resolve_wrapper(path, where=where), kwargs) for item in agent["env_wrapper"] for path, kwargs in item.items()]

    def wrap(env: gym.Env) -> gym.Env:
        for wrapper, kwargs in wrappers:
            env = wrapper(env, **kwargs)
        return env

    env_kwargs = dict(agent["env_kwargs"])
    if render_mode is not None:
        env_kwargs["render_mode"] = render_mode
    try:
        env = make_vec_env(
            agent["env_id"], n_envs=n_envs, seed=seed, env_kwargs=env_kwargs, wrapper_class=wrap if wrappers else None
        )
    except (TypeError, ValueError, ImportError) as error:  # what the task or a wrapper refuses as it is built
        raise ValueError(
            f"{where}: its task {agent['env_id']!r} cannot be built with its env_kwargs {agent['env_kwargs']} and "
            f"env_wrapper {agent['env_wrapper']}: {error}"
        ) from error
    if agent.get("frame_stack"):
        env = VecFrameStack(env, int(agent["frame_stack"]))
    statistics = agent.get("normalization")
    if statistics is not None:
        env = VecNormalize(
            env,
            training=False,
            norm_obs=True,
            norm_reward=False,
            clip_obs=statistics["clip_obs"],
            epsilon=statistics["epsilon"],
        )
        obs_rms = cast(RunningMeanStd, env.obs_rms)  # one for the whole observation: agents ship Box observations
        obs_rms.mean = np.array(statistics["mean"], dtype=np.float64)
        obs_rms.var = np.array(statistics["var"], dtype=np.float64)
        if obs_rms.mean.shape != env.observation_space.shape:
            env.close()
            raise ValueError(
                f"{where}: its normalisation statistics have shape {obs_rms.mean.shape}, the env's "
                f"observations {env.observation_space.shape}"
            )
    return env


def load_pretrained(
    env_id_or_folder: str,
    *,
    n_envs: int = 1,
    seed: int | None = None,
    render_mode: str | None = None,
    device: str = "cpu",
) -> tuple[Any, VecEnv]:
    """Load a shipped agent (or an agent folder) and a matching env, unpickling nothing.

    :param env_id_or_folder: an env id with a shipped agent (see
        :func:`~sb3_ppo_ext.pretrained.format.list_pretrained`) or an agent folder.
    :param n_envs: parallel envs of the returned ``VecEnv``.
    :param seed: seed of the envs.
    :param render_mode: ``render_mode`` of the envs (``"rgb_array"``, ``"human"``).
    :param device: torch device of the model.
    :returns: ``(model, env)``: an ``sb3_ppo_ext.PPO`` holding the agent's actor (its critic is untrained) and the
        ``VecEnv`` with the agent's wrappers and frozen observation normalisation (``training=False``).
    :raises ValueError: for an unknown agent, or when the installed task's spaces differ from the agent's.
    """
    folder, agent = read_agent(env_id_or_folder)
    agent_file, weights_file = os.path.join(folder, AGENT_FILE), os.path.join(folder, WEIGHTS_FILE)
    # Everything read from the folder is checked before the env and the policy are built.
    headers = read_weight_headers(weights_file)
    agent_spaces = {name: space_from_data(agent[name], where=agent_file) for name in ("observation_space", "action_space")}
    policy_kwargs = policy_kwargs_from_data(agent["policy_kwargs"], where=agent_file)
    env = make_pretrained_env(agent, n_envs=n_envs, seed=seed, render_mode=render_mode, where=agent_file)
    for name, space in agent_spaces.items():
        if not same_space(getattr(env, name), space):
            env.close()
            raise ValueError(
                f"{agent_file}: the {name} of {agent['env_id']} ({getattr(env, name)}) is not the agent's "
                f"({space}): the task changed since the agent was trained, or env_id names another task"
            )
    model = PPO(
        agent["policy"],
        env,
        use_sde=agent["use_sde"],
        policy_kwargs=policy_kwargs,
        n_steps=8,
        batch_size=8 * n_envs,
        device=device,
    )
    try:
        state = read_policy_weights(weights_file, headers, model.policy.state_dict())
    except ValueError:
        env.close()
        raise
    model.policy.load_state_dict(state, strict=False)
    model.policy.set_training_mode(False)
    return model, env


#: Largest ``policy.npz``: the weights of the largest policy ``net_arch`` allows (MAX_HIDDEN_WEIGHTS float32 weights
#: between the hidden layers, 256 MB) with room for its input and output layers.
MAX_WEIGHTS_FILE_BYTES = 512 << 20


def read_weight_headers(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of every array of an agent's ``policy.npz``, read from the ``.npy`` headers
    (:func:`~sb3_ppo_ext.safe_loading.zips.npz_headers`) once the zip's entries are found within their
    declared sizes (:func:`~sb3_ppo_ext.safe_loading.zips.check_zip_sizes`): nothing is inflated beyond a header.

    :raises ValueError: naming the file, for a zip bomb or a damaged, truncated or non-zip file.
    """
    if not os.path.isfile(path) or os.path.getsize(path) > MAX_WEIGHTS_FILE_BYTES:
        raise ValueError(
            f"{path} must be a regular file of at most {MAX_WEIGHTS_FILE_BYTES} bytes (MAX_WEIGHTS_FILE_BYTES), the "
            "policy's weights as numpy.savez writes them"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            check_zip_sizes(archive, path, nested=())
            return npz_headers(archive, path)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(f"{path} is not a readable weights file ({type(error).__name__}: {error})") from None


def read_policy_weights(
    path: str, headers: Mapping[str, tuple[tuple[int, ...], np.dtype]], expected: Mapping[str, th.Tensor]
) -> dict[str, th.Tensor]:
    """The actor's weights in an agent's ``policy.npz``, checked before and after they are read.

    Before: on the headers (:func:`read_weight_headers`), each array a parameter of the policy (``expected``) of its
    shape, in floating point, and every parameter of the actor present (the critic's, left out when shipping, may be
    missing): nothing larger than the policy built from ``agent.json`` is read. After: every value finite
    (:func:`~sb3_ppo_ext.safe_loading.models.check_finite_tensors`).

    :param path: the ``policy.npz``.
    :param headers: its arrays' shapes and dtypes, from :func:`read_weight_headers`.
    :param expected: the state dict of the policy the weights are for (names and shapes).
    :raises ValueError: naming the file and the array: unknown, misshapen, missing, unreadable or non-finite.
    """
    for name, (shape, dtype) in headers.items():
        if name not in expected:
            raise ValueError(f"{path}: its array {name!r} is not a parameter of the policy described by {AGENT_FILE}")
        wanted = tuple(expected[name].shape)
        if shape != wanted or dtype.kind != "f":
            raise ValueError(
                f"{path}: its array {name!r} is {dtype}{shape}, the policy's parameter is a float array of shape {wanted}"
            )
    missing = [name for name in expected if name not in headers and not name.startswith(CRITIC_PREFIXES)]
    if missing:
        raise ValueError(f"{path} lacks the policy's parameters {missing}")
    try:
        with np.load(path, allow_pickle=False) as weights:
            state = {name: th.as_tensor(weights[name]) for name in headers}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(f"{path} is not a readable weights file ({type(error).__name__}: {error})") from None
    check_finite_tensors(state, where=path)
    return state

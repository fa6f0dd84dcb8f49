"""Trained agents that ship with the package: saved and loaded as plain data, so that loading one runs no pickle.

An agent is a folder (``sb3_ppo_ext/trained_agents/<env id with "/" as "-">/`` for the shipped ones) with

- ``agent.json``: the task (env id, ``env_kwargs``, wrappers as allow-listed class paths), the policy (class name,
  keyword arguments as plain data, observation and action spaces), the observation normalisation statistics of the
  training run's ``VecNormalize`` (mean, variance, epsilon, clip), the config it was trained with and where it came
  from (seed, steps, score, wall clock, command);
- ``policy.npz``: the actor's weights as float32 arrays (read with ``numpy.load(allow_pickle=False)``). The critic
  and the optimiser state are left out: playing does not need them. To fine-tune, resume from the run's own
  checkpoint instead.

SB3's zips (``data`` holds cloudpickled spaces and schedules) and ``vecnormalize.pkl`` files can run code when
loaded; these files cannot: JSON and ``allow_pickle=False`` arrays carry data only, and a wrapper or activation
named in ``agent.json`` is resolved through an allow-list. For example::

    from sb3_ppo_ext.pretrained import load_pretrained
    model, env = load_pretrained("sb3_ppo_ext/Walker2D-v0")
    obs = env.reset()
    action, _ = model.predict(obs, deterministic=True)
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecFrameStack, VecNormalize, unwrap_vec_normalize

from sb3_ppo_ext.validation import check_env_id

#: Folder of the shipped agents (package data).
AGENTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trained_agents")
FORMAT_VERSION = 1
AGENT_FILE = "agent.json"
WEIGHTS_FILE = "policy.npz"

#: Policy keyword arguments kept as plain data; anything else in a model's ``policy_kwargs`` cannot be shipped.
_PLAIN_POLICY_KWARGS = frozenset({"net_arch", "log_std_init", "ortho_init", "squash_output", "full_std", "use_expln",
                                  "share_features_extractor", "normalize_images", "activation_fn"})
#: Policy keyword arguments that only matter for training (dropped when shipping).
_TRAINING_POLICY_KWARGS = frozenset({"optimizer_class", "optimizer_kwargs"})
#: State-dict prefixes of the critic (left out of ``policy.npz``).
_CRITIC_PREFIXES = ("value_net.", "mlp_extractor.value_net.", "vf_features_extractor.")


def agent_folder(env_id: str) -> str:
    """The folder of the shipped agent of ``env_id`` (it may not exist)."""
    return os.path.join(AGENTS_DIR, env_id.replace("/", "-"))


def list_pretrained() -> list[str]:
    """The env ids that have a shipped agent."""
    if not os.path.isdir(AGENTS_DIR):
        return []
    found = []
    for name in sorted(os.listdir(AGENTS_DIR)):
        path = os.path.join(AGENTS_DIR, name, AGENT_FILE)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as stream:
                found.append(json.load(stream)["env_id"])
    return found


# --- spaces and policy settings as plain data ------------------------------------------------------------------


def space_to_data(space: spaces.Space) -> dict[str, Any]:
    """A JSON-able description of a Box, Discrete, MultiDiscrete (``start`` only when not all zero) or MultiBinary
    space."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(), "shape": list(space.shape),
                "dtype": str(space.dtype)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        data = {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
        if np.any(space.start != 0):
            data["start"] = space.start.tolist()
        return data
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise ValueError(f"cannot store a {type(space).__name__} space as plain data (Box, Discrete, MultiDiscrete, "
                     f"MultiBinary are supported), got {space}")


def space_from_data(data: dict[str, Any]) -> spaces.Space:
    """The space described by :func:`space_to_data`."""
    kind = data.get("type")
    if kind == "Box":
        return spaces.Box(np.array(data["low"], dtype=data["dtype"]), np.array(data["high"], dtype=data["dtype"]),
                          shape=tuple(data["shape"]), dtype=data["dtype"])
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        start = np.array(data["start"]) if "start" in data else None
        return spaces.MultiDiscrete(np.array(data["nvec"]), start=start)
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    raise ValueError(f"unknown space type {kind!r} in {AGENT_FILE}")


def same_space(first: spaces.Space, second: spaces.Space) -> bool:
    """Same kind, shape, dtype and bounds (``Box.__eq__`` is not reliable for bounds of inf)."""
    return space_to_data(first) == space_to_data(second)


def policy_kwargs_to_data(policy_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Plain data of the policy keyword arguments playing needs (activation as its ``torch.nn`` class name)."""
    from torch import nn

    data = {}
    for key, value in policy_kwargs.items():
        if key in _TRAINING_POLICY_KWARGS:
            continue
        if key not in _PLAIN_POLICY_KWARGS:
            raise ValueError(f"cannot ship a policy with policy_kwargs[{key!r}] as plain data; supported: "
                             f"{sorted(_PLAIN_POLICY_KWARGS)}")
        if key == "activation_fn":
            if not (isinstance(value, type) and issubclass(value, nn.Module) and getattr(nn, value.__name__, None) is value):
                raise ValueError(f"activation_fn must be a torch.nn activation class to be shipped, got {value!r}")
            value = value.__name__
        data[key] = value
    return json.loads(json.dumps(data))  # tuples -> lists; fails here, not when loading, if anything is not JSON


def policy_kwargs_from_data(data: dict[str, Any]) -> dict[str, Any]:
    """The policy keyword arguments of :func:`policy_kwargs_to_data` (the activation looked up in ``torch.nn``)."""
    from torch import nn

    unknown = set(data) - _PLAIN_POLICY_KWARGS
    if unknown:
        raise ValueError(f"unknown policy_kwargs {sorted(unknown)} in {AGENT_FILE}")
    kwargs = dict(data)
    if "activation_fn" in kwargs:
        activation = getattr(nn, str(kwargs["activation_fn"]), None)
        if not (isinstance(activation, type) and issubclass(activation, nn.Module)):
            raise ValueError(f"activation_fn {kwargs['activation_fn']!r} in {AGENT_FILE} is not a torch.nn class")
        kwargs["activation_fn"] = activation
    return kwargs


def _wrapper_list(env_wrapper: Any) -> list[dict[str, dict[str, Any]]]:
    """rl-zoo3's ``env_wrapper`` value (a path, a list of paths or ``{path: kwargs}`` items) as ``[{path: kwargs}]``."""
    if env_wrapper is None:
        return []
    items = env_wrapper if isinstance(env_wrapper, list) else [env_wrapper]
    normalised = []
    for item in items:
        if isinstance(item, str):
            normalised.append({item: {}})
        elif isinstance(item, dict) and len(item) == 1:
            ((path, kwargs),) = item.items()
            normalised.append({str(path): dict(kwargs or {})})
        else:
            raise ValueError(f"env_wrapper items must be class paths or one-key {{path: kwargs}} mappings, got {item!r}")
    return normalised


def _resolve_wrapper(path: str) -> type:
    from sb3_ppo_ext.zoo.safe_eval import resolve_name  # allow-listed classes only (needs the zoo extra)

    wrapper = resolve_name(path)
    if wrapper is None or not (isinstance(wrapper, type) and issubclass(wrapper, gym.Wrapper)):
        raise ValueError(f"env wrapper {path!r} in {AGENT_FILE} is not an allow-listed gymnasium wrapper")
    return wrapper


# --- saving ----------------------------------------------------------------------------------------------------


def _policy_alias(model: Any) -> str:
    """The ``policy_aliases`` name of the model's policy class (``MlpPolicy``...): the only policies we rebuild."""
    for alias, policy_class in getattr(model, "policy_aliases", {}).items():
        if type(model.policy) is policy_class:
            return alias
    raise ValueError(f"cannot ship a {type(model.policy).__name__}: only the algorithm's named policies "
                     f"({sorted(getattr(model, 'policy_aliases', {}))}) are rebuilt from plain data")


def recorded_env_kwargs(env_id: str, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``env_kwargs`` with the task's version-dependent defaults written out, so that the agent keeps playing the
    task it was trained on if a later version changes a default: a locomotion task's ``foot_contacts`` (its
    ``default_foot_contacts`` unless the kwargs choose, directly or through the ``late_foot_contacts`` quirk)."""
    kwargs = dict(env_kwargs or {})
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    default = getattr(creator, "default_foot_contacts", None)
    quirks = kwargs.get("reference_quirks", False)
    late = quirks is True or (not isinstance(quirks, bool) and "late_foot_contacts" in quirks)
    if isinstance(default, str) and "foot_contacts" not in kwargs:
        kwargs["foot_contacts"] = "previous" if late else default
    return kwargs


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
    :param env_kwargs: keyword arguments of ``gym.make``.
    :param env_wrapper: rl-zoo3's ``env_wrapper`` value of the config (allow-listed class paths).
    :param frame_stack: rl-zoo3's ``frame_stack`` value, if the run stacked frames.
    :param hyperparams: the config the agent was trained with (kept for provenance, as JSON).
    :param provenance: seed, steps, score, wall clock, command... (kept as JSON).
    :returns: ``destination``.
    """
    import torch as th

    gym.spec(env_id)  # raises for an unknown id
    if vec_normalize is None and model.get_env() is not None:
        vec_normalize = unwrap_vec_normalize(model.get_env())
    normalization = None
    if vec_normalize is not None and vec_normalize.norm_obs:
        if isinstance(vec_normalize.obs_rms, dict):
            raise ValueError("cannot ship Dict-observation statistics as plain data yet")
        normalization = {"mean": vec_normalize.obs_rms.mean.tolist(), "var": vec_normalize.obs_rms.var.tolist(),
                         "epsilon": float(vec_normalize.epsilon), "clip_obs": float(vec_normalize.clip_obs)}
    wrappers = _wrapper_list(env_wrapper)
    for item in wrappers:
        _resolve_wrapper(next(iter(item)))
    weights = {name: tensor.detach().cpu().to(th.float32).numpy() if tensor.is_floating_point() else tensor.cpu().numpy()
               for name, tensor in model.policy.state_dict().items() if not name.startswith(_CRITIC_PREFIXES)}
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
    from sb3_ppo_ext.callbacks._files import atomic_write

    os.makedirs(destination, exist_ok=True)
    # Each file is replaced atomically (never half-written); the weights first, so a new folder becomes an agent
    # (has agent.json) only once its weights are there.
    with atomic_write(os.path.join(destination, WEIGHTS_FILE)) as stream:
        np.savez_compressed(stream, **weights)
    with atomic_write(os.path.join(destination, AGENT_FILE), "w") as stream:
        json.dump(agent, stream, indent=1)
        stream.write("\n")
    return destination


# --- loading ---------------------------------------------------------------------------------------------------


def read_agent(env_id_or_folder: str) -> tuple[str, dict[str, Any]]:
    """The agent folder and its parsed ``agent.json``, for a shipped env id or an agent folder.

    :raises ValueError: when there is no such agent (naming the env ids that have one).
    """
    folder = env_id_or_folder if os.path.isdir(env_id_or_folder) else agent_folder(env_id_or_folder)
    path = os.path.join(folder, AGENT_FILE)
    if not os.path.isfile(path):
        shipped = ", ".join(list_pretrained()) or "none"
        raise ValueError(f"no pretrained agent for {env_id_or_folder!r} (an env id with a shipped agent or an agent "
                         f"folder with {AGENT_FILE}); shipped agents: {shipped}")
    with open(path, encoding="utf-8") as stream:
        agent = json.load(stream)
    if not isinstance(agent, dict):
        raise ValueError(f"{path}: not a JSON object of agent settings")
    if agent.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {agent.get('format_version')!r}, this version reads {FORMAT_VERSION}")
    check_env_id(agent.get("env_id"), where=path)
    check_normalization(agent.get("normalization"), where=path)
    return folder, agent


def check_normalization(statistics: Any, *, where: str) -> None:
    """Check an agent's frozen observation statistics (``agent.json``'s ``normalization``) before an env uses them:
    ``mean`` and ``var`` finite lists of numbers of one length with ``var >= 0``, ``clip_obs`` and ``epsilon`` finite
    and ``> 0``; ``None`` (no normalisation) passes.

    :raises ValueError: naming the entry and what is wrong with it.
    """
    if statistics is None:
        return
    if not isinstance(statistics, dict):
        raise ValueError(f"{where}: normalization must be an object with mean, var, clip_obs and epsilon, got "
                         f"{type(statistics).__name__}")
    for name in ("clip_obs", "epsilon"):
        value = statistics.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{where}: normalization {name} must be a finite number > 0, got {value!r}")
    arrays = {}
    for name in ("mean", "var"):
        value = statistics.get(name)
        if not isinstance(value, list) or not all(isinstance(item, (int, float)) and not isinstance(item, bool)
                                                  for item in value):
            raise ValueError(f"{where}: normalization {name} must be a list of numbers")
        arrays[name] = np.asarray(value, dtype=np.float64)
        if not np.isfinite(arrays[name]).all():
            raise ValueError(f"{where}: normalization {name} holds a non-finite value (NaN or inf)")
    if arrays["mean"].shape != arrays["var"].shape:
        raise ValueError(f"{where}: normalization mean and var differ in length ({arrays['mean'].size} and "
                         f"{arrays['var'].size})")
    if (arrays["var"] < 0).any():
        raise ValueError(f"{where}: normalization var must be >= 0, got {float(arrays['var'].min())!r}")


def make_pretrained_env(
    agent: dict[str, Any], *, n_envs: int = 1, seed: int | None = None, render_mode: str | None = None,
) -> VecEnv:
    """The vectorised env an agent plays: its task, wrappers, frame stack and frozen observation normalisation."""
    from stable_baselines3.common.env_util import make_vec_env

    wrappers = [(_resolve_wrapper(path), kwargs) for item in agent["env_wrapper"] for path, kwargs in item.items()]

    def wrap(env: gym.Env) -> gym.Env:
        for wrapper, kwargs in wrappers:
            env = wrapper(env, **kwargs)
        return env

    env_kwargs = dict(agent["env_kwargs"])
    if render_mode is not None:
        env_kwargs["render_mode"] = render_mode
    env = make_vec_env(agent["env_id"], n_envs=n_envs, seed=seed, env_kwargs=env_kwargs,
                       wrapper_class=wrap if wrappers else None)
    if agent.get("frame_stack"):
        env = VecFrameStack(env, int(agent["frame_stack"]))
    statistics = agent.get("normalization")
    if statistics is not None:
        env = VecNormalize(env, training=False, norm_obs=True, norm_reward=False, clip_obs=statistics["clip_obs"],
                           epsilon=statistics["epsilon"])
        env.obs_rms.mean = np.array(statistics["mean"], dtype=np.float64)
        env.obs_rms.var = np.array(statistics["var"], dtype=np.float64)
        if env.obs_rms.mean.shape != env.observation_space.shape:
            env.close()
            raise ValueError(f"the agent's normalisation statistics have shape {env.obs_rms.mean.shape}, the env's "
                             f"observations {env.observation_space.shape}")
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

    :param env_id_or_folder: an env id with a shipped agent (see :func:`list_pretrained`) or an agent folder.
    :param n_envs: parallel envs of the returned ``VecEnv``.
    :param seed: seed of the envs.
    :param render_mode: ``render_mode`` of the envs (``"rgb_array"``, ``"human"``).
    :param device: torch device of the model.
    :returns: ``(model, env)``: an ``sb3_ppo_ext.PPO`` holding the agent's actor (its critic is untrained) and the
        ``VecEnv`` with the agent's wrappers and frozen observation normalisation (``training=False``).
    :raises ValueError: for an unknown agent, or when the installed task's spaces differ from the agent's.
    """
    import torch as th

    from sb3_ppo_ext.ppo import PPO

    folder, agent = read_agent(env_id_or_folder)
    env = make_pretrained_env(agent, n_envs=n_envs, seed=seed, render_mode=render_mode)
    for name in ("observation_space", "action_space"):
        if not same_space(getattr(env, name), space_from_data(agent[name])):
            env.close()
            raise ValueError(f"the {name} of {agent['env_id']} ({getattr(env, name)}) is not the agent's "
                             f"({space_from_data(agent[name])}): the task changed since the agent was trained")
    model = PPO(agent["policy"], env, use_sde=agent["use_sde"], policy_kwargs=policy_kwargs_from_data(agent["policy_kwargs"]),
                n_steps=8, batch_size=8 * n_envs, device=device)
    with np.load(os.path.join(folder, WEIGHTS_FILE), allow_pickle=False) as weights:
        state = {name: th.as_tensor(weights[name]) for name in weights.files}
    missing, unexpected = model.policy.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.startswith(_CRITIC_PREFIXES)]
    if missing or unexpected:
        env.close()
        raise ValueError(f"{folder}: the weights do not fit the policy (missing {missing}, unexpected {unexpected})")
    model.policy.set_training_mode(False)
    return model, env



def _reset_x(env: VecEnv, index: int) -> float | None:
    while isinstance(env, VecEnvWrapper):  # SB3's wrappers (VecNormalize, VecFrameStack ...) keep empty reset_infos
        env = env.venv
    infos = getattr(env, "reset_infos", None)
    if infos is None or index >= len(infos) or "x_position" not in infos[index]:
        return None
    return float(infos[index]["x_position"])


def play(
    model: Any,
    env: VecEnv,
    n_steps: int,
    *,
    deterministic: bool = True,
    n_episodes: int | None = None,
    on_frame: Callable[[], None] | None = None,
) -> list[dict[str, float]]:
    """Run ``model`` on ``env`` for ``n_steps`` steps (or until ``n_episodes`` episodes have finished) and return the
    episodes that finished.

    Each episode: ``return`` (the task's own reward, before any normalisation), ``length``, ``truncated`` (ended by
    the time limit, not by a fall or a crash), ``success`` where the task reports ``info["is_success"]``,
    ``crash_reason`` where it reports a non-empty ``info["crash_reason"]`` (the RocketLander), ``flags_reached``
    where it reports ``info["flags_reached"]`` (the flag runs) and, for
    tasks that report ``info["x_position"]`` (the locomotion tasks), ``distance`` (torso x at the end minus at the reset, metres) and ``speed`` (distance over the episode's
    simulated time, m/s, where the env has a ``dt``).

    :param on_frame: called after the reset and after every step (rendering, frame capture).
    """
    if not isinstance(n_steps, (int, np.integer)) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int, got {n_steps!r}")
    observation = env.reset()
    if on_frame is not None:
        on_frame()
    try:
        step_seconds = [float(dt) for dt in env.get_attr("dt")]
    except AttributeError:
        step_seconds = [float("nan")] * env.num_envs
    returns = np.zeros(env.num_envs)
    lengths = np.zeros(env.num_envs, dtype=int)
    start_x = [_reset_x(env, index) for index in range(env.num_envs)]
    episodes = []
    for _ in range(n_steps):
        action, _ = model.predict(observation, deterministic=deterministic)
        observation, reward, done, infos = env.step(action)
        if on_frame is not None:
            on_frame()
        returns += env.get_original_reward() if isinstance(env, VecNormalize) else reward
        lengths += 1
        for index in np.flatnonzero(done):
            info = infos[index]
            episode = {"return": float(returns[index]), "length": int(lengths[index]),
                       "truncated": bool(info.get("TimeLimit.truncated", False))}
            if "is_success" in info:
                episode["success"] = bool(info["is_success"])
            if info.get("crash_reason"):
                episode["crash_reason"] = str(info["crash_reason"])
            if "flags_reached" in info:
                episode["flags_reached"] = int(info["flags_reached"])
            if start_x[index] is not None and "x_position" in info:
                episode["distance"] = float(info["x_position"]) - start_x[index]
                episode["speed"] = episode["distance"] / (lengths[index] * step_seconds[index])
            episodes.append(episode)
            returns[index], lengths[index] = 0.0, 0
            start_x[index] = _reset_x(env, index)
        if n_episodes is not None and len(episodes) >= n_episodes:
            return episodes[:n_episodes]
    return episodes


# --- packing a zoo run ------------------------------------------------------------------------------------------


def find_zoo_run(folder: str) -> str:
    """The rl-zoo3 run folder (``<algo>/<env>_<n>``, holding ``<env>/config.yml``) that is ``folder`` or lies under it
    (the newest one, e.g. inside a ``benchmarks/grid.py`` cell folder).

    :raises ValueError: when there is none.
    """
    if glob.glob(os.path.join(glob.escape(folder), "*", "config.yml")):
        return folder
    runs = sorted(glob.glob(os.path.join(glob.escape(folder), "*", "*", "*", "config.yml")), key=os.path.getmtime)
    if not runs:
        raise ValueError(f"no rl-zoo3 run (a folder with <env>/config.yml) in {folder!r}")
    return os.path.dirname(os.path.dirname(runs[-1]))


def save_pretrained_from_run(
    folder: str, destination: str, *, model: str = "final", provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Pack the final model of an rl-zoo3 run (or its ``"best"`` one, or a checkpoint) as an agent folder (see
    :func:`save_pretrained`), with the statistics saved with that model.

    **This unpickles the run's model zip and ``vecnormalize.pkl``: use it only on runs you made.** Needs the ``zoo``
    extra (the run's algorithm is looked up in rl-zoo3's registry).

    :param folder: an rl-zoo3 run folder or a folder above one (see :func:`find_zoo_run`).
    :param destination: the agent folder to write.
    :param model: ``"final"`` (``<env>.zip``), ``"best"`` (``best_model.zip``) or ``"checkpoint:<steps>"``
        (``rl_model_<steps>_steps.zip``, the ``--save-freq`` checkpoint with its own statistics).
    :param provenance: extra provenance entries (kept with the run's own: algorithm, seed, steps, last evaluation).
    :returns: the provenance written.
    """
    import pickle

    from rl_zoo3.utils import ALGOS

    from sb3_ppo_ext.callbacks.checkpoint import list_checkpoints, model_checkpoint_path
    from sb3_ppo_ext.zoo import register_algorithm
    from sb3_ppo_ext.zoo.hyperparams import check_run_folder
    from sb3_ppo_ext.zoo.loading import played_model_statistics

    checkpoint = re.fullmatch(r"checkpoint:(\d+)", model)
    if model not in ("final", "best") and checkpoint is None:
        raise ValueError(f"model must be 'final', 'best' or 'checkpoint:<steps>', got {model!r}")
    run = find_zoo_run(folder)
    (params,) = [os.path.dirname(path) for path in glob.glob(os.path.join(glob.escape(run), "*", "config.yml"))]
    settings = check_run_folder(params)
    run_args, config = settings.arguments, settings.config
    if checkpoint is not None:
        model_path = model_checkpoint_path(run, "rl_model", int(checkpoint[1]))
        if not os.path.isfile(model_path):
            saved = [saved.num_timesteps for saved in list_checkpoints(run)]
            raise ValueError(f"no checkpoint {model_path}; the run has checkpoints at {saved or 'no steps'}")
    else:
        model_path = os.path.join(run, "best_model.zip" if model == "best" else f"{os.path.basename(params)}.zip")
    register_algorithm()
    trained = ALGOS[run_args["algo"]].load(model_path, device="cpu")
    statistics = None
    statistics_file = played_model_statistics(run, os.path.basename(params), load_best=model == "best",
                                              load_checkpoint=None if checkpoint is None else checkpoint[1])
    if os.path.isfile(statistics_file):
        with open(statistics_file, "rb") as stream:
            statistics = pickle.load(stream)
    facts: dict[str, Any] = {"algo": run_args["algo"], "seed": run_args["seed"], "timesteps": int(trained.num_timesteps),
                             "model": model, "training_vec_env": run_args.get("vec_env"),
                             "torch_threads": run_args.get("num_threads"),
                             "hyperparams_overrides": run_args.get("hyperparams")}
    if os.path.isfile(os.path.join(run, "evaluations.npz")):
        with np.load(os.path.join(run, "evaluations.npz")) as evaluations:
            # The run's last evaluation up to the packed model (a checkpoint's: the last one at or before its steps).
            last = len(evaluations["timesteps"]) - 1
            if checkpoint is not None:
                last = int(np.searchsorted(evaluations["timesteps"], trained.num_timesteps, side="right")) - 1
            if last >= 0:
                facts["final_eval_mean"] = float(evaluations["results"][last].mean())
                facts["final_eval_timesteps"] = int(evaluations["timesteps"][last])
    facts.update(provenance or {})
    save_pretrained(trained, destination, env_id=run_args["env"], vec_normalize=statistics,
                    env_kwargs=config.get("env_kwargs"), env_wrapper=config.get("env_wrapper"),
                    frame_stack=config.get("frame_stack"), hyperparams=config, provenance=facts)
    return facts


def add_provenance(folder: str, entries: dict[str, Any]) -> dict[str, Any]:
    """Add ``entries`` to the provenance in an agent folder's ``agent.json`` (rewritten atomically); returns it."""
    from sb3_ppo_ext.callbacks._files import atomic_write

    folder, agent = read_agent(folder)
    agent["provenance"].update(json.loads(json.dumps(entries, default=str)))
    with atomic_write(os.path.join(folder, AGENT_FILE), "w") as stream:
        json.dump(agent, stream, indent=1)
        stream.write("\n")
    return agent["provenance"]


def evaluate_agent(folder: str, n_episodes: int, seed: int = 0) -> dict[str, Any]:
    """Play ``n_episodes`` deterministic episodes of an agent folder from env seed ``seed`` (one env, so the
    episodes and their order are fixed by the seed) and summarise them (:func:`summarise_episodes`)."""
    model, env = load_pretrained(folder, n_envs=1, seed=seed)
    try:
        episodes = play(model, env, 1 << 62, n_episodes=n_episodes)
    finally:
        env.close()
    return {**summarise_episodes(episodes), "seed": seed}


def summarise_episodes(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and standard deviation of the return of episodes from :func:`play`, their mean length, how many ended
    before the time limit, and where the task reports them: landings (``successes``) with how the other episodes ended
    (``failures``: crash reason, or ``time_limit``, -> count, most frequent first; ``failed_episodes``: the index of
    each such episode in play order -> its reason, so that runs evaluated on the same starts can be compared start by
    start), the mean speed, and for the flag runs the mean number of flags reached and how many episodes reached
    at least one (``with_a_flag``)."""
    returns = [episode["return"] for episode in episodes]
    summary: dict[str, Any] = {"episodes": len(episodes), "mean_return": float(np.mean(returns)),
                               "std_return": float(np.std(returns)),
                               "mean_length": float(np.mean([episode["length"] for episode in episodes])),
                               "ended_early": sum(not episode["truncated"] for episode in episodes)}
    if "success" in episodes[0]:
        summary["successes"] = sum(episode["success"] for episode in episodes)
        failed = {index: episode.get("crash_reason", "time_limit" if episode["truncated"] else "other")
                  for index, episode in enumerate(episodes) if not episode["success"]}
        summary["failures"] = dict(Counter(failed.values()).most_common())
        summary["failed_episodes"] = failed
    if "speed" in episodes[0]:
        summary["mean_speed_m_s"] = float(np.mean([episode["speed"] for episode in episodes]))
    if "flags_reached" in episodes[0]:
        summary["mean_flags"] = float(np.mean([episode["flags_reached"] for episode in episodes]))
        summary["with_a_flag"] = sum(episode["flags_reached"] >= 1 for episode in episodes)
    return summary

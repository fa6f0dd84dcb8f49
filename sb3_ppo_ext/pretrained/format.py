"""The format of an agent folder (``agent.json`` and ``policy.npz``), where the shipped ones lie, and the checks an
``agent.json`` passes before anything uses it."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import gymnasium as gym
import numpy as np

from sb3_ppo_ext.allow_list import resolve_name
from sb3_ppo_ext.validation import check_env_id

#: Folder of the shipped agents (package data).
AGENTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "trained_agents")
FORMAT_VERSION = 1
AGENT_FILE = "agent.json"
WEIGHTS_FILE = "policy.npz"
#: State-dict prefixes of the critic (left out of ``policy.npz``).
CRITIC_PREFIXES = ("value_net.", "mlp_extractor.value_net.", "vf_features_extractor.")


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


def wrapper_list(env_wrapper: Any) -> list[dict[str, dict[str, Any]]]:
    """rl-zoo3's ``env_wrapper`` value (a path, a list of paths or ``{path: kwargs}`` items) as ``[{path: kwargs}]``."""
    if env_wrapper is None:
        return []
    items = env_wrapper if isinstance(env_wrapper, list) else [env_wrapper]
    normalised: list[dict[str, dict[str, Any]]] = []
    for item in items:
        if isinstance(item, str):
            normalised.append({item: {}})
        elif isinstance(item, dict) and len(item) == 1:
            ((path, kwargs),) = item.items()
            normalised.append({str(path): dict(kwargs or {})})
        else:
            raise ValueError(f"env_wrapper items must be class paths or one-key {{path: kwargs}} mappings, got {item!r}")
    return normalised


def resolve_wrapper(path: str) -> type:
    """The allow-listed gymnasium wrapper class named ``path`` in an ``agent.json``.

    :raises ValueError: for any other name.
    """
    wrapper = resolve_name(path)
    if wrapper is None or not (isinstance(wrapper, type) and issubclass(wrapper, gym.Wrapper)):
        raise ValueError(f"env wrapper {path!r} in {AGENT_FILE} is not an allow-listed gymnasium wrapper")
    return wrapper


def read_agent(env_id_or_folder: str) -> tuple[str, dict[str, Any]]:
    """The agent folder and its parsed ``agent.json``, for a shipped env id or an agent folder.

    :raises ValueError: when there is no such agent (naming the env ids that have one).
    """
    folder = env_id_or_folder if os.path.isdir(env_id_or_folder) else agent_folder(env_id_or_folder)
    path = os.path.join(folder, AGENT_FILE)
    if not os.path.isfile(path):
        shipped = ", ".join(list_pretrained()) or "none"
        raise ValueError(
            f"no pretrained agent for {env_id_or_folder!r} (an env id with a shipped agent or an agent "
            f"folder with {AGENT_FILE}); shipped agents: {shipped}"
        )
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
        raise ValueError(
            f"{where}: normalization must be an object with mean, var, clip_obs and epsilon, got {type(statistics).__name__}"
        )
    for name in ("clip_obs", "epsilon"):
        value = statistics.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{where}: normalization {name} must be a finite number > 0, got {value!r}")
    arrays = {}
    for name in ("mean", "var"):
        value = statistics.get(name)
        if not isinstance(value, list) or not all(
            isinstance(item, (int, float)) and not isinstance(item, bool) for item in value
        ):
            raise ValueError(f"{where}: normalization {name} must be a list of numbers")
        arrays[name] = np.asarray(value, dtype=np.float64)
        if not np.isfinite(arrays[name]).all():
            raise ValueError(f"{where}: normalization {name} holds a non-finite value (NaN or inf)")
    if arrays["mean"].shape != arrays["var"].shape:
        raise ValueError(
            f"{where}: normalization mean and var differ in length ({arrays['mean'].size} and {arrays['var'].size})"
        )
    if (arrays["var"] < 0).any():
        raise ValueError(f"{where}: normalization var must be >= 0, got {float(arrays['var'].min())!r}")

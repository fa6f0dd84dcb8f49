"""The format of an agent folder (``agent.json`` and ``policy.npz``), where the shipped ones lie, and the checks an
``agent.json`` passes before anything uses it."""

from __future__ import annotations

import difflib
import inspect
import json
import math
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from sb3_ppo_ext.allow_list import resolve_name
from sb3_ppo_ext.validation import check_bool, check_env_id, check_frame_stack, check_kwargs

#: Folder of the shipped agents (package data).
AGENTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "trained_agents")
FORMAT_VERSION = 1
AGENT_FILE = "agent.json"
WEIGHTS_FILE = "policy.npz"
#: State-dict prefixes of the critic (left out of ``policy.npz``).
CRITIC_PREFIXES = ("value_net.", "mlp_extractor.value_net.", "vf_features_extractor.")
#: Largest ``agent.json`` read (the shipped ones have 1.4 to 5.6 kB; the normalisation statistics and space bounds of
#: an observation of 100,000 numbers take about 6 MB); a larger file is refused before it is parsed.
MAX_AGENT_FILE_BYTES = 8 << 20
#: The entries every ``agent.json`` holds, with the JSON type each must have.
_AGENT_ENTRY_TYPES: dict[str, type | tuple[type, ...]] = {
    "env_kwargs": dict,
    "env_wrapper": list,
    "policy": str,
    "policy_kwargs": dict,
    "observation_space": dict,
    "action_space": dict,
}
#: Every top-level key of an ``agent.json`` (what :func:`~sb3_ppo_ext.pretrained.saving.save_pretrained` writes);
#: any other is refused, so that a misspelt one (``normalisation``) is not silently ignored.
AGENT_KEYS = frozenset(
    {
        "format_version",
        "env_id",
        *_AGENT_ENTRY_TYPES,
        "frame_stack",
        "use_sde",
        "normalization",
        "hyperparams",
        "provenance",
    }
)
#: The keyword arguments ``gymnasium.make`` takes itself rather than passing them to the task.
MAKE_KEYWORDS: tuple[str, ...] = tuple(
    name
    for name, parameter in inspect.signature(gym.make).parameters.items()
    if name != "id" and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
)


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


def resolve_wrapper(path: str, *, where: str = AGENT_FILE) -> type:
    """The allow-listed gymnasium wrapper class named ``path`` in an ``agent.json``.

    :param where: the file, used in the message.
    :raises ValueError: for any other name.
    """
    wrapper = resolve_name(path) if isinstance(path, str) else None
    if wrapper is None or not (isinstance(wrapper, type) and issubclass(wrapper, gym.Wrapper)):
        raise ValueError(f"env wrapper {path!r} in {where} is not an allow-listed gymnasium wrapper")
    return wrapper


def read_agent(env_id_or_folder: str) -> tuple[str, dict[str, Any]]:
    """The agent folder and its parsed ``agent.json``, for a shipped env id or an agent folder.

    The file is checked before anything uses it: at most :data:`MAX_AGENT_FILE_BYTES` bytes of JSON (a truncated or
    deeply nested file is refused by name), no key outside :data:`AGENT_KEYS`, its ``env_id``
    (:func:`~sb3_ppo_ext.validation.check_env_id`), the types of its entries, ``use_sde`` a boolean, ``frame_stack``
    ``None`` or at most :data:`~sb3_ppo_ext.validation.MAX_FRAME_STACK` (the bound of config blocks), ``env_kwargs``
    without a ``render_mode`` (the player chooses it), ``env_wrapper`` a list of allow-listed wrappers with keyword
    arguments they take (:func:`check_env_wrapper`), and the normalisation statistics (:func:`check_normalization`).
    Whether the installed task takes ``env_kwargs`` is checked when its env is built (:func:`check_agent_task`).

    :raises ValueError: when there is no such agent (naming the env ids that have one), or naming the file, the entry
        and the rule it breaks.
    """
    folder = env_id_or_folder if os.path.isdir(env_id_or_folder) else agent_folder(env_id_or_folder)
    path = os.path.join(folder, AGENT_FILE)
    if not os.path.isfile(path):
        shipped = ", ".join(list_pretrained()) or "none"
        raise ValueError(
            f"no pretrained agent for {env_id_or_folder!r} (an env id with a shipped agent or an agent "
            f"folder with {AGENT_FILE}); shipped agents: {shipped}"
        )
    agent = _read_json(path)
    if not isinstance(agent, dict):
        raise ValueError(f"{path}: not a JSON object of agent settings")
    for key in agent:
        if key not in AGENT_KEYS:
            raise ValueError(f"{path}: unknown key {key!r}{_did_you_mean(key, AGENT_KEYS)}; the keys are {sorted(AGENT_KEYS)}")
    if agent.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {agent.get('format_version')!r}, this version reads {FORMAT_VERSION}")
    check_env_id(agent.get("env_id"), where=path)
    for name, kind in _AGENT_ENTRY_TYPES.items():
        if not isinstance(agent.get(name), kind):
            expected = "an object" if kind is dict else "a list" if kind is list else "a string"
            raise ValueError(f"{path}: {name} must be {expected}, got {agent.get(name)!r}")
    check_bool(f"{path}: use_sde", agent.get("use_sde"))
    check_frame_stack(f"{path}: frame_stack", agent.get("frame_stack"))
    check_agent_env_kwargs(agent["env_kwargs"], where=path)
    check_env_wrapper(agent["env_wrapper"], where=path)
    check_normalization(agent.get("normalization"), where=path)
    return folder, agent


def _read_json(path: str) -> Any:
    """The JSON document of ``path``, refused by name beyond :data:`MAX_AGENT_FILE_BYTES` bytes, when truncated or
    not JSON, and when nested deeper than Python's parser recurses."""
    with open(path, "rb") as stream:
        content = stream.read(MAX_AGENT_FILE_BYTES + 1)
    if len(content) > MAX_AGENT_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_AGENT_FILE_BYTES} bytes (MAX_AGENT_FILE_BYTES); refused unread")
    try:
        return json.loads(content.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); a truncated or damaged file?") from None
    except RecursionError:
        raise ValueError(f"{path} nests JSON arrays / objects deeper than Python's parser can read; refused") from None


def check_agent_env_kwargs(env_kwargs: Any, *, where: str) -> None:
    """Check an agent's ``env_kwargs``: keyword arguments (:func:`~sb3_ppo_ext.validation.check_kwargs`) without a
    ``render_mode``, which the player of the agent chooses (an agent saved with ``render_mode="human"`` would open a
    window wherever it is loaded).

    :raises ValueError: naming ``where`` and the entry.
    """
    check_kwargs(f"{where}: env_kwargs", env_kwargs)
    if isinstance(env_kwargs, dict) and "render_mode" in env_kwargs:
        raise ValueError(
            f"{where}: env_kwargs must not hold render_mode (got {env_kwargs['render_mode']!r}): the player of an agent "
            "chooses it (load_pretrained's render_mode, the commands' rendering options)"
        )


def check_env_wrapper(env_wrapper: Any, *, where: str) -> None:
    """Check an agent's ``env_wrapper``: a list of one-key ``{class path: keyword arguments}`` objects, each class an
    allow-listed gymnasium wrapper (:func:`resolve_wrapper`) and each set of arguments a mapping of names the class
    takes.

    :raises ValueError: naming ``where`` and the item.
    """
    if not isinstance(env_wrapper, list):
        raise ValueError(
            f"{where}: env_wrapper must be a list of {{class path: keyword arguments}} objects, got {env_wrapper!r}"
        )
    for item in env_wrapper:
        if not (isinstance(item, dict) and len(item) == 1):
            raise ValueError(
                f"{where}: env_wrapper items must be one-key {{class path: keyword arguments}} objects, got {item!r}"
            )
        ((path, kwargs),) = item.items()
        wrapper = resolve_wrapper(path, where=where)
        check_kwargs(f"{where}: env_wrapper {path} arguments", kwargs)
        accepted = accepted_keywords(wrapper)
        if accepted is not None:
            check_keywords(f"{where}: env_wrapper {path}", kwargs, [name for name in accepted if name != "env"])


def check_agent_task(agent: Mapping[str, Any], *, where: str) -> None:
    """Check that the installed task of an agent (its registered ``env_id``) can be loaded and takes every key of its
    ``env_kwargs`` (or ``gymnasium.make`` does: :data:`MAKE_KEYWORDS`), before any env is built: an ``agent.json``
    edited to name another task, or to pass it an argument it does not have, is refused by name. A task whose
    signature takes any keyword (``**kwargs``) is checked only when it is built.

    :param agent: the parsed ``agent.json`` (checked by :func:`read_agent`).
    :param where: the file, used in the message.
    :raises ValueError: naming ``where``, the key and the nearest argument the task takes.
    """
    env_id = agent["env_id"]
    try:
        entry_point = gym.spec(env_id).entry_point
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    except (gym.error.Error, ImportError) as error:  # not registered here, or a missing optional dependency
        raise ValueError(f"{where}: env_id {env_id!r} cannot be made here: {error}") from None
    accepted = accepted_keywords(creator) if callable(creator) else None
    if accepted is not None:
        tasks_own = [name for name in accepted if name != "render_mode"]  # the player chooses the render mode
        check_keywords(f"{where}: env_kwargs of {env_id}", agent["env_kwargs"], [*tasks_own, *MAKE_KEYWORDS])


def accepted_keywords(creator: Callable[..., Any]) -> list[str] | None:
    """The names of the keyword arguments ``creator`` (a class or a function) takes, from its signature; ``None``
    where it takes any (``**kwargs``) or Python cannot read its signature."""
    try:
        parameters = inspect.signature(creator).parameters
    except (TypeError, ValueError):
        return None
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return None
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [name for name, parameter in parameters.items() if parameter.kind in keyword_kinds]


def check_keywords(what: str, kwargs: Mapping[str, Any], accepted: Collection[str]) -> None:
    """Check that every key of ``kwargs`` is one of ``accepted``.

    :param what: what takes the arguments and where they were read, used in the message.
    :raises ValueError: naming ``what``, the first other key and the nearest accepted one.
    """
    for key in kwargs:
        if key not in accepted:
            takes = ", ".join(sorted(accepted)) or "none"
            raise ValueError(f"{what}: no argument {key!r}{_did_you_mean(key, accepted)}; it takes {takes}")


def _did_you_mean(key: str, known: Collection[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name nearest to ``key``, or nothing if none is near."""
    near = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


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

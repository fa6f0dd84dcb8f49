"""The names that config values and agent files may use: activations, optimisers and allow-listed classes.

rl-zoo3 passes config strings to ``eval()`` and imports any class path a config names. Here a name is looked up in
an allow-list instead (:func:`resolve_name`): torch activations and optimisers under their usual aliases, the short
names rl-zoo3's own configs use, and the public callbacks, wrappers, policies and buffers of a fixed list of
modules (imported by name, :func:`importlib.import_module`, only when a name points into one of them: this module
imports none of them itself, so it sits below our callbacks and wrappers). A name outside the list imports nothing.
The config parser (:mod:`sb3_ppo_ext.zoo.config.expressions`), the config checks and the loader of shipped agents
(:mod:`sb3_ppo_ext.pretrained`) all resolve names here.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn, optim

#: torch.nn activation functions and torch.optim optimisers, reachable as ``nn.X``, ``th.nn.X``, ``torch.nn.X``,
#: ``th.optim.X`` and ``torch.optim.X`` (the names rl-zoo3's configs use).
_ACTIVATIONS = (
    "ReLU",
    "Tanh",
    "ELU",
    "LeakyReLU",
    "SELU",
    "GELU",
    "SiLU",
    "Mish",
    "Sigmoid",
    "Softplus",
    "Hardtanh",
    "Hardswish",
    "CELU",
    "PReLU",
    "ReLU6",
    "Identity",
)
_OPTIMISERS = ("Adam", "AdamW", "SGD", "RMSprop", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta")

#: The names a config value may use, as refusals quote them.
NAME_RULE = "activations nn.ReLU/nn.Tanh/..., optimisers th.optim.Adam/... and allow-listed callback/wrapper import paths"

#: Modules whose public classes may be named by import path for ``callback``, ``env_wrapper``,
#: ``vec_env_wrapper`` and ``policy`` (each entry: the module, the base class its classes must subclass).
_CLASS_MODULES: tuple[tuple[str, str], ...] = (
    ("sb3_ppo_ext.callbacks", "stable_baselines3.common.callbacks.BaseCallback"),
    ("stable_baselines3.common.callbacks", "stable_baselines3.common.callbacks.BaseCallback"),
    ("rl_zoo3.callbacks", "stable_baselines3.common.callbacks.BaseCallback"),
    ("sb3_ppo_ext.wrappers", "gymnasium.Wrapper"),
    ("rl_zoo3.wrappers", "gymnasium.Wrapper"),
    ("gymnasium.wrappers", "gymnasium.Wrapper"),
    ("stable_baselines3.common.atari_wrappers", "gymnasium.Wrapper"),
    ("sb3_contrib.common.wrappers", "gymnasium.Wrapper"),
    ("stable_baselines3.common.vec_env", "stable_baselines3.common.vec_env.VecEnvWrapper"),
    ("stable_baselines3.common.policies", "stable_baselines3.common.policies.BasePolicy"),
    ("stable_baselines3.common.buffers", "stable_baselines3.common.buffers.BaseBuffer"),
    ("stable_baselines3.her", "stable_baselines3.common.buffers.BaseBuffer"),
    ("stable_baselines3.common.sb2_compat.rmsprop_tf_like", "torch.optim.Optimizer"),
    ("stable_baselines3.common.torch_layers", "stable_baselines3.common.torch_layers.BaseFeaturesExtractor"),
)


def _import_attr(dotted: str) -> Any:
    module_name, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


@functools.cache
def _public_subclasses(module_name: str, base_path: str) -> dict[str, type]:
    """Public classes of ``module_name`` that subclass ``base_path``, keyed by every import path that reaches them."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            return {}  # an optional package that is not installed
        raise
    base = _import_attr(base_path)
    names = getattr(module, "__all__", None) or [name for name in vars(module) if not name.startswith("_")]
    found: dict[str, type] = {}
    for name in names:
        try:
            value = getattr(module, name, None)
        except ImportError:  # a lazily loaded member whose optional dependency is missing (gymnasium's jax wrappers)
            continue
        if inspect.isclass(value) and issubclass(value, base):
            found[f"{module_name}.{name}"] = value
            found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


@functools.cache
def _short_names() -> dict[str, Any]:
    """Activations and optimisers under their usual aliases and their defining module's path (``torch.nn.modules.
    activation.ReLU``: how a run's ``config.yml`` saves a class), and the short names rl-zoo3's configs use."""
    names: dict[str, Any] = {}
    for name in _ACTIVATIONS:
        for prefix in ("nn", "th.nn", "torch.nn"):
            names[f"{prefix}.{name}"] = getattr(nn, name)
    for name in _OPTIMISERS:
        for prefix in ("th.optim", "torch.optim", "optim"):
            names[f"{prefix}.{name}"] = getattr(optim, name)
    for value in list(names.values()):
        names[f"{value.__module__}.{value.__qualname__}"] = value
    names["RMSpropTFLike"] = _import_attr("stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike")
    names["HerReplayBuffer"] = _import_attr("stable_baselines3.HerReplayBuffer")
    return names


def resolve_name(dotted: str) -> Any | None:
    """The allow-listed object named ``dotted`` (``nn.ReLU``, ``sb3_ppo_ext.wrappers.FrameSkip``), else ``None``.

    Only the allow-listed module that the path points into is imported, so a name outside the list imports nothing.
    """
    short = _short_names()
    if dotted in short:
        return short[dotted]
    module_part = dotted.rpartition(".")[0]
    for module_name, base_path in _CLASS_MODULES:
        if module_part == module_name or module_part.startswith(module_name + "."):
            found = _public_subclasses(module_name, base_path).get(dotted)
            if found is not None:
                return found
    return None


def allowed_names() -> Mapping[str, Any]:
    """Every name a config expression or class path may use, mapped to the object it stands for.

    Activations and optimisers under their usual aliases (``nn.ReLU``, ``th.nn.ReLU``, ``torch.nn.ReLU``,
    ``th.optim.Adam``, ...), the short names rl-zoo3's own configs use (``RMSpropTFLike``, ``HerReplayBuffer``),
    and the public callbacks, wrappers, policies and buffers of the modules in ``_CLASS_MODULES`` under their
    import paths (``sb3_ppo_ext.wrappers.FrameSkip``). Imports all of those modules.
    """
    names = dict(_short_names())
    for module_name, base_path in _CLASS_MODULES:
        names.update(_public_subclasses(module_name, base_path))
    return names


def is_allowed_import_path(path: str) -> bool:
    """Whether ``path`` (e.g. ``"sb3_ppo_ext.wrappers.FrameSkip"``) names an allow-listed class."""
    return resolve_name(path) is not None


def nearest_short_name(name: str) -> str | None:
    """The activation or optimiser alias closest to ``name`` ignoring case (``nn.Relu`` -> ``nn.ReLU``), if any is close."""
    by_lower = {short.lower(): short for short in _short_names()}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.8)
    return by_lower[near[0]] if near else None

"""Spaces and policy settings as plain data (JSON-able dicts and lists), and back.

Shipped agents (:mod:`sb3_ppo_ext.pretrained`) store their spaces and ``policy_kwargs`` this way, and the loader of
model zips (:mod:`sb3_ppo_ext.safe_loading`) rebuilds the spaces SB3 pickled through the same description, so that
neither needs a pickle.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from gymnasium import spaces
from torch import nn

from sb3_ppo_ext.allow_list import resolve_name
from sb3_ppo_ext.validation import check_policy_kwargs

#: Policy keyword arguments kept as plain data; anything else in a model's ``policy_kwargs`` cannot be shipped.
PLAIN_POLICY_KWARGS = frozenset(
    {
        "net_arch",
        "log_std_init",
        "ortho_init",
        "squash_output",
        "full_std",
        "use_expln",
        "share_features_extractor",
        "normalize_images",
        "activation_fn",
    }
)
#: Policy keyword arguments that only matter for training (dropped when shipping).
TRAINING_POLICY_KWARGS = frozenset({"optimizer_class", "optimizer_kwargs"})


def space_to_data(space: spaces.Space) -> dict[str, Any]:
    """A JSON-able description of a Box, Discrete, MultiDiscrete (``start`` only when not all zero) or MultiBinary
    space.

    :raises ValueError: for any other kind of space.
    """
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": space.low.tolist(),
            "high": space.high.tolist(),
            "shape": list(space.shape),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        data = {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
        if np.any(space.start != 0):
            data["start"] = space.start.tolist()
        return data
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise ValueError(
        f"cannot store a {type(space).__name__} space as plain data (Box, Discrete, MultiDiscrete, "
        f"MultiBinary are supported), got {space}"
    )


def space_from_data(data: Any, *, where: str = "the plain data") -> spaces.Space:
    """The space described by :func:`space_to_data`.

    A ``Box`` must list its bounds in full, of its ``shape`` (so that the space costs what its description does: a
    shape of 10**9 with one bound is refused, not broadcast).

    :param data: the description.
    :param where: the file it was read from, used in the message.
    :raises ValueError: naming ``where`` for an unknown space type or a malformed description.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    try:
        if kind == "Box":
            if not isinstance(data["dtype"], str) or np.dtype(data["dtype"]).kind not in "fiub":
                raise ValueError(f"its dtype must name a numeric numpy dtype, got {data['dtype']!r}")
            dtype = np.dtype(data["dtype"])
            low, high = np.array(data["low"], dtype=dtype), np.array(data["high"], dtype=dtype)
            shape = tuple(data["shape"])
            if low.shape != shape or high.shape != shape:
                raise ValueError(f"its bounds have shapes {low.shape} and {high.shape}, not its shape {shape}")
            return spaces.Box(low, high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            return spaces.Discrete(_integer(data["n"]), start=_integer(data.get("start", 0)))
        if kind == "MultiDiscrete":
            start = np.array(data["start"], dtype=np.int64) if "start" in data else None
            return spaces.MultiDiscrete(np.array(data["nvec"], dtype=np.int64), start=start)
        if kind == "MultiBinary":
            n = data["n"]
            return spaces.MultiBinary(_integer(n) if not isinstance(n, list) else [_integer(item) for item in n])
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"the {kind} space in {where} is malformed ({type(error).__name__}: {error})") from None
    raise ValueError(f"unknown space type {kind!r} in {where}")


def _integer(value: Any) -> int:
    """``value`` as an ``int`` when it is an integer number (not a bool, not a float): else ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def same_space(first: spaces.Space, second: spaces.Space) -> bool:
    """Same kind, shape, dtype and bounds (``Box.__eq__`` is not reliable for bounds of inf)."""
    return space_to_data(first) == space_to_data(second)


def policy_kwargs_to_data(policy_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Plain data of the policy keyword arguments playing needs (activation as its ``torch.nn`` class name).

    :raises ValueError: for a keyword argument outside :data:`PLAIN_POLICY_KWARGS` and
        :data:`TRAINING_POLICY_KWARGS` (the latter are dropped), or an activation that is not an allow-listed
        ``torch.nn`` activation (:mod:`sb3_ppo_ext.allow_list`).
    """
    data = {}
    for key, value in policy_kwargs.items():
        if key in TRAINING_POLICY_KWARGS:
            continue
        if key not in PLAIN_POLICY_KWARGS:
            raise ValueError(
                f"cannot ship a policy with policy_kwargs[{key!r}] as plain data; supported: {sorted(PLAIN_POLICY_KWARGS)}"
            )
        if key == "activation_fn":
            name = value.__name__ if isinstance(value, type) and issubclass(value, nn.Module) else None
            if name is None or resolve_name(f"torch.nn.{name}") is not value:
                raise ValueError(
                    f"activation_fn must be an allow-listed torch.nn activation class to be shipped, got {value!r}"
                )
            value = name
        data[key] = value
    return json.loads(json.dumps(data))  # tuples -> lists; fails here, not when loading, if anything is not JSON


def policy_kwargs_from_data(data: dict[str, Any], *, where: str = "the plain data") -> dict[str, Any]:
    """The policy keyword arguments of :func:`policy_kwargs_to_data` (the activation looked up among the allow-listed
    ``torch.nn`` activations, :mod:`sb3_ppo_ext.allow_list`), checked by the rules of any ``policy_kwargs``
    (:func:`~sb3_ppo_ext.validation.check_policy_kwargs`: booleans, a finite ``log_std_init``, ``net_arch`` within
    the layer limits).

    :param data: the plain data.
    :param where: the file it was read from, used in the messages.
    :raises ValueError: for unknown keys, an activation name that is not an allow-listed ``torch.nn`` activation, or
        a value that breaks its rule.
    """
    if not isinstance(data, dict):
        raise ValueError(f"policy_kwargs in {where} must be an object, got {data!r}")
    unknown = set(data) - PLAIN_POLICY_KWARGS
    if unknown:
        raise ValueError(f"unknown policy_kwargs {sorted(unknown)} in {where}")
    kwargs = dict(data)
    if "activation_fn" in kwargs:
        activation = resolve_name(f"torch.nn.{kwargs['activation_fn']}")
        if not (isinstance(activation, type) and issubclass(activation, nn.Module)):
            raise ValueError(
                f"activation_fn {kwargs['activation_fn']!r} in {where} is not an allow-listed torch.nn activation "
                "(ReLU, Tanh, ELU, ...)"
            )
        kwargs["activation_fn"] = activation
    check_policy_kwargs(kwargs, name=f"{where}: policy_kwargs")
    return kwargs

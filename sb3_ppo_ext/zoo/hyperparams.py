"""Checks and safe pre-processing of one zoo config block, before rl-zoo3 sees it.

rl-zoo3 forwards every key it does not know to the algorithm constructor (a typo surfaces as a ``TypeError``
deep inside), ``eval()``s some string values and imports any class named by ``callback`` / ``env_wrapper`` /
``vec_env_wrapper`` / ``policy``. :func:`check_block_keys` and :func:`preprocess_block` close those doors:
unknown keys are an error naming the nearest valid key, expression strings go through
:func:`~sb3_ppo_ext.zoo.safe_eval.parse_expression`, and class paths must be on its allow-list.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from rl_zoo3.utils import SimpleLinearSchedule

from sb3_ppo_ext.zoo.safe_eval import is_allowed_import_path, parse_expression

#: Keys rl-zoo3 consumes itself (ExperimentManager._preprocess_hyperparams / _preprocess_action_noise).
ZOO_KEYS: frozenset[str] = frozenset(
    {
        "n_envs",
        "n_timesteps",
        "normalize",
        "frame_stack",
        "env_wrapper",
        "vec_env_wrapper",
        "callback",
        "env_kwargs",
        "monitor_kwargs",
        "noise_type",
        "noise_std",
    }
)

#: Constructor parameters that rl-zoo3 sets itself from the command line, so a config must not set them.
MANAGER_SET_PARAMETERS: frozenset[str] = frozenset(
    {
        "self",
        "env",
        "tensorboard_log",
        "seed",
        "verbose",
        "device",
        "_init_setup_model",
    }
)

#: String values that rl-zoo3 passes to ``eval()``.
EXPRESSION_KEYS: tuple[str, ...] = (
    "policy_kwargs",
    "normalize",
    "monitor_kwargs",
    "replay_buffer_class",
    "replay_buffer_kwargs",
)

#: Keys whose value names classes that rl-zoo3 imports (a path, a list of paths, or ``{path: kwargs}`` items).
CLASS_PATH_KEYS: tuple[str, ...] = ("callback", "env_wrapper", "vec_env_wrapper")

#: Keys rl-zoo3 turns into schedules when given as strings (``lin_<initial value>``).
SCHEDULE_KEYS: tuple[str, ...] = ("learning_rate", "clip_range", "clip_range_vf", "delta_std")
#: Our schedule keys, which rl-zoo3 does not know: :func:`preprocess_block` turns them into schedules as rl-zoo3
#: does its own.
OWN_SCHEDULE_KEYS: tuple[str, ...] = ("vf_learning_rate",)
_SCHEDULE_PATTERN = re.compile(r"^lin_([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$")


def valid_keys(algorithm: type) -> frozenset[str]:
    """Keys a config block may hold for ``algorithm``: its constructor's parameters plus the zoo-only keys."""
    parameters = inspect.signature(algorithm.__init__).parameters
    return frozenset(parameters) - MANAGER_SET_PARAMETERS | ZOO_KEYS


def check_block_keys(block: Mapping[str, Any], allowed: Iterable[str], *, where: str) -> None:
    """Raise ``ValueError`` for the first key of ``block`` that is not in ``allowed``, naming the nearest valid key.

    :param block: a config block (env id -> settings) after YAML merges.
    :param allowed: the valid keys (see :func:`valid_keys`).
    :param where: where the block comes from, e.g. ``"'CartPole-v1' in ppo_ext.yml"``.
    """
    allowed_sorted = sorted(allowed)
    for key in block:
        if key in allowed_sorted:
            continue
        near = difflib.get_close_matches(str(key), allowed_sorted, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(
            f"unknown key {key!r} in {where}: a config key must be a parameter of the algorithm's constructor or "
            f"one of the zoo keys {sorted(ZOO_KEYS)}{hint}"
        )


def check_schedule(key: str, value: Any) -> None:
    """Check a schedule setting: a number, or a string ``lin_<number>`` (linear decay from that number to 0)."""
    if isinstance(value, str) and not _SCHEDULE_PATTERN.match(value.strip()):
        raise ValueError(f"{key} must be a number or a linear schedule 'lin_<initial value>' (e.g. lin_3e-4), got {value!r}")


def as_schedule(value: Any) -> Any:
    """rl-zoo3's reading of a schedule string: ``lin_<x>`` -> linear decay from x to 0; anything else (a number,
    ``None``) unchanged. Check it with :func:`check_schedule` first."""
    if isinstance(value, str):
        return SimpleLinearSchedule(float(value.strip()[len("lin_") :]))
    return value


def check_class_paths(key: str, value: Any) -> None:
    """Check that every class named under ``key`` (a path, a list of paths, ``{path: kwargs}`` items) is allow-listed."""
    if value is None:
        return
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict):
            if len(item) != 1:
                raise ValueError(f"{key}: each item must be a class path or a one-key mapping {{path: kwargs}}, got {item!r}")
            ((path, kwargs),) = item.items()
            if kwargs is not None and not isinstance(kwargs, dict):
                raise ValueError(f"{key}: the keyword arguments of {path!r} must be a mapping, got {kwargs!r}")
        else:
            path = item
        if not isinstance(path, str) or not is_allowed_import_path(path):
            raise ValueError(
                f"{key}: {path!r} is not an allow-listed class import path (our callbacks and wrappers, SB3 / rl-zoo3 / "
                f"gymnasium callbacks and wrappers); see sb3_ppo_ext.zoo.safe_eval.allowed_names()"
            )


def preprocess_block(block: dict[str, Any], *, where: str) -> dict[str, Any]:
    """Return a copy of ``block`` with every string rl-zoo3 would ``eval()`` replaced by its safely parsed value.

    Also checks schedules and class paths, so that nothing in the result makes rl-zoo3 run code from the config.
    ``normalize: true`` stays a boolean; ``normalize: "dict(norm_reward=False)"`` becomes a dict.

    :param block: one config block (after merges and command-line overrides).
    :param where: where the block comes from, used in error messages.
    """
    parsed = dict(block)
    for key in EXPRESSION_KEYS:
        if isinstance(parsed.get(key), str):
            parsed[key] = parse_expression(parsed[key], what=f"{key} in {where}")
    for key in SCHEDULE_KEYS:
        if key in parsed:
            check_schedule(key, parsed[key])
    for key in OWN_SCHEDULE_KEYS:
        if key in parsed:
            check_schedule(key, parsed[key])
            parsed[key] = as_schedule(parsed[key])
    for key in CLASS_PATH_KEYS:
        if key in parsed:
            check_class_paths(key, parsed[key])
    policy = parsed.get("policy")
    if isinstance(policy, str) and "." in policy and not is_allowed_import_path(policy):
        raise ValueError(f"policy: {policy!r} is not an allow-listed policy class import path")
    return parsed


class _RunFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader plus the one Python tag plain rl-zoo3 writes into run files (``OrderedDict``)."""


def _construct_ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> OrderedDict:
    if not isinstance(node, yaml.SequenceNode):
        raise yaml.constructor.ConstructorError(None, None, "expected the arguments of OrderedDict", node.start_mark)
    arguments = loader.construct_sequence(node, deep=True)
    return OrderedDict(arguments[0] if arguments else ())


_RunFileLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _construct_ordered_dict)


def load_run_yaml(path: str) -> Any:
    """Read a run's ``config.yml`` / ``args.yml`` without running code.

    rl-zoo3 reads these with PyYAML's unsafe loader, which builds any Python object a tag names. Here only plain
    YAML and ``!!python/object/apply:collections.OrderedDict`` (what plain rl-zoo3 writes) are accepted.

    :raises ValueError: for any other Python tag or invalid YAML.
    """
    with open(path) as file:
        try:
            return yaml.load(file, Loader=_RunFileLoader)  # a SafeLoader subclass: no arbitrary tags
        except yaml.YAMLError as error:
            raise ValueError(f"{path} is not plain YAML (Python tags other than OrderedDict are refused): {error}") from None


def check_run_folder(stats_path: str) -> None:
    """Check the files rl-zoo3's enjoy / record_video read from a run (``<run>/<env>/``) before they read them.

    ``config.yml`` and ``args.yml`` must pass :func:`load_run_yaml`, and a string ``normalize`` in ``config.yml``
    (which rl-zoo3 ``eval``s) must pass the restricted parser. Missing files are fine (rl-zoo3 reports them).

    :param stats_path: the run's parameter folder, ``logs/<algo>/<env>_<n>/<env>``.
    """
    for name in ("config.yml", "args.yml"):
        path = os.path.join(stats_path, name)
        if not os.path.isfile(path):
            continue
        content = load_run_yaml(path)
        if name == "config.yml" and isinstance(content, Mapping) and isinstance(content.get("normalize"), str):
            parse_expression(content["normalize"], what=f"normalize in {path}")

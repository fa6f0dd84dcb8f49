"""Checks and safe pre-processing of one zoo config block, before rl-zoo3 sees it.

rl-zoo3 forwards every key it does not know to the algorithm constructor (a typo surfaces as a ``TypeError``
deep inside), ``eval()``s some string values and imports any class named by ``callback`` / ``env_wrapper`` /
``vec_env_wrapper`` / ``policy``. :func:`check_block_keys` and :func:`preprocess_block` close those doors:
unknown keys are an error naming the nearest valid key, expression strings go through
:func:`~sb3_ppo_ext.zoo.config.expressions.parse_expression`, and class paths must be on its allow-list.
:func:`check_config_document` and :func:`check_block_values` refuse a config of the wrong shape and settings of the
wrong type or of absurd sizes (``n_envs: 100000000000`` would fill the memory before anything else fails).
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

from rl_zoo3.utils import SimpleLinearSchedule

from sb3_ppo_ext.allow_list import is_allowed_import_path, resolve_name
from sb3_ppo_ext.validation import (
    MAX_N_EPOCHS,
    MAX_ROLLOUT_TRANSITIONS,
    check_frame_stack,
    check_int,
    check_kwargs,
    check_number,
    check_policy_kwargs,
    check_vecnormalize_kwargs,
)
from sb3_ppo_ext.validation import check_schedule as check_schedule_setting
from sb3_ppo_ext.zoo.config.expressions import parse_expression

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
#: A number written in plain decimal or scientific notation: ``3e-4``, ``1E6``, ``-0.5``, ``.5``, ``+2``.
_NUMBER_PATTERN = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
#: Zoo keys whose value is a number.
ZOO_NUMBER_KEYS: tuple[str, ...] = ("n_envs", "n_timesteps", "frame_stack", "noise_std")
_NUMBER_KEYS_OF_ANY_ALGORITHM = frozenset(SCHEDULE_KEYS + OWN_SCHEDULE_KEYS + ZOO_NUMBER_KEYS)

# Size limits of a config block (:func:`check_block_values`): far above any real run, far below what exhausts a
# machine's memory before training starts. Those the algorithm checks too (MAX_ROLLOUT_TRANSITIONS, MAX_N_EPOCHS,
# MAX_LAYER_WIDTH, MAX_HIDDEN_LAYERS) come from :mod:`sb3_ppo_ext.validation`.
#: Most parallel envs (rl-zoo3 builds them all at once; its own configs use at most 64).
MAX_N_ENVS = 4096
#: Largest replay buffer, ``buffer_size`` (rl-zoo3's own configs use at most 1,000,000).
MAX_BUFFER_SIZE = 10_000_000
#: Largest training budget, ``n_timesteps``.
MAX_N_TIMESTEPS = 10**12
#: Keys whose value, when set, must be a mapping (``None`` leaves rl-zoo3's default).
MAPPING_KEYS: tuple[str, ...] = ("env_kwargs", "monitor_kwargs", "policy_kwargs", "replay_buffer_kwargs")


def check_config_document(document: Any, *, where: str) -> dict[str, dict[str, Any]]:
    """Check the shape of a loaded zoo config: env ids (strings) mapped to blocks (mappings) of hyperparameters.

    rl-zoo3 assumes this shape; an empty file, a top-level list or a block that is a number would end in an
    ``AttributeError`` / ``TypeError`` inside it.

    :param document: the loaded YAML document.
    :param where: the config file, used in the messages.
    :return: ``document``, unchanged.
    :raises ValueError: naming the file (and the key) that breaks the shape.
    """
    shape = "a zoo config maps env ids to blocks of hyperparameters (CartPole-v1: {policy: MlpPolicy, ...})"
    if document is None:
        raise ValueError(f"{where} is empty: {shape}")
    if not isinstance(document, dict):
        raise ValueError(f"{where} holds a {type(document).__name__} at the top level: {shape}")
    for key, block in document.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}: the top-level key {key!r} is not an env id string: {shape}")
        if not isinstance(block, dict):
            raise ValueError(f"{where}: the {key!r} block must be a mapping of hyperparameters, got {block!r}: {shape}")
    return document


def number_from_text(value: Any) -> Any:
    """The number a string in plain decimal or scientific notation spells (an ``int`` when written without a dot and
    integral: ``"1e6"`` -> 1000000, ``"64"`` -> 64; else a ``float``: ``"1e-3"`` -> 0.001); any other value unchanged.

    PyYAML reads YAML 1.1, whose floats need a dot: ``learning_rate: 1e-3`` gives the string ``"1e-3"`` (rl-zoo3's
    own configs write ``!!float 1e-3``); a user means the number.
    """
    if not isinstance(value, str) or not _NUMBER_PATTERN.fullmatch(value.strip()):
        return value
    text = value.strip()
    if text.lstrip("+-").isdigit():
        return int(text)
    number = float(text)
    return int(number) if "." not in text and number.is_integer() else number


def number_keys(algorithm: type[Any]) -> frozenset[str]:
    """The keys of a config block for ``algorithm`` whose value is a number: the constructor's parameters annotated
    with ``float`` or ``int`` (alone, or with a schedule or ``None``; not those that also take a string, such as
    SAC's ``ent_coef: "auto"``), the schedule keys and :data:`ZOO_NUMBER_KEYS`."""
    parameters = inspect.signature(algorithm.__init__).parameters
    annotations = {name: str(parameter.annotation) for name, parameter in parameters.items()}
    numeric = {
        name
        for name, annotation in annotations.items()
        if re.search(r"\b(float|int)\b", annotation) and not re.search(r"\bstr\b", annotation)
    }
    return frozenset(numeric - MANAGER_SET_PARAMETERS) | _NUMBER_KEYS_OF_ANY_ALGORITHM


def _checked(check: Any, *args: Any, where: str, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)`` with ``where`` added to the message of its ``ValueError``."""
    try:
        return check(*args, **kwargs)
    except ValueError as error:
        raise ValueError(f"{error} (in {where})") from None


def check_block_values(block: Mapping[str, Any], *, where: str) -> None:
    """Check the types and sizes of the settings rl-zoo3 itself consumes, before it builds anything from them: the
    counts (``n_envs``, ``n_timesteps``, ``n_steps * n_envs``, ``batch_size``, ``buffer_size``, ``n_epochs``,
    ``frame_stack``) numbers within the limits their messages name (an integral float such as ``1e6`` is an
    integer), the :data:`MAPPING_KEYS` mappings, ``normalize``
    (:func:`~sb3_ppo_ext.validation.check_vecnormalize_kwargs`) and ``policy_kwargs``
    (:func:`~sb3_ppo_ext.validation.check_policy_kwargs`). Run it on the block after :func:`preprocess_block`, which
    turns expression strings into values.

    :param block: one config block, after merges, command-line overrides and :func:`preprocess_block`.
    :param where: where the block comes from, used in the messages.
    :raises ValueError: naming the setting, its value and the rule (and the limit's name).
    """
    n_envs = _checked(check_int, "n_envs", block.get("n_envs", 1), minimum=1, where=where)
    if n_envs > MAX_N_ENVS:
        raise ValueError(f"n_envs must be <= {MAX_N_ENVS} (MAX_N_ENVS), got {block['n_envs']!r} (in {where})")
    if "n_timesteps" in block:
        _checked(check_number, "n_timesteps", block["n_timesteps"], low=1, high=MAX_N_TIMESTEPS, where=where)
    if "n_steps" in block:
        n_steps = _checked(check_int, "n_steps", block["n_steps"], minimum=1, where=where)
        if n_steps * n_envs > MAX_ROLLOUT_TRANSITIONS:
            raise ValueError(
                f"n_steps * n_envs must be <= {MAX_ROLLOUT_TRANSITIONS} transitions per rollout "
                f"(MAX_ROLLOUT_TRANSITIONS), got {n_steps} * {n_envs} = {n_steps * n_envs} (in {where})"
            )
    for name, maximum, limit in (
        ("batch_size", MAX_ROLLOUT_TRANSITIONS, "MAX_ROLLOUT_TRANSITIONS"),
        ("buffer_size", MAX_BUFFER_SIZE, "MAX_BUFFER_SIZE"),
        ("n_epochs", MAX_N_EPOCHS, "MAX_N_EPOCHS"),
    ):
        if name in block and _checked(check_int, name, block[name], minimum=1, where=where) > maximum:
            raise ValueError(f"{name} must be <= {maximum} ({limit}), got {block[name]!r} (in {where})")
    _checked(check_frame_stack, "frame_stack", block.get("frame_stack"), where=where)  # None: rl-zoo3 stacks nothing
    for name in MAPPING_KEYS:
        if block.get(name) is not None and not isinstance(block[name], dict):
            raise ValueError(f"{name} must be a mapping (or a dict(...) string), got {block[name]!r} (in {where})")
        _checked(check_kwargs, name, block.get(name), where=where)  # keys: argument names
    if "normalize" in block and not isinstance(block["normalize"], (bool, dict)):
        raise ValueError(
            f"normalize must be true, false or a mapping of VecNormalize arguments, got {block['normalize']!r} (in {where})"
        )
    if isinstance(block.get("normalize"), dict):
        _checked(check_vecnormalize_kwargs, block["normalize"], where=where)
    _checked(check_policy_kwargs, block.get("policy_kwargs"), where=where)


def check_policy_arguments(block: Mapping[str, Any], algorithm: type, *, where: str) -> None:
    """Check the block's ``policy_kwargs`` against the policy it names (an alias of ``algorithm`` such as
    ``MlpPolicy``, or an allow-listed class path): the policy must take every key, and the types of
    :func:`~sb3_ppo_ext.validation.check_policy_kwargs` hold. A policy that cannot be resolved here is left to
    rl-zoo3, which reports it.

    :param block: one config block, after :func:`preprocess_block`.
    :param algorithm: the algorithm class the block is for.
    :param where: where the block comes from, used in the messages.
    """
    policy = block.get("policy")
    policy_class = None
    if isinstance(policy, str):
        policy_class = getattr(algorithm, "policy_aliases", {}).get(policy) or resolve_name(policy)
    elif inspect.isclass(policy):
        policy_class = policy
    if inspect.isclass(policy_class):
        _checked(check_policy_kwargs, block.get("policy_kwargs"), policy_class=policy_class, where=where)


def valid_keys(algorithm: type[Any]) -> frozenset[str]:
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


def is_schedule_text(key: str, text: str) -> bool:
    """Whether ``text`` is a linear schedule (``lin_<number>``) given to a schedule key: on the command line such a
    value is taken as the string it is, as a YAML config takes it, without the quotes a Python literal needs."""
    return key in SCHEDULE_KEYS + OWN_SCHEDULE_KEYS and _SCHEDULE_PATTERN.match(text.strip()) is not None


def check_schedule(key: str, value: Any, *, where: str = "the config") -> None:
    """Check a schedule setting: a number, or a string ``lin_<number>`` (linear decay from that number to 0), by the
    rule the algorithm checks it with (:func:`sb3_ppo_ext.validation.check_schedule`: > 0 at the start of training,
    >= 0 at its end, within the setting's upper limit), so that ``clip_range: 0`` or ``lin_-0.2`` (which rl-zoo3 turns
    into schedules the algorithm cannot check as numbers) is refused here. ``None`` is left to rl-zoo3 and the
    algorithm (``vf_learning_rate: null`` is valid).

    :param where: where the block comes from, used in the message.
    """
    if value is None:
        return
    if isinstance(value, str) and not _SCHEDULE_PATTERN.match(value.strip()):
        raise ValueError(f"{key} must be a number or a linear schedule 'lin_<initial value>' (e.g. lin_3e-4), got {value!r}")
    _checked(check_schedule_setting, key, as_schedule(value), where=where)


def as_schedule(value: Any) -> Any:
    """rl-zoo3's reading of a schedule string: ``lin_<x>`` -> linear decay from x to 0; anything else (a number,
    ``None``) unchanged. Check it with :func:`check_schedule` first."""
    if isinstance(value, str):
        return SimpleLinearSchedule(float(value.strip()[len("lin_") :]))
    return value


#: The positional arguments rl-zoo3 passes to each class of a class-path key before its keyword arguments: the env
#: to a wrapper, the VecEnv to a VecEnv wrapper, nothing to a callback.
CLASS_PATH_POSITIONALS: Mapping[str, tuple[str, ...]] = {
    "callback": (),
    "env_wrapper": ("env",),
    "vec_env_wrapper": ("venv",),
}


def check_class_paths(key: str, value: Any) -> None:
    """Check the classes named under ``key`` (a path, a list of paths, ``{path: kwargs}`` items) before rl-zoo3 builds
    them: each allow-listed, its keyword arguments a mapping of argument names holding plain values (not classes or
    functions), which the class takes (matched against its signature, with what rl-zoo3 passes first,
    :data:`CLASS_PATH_POSITIONALS`: a missing required argument or an unknown one is named here)."""
    if value is None:
        return
    if not isinstance(value, (str, list, dict)):
        raise ValueError(f"{key} must be a class path, a {{path: kwargs}} mapping or a list of them, got {value!r}")
    for item in value if isinstance(value, list) else [value]:
        kwargs: Any = None
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
                f"gymnasium callbacks and wrappers); see sb3_ppo_ext.allow_list.allowed_names()"
            )
        _check_class_arguments(key, path, dict(kwargs or {}))


def _check_class_arguments(key: str, path: str, kwargs: dict[str, Any]) -> None:
    """Check ``kwargs`` against the signature of the allow-listed class ``path`` named under ``key``."""
    check_kwargs(f"{key}: the arguments of {path}", kwargs)
    for name, argument in kwargs.items():
        if callable(argument):
            raise ValueError(
                f"{key}: the argument {name} of {path} must be a plain value (a number, a string, a list...), got {argument!r}"
            )
    positionals = CLASS_PATH_POSITIONALS.get(key, ())
    try:
        signature = inspect.signature(cast(type, resolve_name(path)))  # allow-listed: a class
    except (TypeError, ValueError):
        return  # a class whose signature Python cannot read: rl-zoo3 reports what it refuses
    try:
        signature.bind(*positionals, **kwargs)
    except TypeError as error:
        raise ValueError(f"{key}: {path} cannot be built with the arguments {kwargs}: {error}") from None


#: Arguments of ``policy_kwargs`` that take a class, which a run's ``config.yml`` saves as its import path
#: (:func:`~sb3_ppo_ext.zoo.experiment.to_plain_yaml`).
CLASS_ARGUMENTS: tuple[str, ...] = ("activation_fn", "optimizer_class", "features_extractor_class")


def with_classes_resolved(policy_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``policy_kwargs`` whose :data:`CLASS_ARGUMENTS` given as allow-listed import paths
    (``"torch.nn.modules.activation.ReLU"``, what a run's ``config.yml`` holds when ``policy_kwargs`` was given on the
    command line) are the classes; any other value is left for :func:`check_block_values` to judge."""
    resolved = dict(policy_kwargs)
    for key in CLASS_ARGUMENTS:
        if isinstance(resolved.get(key), str) and resolve_name(resolved[key]) is not None:
            resolved[key] = resolve_name(resolved[key])
    return resolved


def preprocess_block(block: dict[str, Any], *, where: str, algorithm: type | None = None) -> dict[str, Any]:
    """Return a copy of ``block`` with every string rl-zoo3 would ``eval()`` replaced by its safely parsed value, and
    every number written as a string (``learning_rate: 1e-3``, which YAML 1.1 reads as a string) as that number
    (:func:`number_from_text`) where a number is expected.

    Also checks schedules and class paths, so that nothing in the result makes rl-zoo3 run code from the config.
    ``normalize: true`` stays a boolean; ``normalize: "dict(norm_reward=False)"`` becomes a dict; classes that a
    ``policy_kwargs`` mapping names by import path become the classes (:func:`with_classes_resolved`).

    :param block: one config block (after merges and command-line overrides).
    :param where: where the block comes from, used in error messages.
    :param algorithm: the algorithm class the block is for, whose numeric parameters (:func:`number_keys`) take
        numbers written as strings; without it, only the schedule keys and :data:`ZOO_NUMBER_KEYS` do.
    """
    numeric = _NUMBER_KEYS_OF_ANY_ALGORITHM if algorithm is None else number_keys(algorithm)
    parsed = {key: number_from_text(value) if key in numeric else value for key, value in block.items()}
    for key in EXPRESSION_KEYS:
        if isinstance(parsed.get(key), str):
            parsed[key] = parse_expression(parsed[key], what=f"{key} in {where}")
    if isinstance(parsed.get("policy_kwargs"), dict):
        parsed["policy_kwargs"] = with_classes_resolved(parsed["policy_kwargs"])
    for key in SCHEDULE_KEYS:
        if key in parsed:
            check_schedule(key, parsed[key], where=where)
    for key in OWN_SCHEDULE_KEYS:
        if key in parsed:
            check_schedule(key, parsed[key], where=where)
            parsed[key] = as_schedule(parsed[key])
    for key in CLASS_PATH_KEYS:
        if key in parsed:
            check_class_paths(key, parsed[key])
    policy = parsed.get("policy")
    if isinstance(policy, str) and "." in policy and not is_allowed_import_path(policy):
        raise ValueError(f"policy: {policy!r} is not an allow-listed policy class import path")
    return parsed

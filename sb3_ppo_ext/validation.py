"""Input checks shared by the algorithm, the callbacks and the CLI.

Each raises :class:`HyperparameterError` (a ``ValueError``) with a message naming the parameter, the value it got and
the rule it broke, at the moment the object is created, never deep inside training.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import itertools
import math
import numbers
import sys
from collections.abc import Collection, Iterable, Mapping
from typing import Any


class HyperparameterError(ValueError, AssertionError):
    """An invalid setting. A ``ValueError`` by meaning; also an ``AssertionError``, because SB3 checks some of the
    same settings with ``assert`` and code written against SB3 may catch that."""


#: Largest finite float: an int beyond it (``10**400``) has no float value.
_FLOAT_MAX = sys.float_info.max


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Check that ``value`` is a finite real number within the given bounds and return it as a float.

    :param name: parameter name, used in the error message.
    :param low: lower bound (``None`` for none).
    :param high: upper bound (``None`` for none).
    :param low_inclusive: whether ``value == low`` is allowed.
    :param high_inclusive: whether ``value == high`` is allowed.
    """
    if not _is_number(value) or abs(value) > _FLOAT_MAX or not math.isfinite(value):  # an int past float's range too
        raise HyperparameterError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        relation = ">=" if low_inclusive else ">"
        raise HyperparameterError(f"{name} must be {relation} {low}, got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        relation = "<=" if high_inclusive else "<"
        raise HyperparameterError(f"{name} must be {relation} {high}, got {value!r}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """Check that ``value`` is ``True`` or ``False`` and return it: a string (``"yes"``, ``"no"``, which Python reads
    as true), a number or ``None`` is refused.

    :param name: parameter name, used in the error message.
    """
    if not isinstance(value, bool):
        raise HyperparameterError(f"{name} must be True or False, got {value!r}")
    return value


def check_frame_stack(name: str, value: Any) -> int | None:
    """Check a ``frame_stack`` setting: ``None`` (no stacking) or an integer from 1 to :data:`MAX_FRAME_STACK`.

    :param name: the setting and where it was read, used in the error message.
    """
    if value is None:
        return None
    return check_int(name, value, minimum=1, maximum=MAX_FRAME_STACK, limit="MAX_FRAME_STACK")


def check_positive(name: str, value: Any) -> float:
    """Check that ``value`` is a finite number strictly greater than zero."""
    return check_number(name, value, low=0.0, low_inclusive=False)


def check_int(name: str, value: Any, *, minimum: int, maximum: int | None = None, limit: str = "", hint: str = "") -> int:
    """Check that ``value`` is an integer of at least ``minimum`` (and at most ``maximum``) and return it as an ``int``.

    A float with an integral value (``2048.0``, ``1e6``: what YAML and scientific notation give) counts as that
    integer; ``bool`` does not count as an integer.

    :param limit: the name of the constant ``maximum`` comes from (``"MAX_N_EPOCHS"``), quoted in the message.
    :param hint: what the user may have meant, added to the message of a value above ``maximum``.
    """
    integral = isinstance(value, numbers.Integral) or (isinstance(value, numbers.Real) and float(value).is_integer())
    if isinstance(value, bool) or not integral:
        raise HyperparameterError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise HyperparameterError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise HyperparameterError(
            f"{name} must be <= {maximum}{f' ({limit})' if limit else ''}, got {value!r}{f': {hint}' if hint else ''}"
        )
    return int(value)


def check_observation_indices(name: str, value: Any, *, size: int | None = None) -> list[int]:
    """Check that ``value`` is a non-empty list of positions in a flat observation vector and return it as ints.

    :param name: parameter name, used in the error message.
    :param size: the observation's length: each index must then lie in ``[-size, size)`` (negative counts from the
        end, as in NumPy); ``None`` checks only that each is an integer.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise HyperparameterError(f"{name} must be a non-empty list of observation positions, got {value!r}")
    indices = [check_int(f"{name}[{position}]", index, minimum=-(2**31)) for position, index in enumerate(value)]
    if size is not None:
        for index in indices:
            if not -size <= index < size:
                raise HyperparameterError(
                    f"{name}: observation index {index} is out of range for an observation of {size} entries"
                )
    return indices


# --- sizes, schedules and keyword arguments, shared by the algorithm and the zoo configs ----------------------------

# Upper limits of the settings that size memory or time: far above any real run, far below what fills a machine's
# memory, runs for ever or overflows float32 arithmetic before training starts.
#: Most transitions in one on-policy rollout, ``n_steps * n_envs``, and the largest ``batch_size`` (4,194,304: 32
#: times a 64-env x 2048-step rollout).
MAX_ROLLOUT_TRANSITIONS = 1 << 22
#: Most bytes of one array of a run's evaluation history (``evaluations.npz``: the returns, lengths and successes of
#: every periodic evaluation): 1000 evaluations of 1000 episodes take 8 MB.
MAX_EVALUATION_HISTORY_BYTES = 64 << 20
#: Most cells in one grid file (tasks x variants x seeds): a research grid has tens to hundreds; 10**9 cells built
#: their commands for minutes before the first one ran.
MAX_GRID_CELLS = 10_000
#: Most passes over a rollout in one update, ``n_epochs`` (the PPO paper and rl-zoo3's configs use 3 to 30).
MAX_N_EPOCHS = 1000
#: Largest ``clip_range``: it bounds the probability ratio to ``[1 - clip_range, 1 + clip_range]`` (0.1 to 0.4 in
#: practice; above 1 the lower bound is gone already).
MAX_CLIP_RANGE = 1000.0
#: Largest ``clip_range_vf``, in the units of the value function (returns): far above any return, far below float32's
#: overflow (3.4e38).
MAX_CLIP_RANGE_VF = 1e9
#: Widest hidden layer (``net_arch`` entries, ``lstm_hidden_size``): a square layer this wide has 67 M weights.
MAX_LAYER_WIDTH = 8192
#: Most weights between the hidden layers of one ``net_arch`` (the products of consecutive widths, a plain list counted
#: twice: SB3 builds it for the actor and again for the critic): 2**26 weights take 256 MB as float32, so that a
#: policy fits in well under 1 GB; a dict(pi=[8192, 8192], vf=[256]) is the largest of its kind.
MAX_HIDDEN_WEIGHTS = 1 << 26
#: Most hidden layers in one ``net_arch`` list.
MAX_HIDDEN_LAYERS = 64
#: Most frames stacked by ``frame_stack``, in a config block and in a shipped agent's ``agent.json`` alike (rl-zoo3's
#: configs stack 2 or 4; the stack multiplies the memory of every observation kept, so 10**9 frames would fill the
#: memory at once).
MAX_FRAME_STACK = 256
#: Most physics or env steps repeated per agent step (``frame_skip`` of the rocket lander, ``skip`` of the
#: ``FrameSkip`` wrapper; 3 to 8 in practice): each costs a physics step, so 10**9 made one ``step()`` run for hours.
MAX_FRAME_SKIP = 1000

#: Oldest ONNX opset of an exported policy (``export --opset``, ``ExportPolicyCallback``'s ``opset``): the oldest
#: torch's ONNX exporter writes. The newest is that of the installed packages
#: (:func:`sb3_ppo_ext.callbacks.export.newest_onnx_opset`).
MIN_ONNX_OPSET = 7


def _with_hint(error: HyperparameterError, hint: str) -> HyperparameterError:
    return HyperparameterError(f"{error}: {hint}") if hint else error


def _schedule_value(name: str, schedule: Any, progress: float) -> Any:
    """``schedule(progress)``, with a 0-d tensor or array converted to a float as SB3's ``FloatSchedule`` does; a
    failure of the function is reported as the setting's."""
    try:
        value = schedule(progress)
    except Exception as error:  # whatever the user's function raises, the setting is what is wrong
        raise HyperparameterError(
            f"{name}: the schedule {schedule!r} fails at progress_remaining={progress:g} ({type(error).__name__}: {error})"
        ) from error
    if not _is_number(value) and not isinstance(value, (str, bytes, bool)) and hasattr(value, "__float__"):
        try:
            value = float(value)
        except (TypeError, ValueError):
            pass  # not a single number: refused by the check that follows
    return value


#: The rule of each schedule setting besides "> 0": its upper limit (``None``: none) and what a refused value may have
#: meant; the algorithm and the zoo configs check with the same rules (:func:`check_schedule`).
SCHEDULE_RULES: Mapping[str, tuple[float | None, str]] = {
    "learning_rate": (None, "a learning rate is > 0, e.g. 3e-4 (a zoo config's lin_3e-4 decays it linearly to 0)"),
    "vf_learning_rate": (None, "a learning rate is > 0, e.g. 3e-4; None gives the critic learning_rate"),
    "clip_range": (
        MAX_CLIP_RANGE,
        (
            "it bounds the probability ratio to [1 - clip_range, 1 + clip_range], e.g. 0.2; "
            "to train without clipping use objective='kl_penalty'"
        ),
    ),
    "clip_range_vf": (
        MAX_CLIP_RANGE_VF,
        (
            "it bounds how far one update moves the value predictions, in the units of "
            "the returns; None turns value clipping off"
        ),
    ),
}


def check_schedule(name: str, value: Any) -> None:
    """Check a setting that is a number or a schedule: a function of the progress remaining, 1 at the start of training
    and 0 at its end (``learning_rate``, ``clip_range``...).

    A number must be finite, > 0 and within the setting's upper limit (:data:`SCHEDULE_RULES`). A schedule is called at
    both ends of its range, as training will call it: its value must be such a number at the start (progress 1), and
    finite, >= 0 and within the limit at the end (progress 0: a linear decay such as rl-zoo3's ``lin_<x>`` ends at 0).
    Only the ends are checked.

    :param name: the setting, used in the message and to find its rule.
    :param value: the number or the schedule.
    """
    maximum, hint = SCHEDULE_RULES.get(name, (None, ""))
    if not callable(value):
        try:
            check_number(name, value, low=0.0, low_inclusive=False, high=maximum)
        except HyperparameterError as error:
            raise _with_hint(error, hint) from None
        return
    for progress, low_inclusive in ((1.0, False), (0.0, True)):
        at = f"{name} (the schedule {value!r} at progress_remaining={progress:g})"
        try:
            check_number(at, _schedule_value(name, value, progress), low=0.0, low_inclusive=low_inclusive, high=maximum)
        except HyperparameterError as error:
            raise _with_hint(error, hint) from None


def check_kwargs(name: str, value: Any) -> None:
    """Check keyword arguments given as one setting (``policy_kwargs``, ``rollout_buffer_kwargs``): ``None`` or a
    mapping whose keys are argument names."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        hint = (
            (
                ' (a string such as "dict(key=value)" is parsed in zoo configs and on the command line; in Python '
                "pass the dict itself)"
            )
            if isinstance(value, str)
            else ""
        )
        raise HyperparameterError(f"{name} must be a dict of keyword arguments, got {value!r}{hint}")
    for key in value:
        if not isinstance(key, str) or not key.isidentifier():
            raise HyperparameterError(f"{name}: argument names must be identifier strings, got the key {key!r}")


def check_width(name: str, value: Any) -> int:
    """Check a layer width: an integer from 1 to :data:`MAX_LAYER_WIDTH`."""
    return check_int(name, value, minimum=1, maximum=MAX_LAYER_WIDTH, limit="MAX_LAYER_WIDTH")


def check_net_arch(net_arch: Any, *, name: str = "policy_kwargs net_arch", keys: Collection[str] | None = None) -> None:
    """Check a ``net_arch``: ``None``, a list of layer widths, or a dict of such lists (``pi`` / ``vf`` for
    actor-critic policies, ``pi`` / ``qf`` for SAC and TD3), with at most :data:`MAX_HIDDEN_LAYERS` layers of at most
    :data:`MAX_LAYER_WIDTH` units.

    :param keys: the keys a dict may have (``None``: any).
    """
    if net_arch is None:
        return
    if isinstance(net_arch, (list, tuple)) and len(net_arch) == 1 and isinstance(net_arch[0], Mapping):
        net_arch = net_arch[0]  # SB3's actor-critic policies still read (and warn about) the pre-1.8 [dict(...)]
    if isinstance(net_arch, Mapping):
        for key in net_arch:
            if keys is not None and key not in keys:
                near = difflib.get_close_matches(str(key), list(keys), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise HyperparameterError(
                    f"{name} must be a list of layer widths or a dict with the keys {sorted(keys)}, got the key {key!r}{hint}"
                )
        lists = [(f"{name}[{key!r}]", layers) for key, layers in net_arch.items()]
    else:
        lists = [(name, net_arch)]
    for list_name, layers in lists:
        if not isinstance(layers, (list, tuple)):
            raise HyperparameterError(f"{list_name} must be a list of layer widths (or a dict of such lists), got {layers!r}")
        if len(layers) > MAX_HIDDEN_LAYERS:
            raise HyperparameterError(
                f"{list_name} must have at most {MAX_HIDDEN_LAYERS} layers (MAX_HIDDEN_LAYERS), got {len(layers)}"
            )
        for width in layers:
            if isinstance(width, Mapping):
                raise HyperparameterError(
                    f"{list_name} holds a dict ({width!r}) among layer widths: SB3 (since 1.8) has no shared layers and "
                    f"takes the actor's and the critic's layers as one dict, e.g. dict(pi=[64, 64], vf=[64, 64])"
                )
            check_width(f"a layer of {list_name}", width)
    copies = 1 if isinstance(net_arch, Mapping) else 2  # a plain list is built for the actor and for the critic
    weights = copies * sum(sum(a * b for a, b in itertools.pairwise(layers)) for _, layers in lists)
    if weights > MAX_HIDDEN_WEIGHTS:
        raise HyperparameterError(
            f"{name} has {weights} weights between its hidden layers, the limit is {MAX_HIDDEN_WEIGHTS} "
            "(MAX_HIDDEN_WEIGHTS: 256 MB of float32)"
        )


#: Arguments of SB3's policies that the algorithm passes itself, with the setting that decides each.
ALGORITHM_SET_POLICY_ARGUMENTS: Mapping[str, str] = {
    "observation_space": "the env's observation space",
    "action_space": "the env's action space",
    "lr_schedule": "the algorithm's learning_rate",
    "use_sde": "the algorithm's use_sde",
}
#: Policy arguments shared by SB3's policies, with their types; others are left to the policy class.
_BOOLEAN_POLICY_ARGUMENTS = (
    "ortho_init",
    "full_std",
    "use_expln",
    "squash_output",
    "share_features_extractor",
    "normalize_images",
)
_MAPPING_POLICY_ARGUMENTS = ("features_extractor_kwargs", "optimizer_kwargs")
#: Class arguments: the base class each must subclass (import path) and an example.
_CLASS_POLICY_ARGUMENTS = {
    "activation_fn": ("torch.nn.Module", "th.nn.ReLU"),
    "optimizer_class": ("torch.optim.Optimizer", "th.optim.Adam"),
    "features_extractor_class": (
        "stable_baselines3.common.torch_layers.BaseFeaturesExtractor",
        "stable_baselines3.common.torch_layers.FlattenExtractor",
    ),
}


def _import_path(path: str) -> type:
    """The class at import ``path``, imported on first use: this module imports no torch (nor SB3) itself."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def check_subclass(name: str, value: Any, base_path: str, example: str) -> type:
    """Check that ``value`` is a class deriving from the class at import path ``base_path`` and return it.

    :param name: the setting, used in the message.
    :param example: a class the setting may take, quoted in the message.
    """
    if not (inspect.isclass(value) and issubclass(value, _import_path(base_path))):
        raise HyperparameterError(
            f"{name} must be a class deriving from {base_path} (e.g. {example}; the class, not an instance or a "
            f"name), got {value!r}"
        )
    return value


def _check_policy_keys(policy_kwargs: Mapping[str, Any], policy_class: type[Any], name: str) -> None:
    parameters = inspect.signature(policy_class.__init__).parameters
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())
    accepted = sorted(key for key in parameters if key != "self" and key not in ALGORITHM_SET_POLICY_ARGUMENTS)
    for key in policy_kwargs:
        if key in ALGORITHM_SET_POLICY_ARGUMENTS:
            raise HyperparameterError(
                f"{name} must not set {key!r}: the algorithm passes it to the policy ({ALGORITHM_SET_POLICY_ARGUMENTS[key]})"
            )
        if not takes_any and key not in parameters:
            near = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise HyperparameterError(
                f"{name}: {policy_class.__name__} takes no argument {key!r} ({hint}it takes {', '.join(accepted)})"
            )


def check_policy_kwargs(policy_kwargs: Any, *, policy_class: type | None = None, name: str = "policy_kwargs") -> None:
    """Check ``policy_kwargs`` before a policy is built from it: a dict (:func:`check_kwargs`) whose arguments shared
    by SB3's policies have their types (booleans, ``log_std_init`` a number, mappings, ``activation_fn`` /
    ``optimizer_class`` / ``features_extractor_class`` classes of the right base), its ``net_arch``
    (:func:`check_net_arch`) and ``lstm_hidden_size`` (:func:`check_width`) their sizes.

    :param policy_class: the policy the arguments are for; when given, it must take every key (unless it takes
        ``**kwargs``), none may be one the algorithm passes itself (:data:`ALGORITHM_SET_POLICY_ARGUMENTS`), and an
        actor-critic policy's ``net_arch`` dict may only have the keys ``pi`` and ``vf``.
    :param name: the setting, used in the messages.
    """
    check_kwargs(name, policy_kwargs)
    if not policy_kwargs:
        return
    net_arch_keys = None
    if policy_class is not None:
        _check_policy_keys(policy_kwargs, policy_class, name)
        actor_critic = _import_path("stable_baselines3.common.policies.ActorCriticPolicy")
        if inspect.isclass(policy_class) and issubclass(policy_class, actor_critic):
            net_arch_keys = ("pi", "vf")
    for key in _BOOLEAN_POLICY_ARGUMENTS:
        if key in policy_kwargs and not isinstance(policy_kwargs[key], bool):
            raise HyperparameterError(f"{name} {key} must be True or False, got {policy_kwargs[key]!r}")
    if "log_std_init" in policy_kwargs:
        check_number(f"{name} log_std_init", policy_kwargs["log_std_init"])
    for key in _MAPPING_POLICY_ARGUMENTS:
        check_kwargs(f"{name} {key}", policy_kwargs.get(key))
    for key, (base_path, example) in _CLASS_POLICY_ARGUMENTS.items():
        if key in policy_kwargs:
            check_subclass(f"{name} {key}", policy_kwargs[key], base_path, example)
    check_net_arch(policy_kwargs.get("net_arch"), name=f"{name} net_arch", keys=net_arch_keys)
    if policy_kwargs.get("lstm_hidden_size") is not None:
        check_width(f"{name} lstm_hidden_size", policy_kwargs["lstm_hidden_size"])


#: ``VecNormalize``'s arguments besides the env.
VECNORMALIZE_ARGUMENTS: tuple[str, ...] = (
    "training",
    "norm_obs",
    "norm_reward",
    "clip_obs",
    "clip_reward",
    "gamma",
    "epsilon",
    "norm_obs_keys",
)


def check_vecnormalize_kwargs(kwargs: Any, *, name: str = "normalize") -> None:
    """Check keyword arguments of ``VecNormalize`` (a zoo config's ``normalize`` mapping, saved statistics' settings):
    known names (:data:`VECNORMALIZE_ARGUMENTS`); ``training`` / ``norm_obs`` / ``norm_reward`` booleans;
    ``clip_obs`` / ``clip_reward`` numbers > 0 (infinity: no clipping); ``gamma`` in [0, 1]; ``epsilon`` > 0;
    ``norm_obs_keys`` ``None`` or a list of strings."""
    check_kwargs(name, kwargs)
    for key, value in (kwargs or {}).items():
        if key not in VECNORMALIZE_ARGUMENTS:
            near = difflib.get_close_matches(key, VECNORMALIZE_ARGUMENTS, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise HyperparameterError(
                f"{name}: VecNormalize takes no argument {key!r} ({hint}it takes {', '.join(VECNORMALIZE_ARGUMENTS)})"
            )
        if key in ("training", "norm_obs", "norm_reward") and not isinstance(value, bool):
            raise HyperparameterError(f"{name} {key} must be True or False, got {value!r}")
        if key in ("clip_obs", "clip_reward") and not (_is_number(value) and value > 0):
            raise HyperparameterError(f"{name} {key} must be a number > 0, got {value!r}")
        if key == "gamma":
            check_number(f"{name} gamma", value, low=0.0, high=1.0)
        if key == "epsilon":
            check_positive(f"{name} epsilon", value)
        if (
            key == "norm_obs_keys"
            and value is not None
            and not (isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value))
        ):
            raise HyperparameterError(
                f"{name} norm_obs_keys must be None or a list of observation keys (strings), got {value!r}"
            )


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of ``choices``; the error suggests the nearest valid one."""
    options = list(choices)
    if value not in options:
        near = difflib.get_close_matches(str(value), options, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise HyperparameterError(f"{name} must be one of {options}, got {value!r}{hint}")
    return value


#: Modules that a module-qualified env id (``module:Env-v0``) may name: importing ours runs nothing a user did not
#: install with this package.
OWN_ENV_MODULES: frozenset[str] = frozenset({"sb3_ppo_ext", "sb3_ppo_ext.envs"})


def check_env_id(env_id: Any, *, where: str) -> str:
    """Check an env id read from a file before gymnasium sees it, and return it.

    gymnasium imports the module named in an id of the form ``module:Env-v0`` (running its code) before it looks the
    env up, so an id from a file a user downloaded (a run's ``args.yml``, an agent's ``agent.json``) may only name a
    module that is already imported (importing it again runs nothing) or one of :data:`OWN_ENV_MODULES`. A plain id
    (``Walker2D-v0``, ``sb3_ppo_ext/Humanoid-v0``) imports nothing.

    :param env_id: the id as read.
    :param where: the file it was read from, used in the message.
    :raises ValueError: for a non-string id or a module-qualified one naming any other module.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"{where}: the env id must be a non-empty string, got {env_id!r}")
    if ":" in env_id:
        module, _, name = env_id.partition(":")
        if ":" in name or not module or (module not in sys.modules and module not in OWN_ENV_MODULES):
            raise ValueError(
                f"{where}: the env id {env_id!r} names the module {module!r}, which gymnasium would "
                f"import (running its code) before making the env; refused. Use the registered id "
                f"({name!r}) and import the module yourself if you trust it (the CLI's --gym-packages)"
            )
    return env_id

"""Load Stable-Baselines3 model zips without unpickling anything.

SB3 writes each value of a model's ``data`` entry that JSON cannot hold (the spaces, the schedules, the policy class,
a ``policy_kwargs`` holding classes, the last observation...) as a base64 cloudpickle, ``{":type:": ...,
":serialized:": ..., <readable fields>}``, and ``PPO.load`` unpickles it; a crafted file runs code when it is loaded.
:func:`load_without_pickles` rebuilds every pickled entry of ``data`` from plain data (:func:`rebuilt_entries`)
and hands the results to the algorithm's own ``load`` as ``custom_objects``, which SB3 uses *instead of*
unpickling those entries. Spaces are rebuilt from their readable fields (``_shape``, ``dtype``, ``low`` / ``high``
/ ``nvec`` as printed arrays, ``n``, ``start``); a ``Dict`` or ``Tuple`` space, or a ``Box`` whose printed bounds
are abridged (``...``, over 1000 values), only from an env whose spaces print the same. Schedules are rebuilt
from their readable fields (SB3's ``FloatSchedule`` / ``ConstantSchedule`` / ``LinearSchedule`` and rl-zoo3's
``SimpleLinearSchedule``: what ``lin_3e-4`` config strings become); a class (``policy_class``, ``*_buffer_class``)
from the pickle's opcodes, read with :func:`pickletools.genops`, which builds no object, when the whole pickle is
one reference to an importable class, and only from an allow-list (:func:`allowed_classes`); a ``policy_kwargs``
from its readable items, classes (printed ``<class '...'>``) again through the allow-list. The weights
(``policy.pth``, ``policy.optimizer.pth``, ``pytorch_variables.pth``) are read by SB3 itself with
``torch.load(weights_only=True)``, which builds tensors and plain containers only.

What cannot be rebuilt is refused with a :class:`~sb3_ppo_ext.safe_loading.errors.PickleRefusedError` naming the
entry; loading it is what ``PPO.load`` (the CLI's ``--trust-pickles``) does, for files you trust.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import inspect
import io
import json
import math
import os
import pickle
import pickletools
import re
import zipfile
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import IO, Any

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecTransposeImage

from sb3_ppo_ext.plain_data import space_from_data
from sb3_ppo_ext.ppo import PPO
from sb3_ppo_ext.safe_loading.errors import TRUST_PICKLES_OPTION, PickleRefusedError, refusal
from sb3_ppo_ext.safe_loading.zips import check_zip_sizes

#: Entries that SB3's ``learn`` sets afresh before reading them (and ``load`` with an env drops ``_last_obs``
#: itself): loaded as ``None``, so the rolling episode statistics of a continued run start empty.
RESET_ENTRIES: frozenset[str] = frozenset(
    {"_last_obs", "_last_original_obs", "_last_episode_starts", "ep_info_buffer", "ep_success_buffer"}
)
#: Entries that the algorithm's ``_setup_model`` recomputes from other entries during ``load`` (``lr_schedule`` from
#: ``learning_rate``, DQN's ``exploration_schedule`` from its ``exploration_*`` settings), with the stand-in they get
#: when the saved one cannot be rebuilt.
DERIVED_ENTRIES: Mapping[str, Any] = {"lr_schedule": 0.0, "exploration_schedule": 0.0}
#: Entries that only training reads, with the stand-in a model loaded to act (``training=False``) gets when the
#: saved one cannot be rebuilt: zero learning rates and clip ranges, no action noise.
ACTING_PLACEHOLDERS: Mapping[str, Any] = {
    "learning_rate": 0.0,
    "clip_range": 0.0,
    "clip_range_vf": 0.0,
    "vf_learning_rate": 0.0,
    "delta_std": 0.0,
    "train_freq": 1,
    "action_noise": None,
}
#: Entries SB3's ``load`` uses before it applies its keyword arguments: a keyword argument cannot stand in for them.
STRUCTURE_ENTRIES: frozenset[str] = frozenset({"policy_class", "policy_kwargs", "observation_space", "action_space"})

#: The gymnasium (or gym) space classes rebuilt from their readable fields.
_SPACE_MODULES = ("gymnasium.spaces.", "gym.spaces.")
_SPACE_CLASSES = frozenset({"Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"})
#: Schedule classes rebuilt from their readable fields or their ``repr``: class path -> parameter names.
_SCHEDULES: Mapping[str, tuple[str, ...]] = {
    "stable_baselines3.common.utils.ConstantSchedule": ("val",),
    "stable_baselines3.common.utils.LinearSchedule": ("start", "end", "end_fraction"),
    "rl_zoo3.utils.SimpleLinearSchedule": ("initial_value",),
}
_FLOAT_SCHEDULE = "stable_baselines3.common.utils.FloatSchedule"
_SCHEDULE_REPR = re.compile(r"(?P<name>ConstantSchedule|LinearSchedule|SimpleLinearSchedule)\((?P<arguments>[^()]*)\)")
_CLASS_TEXT = re.compile(r"<class '(?P<path>[\w.]+)'>")
#: Opcodes that only frame or memoise: skipped when reading a class reference.
_FRAMING_OPCODES = frozenset({"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"})
_STRING_OPCODES = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})


class UnreadableEntry(Exception):
    """An entry whose readable fields do not determine its value (the message says why)."""


# --- the readable parts of SB3's data entry --------------------------------------------------------------------


def is_pickled(entry: Any) -> bool:
    """Whether a value of SB3's ``data`` entry is one SB3 stored as a cloudpickle."""
    return isinstance(entry, dict) and ":serialized:" in entry


def type_path(entry: Mapping[str, Any]) -> str:
    """The class of a pickled entry as an import path, read from its ``:type:`` text (``<class 'x.y.Z'>`` -> ``x.y.Z``)."""
    match = _CLASS_TEXT.fullmatch(str(entry.get(":type:", "")))
    return match["path"] if match else str(entry.get(":type:"))


#: Largest ``data`` entry of a model zip (SB3's JSON of the model's settings; 50 kB for a humanoid run, a few MB for an
#: image-based one, whose last observations it keeps).
MAX_DATA_ENTRY_BYTES = 64 << 20


def read_zip_data(source: str | IO[bytes]) -> dict[str, Any]:
    """The ``data`` entry of an SB3 model zip as parsed JSON (the pickled entries stay base64 text), after
    :func:`~sb3_ppo_ext.safe_loading.zips.check_zip_sizes` on the whole zip (``data`` within
    :data:`MAX_DATA_ENTRY_BYTES`), which SB3's ``load`` reads next.

    :raises ValueError: when ``source`` is not a zip file, has no ``data`` entry or an entry that inflates too far.
    """
    name = source if isinstance(source, str) else "the model file"
    try:
        with zipfile.ZipFile(source) as archive:
            if "data" not in archive.namelist():
                raise ValueError(f"{name} has no 'data' entry: not a Stable-Baselines3 model zip")
            check_zip_sizes(archive, name, limits={"data": MAX_DATA_ENTRY_BYTES})
            text = archive.read("data").decode()
    except zipfile.BadZipFile as error:
        raise ValueError(f"{name} is not a zip file ({error})") from None
    finally:
        if not isinstance(source, str):
            source.seek(0)
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"the 'data' entry of {name} is not a JSON object")
    return data


def parse_printed_array(text: object, shape: Sequence[int], dtype: np.dtype, *, what: str) -> np.ndarray:
    """The array whose ``str()`` numpy printed as ``text`` (``'[-4.8 -inf  0.4]'``, nested brackets for more axes).

    :raises UnreadableEntry: when the print is abridged (``...``, numpy's summary of arrays over 1000 values), does not
        hold ``prod(shape)`` numbers, or holds something else than numbers.
    """
    if not isinstance(text, str):
        raise UnreadableEntry(f"{what} is not printed as an array ({text!r})")
    if "..." in text:
        raise UnreadableEntry(f"{what} is printed abridged ('...': over 1000 values)")
    tokens = text.replace("[", " ").replace("]", " ").split()
    size = math.prod(shape)
    if len(tokens) != size:
        raise UnreadableEntry(f"{what} prints {len(tokens)} values, its shape {tuple(shape)} holds {size}")
    try:
        if np.issubdtype(dtype, np.integer):
            values: list[Any] = [int(token) for token in tokens]
        elif np.issubdtype(dtype, np.bool_):
            values = [{"True": True, "False": False}[token] for token in tokens]
        else:
            values = [float(token) for token in tokens]
    except (ValueError, KeyError):
        raise UnreadableEntry(f"{what} holds something else than {dtype} numbers: {text!r}") from None
    return np.array(values, dtype=dtype).reshape(tuple(shape))


def _shape(fields: Mapping[str, Any], what: str) -> tuple[int, ...]:
    shape = fields.get("_shape")
    if not isinstance(shape, list) or not all(isinstance(size, int) and size >= 0 for size in shape):
        raise UnreadableEntry(f"{what} has no readable shape ({shape!r})")
    return tuple(shape)


def _integer_text(fields: Mapping[str, Any], name: str, what: str, default: int | None = None) -> int:
    value = fields.get(name, default)
    try:
        return int(str(value))
    except ValueError:
        raise UnreadableEntry(f"{what}: {name} is not an integer ({value!r})") from None


def _default_integer_dtype(fields: Mapping[str, Any], what: str) -> None:
    if str(fields.get("dtype", "int64")) != "int64":
        raise UnreadableEntry(f"{what} has dtype {fields.get('dtype')!r}; only int64 is rebuilt")


def space_data_from_fields(kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The plain-data description (:func:`sb3_ppo_ext.plain_data.space_to_data`'s format) of a ``Box``,
    ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` space, read from the readable fields SB3 stored with it.

    :param kind: the space class name.
    :param fields: the pickled entry (its readable fields).
    :raises UnreadableEntry: when the fields do not determine the space.
    """
    what = f"the {kind} space"
    if kind == "Box":
        shape = _shape(fields, what)
        try:
            dtype = np.dtype(str(fields.get("dtype")))
        except TypeError:
            raise UnreadableEntry(f"{what} has no readable dtype ({fields.get('dtype')!r})") from None
        low = parse_printed_array(fields.get("low"), shape, dtype, what=f"the low bound of {what}")
        high = parse_printed_array(fields.get("high"), shape, dtype, what=f"the high bound of {what}")
        return {"type": "Box", "low": low, "high": high, "shape": list(shape), "dtype": str(dtype)}
    if kind == "Discrete":
        _default_integer_dtype(fields, what)
        return {"type": "Discrete", "n": _integer_text(fields, "n", what), "start": _integer_text(fields, "start", what, 0)}
    if kind == "MultiDiscrete":
        _default_integer_dtype(fields, what)
        shape = _shape(fields, what)
        data = {"type": "MultiDiscrete", "nvec": parse_printed_array(fields.get("nvec"), shape, np.dtype(np.int64), what=what)}
        if "start" in fields:
            data["start"] = parse_printed_array(fields["start"], shape, np.dtype(np.int64), what=f"the start of {what}")
        return data
    if kind == "MultiBinary":
        n = fields.get("n")
        if not (isinstance(n, int) or (isinstance(n, list) and all(isinstance(size, int) for size in n))):
            raise UnreadableEntry(f"{what} has no readable n ({n!r})")
        return {"type": "MultiBinary", "n": n}
    raise UnreadableEntry(f"a {kind} space is not rebuilt from its readable fields")


def matching_spaces(space: spaces.Space) -> list[spaces.Space]:
    """The spaces a saved space may equal for an env with ``space``: itself and, for a channels-last image, the
    channels-first one SB3's ``VecTransposeImage`` gives the model."""
    found = [space]
    if (
        isinstance(space, spaces.Box)
        and is_image_space(space, check_channels=False)
        and not is_image_space_channels_first(space)
    ):
        found.append(VecTransposeImage.transpose_space(space))
    return found


def space_from_fields(entry: Mapping[str, Any], references: Sequence[spaces.Space] = ()) -> spaces.Space:
    """The space SB3 pickled as ``entry``, from its readable fields only.

    A ``Box``, ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` is built from the fields; one of ``references``
    (the env's spaces) that equals it (gymnasium's ``==``: same shape and dtype, bounds within ``np.allclose``) is
    returned instead, with the env's exact bounds. A ``Dict`` or ``Tuple`` space, and a ``Box`` printed abridged,
    is one of ``references`` whose sub-spaces (bounds) print as the saved ones, or unreadable.

    :raises UnreadableEntry: when the fields do not determine the space and no reference matches.
    """
    path = type_path(entry)
    kind = path.rpartition(".")[2]
    if not path.startswith(_SPACE_MODULES) or kind not in _SPACE_CLASSES:
        raise UnreadableEntry(f"{path} is not a space class that is rebuilt")
    same_kind = [space for space in references if type(space).__name__ == kind]
    if kind in ("Dict", "Tuple"):
        for space in same_kind:
            if isinstance(space, (spaces.Dict, spaces.Tuple)) and str(space.spaces) == entry.get("spaces"):
                return space
        raise UnreadableEntry(f"a {kind} space is rebuilt only from an env whose spaces match it (pass env)")
    try:
        rebuilt = space_from_data(space_data_from_fields(kind, entry))
    except UnreadableEntry:
        if kind == "Box":
            for space in same_kind:
                if (
                    isinstance(space, spaces.Box)
                    and list(space.shape) == entry.get("_shape")
                    and str(space.dtype) == entry.get("dtype")
                    and str(space.low) == entry.get("low")
                    and str(space.high) == entry.get("high")
                ):
                    return space
        raise
    except (ValueError, TypeError) as error:  # gymnasium refuses the values (low > high, n < 1 ...)
        raise UnreadableEntry(f"the {kind} space's readable fields do not make a space ({error})") from None
    for space in same_kind:
        if space == rebuilt:
            return space
    return rebuilt


def _schedule(path: str, arguments: Mapping[str, Any]) -> Callable[[float], float]:
    names = _SCHEDULES[path]
    if set(arguments) != set(names):
        raise UnreadableEntry(f"{path} has the fields {sorted(arguments)}, expected {list(names)}")
    try:
        values = {name: float(arguments[name]) for name in names}
    except (TypeError, ValueError):
        raise UnreadableEntry(f"{path} has non-numeric fields {dict(arguments)}") from None
    if path == "rl_zoo3.utils.SimpleLinearSchedule":
        try:
            from rl_zoo3.utils import SimpleLinearSchedule  # the zoo extra: only runs of rl-zoo3 save this class
        except ImportError:
            raise UnreadableEntry("an rl-zoo3 SimpleLinearSchedule needs rl-zoo3 installed") from None
        return SimpleLinearSchedule(values["initial_value"])
    if path.endswith("ConstantSchedule"):
        return ConstantSchedule(values["val"])
    return LinearSchedule(values["start"], values["end"], values["end_fraction"])


def schedule_from_repr(text: Any) -> Callable[[float], float]:
    """The schedule printed as ``text`` (``ConstantSchedule(val=0.2)``, ``LinearSchedule(start=1.0, end=0.05,
    end_fraction=0.1)``, ``SimpleLinearSchedule(initial_value=0.0003)``).

    :raises UnreadableEntry: for anything else (a function prints as ``<function ...>``).
    """
    match = _SCHEDULE_REPR.fullmatch(str(text))
    if match is None:
        raise UnreadableEntry(
            f"the schedule {text!r} is not a printed ConstantSchedule, LinearSchedule or SimpleLinearSchedule"
        )
    arguments = {}
    for item in match["arguments"].split(", "):
        name, separator, value = item.partition("=")
        if not separator:
            raise UnreadableEntry(f"the schedule {text!r} has an unreadable argument {item!r}")
        arguments[name] = value
    path = next(path for path in _SCHEDULES if path.endswith("." + match["name"]))
    return _schedule(path, arguments)


def schedule_from_fields(entry: Mapping[str, Any]) -> Callable[[float], float]:
    """The schedule SB3 pickled as ``entry``: a ``FloatSchedule`` (its ``value_schedule`` is printed), or a
    ``ConstantSchedule`` / ``LinearSchedule`` / rl-zoo3 ``SimpleLinearSchedule`` (their fields are readable).

    :raises UnreadableEntry: for any other callable (a function or lambda is stored as a pickle only).
    """
    path = type_path(entry)
    if path == _FLOAT_SCHEDULE:
        return FloatSchedule(schedule_from_repr(entry.get("value_schedule")))
    if path in _SCHEDULES:
        return _schedule(path, {name: value for name, value in entry.items() if not name.startswith(":")})
    raise UnreadableEntry(f"a {path} is stored only as a pickle")


def class_reference(entry: Mapping[str, Any]) -> str:
    """The import path of the class SB3 pickled as ``entry``, read from the pickle's opcodes (``pickletools.genops``
    only tokenises: it builds no object and imports nothing).

    :raises UnreadableEntry: unless the whole pickle is one reference to a class by module and name (a class pickled
        by value, or any call, is not).
    """
    try:
        payload = base64.b64decode(str(entry[":serialized:"]), validate=True)
        opcodes = [(opcode.name, argument) for opcode, argument, _ in pickletools.genops(payload)]
    except (binascii.Error, ValueError) as error:
        raise UnreadableEntry(f"its pickle is not readable ({error})") from None
    significant = [(name, argument) for name, argument in opcodes if name not in _FRAMING_OPCODES]
    names = [name for name, _ in significant]
    if (
        len(significant) == 4
        and names[2:] == ["STACK_GLOBAL", "STOP"]
        and names[0] in _STRING_OPCODES
        and names[1] in _STRING_OPCODES
    ):
        return f"{significant[0][1]}.{significant[1][1]}"
    if names == ["GLOBAL", "STOP"]:
        module, _, name = str(significant[0][1]).partition(" ")
        return f"{module}.{name}"
    raise UnreadableEntry("its pickle is not a plain reference to a class (it would build or call something)")


def _public_classes(module_name: str, base_path: str) -> list[type]:
    try:
        module = importlib.import_module(module_name)
        base_module, _, base_name = base_path.rpartition(".")
        base = getattr(importlib.import_module(base_module), base_name)
    except ImportError:  # an optional package (sb3-contrib, rl-zoo3) that is not installed
        return []
    return [
        value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isclass(value)
        and issubclass(value, base)
        and value.__module__.startswith(module_name)
    ]


#: Modules whose classes a pickled entry may name: (module, base class) for each role.
_BUFFER_MODULES = (
    ("stable_baselines3.common.buffers", "stable_baselines3.common.buffers.BaseBuffer"),
    ("stable_baselines3.her.her_replay_buffer", "stable_baselines3.common.buffers.BaseBuffer"),
    ("sb3_contrib.common.recurrent.buffers", "stable_baselines3.common.buffers.BaseBuffer"),
)
_POLICY_PART_MODULES = (
    ("torch.nn.modules.activation", "torch.nn.Module"),
    ("torch.nn.modules.linear", "torch.nn.Identity"),
    ("torch.optim", "torch.optim.Optimizer"),
    ("stable_baselines3.common.sb2_compat.rmsprop_tf_like", "torch.optim.Optimizer"),
    ("stable_baselines3.common.torch_layers", "stable_baselines3.common.torch_layers.BaseFeaturesExtractor"),
)


@functools.cache
def _classes_of(modules: tuple[tuple[str, str], ...]) -> Mapping[str, type]:
    return {f"{cls.__module__}.{cls.__qualname__}": cls for module, base in modules for cls in _public_classes(module, base)}


def allowed_classes(key: str, algorithm: type) -> Mapping[str, type]:
    """The classes a pickled entry ``key`` of a model of ``algorithm`` may name, by ``module.qualname``.

    ``policy_class``: the algorithm's ``policy_aliases`` (``MlpPolicy``...); ``*_buffer_class``: SB3's (and
    sb3-contrib's) rollout and replay buffers; classes inside ``policy_kwargs``: torch activations and optimisers,
    SB3's ``RMSpropTFLike`` and features extractors. Anything else is refused.
    """
    if key == "policy_class":
        return {f"{cls.__module__}.{cls.__qualname__}": cls for cls in getattr(algorithm, "policy_aliases", {}).values()}
    if key.endswith("_buffer_class"):
        return _classes_of(_BUFFER_MODULES)
    return _classes_of(_POLICY_PART_MODULES)


def _allowed_class(path: str, allowed: Mapping[str, type], key: str) -> type:
    if path not in allowed:
        raise UnreadableEntry(f"it names {path}, which is not on the allow-list for {key} ({', '.join(sorted(allowed))})")
    return allowed[path]


def dict_from_fields(key: str, entry: Mapping[str, Any], allowed: Mapping[str, type]) -> dict[str, Any]:
    """The dict SB3 pickled as ``entry`` (a ``policy_kwargs`` holding a class), from its readable items.

    SB3 keeps the JSON-able items as they are and prints the others; a printed class (``<class 'torch.nn.modules.
    activation.ReLU'>``) is looked up in ``allowed``. Any other text is refused: it may be an original string or the
    print of an object, and the two cannot be told apart.

    :raises UnreadableEntry: for a class off the allow-list or any other printed value.
    """
    rebuilt = {}
    for name, value in entry.items():
        if name.startswith(":"):
            continue
        if isinstance(value, str):
            match = _CLASS_TEXT.fullmatch(value)
            if match is None:
                raise UnreadableEntry(f"its item {name!r} is kept only as text ({value!r})")
            value = _allowed_class(match["path"], allowed, f"{key}[{name!r}]")
        rebuilt[name] = value
    return rebuilt


def rebuild_entry(key: str, entry: Mapping[str, Any], algorithm: type, references: Sequence[spaces.Space] = ()) -> Any:
    """The value of one pickled entry of SB3's ``data``, rebuilt from plain data (see the module docstring).

    :param key: the entry's name (``observation_space``, ``lr_schedule`` ...).
    :param entry: the pickled entry (``:type:``, ``:serialized:``, readable fields).
    :param algorithm: the algorithm class of the model (its ``policy_aliases`` are the allowed policy classes).
    :param references: spaces of the env the model is for, which a saved space may equal.
    :raises UnreadableEntry: when the value cannot be rebuilt without unpickling it.
    """
    path = type_path(entry)
    if key == "policy_class" or key.endswith("_buffer_class"):
        return _allowed_class(class_reference(entry), allowed_classes(key, algorithm), key)
    if path.startswith(_SPACE_MODULES):
        return space_from_fields(entry, references)
    if path == _FLOAT_SCHEDULE or path in _SCHEDULES:
        return schedule_from_fields(entry)
    if path == "dict":
        return dict_from_fields(key, entry, allowed_classes(key, algorithm))
    raise UnreadableEntry(f"a {path} is stored only as a pickle")


def rebuilt_entries(
    data: Mapping[str, Any],
    algorithm: type,
    *,
    training: bool,
    given: Collection[str] = (),
    overridden: Collection[str] = (),
    observation_spaces: Sequence[spaces.Space] = (),
    action_spaces: Sequence[spaces.Space] = (),
    source: str = "the model",
) -> dict[str, Any]:
    """A value for every pickled entry of SB3's ``data`` (its ``custom_objects``), so that ``load`` unpickles none.

    Each entry, in order: left to the caller when in ``given`` (its own ``custom_objects``); ``None`` when in
    :data:`RESET_ENTRIES`; rebuilt by :func:`rebuild_entry`; else ``None`` when in ``overridden`` (a keyword
    argument of ``load`` replaces it) and not in :data:`STRUCTURE_ENTRIES`; else a stand-in when in
    :data:`DERIVED_ENTRIES`, or, unless ``training``, in :data:`ACTING_PLACEHOLDERS`; else refused.

    :param data: SB3's ``data`` entry as parsed JSON (:func:`read_zip_data`).
    :param algorithm: the algorithm class of the model.
    :param training: whether the model must train as saved (then the schedules must be rebuilt exactly or given).
    :param given: entries the caller provides itself.
    :param overridden: keyword arguments of ``load`` (they replace the saved entries of the same name).
    :param observation_spaces: spaces the saved observation space may equal (see :func:`space_from_fields`).
    :param action_spaces: spaces the saved action space may equal.
    :param source: the file, for refusals.
    :raises PickleRefusedError: for the first entry that cannot be rebuilt, naming it.
    """
    references = {"observation_space": tuple(observation_spaces), "action_space": tuple(action_spaces)}
    objects: dict[str, Any] = {}
    for key, entry in data.items():
        if not is_pickled(entry) or key in given:
            continue
        if key in RESET_ENTRIES:
            objects[key] = None
            continue
        try:
            objects[key] = rebuild_entry(key, entry, algorithm, references.get(key, ()))
        except UnreadableEntry as reason:
            if key in overridden and key not in STRUCTURE_ENTRIES:
                objects[key] = None
            elif key in DERIVED_ENTRIES:
                objects[key] = DERIVED_ENTRIES[key]
            elif not training and key in ACTING_PLACEHOLDERS:
                objects[key] = ACTING_PLACEHOLDERS[key]
            else:
                hint = (
                    " (to continue training, give it as a keyword argument, e.g. from the run's config)"
                    if key in ACTING_PLACEHOLDERS
                    else ""
                )
                raise refusal(
                    f"{source}: its entry {key!r} ({type_path(entry)})",
                    f"cannot be rebuilt without unpickling it: {reason}{hint}",
                    f"{algorithm.__name__}.load",
                ) from None
    return objects


def _env_spaces(env: gym.Env | VecEnv | None, name: str) -> list[spaces.Space]:
    return [] if env is None else matching_spaces(getattr(env, name))


def _model_source(path: str | os.PathLike | IO[bytes]) -> str | IO[bytes]:
    """What SB3's ``load`` would open: a path (``.zip`` added when missing, as SB3 does) or a file read into memory."""
    if isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if not os.path.exists(path) and os.path.exists(path + ".zip"):
            return path + ".zip"
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no model file {path!r}")
        return path
    return io.BytesIO(path.read())


def load_without_pickles(
    path: str | os.PathLike | IO[bytes],
    env: gym.Env | VecEnv | None = None,
    *,
    algorithm: type[BaseAlgorithm] | None = None,
    device: th.device | str = "auto",
    training: bool = True,
    custom_objects: dict[str, Any] | None = None,
    reference_env: gym.Env | VecEnv | None = None,
    **kwargs: Any,
) -> Any:
    """``algorithm.load(path, env, ...)`` without unpickling anything from the zip.

    Every pickled entry of the zip's ``data`` is rebuilt from plain data (:func:`rebuilt_entries`) and passed to
    SB3's ``load`` as ``custom_objects``, which SB3 then uses instead of unpickling; SB3 reads the weights with
    ``torch.load(weights_only=True)``. The model is the one ``algorithm.load`` gives, except that the episode
    statistics (``ep_info_buffer``) and the last observation start empty, as after ``load`` with an env.

    :param path: the model zip (``.zip`` may be left out, as with SB3) or a binary file object.
    :param env: as in SB3's ``load``: the env to run on; its spaces must match the saved ones (a ``Dict`` or
        ``Tuple`` observation space is only rebuilt by matching an env's).
    :param algorithm: the algorithm class (default: ``sb3_ppo_ext.PPO``; e.g. ``stable_baselines3.SAC``).
    :param device: as in SB3's ``load``.
    :param training: ``True`` (default): the model must train as saved, so a schedule stored only as a pickle (a
        function or lambda) is refused unless given in ``custom_objects`` or ``kwargs``. ``False``: a model to act
        with (``predict``); such schedules become 0 and unreadable action noise ``None``: do not train it.
    :param custom_objects: as in SB3's ``load``: values used instead of the saved entries.
    :param reference_env: an env whose spaces the saved ones are matched against when ``env`` is not given (rl-zoo3's
        ``enjoy`` loads without an env).
    :param kwargs: as in SB3's ``load``: attributes to set on the model (they also stand in for unreadable entries
        of the same name, e.g. ``learning_rate``).
    :raises PickleRefusedError: for an entry that cannot be rebuilt without unpickling it (a ``ValueError`` naming
        the entry and ``--trust-pickles``).
    """
    if algorithm is None:
        algorithm = PPO
    source = _model_source(path)
    given = dict(custom_objects or {})
    spaces_of = env if env is not None else reference_env
    objects = rebuilt_entries(
        read_zip_data(source),
        algorithm,
        training=training,
        given=given,
        overridden=kwargs,
        observation_spaces=_env_spaces(spaces_of, "observation_space"),
        action_spaces=_env_spaces(spaces_of, "action_space"),
        source=source if isinstance(source, str) else "the model file",
    )
    what = source if isinstance(source, str) else "the model file"
    try:
        # SB3 annotates the path as str | Path | BufferedIOBase; it reads any binary file (IO[bytes]).
        model = algorithm.load(source, env=env, device=device, custom_objects={**objects, **given}, **kwargs)  # type: ignore[arg-type]
    except pickle.UnpicklingError:
        # torch.load(weights_only=True) met a Python object in a weights file (policy.pth, the optimizer's state):
        # what runs code when unpickled. torch's own message recommends weights_only=False; ours names the file.
        raise PickleRefusedError(
            f"{what}: a weights file inside (policy.pth or an optimizer's .pth) holds Python objects that only "
            f"unpickling could build, and unpickling can run code: refused; load it with {TRUST_PICKLES_OPTION} "
            f"(or PPO.load) only if you trust the file"
        ) from None
    check_finite_tensors(model.policy.state_dict(), where=f"{what} (policy.pth)")
    return model


def check_finite_tensors(tensors: Mapping[str, Any], *, where: str) -> None:
    """Raise ``ValueError`` naming the first tensor (or array) of ``tensors`` holding a NaN or an infinity: weights
    loaded from a file a user downloaded must be finite (a policy with an infinite weight acts with NaN, or fails
    at its first action).

    :param tensors: the tensors or arrays by name (a ``state_dict``, the arrays of an ``.npz``).
    :param where: the file they were read from, used in the message.
    """
    for name, tensor in tensors.items():
        values = th.as_tensor(tensor)
        if values.is_floating_point() and not bool(th.isfinite(values).all()):
            bad = int((~th.isfinite(values)).sum())
            raise ValueError(
                f"{where}: the tensor {name!r} holds {bad} non-finite value(s) (NaN or inf) among {values.numel()}; "
                "weights must be finite, refused"
            )

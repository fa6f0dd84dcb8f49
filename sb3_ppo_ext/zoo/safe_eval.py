"""A restricted parser for the Python-expression strings of zoo configs.

rl-zoo3 passes ``policy_kwargs``, ``normalize``, ``monitor_kwargs`` and every ``--hyperparams`` /
``--env-kwargs`` value to ``eval()``, so a config file or a command line can run any code. This module accepts
only what those values are for: literals (numbers, strings, booleans, ``None``, lists, tuples, dicts, sets),
a leading ``+``/``-`` on a number, ``dict(...)`` / ``list(...)`` / ``tuple(...)`` calls on such values, and the
names of an allow-list (activation functions, optimisers, our callbacks and wrappers, ...). Anything else is a
``ValueError`` that names the offending text.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

#: Calls allowed in a config expression and the Python builtin they build.
_ALLOWED_CALLS: dict[str, type] = {"dict": dict, "list": list, "tuple": tuple}

#: Longest expression parsed (characters): rl-zoo3's longest ``policy_kwargs`` string has about 200. Python's parser
#: needs memory and recursion in proportion to the nesting, so a long chain of signs (``"-" * 100000 + "1"``) would
#: end in a ``MemoryError`` or ``RecursionError``.
MAX_EXPRESSION_LENGTH = 10_000
#: Deepest nesting of the parsed expression (syntax-tree levels; ``dict(net_arch=dict(pi=[64]))`` has 6).
MAX_EXPRESSION_DEPTH = 32

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
    from torch import nn, optim

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


class UnknownNameError(ValueError):
    """A config value names something outside the allow-list; often a string that lacks its quotes.

    :param message: the error message.
    :param name: the refused name, e.g. ``"kl_penalty"``.
    """

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def _dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a plain name, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Evaluator:
    """Evaluates the allowed subset of Python expressions; every refusal names the offending text."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.what = what

    def message(self, node: ast.AST, rule: str) -> str:
        segment = ast.get_source_segment(self.text, node) or self.text
        return f"{self.what}: {segment!r} is not allowed in a config value ({rule}); in {self.text!r}"

    def refuse(self, node: ast.AST, rule: str) -> ValueError:
        return ValueError(self.message(node, rule))

    def refuse_name(self, node: ast.expr, name: str) -> UnknownNameError:
        near = nearest_short_name(name)
        if near is not None:
            rule = f"not an allowed name; did you mean {near}?"
        else:
            rule = f"not an allowed name: string values need quotes, e.g. {name!r}; the names allowed are {NAME_RULE}"
        return UnknownNameError(self.message(node, rule), name)

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float, str, type(None))):
                return node.value
            raise self.refuse(node, "only numbers, strings, booleans and None are allowed as constants")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.value(node.operand)
            if isinstance(operand, bool) or not isinstance(operand, (int, float)):
                raise self.refuse(node, "a sign may only precede a number")
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.List):
            return [self.value(element) for element in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(element) for element in node.elts)
        if isinstance(node, ast.Set):
            return self.hashed(node, set, [self.value(element) for element in node.elts])
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise self.refuse(node, "'**' unpacking is not allowed")
            pairs = zip(node.keys, node.values)
            items = [(self.value(key), self.value(value)) for key, value in pairs]  # type: ignore[arg-type]
            return self.hashed(node, dict, items)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            dotted = _dotted_name(node)
            if dotted is None:
                raise self.refuse(node, f"attribute access is only allowed in names: {NAME_RULE}")
            resolved = resolve_name(dotted)
            if resolved is not None:
                return resolved
            raise self.refuse_name(node, dotted)
        raise self.refuse(node, f"{type(node).__name__} expressions are not allowed; use literals, dict(), list()")

    def hashed(self, node: ast.expr, builder: type, contents: list[Any]) -> Any:
        """``builder(contents)`` (a set of the members, a dict of the pairs), refused when a key is unhashable."""
        try:
            return builder(contents)
        except TypeError:
            raise self.refuse(node, "dict keys and set members must be hashable: numbers, strings, booleans, None or "
                                    "tuples of them, not lists, dicts or sets") from None

    def call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.func.id not in _ALLOWED_CALLS:
            raise self.refuse(node, f"only calls to {sorted(_ALLOWED_CALLS)} are allowed")
        builder = _ALLOWED_CALLS[node.func.id]
        if any(keyword.arg is None for keyword in node.keywords):
            raise self.refuse(node, "'**' unpacking is not allowed")
        if builder is dict:
            if node.args:
                raise self.refuse(node, "dict() takes keyword arguments only, e.g. dict(pi=[64], vf=[64])")
            return {keyword.arg: self.value(keyword.value) for keyword in node.keywords}
        if node.keywords or len(node.args) > 1 or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.refuse(node, f"{node.func.id}() takes at most one list or tuple argument")
        if not node.args:
            return builder()
        argument = self.value(node.args[0])
        if not isinstance(argument, (list, tuple)):
            raise self.refuse(node, f"{node.func.id}() takes a list or tuple literal")
        return builder(argument)


def parse_expression(text: str, *, what: str = "config value") -> Any:
    """Evaluate ``text`` as a restricted Python expression (the syntax rl-zoo3 feeds to ``eval``).

    :param text: the expression, e.g. ``"dict(net_arch=[64, 64], activation_fn=nn.Tanh)"``.
    :param what: what the text is (a config key, a command-line option), used in error messages.
    :return: the value.
    :raises ValueError: if the text is not valid Python, is longer than :data:`MAX_EXPRESSION_LENGTH` characters,
        nests deeper than :data:`MAX_EXPRESSION_DEPTH` levels or uses anything outside the allowed subset.
    """
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected an expression string, got {text!r}")  # noqa: TRY004 (project rule: ValueError)
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"{what}: the expression is {len(text)} characters long, the limit is {MAX_EXPRESSION_LENGTH} "
                         f"(MAX_EXPRESSION_LENGTH); it starts {text[:40]!r}")
    nesting = f"nests deeper than {MAX_EXPRESSION_DEPTH} levels (MAX_EXPRESSION_DEPTH)"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"{what}: {text!r} is not a valid Python expression ({error.msg})") from None
    except (RecursionError, MemoryError):  # what Python's parser raises for thousands of nested signs or brackets
        raise ValueError(f"{what}: the expression {nesting}; it starts {text[:40]!r}") from None
    if syntax_depth(tree) > MAX_EXPRESSION_DEPTH:
        raise ValueError(f"{what}: the expression {nesting}; it starts {text[:40]!r}")
    return _Evaluator(text.strip(), what).value(tree.body)


def syntax_depth(tree: ast.AST) -> int:
    """The number of levels of ``tree`` (1 for a lone node), counted without recursion and only up to one level
    beyond :data:`MAX_EXPRESSION_DEPTH`."""
    deepest = 0
    pending = [(tree, 1)]
    while pending and deepest <= MAX_EXPRESSION_DEPTH:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest

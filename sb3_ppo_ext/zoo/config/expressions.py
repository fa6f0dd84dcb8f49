"""A restricted parser for the Python-expression strings of zoo configs.

rl-zoo3 passes ``policy_kwargs``, ``normalize``, ``monitor_kwargs`` and every ``--hyperparams`` /
``--env-kwargs`` value to ``eval()``, so a config file or a command line can run any code. This module accepts
only what those values are for: literals (numbers, strings, booleans, ``None``, lists, tuples, dicts, sets),
a leading ``+``/``-`` on a number, ``dict(...)`` / ``list(...)`` / ``tuple(...)`` calls on such values, and the
names of an allow-list (activation functions, optimisers, our callbacks and wrappers, ...:
:mod:`sb3_ppo_ext.allow_list`). Anything else is a ``ValueError`` that names the offending text.
"""

from __future__ import annotations

import ast
from typing import Any

from sb3_ppo_ext.allow_list import NAME_RULE, nearest_short_name, resolve_name

#: Calls allowed in a config expression and the Python builtin they build.
_ALLOWED_CALLS: dict[str, type] = {"dict": dict, "list": list, "tuple": tuple}

#: Longest expression parsed (characters): rl-zoo3's longest ``policy_kwargs`` string has about 200. Python's parser
#: needs memory and recursion in proportion to the nesting, so a long chain of signs (``"-" * 100000 + "1"``) would
#: end in a ``MemoryError`` or ``RecursionError``.
MAX_EXPRESSION_LENGTH = 10_000
#: Deepest nesting of the parsed expression (syntax-tree levels; ``dict(net_arch=dict(pi=[64]))`` has 6).
MAX_EXPRESSION_DEPTH = 32


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
            pairs = zip(node.keys, node.values, strict=True)
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
            raise self.refuse(
                node,
                "dict keys and set members must be hashable: numbers, strings, booleans, None or "
                "tuples of them, not lists, dicts or sets",
            ) from None

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
        raise ValueError(f"{what}: expected an expression string, got {text!r}")  # ValueError, as for every bad setting
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValueError(
            f"{what}: the expression is {len(text)} characters long, the limit is {MAX_EXPRESSION_LENGTH} "
            f"(MAX_EXPRESSION_LENGTH); it starts {text[:40]!r}"
        )
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

"""Input checks shared by the algorithm, the callbacks and the CLI.

Each raises :class:`HyperparameterError` (a ``ValueError``) with a message naming the parameter, the value it got and
the rule it broke, at the moment the object is created, never deep inside training.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any


class HyperparameterError(ValueError, AssertionError):
    """An invalid setting. A ``ValueError`` by meaning; also an ``AssertionError``, because SB3 checks some of the
    same settings with ``assert`` and code written against SB3 may catch that."""


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_inclusive: bool = True, high_inclusive: bool = True) -> float:
    """Check that ``value`` is a finite real number within the given bounds and return it as a float.

    :param name: parameter name, used in the error message.
    :param low: lower bound (``None`` for none).
    :param high: upper bound (``None`` for none).
    :param low_inclusive: whether ``value == low`` is allowed.
    :param high_inclusive: whether ``value == high`` is allowed.
    """
    if not _is_number(value) or not math.isfinite(value):
        raise HyperparameterError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        relation = ">=" if low_inclusive else ">"
        raise HyperparameterError(f"{name} must be {relation} {low}, got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        relation = "<=" if high_inclusive else "<"
        raise HyperparameterError(f"{name} must be {relation} {high}, got {value!r}")
    return float(value)


def check_positive(name: str, value: Any) -> float:
    """Check that ``value`` is a finite number strictly greater than zero."""
    return check_number(name, value, low=0.0, low_inclusive=False)


def check_int(name: str, value: Any, *, minimum: int) -> int:
    """Check that ``value`` is an integer of at least ``minimum`` and return it as an ``int``.

    A float with an integral value (``2048.0``, ``1e6``: what YAML and scientific notation give) counts as that
    integer; ``bool`` does not count as an integer."""
    integral = isinstance(value, numbers.Integral) or isinstance(value, numbers.Real) and float(value).is_integer()
    if isinstance(value, bool) or not integral:
        raise HyperparameterError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise HyperparameterError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of ``choices``; the error suggests the nearest valid one."""
    options = list(choices)
    if value not in options:
        near = difflib.get_close_matches(str(value), options, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise HyperparameterError(f"{name} must be one of {options}, got {value!r}{hint}")
    return value

"""``compile_update``: the minibatch loss run through ``torch.compile``, with an eager fall-back.

Mirrors calling the loss function eagerly: the same function, traced once (``dynamic=False``) and run as a compiled
graph for its forward and backward, to float32 rounding. Guarded: where compiling or running the compiled graph
fails (no C++ compiler, an unsupported platform, a backend error), it warns once and calls the function eagerly
from then on. While compiled, numbers among the arguments (alone or as the fields of a named tuple, such as the loss's
:class:`~sb3_ppo_ext.ppo.loss.LossCoefficients`) are handed over as 0-d float32 tensors, so that a schedule or an
adaptive beta does not trigger a recompilation; eagerly they stay numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Real
from typing import Any, Generic, TypeVar

import torch as th

F = TypeVar("F", bound=Callable[..., Any])


class CompiledOrEager(Generic[F]):
    """``function`` compiled with ``torch.compile`` when ``enabled``, eager when not or once compiling has failed.

    :param function: the function to compile (the minibatch loss).
    :param enabled: whether to compile at all (``compile_update``).
    :param device: where the numbers handed to the compiled function go as tensors.
    """

    def __init__(self, function: F, enabled: bool, device: th.device | str = "cpu") -> None:
        self.function = function
        self.enabled = enabled
        self.device = device
        self.failed = False
        self.compiled: Callable[..., Any] | None = None
        self._last_tuple: tuple[Any, Any] = (None, None)

    @property
    def compiling(self) -> bool:
        """Whether calls go through the compiled function."""
        return self.enabled and not self.failed

    def _as_input(self, value: Any) -> Any:
        """``value`` as the compiled function takes it: a number (not a bool) as a 0-d float32 tensor on ``device``,
        a named tuple of numbers (bools and ``None`` kept) with each number so, anything else as it is. The last
        named tuple converted is kept, so one given at every call (once per update) is converted once."""
        if isinstance(value, Real) and not isinstance(value, bool):
            return th.tensor(float(value), dtype=th.float32, device=self.device)
        if not (isinstance(value, tuple) and hasattr(value, "_fields")):
            return value
        if value is self._last_tuple[0]:
            return self._last_tuple[1]
        if not all(field is None or isinstance(field, Real) for field in value):
            return value
        make: Any = type(value)  # the named tuple's class
        converted = make(*(field if isinstance(field, bool) or field is None else self._as_input(field) for field in value))
        self._last_tuple = (value, converted)
        return converted

    def __call__(self, *args: Any) -> Any:
        if self.compiling:
            if self.compiled is None:
                self.compiled = th.compile(self.function, dynamic=False)
            try:
                return self.compiled(*(self._as_input(arg) for arg in args))
            except Exception as error:  # no C++ compiler, unsupported platform, backend error ...
                self.failed = True
                warnings.warn(
                    f"compile_update: torch.compile failed ({type(error).__name__}: {error}); "
                    "the update runs eagerly from now on",
                    RuntimeWarning,
                )
        return self.function(*args)

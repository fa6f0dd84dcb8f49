"""``compile_update``: the minibatch loss run through ``torch.compile``, with an eager fall-back.

Mirrors calling the loss function eagerly: the same function, traced once (``dynamic=False``) and run as a compiled
graph for its forward and backward, to float32 rounding. Guarded: where compiling or running the compiled graph
fails (no C++ compiler, an unsupported platform, a backend error), it warns once and calls the function eagerly
from then on; :meth:`CompiledOrEager.constants` hands the loss's changing constants (clip range, beta) over as 0-d
tensors while compiled, so that a schedule or an adaptive beta does not trigger a recompilation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch as th


class CompiledOrEager:
    """``function`` compiled with ``torch.compile`` when ``enabled``, eager when not or once compiling has failed.

    :param function: the function to compile (the minibatch loss).
    :param enabled: whether to compile at all (``compile_update``).
    :param device: where :meth:`constants` puts its tensors.
    """

    def __init__(self, function: Callable[..., Any], enabled: bool, device: th.device | str = "cpu") -> None:
        self.function = function
        self.enabled = enabled
        self.device = device
        self.failed = False
        self.compiled: Callable[..., Any] | None = None

    @property
    def compiling(self) -> bool:
        """Whether calls go through the compiled function."""
        return self.enabled and not self.failed

    def constants(self, *values: float | None) -> tuple[Any, ...]:
        """``values`` as they should be passed: 0-d float32 tensors while compiling (``None`` stays ``None``)."""
        if not self.compiling:
            return values
        return tuple(None if value is None else th.tensor(value, dtype=th.float32, device=self.device) for value in values)

    def __call__(self, *args: Any) -> Any:
        if self.compiling:
            if self.compiled is None:
                self.compiled = th.compile(self.function, dynamic=False)
            try:
                return self.compiled(*args)
            except Exception as error:  # no C++ compiler, unsupported platform, backend error ...
                self.failed = True
                warnings.warn(f"compile_update: torch.compile failed ({type(error).__name__}: {error}); "
                              "the update runs eagerly from now on", RuntimeWarning)
        return self.function(*args)

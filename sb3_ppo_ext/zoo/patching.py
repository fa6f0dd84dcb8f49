"""Temporary replacement of names in rl-zoo3's modules (and attributes of objects) while one of its scripts runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def patched_zoo_module(module: Any, **replacements: Any) -> Iterator[None]:
    """Temporarily replace module-level names of an rl-zoo3 script (its ``StoreDict``, ``ExperimentManager``), or
    attributes of an object."""
    originals = {name: getattr(module, name) for name in replacements}
    for name, value in replacements.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in originals.items():
            setattr(module, name, value)

"""Command-line ``key:value`` items (``--hyperparams``, ``--env-kwargs``, ``--vec-env-kwargs``) parsed without
``eval``."""

from __future__ import annotations

import argparse
from typing import Any

from sb3_ppo_ext.allow_list import nearest_short_name
from sb3_ppo_ext.zoo.config.blocks import is_schedule_text
from sb3_ppo_ext.zoo.config.expressions import UnknownNameError, parse_expression

#: rl-zoo3's names of the option that overrides a config block's settings.
HYPERPARAMETER_OPTIONS = ("--hyperparams", "-params")


def parse_key_value_arguments(values: list[str], *, option: str) -> dict[str, Any]:
    """Parse ``key:value`` command-line items, each value with :func:`parse_expression` (rl-zoo3 uses ``eval``).

    A linear schedule given to a schedule key (``learning_rate:lin_3e-4``) is the string it spells, as in a config
    file. Any other value that is one unknown name, such as ``objective:kl_penalty``, is refused with the quoting that
    makes it a string on the command line (``objective:"'kl_penalty'"``: the shell removes the outer quotes).
    """
    parsed: dict[str, Any] = {}
    for item in values:
        key, separator, text = item.partition(":")
        if not separator or not key:
            raise ValueError(f"{option}: expected key:value items, got {item!r}")
        if option in HYPERPARAMETER_OPTIONS and is_schedule_text(key, text):
            parsed[key] = text.strip()
            continue
        try:
            parsed[key] = parse_expression(text, what=f"{option} {key}")
        except UnknownNameError as error:
            if error.name != text.strip() or nearest_short_name(error.name) is not None:
                raise
            raise ValueError(
                f"{option} {key}: {error.name} is not an allowed name; string values need quotes: "
                f"{key}:\"'{error.name}'\" (the shell removes the outer ones)"
            ) from None
    return parsed


class SafeStoreDict(argparse.Action):
    """Drop-in for rl-zoo3's ``StoreDict`` (``--hyperparams``, ``--env-kwargs``) that never calls ``eval``."""

    def __init__(self, option_strings: list[str], dest: str, nargs: Any = None, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        try:
            setattr(namespace, self.dest, parse_key_value_arguments(list(values), option=option_string or self.dest))
        except ValueError as error:
            parser.error(str(error))

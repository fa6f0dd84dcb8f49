"""A zoo config file's block as ``train`` reads it: rl-zoo3's own ``read_hyperparameters``, given the document read
within the limits of :mod:`~sb3_ppo_ext.zoo.config.yaml_files` and checked (rl-zoo3 reads it with an unbounded
``yaml.safe_load``), its ``pprint`` of the block held back until :func:`check_read_block` has checked it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pprint import pprint
from typing import Any
from unittest.mock import patch

from rl_zoo3 import exp_manager

from sb3_ppo_ext.zoo.config.blocks import (
    check_block_keys,
    check_block_values,
    check_config_document,
    check_policy_arguments,
    number_keys,
    preprocess_block,
    valid_keys,
)
from sb3_ppo_ext.zoo.config.yaml_files import load_yaml_file


class _ReadDocument:
    """Stands in for the ``yaml`` module of rl-zoo3's ``exp_manager`` while it reads the config: its ``safe_load``
    gives the document read and checked already (:func:`read_config_document`), so the file is parsed once, and what
    is checked is what is used."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def safe_load(self, stream: Any) -> dict[str, Any]:
        return self.document


class DeferredPrint:
    """Stands in for the ``pprint`` of rl-zoo3's ``exp_manager`` while it reads the config: rl-zoo3 prints the block
    before anything has checked it (a block of aliases of one long string prints gigabytes), so the values are kept
    and printed by :meth:`print_all` once :func:`check_read_block` has checked them."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> None:
        self.values.append(value)

    def print_all(self) -> None:
        """Print the kept values with ``pprint``, as rl-zoo3 would have."""
        for value in self.values:
            pprint(value)
        self.values.clear()


def check_yaml_config_path(config: str) -> None:
    """Refuse a config file that is not YAML: rl-zoo3 would execute a Python config file (or import a module).

    :raises ValueError: naming the file.
    """
    if not config.endswith((".yml", ".yaml")):
        raise ValueError(
            f"conf_file must be a YAML file (.yml or .yaml): rl-zoo3 would execute Python config files, got {config!r}"
        )


def read_config_document(config: str) -> dict[str, Any]:
    """The config file ``config``, read within the YAML limits and checked for the shape rl-zoo3 assumes (env ids
    mapped to blocks, :func:`~sb3_ppo_ext.zoo.config.blocks.check_config_document`)."""
    return check_config_document(load_yaml_file(config), where=config)


@contextmanager
def reading_document(document: dict[str, Any], deferred: DeferredPrint) -> Iterator[None]:
    """While rl-zoo3's ``read_hyperparameters`` runs: its ``yaml.safe_load`` gives ``document`` (read and checked
    already, so what is checked is what is used) and its ``pprint`` is held back in ``deferred``."""
    with patch.multiple(exp_manager, yaml=_ReadDocument(document), pprint=deferred):
        yield


def check_read_block(
    hyperparams: dict[str, Any],
    saved_hyperparams: dict[str, Any],
    *,
    algorithm: type[Any],
    n_timesteps: int,
    where: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The block rl-zoo3 read (merged with ``--hyperparams`` and an Optuna trial), checked and parsed: its keys
    (:func:`~sb3_ppo_ext.zoo.config.blocks.check_block_keys`), ``n_timesteps`` (from ``-n`` when the block has
    none), its expressions (:func:`~sb3_ppo_ext.zoo.config.blocks.preprocess_block`), its values and policy
    arguments; the saved form (``config.yml``) gets numbers written as strings as numbers and ``normalize`` parsed.

    :param hyperparams: the block rl-zoo3 read.
    :param saved_hyperparams: what rl-zoo3 saves as the run's ``config.yml`` (changed in place).
    :param algorithm: the algorithm class of the run.
    :param n_timesteps: ``-n`` (<= 0 when not given).
    :param where: the block's name in messages.
    :return: the parsed block and the saved form.
    :raises ValueError: naming ``where`` and the setting that is refused.
    """
    check_block_keys(hyperparams, valid_keys(algorithm), where=where)
    if "n_timesteps" not in hyperparams:
        if n_timesteps <= 0:
            raise ValueError(f"n_timesteps is missing from {where}: set it there or pass -n")
        hyperparams["n_timesteps"] = n_timesteps
    parsed = preprocess_block(hyperparams, where=where, algorithm=algorithm)
    for key in saved_hyperparams.keys() & number_keys(algorithm):
        if isinstance(saved_hyperparams[key], str) and isinstance(parsed[key], (int, float)):
            saved_hyperparams[key] = parsed[key]  # a number written as a string: config.yml holds the number
    check_block_values(parsed, where=where)
    check_policy_arguments(parsed, algorithm, where=where)
    if isinstance(parsed.get("normalize"), dict):
        # rl-zoo3's enjoy / record_video would eval a string here: save the parsed form (a copy, because
        # rl-zoo3 adds gamma to the dict it is given).
        saved_hyperparams["normalize"] = dict(parsed["normalize"])
    return parsed, saved_hyperparams


def sorted_block(hyperparams: dict[str, Any]) -> OrderedDict:
    """``hyperparams`` in the key order rl-zoo3 saves a block in."""
    return OrderedDict((key, hyperparams[key]) for key in sorted(hyperparams))

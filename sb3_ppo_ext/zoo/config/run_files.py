"""The files a run folder holds about its settings (``<run>/<env>/config.yml`` and ``args.yml``), read without running
code and checked as a config block is, before any command acts on them."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from rl_zoo3.utils import get_saved_hyperparams as zoo_get_saved_hyperparams

from sb3_ppo_ext.validation import check_env_id
from sb3_ppo_ext.zoo.config.blocks import check_block_values, preprocess_block
from sb3_ppo_ext.zoo.config.yaml_files import check_yaml_limits, read_yaml_text


class _RunFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader plus the one Python tag plain rl-zoo3 writes into run files (``OrderedDict``)."""


def _construct_ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> OrderedDict:
    if not isinstance(node, yaml.SequenceNode):
        raise yaml.constructor.ConstructorError(None, None, "expected the arguments of OrderedDict", node.start_mark)
    arguments = loader.construct_sequence(node, deep=True)
    return OrderedDict(arguments[0] if arguments else ())


_RunFileLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _construct_ordered_dict)


def load_run_yaml(path: str) -> Any:
    """Read a run's ``config.yml`` / ``args.yml`` without running code.

    rl-zoo3 reads these with PyYAML's unsafe loader, which builds any Python object a tag names. Here only plain
    YAML and ``!!python/object/apply:collections.OrderedDict`` (what plain rl-zoo3 writes) are accepted, within the
    size, nesting and alias limits of :mod:`sb3_ppo_ext.zoo.config.yaml_files`.

    :raises ValueError: for any other Python tag, invalid YAML or a broken limit.
    """
    text = read_yaml_text(path)
    check_yaml_limits(text, where=path)
    try:
        return yaml.load(text, Loader=_RunFileLoader)  # a SafeLoader subclass: no arbitrary tags
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not plain YAML (Python tags other than OrderedDict are refused): {error}") from None


@dataclass(frozen=True)
class RunSettings:
    """A run's saved settings, read and checked by :func:`check_run_folder`.

    :param config: ``config.yml``: the hyperparameters the run trained with, as saved (expression strings unparsed);
        empty when the file is missing.
    :param arguments: ``args.yml``: the command-line options of the run; empty when the file is missing.
    """

    config: dict[str, Any]
    arguments: dict[str, Any]


def check_run_folder(stats_path: str) -> RunSettings:
    """Read and check the files every command reads from a run folder (``<run>/<env>/config.yml`` and ``args.yml``),
    before anything acts on them: the one gate for ``enjoy``, ``record-video``, ``export``, ``train --resume`` and
    the packing of a run as an agent.

    A run folder may come from anywhere (downloaded, shared), and rl-zoo3 acts on what these files name: it imports
    and calls the classes of ``env_wrapper`` / ``vec_env_wrapper`` / ``callback``, ``eval``s ``normalize`` and
    ``policy_kwargs``, and gymnasium imports the module of an env id ``module:Env-v0``. So ``config.yml`` gets the
    checks of a config block (:func:`preprocess_block`: the allow-list of class paths, the restricted expression
    parser; :func:`check_block_values`: types and sizes) and ``args.yml``'s env id :func:`check_env_id`. Both files
    must pass :func:`load_run_yaml`. Missing files are fine (the command reports them).

    :param stats_path: the run's parameter folder, ``logs/<algo>/<env>_<n>/<env>``.
    :raises ValueError: naming the file and the setting that is refused.
    """
    documents: dict[str, dict[str, Any]] = {}
    for name in ("config.yml", "args.yml"):
        path = os.path.join(stats_path, name)
        documents[name] = {}
        if not os.path.isfile(path):
            continue
        content = load_run_yaml(path)
        if content is None:
            continue
        if not isinstance(content, Mapping):
            raise ValueError(f"{path} is not a mapping of settings (got {type(content).__name__})")
        documents[name] = dict(content)
    config, arguments = documents["config.yml"], documents["args.yml"]
    where = os.path.join(stats_path, "config.yml")
    try:
        check_block_values(preprocess_block(config, where=where), where=where)
    except ValueError as error:
        message = str(error)
        raise ValueError(message if where in message else f"{where}: {message}") from None
    if arguments.get("env") is not None:
        check_env_id(arguments["env"], where=os.path.join(stats_path, "args.yml"))
    return RunSettings(config=config, arguments=arguments)


def checked_get_saved_hyperparams(stats_path: str, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], str | None]:
    """rl-zoo3's ``get_saved_hyperparams`` after :func:`check_run_folder` on the same ``stats_path``.

    rl-zoo3's enjoy / record_video call this function on the run's parameter folder to read its ``config.yml``, then
    read ``args.yml`` from the same folder; swapped in for it, the check (of both files) sees exactly the folder that
    is loaded, however the command line named it (``-f X``, ``--folder=X``, ``--exp-id``, defaults).
    """
    check_run_folder(stats_path)
    return zoo_get_saved_hyperparams(stats_path, *args, **kwargs)

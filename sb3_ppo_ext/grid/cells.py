"""A grid file (YAML) and the cells it names: one training run per (task, variant, seed), with the folder layout of a
cell under the grid's root."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sb3_ppo_ext.validation import MAX_GRID_CELLS, check_int, check_kwargs
from sb3_ppo_ext.zoo.config.blocks import MAX_N_TIMESTEPS
from sb3_ppo_ext.zoo.config.yaml_files import UniqueKeyLoader, load_yaml_file

#: The keys a task's entry may hold (``defaults`` may hold all but ``seeds`` and ``variants``).
CELL_KEYS = {"seeds", "variants", "n_timesteps", "eval_freq", "eval_episodes", "env_kwargs", "save_freq"}
#: The keys a variant's entry may hold.
VARIANT_KEYS = {"algo", "conf", "hyperparams", "trained_agent"}
#: The variant keys ``defaults`` may hold as well: every variant takes them unless it names its own (``conf: null``
#: in a variant brings back the algorithm's bundled config file), except ``hyperparams``, which merge: a variant's
#: own are laid over the defaults' key by key (a variant that differs in one setting names only that one).
DEFAULT_VARIANT_KEYS = {"algo", "conf", "hyperparams"}
#: The file a cell's folder holds once its training finished (the cell's settings, wall clock and command).
DONE_FILE = "done.json"
#: The env seed of ``evaluate``'s final evaluations: one for every cell, so that every policy meets the same starts.
FINAL_EVAL_SEED = 10_000
#: The file of a cell's final evaluation (``evaluate``), in its folder.
FINAL_EVAL_FILE = "final_eval.json"
#: The VecEnv of every cell, new or resumed: the grid runs one cell per core (``--num-threads 1``), so a cell's envs
#: step in its own process rather than in worker processes of the task's preferred VecEnv.
CELL_VEC_ENV: tuple[str, ...] = ("--vec-env", "dummy")
#: The torch threads of every cell: one, as the cells share the machine's cores one each.
CELL_THREADS: tuple[str, ...] = ("--num-threads", "1")
#: What a variant's name and a task's folder name (its id, ``/`` written as ``-``) may be: they become folders under
#: the grid's root, so no ``/``, no ``..``, no leading ``.`` or ``-`` (which ``train`` would read as an option).
PATH_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,99}")
#: Largest seed (numpy's seeds are 32-bit).
MAX_SEED = 2**32 - 1


def check_path_component(what: str, name: Any) -> str:
    """Check that ``name`` may become one folder name under the grid's root (:data:`PATH_COMPONENT`) and return it.

    :param what: what the name is and where it was read, used in the message.
    :raises ValueError: naming ``what``, the name and the rule.
    """
    if not isinstance(name, str) or not PATH_COMPONENT.fullmatch(name):
        raise ValueError(
            f"{what} {name!r} cannot name a folder under the grid's root: up to 100 letters, digits and _ . + = -, "
            "not starting with . or -"
        )
    return name


def inside_root(root: str, path: str) -> str:
    """``path``, after checking that it lies under ``root`` once every symbolic link is resolved.

    :raises ValueError: for a path that leads outside ``root``.
    """
    real_root, real_path = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real_path]) != real_root:
        raise ValueError(f"{path} leads outside the grid's root {root} (to {real_path}); refused")
    return path


@dataclasses.dataclass(frozen=True)
class Cell:
    """One training run of the grid: a task, a variant of the algorithm or its settings, and a seed.

    :param task: the env id.
    :param variant: the variant's name in the grid file.
    :param seed: the run's seed.
    :param algo: the ``sb3-ppo-ext train --algo`` of the variant.
    :param conf: the variant's config file (absolute), or ``None`` for the algorithm's bundled one.
    :param hyperparams: the variant's ``--hyperparams`` overrides (and the task's ``env_kwargs``), sorted by key.
    :param n_timesteps: the training budget, or ``None`` for the config's.
    :param eval_freq: steps between rl-zoo3's periodic evaluations.
    :param eval_episodes: episodes per periodic evaluation.
    :param save_freq: steps between checkpoints (what an interrupted cell resumes from), or ``None`` for none.
    :param trained_agent: a model zip (absolute) the cell starts from (rl-zoo3's ``-i``), or ``None``.
    """

    task: str
    variant: str
    seed: int
    algo: str = "ppo_ext"
    conf: str | None = None
    hyperparams: tuple[tuple[str, Any], ...] = ()
    n_timesteps: int | None = None
    eval_freq: int = 50_000
    eval_episodes: int = 10
    save_freq: int | None = None
    trained_agent: str | None = None

    def folder(self, root: str) -> str:
        """``<root>/<task>/<variant>/seed_<S>``, the task id's ``/`` written as ``-`` (as rl-zoo3 does).

        :raises ValueError: when a name is not a folder name (:func:`check_path_component`) or the folder leads
            outside ``root`` through a symbolic link (:func:`inside_root`).
        """
        task_folder = check_path_component("the task", self.task.replace("/", "-"))
        variant_folder = check_path_component("the variant", self.variant)
        return inside_root(root, os.path.join(root, task_folder, variant_folder, f"seed_{self.seed}"))

    def train_argv(self, folder: str) -> list[str]:
        """The ``sb3-ppo-ext train`` arguments of this cell."""
        argv = [
            "train",
            "--algo",
            self.algo,
            "--env",
            self.task,
            "--seed",
            str(self.seed),
            "-f",
            folder,
            *CELL_THREADS,
            *CELL_VEC_ENV,
            "--eval-freq",
            str(self.eval_freq),
            "--eval-episodes",
            str(self.eval_episodes),
            "--no-progress",
        ]
        if self.conf is not None:
            argv += ["--conf-file", self.conf]
        if self.trained_agent is not None:
            argv += ["-i", self.trained_agent]
        if self.n_timesteps is not None:
            argv += ["-n", str(self.n_timesteps)]
        if self.save_freq is not None:
            argv += ["--save-freq", str(self.save_freq)]
        if self.hyperparams:
            argv += ["--hyperparams", *(f"{key}:{value!r}" for key, value in self.hyperparams)]
        return argv

    def resume_argv(self, run_folder: str) -> list[str]:
        """The ``sb3-ppo-ext train`` arguments that continue this cell's interrupted run from its newest checkpoint."""
        argv = ["train", "--resume", run_folder, *CELL_THREADS, *CELL_VEC_ENV, "--no-progress"]
        if self.n_timesteps is not None:
            argv += ["-n", str(self.n_timesteps)]
        if self.save_freq is not None:
            argv += ["--save-freq", str(self.save_freq)]
        return argv


def _check_keys(where: str, given: Iterable[str], allowed: set[str]) -> None:
    """Raise a ``ValueError`` naming ``where`` and the keys of ``given`` that are not ``allowed``."""
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _mapping(where: str, value: Any) -> Mapping[str, Any]:
    """``value`` (``None``: empty) after checking that it is a mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping, got {value!r}")
    return value


def _seeds(where: str, seeds: Any) -> list[int]:
    """A task's ``seeds``: a list of integers from 0 to :data:`MAX_SEED` (not booleans)."""
    if not isinstance(seeds, list) or not seeds:
        raise ValueError(f"{where}: seeds must be a non-empty list of non-negative integers, got {seeds!r}")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(
                f"{where}: seeds must be a list of non-negative integers (at most {MAX_SEED}), got {seed!r} in {seeds!r}"
            )
    _refuse_repeats(f"{where}: seeds", seeds)
    return seeds


def _refuse_repeats(where: str, names: list[Any]) -> None:
    """Refuse a seed or variant named twice: the two cells would be one folder, trained by two processes at once."""
    seen: set[Any] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{where} names {name!r} twice (one cell, one folder: list it once)")
        seen.add(name)


def load_grid(path: str, relative_to: str | None = None) -> list[Cell]:
    """The cells of a grid file, in file order (task, then variant, then seed).

    The file is read within the limits of :mod:`~sb3_ppo_ext.zoo.config.yaml_files` (size, nesting, alias expansion; no
    Python tags; no key twice in a mapping). Task and variant names must be folder names (:func:`check_path_component`),
    hyperparameter keys argument names, seeds integers from 0 to :data:`MAX_SEED`, the budgets and frequencies
    positive integers, ``env_kwargs`` (a task's, or a variant's hyperparameter) a mapping without ``render_mode``.

    :param path: the grid file (YAML).
    :param relative_to: the folder that relative ``conf`` and ``trained_agent`` paths start from (default: the
        current directory).
    :raises ValueError: naming the file, and the task or variant whose entry is malformed.
    """
    spec = load_yaml_file(path, loader=UniqueKeyLoader)
    if not isinstance(spec, dict) or not isinstance(spec.get("tasks"), dict) or not spec["tasks"]:
        raise ValueError(f"{path}: a grid file needs a non-empty 'tasks' mapping")
    _check_keys(path, spec, {"defaults", "variants", "tasks"})
    defaults = dict(_mapping(f"{path}: defaults", spec.get("defaults")))
    _check_keys(f"{path}: defaults", defaults, (CELL_KEYS - {"seeds", "variants"}) | DEFAULT_VARIANT_KEYS)
    variant_defaults = {key: defaults.pop(key) for key in DEFAULT_VARIANT_KEYS if key in defaults}
    _mapping(f"{path}: defaults: hyperparams", variant_defaults.get("hyperparams"))
    variants = _mapping(f"{path}: variants", spec.get("variants")) or {"ppo_ext": {}}
    for name, variant in variants.items():
        check_path_component(f"{path}: the variant", name)
        _check_keys(f"{path}: variant {name!r}", _mapping(f"{path}: variant {name!r}", variant), VARIANT_KEYS)
        _mapping(f"{path}: variant {name!r}: hyperparams", (variant or {}).get("hyperparams"))
    base = os.path.abspath(relative_to if relative_to is not None else os.curdir)
    cells: list[Cell] = []
    for task, task_entry in spec["tasks"].items():
        if not isinstance(task, str):
            raise ValueError(f"{path}: task names must be env id strings, got {task!r}")
        check_path_component(f"{path}: the task", task.replace("/", "-"))
        entry = {**defaults, **_mapping(f"{path}: task {task!r}", task_entry)}
        _check_keys(f"{path}: task {task!r}", entry, CELL_KEYS)
        seeds = _seeds(f"{path}: task {task!r}", entry.get("seeds", [0]))
        named = entry.get("variants", list(variants))
        if not isinstance(named, list):
            raise ValueError(f"{path}: task {task!r}: variants must be a list of variant names, got {named!r}")
        _refuse_repeats(f"{path}: task {task!r}: variants", named)
        if len(cells) + len(named) * len(seeds) > MAX_GRID_CELLS:
            raise ValueError(f"{path}: more than {MAX_GRID_CELLS} cells (tasks x variants x seeds); split the grid")
        for name in named:
            if name not in variants:
                raise ValueError(f"{path}: task {task!r} names variant {name!r}, not one of {sorted(variants)}")
            variant = _with_defaults(variant_defaults, variants[name] or {})
            cells += _variant_cells(path, task, entry, seeds, name, variant, base)
    folders: dict[tuple[str, str, int], Cell] = {}
    for cell in cells:
        other = folders.setdefault((cell.task.replace("/", "-"), cell.variant, cell.seed), cell)
        if other is not cell:  # tasks 'a/b' and 'a-b' both train in the folder a-b
            raise ValueError(f"{path}: tasks {other.task!r} and {cell.task!r} would train in one folder; rename one")
    return cells


def _with_defaults(defaults: Mapping[str, Any], variant: Mapping[str, Any]) -> dict[str, Any]:
    """A variant's entry with the grid's defaults under it: its own ``algo`` and ``conf`` replace the defaults', its
    ``hyperparams`` are laid over the defaults' key by key.

    :param defaults: the grid's ``defaults`` keys that variants take (:data:`DEFAULT_VARIANT_KEYS`), ``hyperparams``
        already checked to be a mapping.
    :param variant: the variant's own entry, ``hyperparams`` already checked to be a mapping.
    """
    merged = {**defaults, **variant}
    if "hyperparams" in defaults and "hyperparams" in variant:
        merged["hyperparams"] = {**(defaults["hyperparams"] or {}), **(variant["hyperparams"] or {})}
    return merged


def _count(where: str, name: str, value: Any, maximum: int | None = None) -> int:
    """A grid entry's budget or frequency: a positive integer (``1e6`` counts, as in zoo configs)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass  # refused by the check that follows
    try:
        return check_int(name, value, minimum=1, maximum=maximum)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


#: What a grid's ``algo`` may be: a lower-case name as rl-zoo3's algorithms have (``ppo``, ``ppo_ext``, ``sac``), so
#: that the value is never read as a ``train`` option.
ALGORITHM_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")


def _check_plain_data(where: str, value: Any) -> None:
    """Refuse a value that is not plain data (None, a bool, number or string, or lists and mappings of them): a YAML
    date or timestamp would reach ``train --hyperparams`` as its Python repr.

    :raises ValueError: naming ``where`` and the value.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for item in value:
            _check_plain_data(where, item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_plain_data(f"{where}: {key}", item)
    else:
        raise ValueError(f"{where} must be plain data (numbers, strings, lists, mappings), got {value!r}")


def _variant_cells(
    path: str, task: str, entry: dict[str, Any], seeds: list[int], name: str, variant: dict[str, Any], base: str
) -> list[Cell]:
    """The cells of one variant of a task, one per seed.

    :param path: the grid file (for error messages).
    :param task: the env id.
    :param entry: the task's entry, the grid's defaults merged in.
    :param seeds: the task's seeds.
    :param name: the variant's name.
    :param variant: the variant's entry, the grid's ``algo``, ``conf`` and ``hyperparams`` defaults merged in.
    :param base: the folder relative paths start from.
    """
    where = f"{path}: variant {name!r}"
    for key in ("algo", "conf", "trained_agent"):
        if variant.get(key) is not None and not isinstance(variant[key], str):
            raise ValueError(f"{where}: {key} must be a string, got {variant[key]!r}")
    if not ALGORITHM_NAME_PATTERN.fullmatch(variant.get("algo", "ppo_ext")):
        raise ValueError(
            f"{where}: algo must be an algorithm's name as rl-zoo3 knows it (ppo, ppo_ext), got {variant['algo']!r}"
        )
    conf = variant.get("conf")
    if conf is not None and not os.path.isabs(conf):
        conf = os.path.join(base, conf)
    trained_agent = variant.get("trained_agent")
    if trained_agent is not None:
        trained_agent = os.path.join(base, os.path.expanduser(str(trained_agent)))
        if not trained_agent.endswith(".zip"):
            raise ValueError(f"{where}: trained_agent must be a model .zip, got {variant['trained_agent']!r}")
    hyperparams = dict(_mapping(f"{where}: hyperparams", variant.get("hyperparams")))
    if "env_kwargs" in entry:
        hyperparams["env_kwargs"] = entry["env_kwargs"]
    env_kwargs = hyperparams.get("env_kwargs", {})
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"{where}, task {task!r}: env_kwargs must be a mapping of the task's arguments, got {env_kwargs!r}")
    if "render_mode" in env_kwargs:
        raise ValueError(f"{where}, task {task!r}: env_kwargs must not hold render_mode: a grid's cells train headless")
    check_kwargs(f"{where}: hyperparams", hyperparams)  # keys become `train --hyperparams key:value` items
    _check_plain_data(f"{where}: hyperparams", hyperparams)
    where = f"{path}: task {task!r}"
    n_timesteps = entry.get("n_timesteps")
    n_timesteps = None if n_timesteps is None else _count(where, "n_timesteps", n_timesteps, MAX_N_TIMESTEPS)
    save_freq = entry.get("save_freq")
    save_freq = None if save_freq is None else _count(where, "save_freq", save_freq)
    eval_freq = _count(where, "eval_freq", entry.get("eval_freq", 50_000))
    eval_episodes = _count(where, "eval_episodes", entry.get("eval_episodes", 10))
    return [
        Cell(
            task=task,
            variant=name,
            seed=seed,
            algo=variant.get("algo", "ppo_ext"),
            conf=conf,
            hyperparams=tuple(sorted(hyperparams.items())),
            n_timesteps=n_timesteps,
            eval_freq=eval_freq,
            eval_episodes=eval_episodes,
            save_freq=save_freq,
            trained_agent=trained_agent,
        )
        for seed in seeds
    ]


def cell_folders(root: str) -> list[str]:
    """The cell folders under ``root`` (``<root>/<task>/<variant>/seed_<n>``, whatever they hold), in name order."""
    return sorted(glob.glob(os.path.join(glob.escape(root), "*", "*", "seed_*")))


def cell_seed(seed_folder: str) -> int:
    """The seed of a cell folder (``seed_<n>``).

    :raises ValueError: naming the folder, where ``<n>`` is not a whole number.
    """
    number = os.path.basename(seed_folder).removeprefix("seed_")
    if not (number.isascii() and number.isdigit()):
        raise ValueError(f"{seed_folder}: not a cell folder (seed_<n>, with <n> a whole number)")
    return int(number)


def cell_run_folders(cell_folder: str) -> list[str]:
    """rl-zoo3's run folders inside a cell folder (``<cell>/<algo>/<env>_<n>``), in name order."""
    return sorted(path for path in glob.glob(os.path.join(glob.escape(cell_folder), "*", "*")) if os.path.isdir(path))

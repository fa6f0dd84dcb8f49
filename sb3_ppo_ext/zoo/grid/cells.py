"""A grid file (YAML) and the cells it names: one training run per (task, variant, seed), with the folder layout of a
cell under the grid's root."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import Any

import yaml

#: The keys a task's entry may hold (``defaults`` may hold all but ``seeds`` and ``variants``).
CELL_KEYS = {"seeds", "variants", "n_timesteps", "eval_freq", "eval_episodes", "env_kwargs", "save_freq"}
#: The keys a variant's entry may hold.
VARIANT_KEYS = {"algo", "conf", "hyperparams", "trained_agent"}
#: The file a cell's folder holds once its training finished (the cell's settings, wall clock and command).
DONE_FILE = "done.json"
#: The env seed of ``evaluate``'s final evaluations: one for every cell, so that every policy meets the same starts.
FINAL_EVAL_SEED = 10_000
#: The file of a cell's final evaluation (``evaluate``), in its folder.
FINAL_EVAL_FILE = "final_eval.json"
#: The VecEnv of every cell, new or resumed: the grid runs one cell per core (``--num-threads 1``), so a cell's envs
#: step in its own process rather than in worker processes of the task's preferred VecEnv.
CELL_VEC_ENV: tuple[str, ...] = ("--vec-env", "dummy")


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
        """``<root>/<task>/<variant>/seed_<S>``, the task id's ``/`` written as ``-`` (as rl-zoo3 does)."""
        return os.path.join(root, self.task.replace("/", "-"), self.variant, f"seed_{self.seed}")

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
            "--num-threads",
            "1",
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
        argv = ["train", "--resume", run_folder, "--num-threads", "1", *CELL_VEC_ENV, "--no-progress"]
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


def load_grid(path: str, relative_to: str | None = None) -> list[Cell]:
    """The cells of a grid file, in file order (task, then variant, then seed).

    :param path: the grid file (YAML).
    :param relative_to: the folder that relative ``conf`` and ``trained_agent`` paths start from (default: the
        current directory).
    :raises ValueError: naming the task or variant whose entry is malformed.
    """
    with open(path, encoding="utf-8") as stream:
        spec = yaml.safe_load(stream)
    if not isinstance(spec, dict) or not isinstance(spec.get("tasks"), dict) or not spec["tasks"]:
        raise ValueError(f"{path}: a grid file needs a non-empty 'tasks' mapping")
    _check_keys(path, spec, {"defaults", "variants", "tasks"})
    defaults = spec.get("defaults") or {}
    _check_keys(f"{path}: defaults", defaults, CELL_KEYS - {"seeds", "variants"})
    variants = spec.get("variants") or {"ppo_ext": {}}
    for name, variant in variants.items():
        _check_keys(f"{path}: variant {name!r}", variant or {}, VARIANT_KEYS)
    base = os.path.abspath(relative_to if relative_to is not None else os.curdir)
    cells = []
    for task, entry in spec["tasks"].items():
        entry = {**defaults, **(entry or {})}
        _check_keys(f"{path}: task {task!r}", entry, CELL_KEYS)
        seeds = entry.get("seeds", [0])
        if not isinstance(seeds, list) or not all(isinstance(seed, int) and seed >= 0 for seed in seeds):
            raise ValueError(f"{path}: task {task!r}: seeds must be a list of non-negative integers, got {seeds!r}")
        for name in entry.get("variants", list(variants)):
            if name not in variants:
                raise ValueError(f"{path}: task {task!r} names variant {name!r}, not one of {sorted(variants)}")
            cells += _variant_cells(path, task, entry, seeds, name, variants[name] or {}, base)
    return cells


def _variant_cells(
    path: str, task: str, entry: dict[str, Any], seeds: list[int], name: str, variant: dict[str, Any], base: str
) -> list[Cell]:
    """The cells of one variant of a task, one per seed.

    :param path: the grid file (for error messages).
    :param task: the env id.
    :param entry: the task's entry, the grid's defaults merged in.
    :param seeds: the task's seeds.
    :param name: the variant's name.
    :param variant: the variant's entry.
    :param base: the folder relative paths start from.
    """
    conf = variant.get("conf")
    if conf is not None and not os.path.isabs(conf):
        conf = os.path.join(base, conf)
    trained_agent = variant.get("trained_agent")
    if trained_agent is not None:
        trained_agent = os.path.join(base, os.path.expanduser(str(trained_agent)))
        if not trained_agent.endswith(".zip"):
            raise ValueError(f"{path}: variant {name!r}: trained_agent must be a model .zip, got {variant['trained_agent']!r}")
    hyperparams = dict(variant.get("hyperparams") or {})
    if "env_kwargs" in entry:
        hyperparams["env_kwargs"] = entry["env_kwargs"]
    n_timesteps = entry.get("n_timesteps")
    save_freq = entry.get("save_freq")
    return [
        Cell(
            task=task,
            variant=name,
            seed=seed,
            algo=variant.get("algo", "ppo_ext"),
            conf=conf,
            hyperparams=tuple(sorted(hyperparams.items())),
            n_timesteps=None if n_timesteps is None else int(float(n_timesteps)),
            eval_freq=int(float(entry.get("eval_freq", 50_000))),
            eval_episodes=int(entry.get("eval_episodes", 10)),
            save_freq=None if save_freq is None else int(float(save_freq)),
            trained_agent=trained_agent,
        )
        for seed in seeds
    ]

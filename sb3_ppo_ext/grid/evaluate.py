"""Final evaluations of finished cells: many deterministic episodes of the final model from one fixed env seed, and the
starts that every seed failed."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.grid.cells import DONE_FILE, FINAL_EVAL_FILE, FINAL_EVAL_SEED, cell_folders, cell_seed
from sb3_ppo_ext.grid.collect import read_json_object
from sb3_ppo_ext.pretrained import evaluate_agent
from sb3_ppo_ext.zoo.packing import save_pretrained_from_run


def evaluate_cells(root: str, episodes: int, tasks: Sequence[str] | None = None) -> list[str]:
    """Evaluate the final model of every finished cell on ``episodes`` deterministic episodes from env seed
    :data:`~sb3_ppo_ext.grid.cells.FINAL_EVAL_SEED` (the same starts for every cell), through the plain-data
    agent files a shipped agent uses; writes ``final_eval.json`` into the cell. Cells already evaluated with as many
    episodes are skipped, and cells without ``done.json`` (unfinished, or being trained further). A cell whose
    ``done.json`` or ``final_eval.json`` is damaged gets a line ``FAIL  <cell> (<what is wrong>)`` and is left as it
    is; the other cells are evaluated all the same.

    :returns: one line per cell evaluated, skipped or failed.
    """
    lines = []
    for seed_folder in cell_folders(root):
        done_path = os.path.join(seed_folder, DONE_FILE)
        if not os.path.isfile(done_path):
            continue
        final_path = os.path.join(seed_folder, FINAL_EVAL_FILE)
        try:
            task = read_json_object(done_path, {"task": (str,)})["task"]
            evaluated = read_json_object(final_path, {"episodes": (int,)})["episodes"] if os.path.isfile(final_path) else None
        except (OSError, ValueError) as error:
            lines.append(f"FAIL  {seed_folder} ({error})")
            continue
        if tasks and task not in tasks:
            continue
        if evaluated == episodes:
            lines.append(f"skip  {seed_folder} (evaluated)")
            continue
        with tempfile.TemporaryDirectory() as agent:
            try:
                facts = save_pretrained_from_run(seed_folder, agent)
            except ValueError as error:  # e.g. an off-policy actor (DDPG): not an actor-critic policy to pack
                lines.append(f"skip  {seed_folder} (no final evaluation: {error}; report uses its periodic ones)")
                continue
            summary = {**evaluate_agent(agent, episodes, seed=FINAL_EVAL_SEED), "timesteps": facts["timesteps"]}
        with atomic_write(final_path, "w") as stream:  # a stop mid-write leaves no half file
            json.dump(summary, stream, indent=1)
        lines.append(f"eval  {seed_folder}: {summary['mean_return']:.1f} over {episodes} episodes")
    return lines


def shared_failures(root: str) -> list[str]:
    """Per task and variant, the starts of the final evaluations (``evaluate``: the same starts for every cell) that
    failed for every seed, and for all but one: hard starts rather than one policy's slips. From the
    ``failed_episodes`` of each finished cell's ``final_eval.json`` (tasks that report success); a cell without
    ``done.json`` (being trained further) is left out, as its ``final_eval.json`` is of a model it has moved past.

    :returns: one line per task and variant, after one line ``FAIL  <cell> (<what is wrong>)`` per cell left out
        because its ``done.json`` or ``final_eval.json`` is not what ``run`` and ``evaluate`` write.
    """
    failed: dict[tuple[str, str], dict[int, dict[int, str]]] = {}
    damaged = []
    for seed_folder in cell_folders(root):
        final_path = os.path.join(seed_folder, FINAL_EVAL_FILE)
        done_path = os.path.join(seed_folder, DONE_FILE)
        if not os.path.isfile(final_path) or not os.path.isfile(done_path):
            continue
        try:
            final = read_json_object(final_path, {}, optional={"failed_episodes": (dict,)})
            if "failed_episodes" not in final:
                continue
            task = read_json_object(done_path, {"task": (str,)})["task"]
            episodes = _failed_episodes(final_path, final["failed_episodes"])
            seed = cell_seed(seed_folder)
        except (OSError, ValueError) as error:
            damaged.append(f"FAIL  {seed_folder} ({error})")
            continue
        variant = os.path.basename(os.path.dirname(seed_folder))
        failed.setdefault((task, variant), {})[seed] = episodes
    lines = damaged
    for (task, variant), per_seed in sorted(failed.items()):
        counts: dict[int, int] = {}
        for episodes in per_seed.values():
            for index in episodes:
                counts[index] = counts.get(index, 0) + 1
        seeds = len(per_seed)
        every = sorted(index for index, count in counts.items() if count == seeds)
        all_but_one = sorted(index for index, count in counts.items() if count == seeds - 1) if seeds > 2 else []
        lines.append(
            f"{task} {variant}: {seeds} seeds, {sum(map(len, per_seed.values()))} failed episodes on "
            f"{len(counts)} starts; failed by every seed: {every}; by all but one: {all_but_one}"
        )
    return lines


def _failed_episodes(final_path: str, episodes: dict[str, Any]) -> dict[int, str]:
    """The ``failed_episodes`` object of a cell's ``final_eval.json`` (``final_path``) as episode index -> why it
    failed, as :func:`~sb3_ppo_ext.pretrained.evaluate_agent` writes them (index strings to reason strings).

    :raises ValueError: naming the file, for any other shape.
    """
    failed = {}
    for index, why in episodes.items():
        if not (index.isascii() and index.isdigit()) or not isinstance(why, str):
            raise ValueError(
                f"{final_path}: failed_episodes must map episode indices (whole numbers) to reasons (strings), "
                f"got {index!r}: {why!r}"
            )
        failed[int(index)] = why
    return failed

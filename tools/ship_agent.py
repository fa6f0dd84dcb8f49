"""Pack a finished zoo run into a shipped agent (``sb3_ppo_ext/trained_agents/<env>/``): actor weights, the
observation statistics and the run's config as plain data (see ``sb3_ppo_ext/pretrained.py``).

    python tools/ship_agent.py ~/runs/grid/sb3_ppo_ext-Walker2D-v0/ppo_ext/seed_1 \\
        --note "3 seeds x 2M steps, benchmarks/grids/walker.yml"
    python tools/ship_agent.py --table        # the table of the shipped agents (docs/results/pretrained_agents.md)

The argument is a grid cell folder (``benchmarks/grid.py``, :mod:`sb3_ppo_ext.grid`) or an rl-zoo3 run folder
(``logs/ppo_ext/<env>_<n>``). The run's own zip and ``vecnormalize.pkl`` are unpickled here: pack only runs you made.
The packed files are then loaded back and played (``--eval-episodes`` deterministic episodes from env seed
``--eval-seed``, 0 by default), and that evaluation is written into the agent's provenance. ``--model
checkpoint:STEPS`` packs one of the run's ``--save-freq`` checkpoints instead of its final model:

    python tools/ship_agent.py CELL --model checkpoint:11800576 --destination /tmp/agent --eval-seed 20000

``--env-kwargs`` sets what the agent plays when the run trained on other task settings than the task's own, e.g. a
Humanoid trained from wider starts, shipped to play the task's starts (the run's settings stay in the provenance):

    python tools/ship_agent.py CELL --env-kwargs reset_noise_scale:0.1 --eval-episodes 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from sb3_ppo_ext.grid.collect import training_clock
from sb3_ppo_ext.pretrained import (
    AGENT_FILE,
    WEIGHTS_FILE,
    add_provenance,
    agent_folder,
    evaluate_agent,
    list_pretrained,
    read_agent,
)
from sb3_ppo_ext.zoo import SafeStoreDict
from sb3_ppo_ext.zoo.config.run_files import load_run_yaml
from sb3_ppo_ext.zoo.packing import find_zoo_run, save_pretrained_from_run


def agents_table() -> str:
    """A Markdown table of the shipped agents: score, evaluation, steps, seed, training wall clock, size."""
    header = (
        "| task | seed | steps | the run's last evaluation up to it | shipped files: deterministic episodes from env "
        "seed 0 | training wall clock | size |"
    )
    lines = [header, "|---|---|---|---|---|---|---|"]
    for env_id in list_pretrained():
        folder, agent = read_agent(env_id)
        provenance = agent["provenance"]
        shipped = provenance.get("shipped_eval", {})
        played = (
            f"{shipped.get('episodes')} episodes: {shipped.get('mean_return', float('nan')):.0f} +- "
            f"{shipped.get('std_return', float('nan')):.0f}"
        )
        if "with_a_flag" in shipped:  # a flag run: its success is a flag, and its distance along x measures nothing
            played += f", a flag reached in {shipped['with_a_flag']} ({shipped['mean_flags']:.1f} per episode)"
            played += f", {shipped['ended_early']} falls"
        elif "successes" in shipped:
            played += f", {shipped['successes']} landed"
        elif "mean_speed_m_s" in shipped:
            played += f", {shipped['mean_speed_m_s']:.2f} m/s, {shipped['ended_early']} falls"
        wall = provenance.get("training_wall_s")
        # The agent's own files (settings and observation statistics in agent.json, weights in policy.npz), not the
        # model card beside them (README.md, curve.png, picture.png, picture.json).
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in (AGENT_FILE, WEIGHTS_FILE))
        lines.append(
            f"| `{env_id}` | {provenance.get('seed')} | {provenance.get('timesteps', 0) / 1e6:.2f}M | "
            f"{provenance.get('final_eval_mean', float('nan')):.0f} | {played} | "
            f"{'?' if wall is None else f'{wall / 60:.0f} min'} (1 torch thread, "
            f"{provenance.get('training_vec_env')}) | {size / 1024:.0f} KiB |"
        )
    return "\n".join(lines)


def checkpoint_wall_clock(run: str, steps: int) -> float | None:
    """Training seconds until the run had taken ``steps`` env steps, from its monitor files (the grid's clock,
    :func:`sb3_ppo_ext.grid.collect.training_clock`: an episode's steps count when it ends, so this is the end of
    the first episode past ``steps``); ``None`` when the monitor files do not reach that far."""
    clock_steps, clock_seconds = training_clock(run)
    reached = int(np.searchsorted(clock_steps, steps))
    return round(float(clock_seconds[reached]), 1) if reached < len(clock_seconds) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", help="grid cell folder or rl-zoo3 run folder")
    parser.add_argument("--table", action="store_true", help="print the table of the shipped agents and exit")
    parser.add_argument(
        "--model",
        default="final",
        help="'final' (the run's final model), 'best' (best_model.zip) or 'checkpoint:STEPS' "
        "(rl_model_STEPS_steps.zip, a --save-freq checkpoint)",
    )
    parser.add_argument("--destination", default=None, help="agent folder (default: the package's trained_agents)")
    parser.add_argument("--note", default="", help="how the run was made (kept in the provenance)")
    parser.add_argument(
        "--env-kwargs",
        nargs="+",
        action=SafeStoreDict,
        default=None,
        help="task settings the agent plays with, over the run's own (KEY:VALUE, as rl-zoo3's --env-kwargs)",
    )
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="env seed of the shipped files' evaluation (choose a checkpoint on one seed, report another)",
    )
    args = parser.parse_args(argv)
    if args.table:
        print(agents_table())
        return 0
    if args.folder is None:
        parser.error("a run folder is needed (or --table)")

    folder = os.path.expanduser(args.folder)
    run = find_zoo_run(folder)
    env_id = next(
        load_run_yaml(os.path.join(run, name, "args.yml"))["env"]
        for name in os.listdir(run)
        if os.path.isfile(os.path.join(run, name, "args.yml"))
    )
    provenance = {"note": args.note, "training_wall_s": None}
    done_path = os.path.join(folder, "done.json")  # a grid cell's record, with the run's wall clock
    if os.path.isfile(done_path):
        with open(done_path, encoding="utf-8") as stream:
            provenance["training_wall_s"] = json.load(stream)["wall_s"]
    destination = args.destination or agent_folder(env_id)
    try:
        facts = save_pretrained_from_run(run, destination, model=args.model, provenance=provenance, env_kwargs=args.env_kwargs)
    except ValueError as error:  # an unknown --model, a missing checkpoint, --env-kwargs the task does not take
        parser.error(str(error))
    if facts["model"].startswith("checkpoint:"):  # the run's clock when it saved that checkpoint
        add_provenance(destination, {"training_wall_s": checkpoint_wall_clock(run, facts["timesteps"])})
    provenance = add_provenance(
        destination, {"shipped_eval": evaluate_agent(destination, args.eval_episodes, seed=args.eval_seed)}
    )
    folder, _ = read_agent(destination)
    size = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
    print(json.dumps(provenance, indent=1))
    print(f"shipped {env_id} -> {destination} ({size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

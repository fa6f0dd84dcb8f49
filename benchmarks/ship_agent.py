"""Pack a finished zoo run into a shipped agent (``sb3_ppo_ext/trained_agents/<env>/``): actor weights, the
observation statistics and the run's config as plain data (see ``sb3_ppo_ext/pretrained.py``).

    python benchmarks/ship_agent.py ~/runs/grid/sb3_ppo_ext-Walker2D-v0/ppo_ext/seed_1 \\
        --note "3 seeds x 2M steps, benchmarks/grids/walker.yml"

``--table`` prints the README's table of every shipped agent from their provenance instead.

The argument is a grid cell folder (``benchmarks/grid.py``) or an rl-zoo3 run folder (``logs/ppo_ext/<env>_<n>``).
The run's own zip and ``vecnormalize.pkl`` are unpickled here: pack only runs you made. The agent is then evaluated
(10 deterministic episodes on fixed seeds) and the result written into its provenance.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import sys

import numpy as np


def find_run(folder: str) -> str:
    """The rl-zoo3 run folder (``<algo>/<env>_<n>``) inside a grid cell folder, or ``folder`` itself."""
    if glob.glob(os.path.join(folder, "*", "config.yml")):
        return folder
    runs = sorted(glob.glob(os.path.join(folder, "*", "*", "*", "config.yml")), key=os.path.getmtime)
    if not runs:
        raise SystemExit(f"no rl-zoo3 run (a <env>/config.yml) in {folder!r}")
    return os.path.dirname(os.path.dirname(runs[-1]))


def agents_table() -> str:
    """A Markdown table of the shipped agents: score, evaluation, steps, seed, training wall clock, size."""
    from sb3_ppo_ext.pretrained import agent_folder, list_pretrained, read_agent

    header = ("| task | seed | steps | final eval (training run) | shipped agent: deterministic episodes from env seed 0 "
              "| training wall clock | size |")
    lines = [header, "|---|---|---|---|---|---|---|"]
    for env_id in list_pretrained():
        folder, agent = read_agent(env_id)
        provenance = agent["provenance"]
        shipped = provenance.get("shipped_eval", {})
        played = (f"{shipped.get('episodes')} episodes: {shipped.get('mean_return', float('nan')):.0f} +- "
                  f"{shipped.get('std_return', float('nan')):.0f}")
        if "successes" in shipped:
            played += f", {shipped['successes']}/{shipped['episodes']} landed"
        if "mean_speed_m_s" in shipped:
            played += f", {shipped['mean_speed_m_s']:.2f} m/s, {shipped['fell_or_crashed']} falls"
        wall = provenance.get("training_wall_s")
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(agent_folder(env_id)))
        lines.append(f"| `{env_id}` | {provenance.get('seed')} | {provenance.get('timesteps', 0) / 1e6:.2f}M | "
                     f"{provenance.get('final_eval_mean', float('nan')):.0f} | {played} | "
                     f"{'?' if wall is None else f'{wall / 60:.0f} min'} (1 torch thread, "
                     f"{provenance.get('training_vec_env')}) | {size / 1024:.0f} KiB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", help="grid cell folder or rl-zoo3 run folder")
    parser.add_argument("--table", action="store_true", help="print the table of the shipped agents and exit")
    parser.add_argument("--model", default="final", choices=["final", "best"], help="the final model or best_model.zip")
    parser.add_argument("--destination", default=None, help="agent folder (default: the package's trained_agents)")
    parser.add_argument("--note", default="", help="how the run was made (kept in the provenance)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args(argv)
    if args.table:
        print(agents_table())
        return 0
    if args.folder is None:
        parser.error("a run folder is needed (or --table)")

    from stable_baselines3.common.vec_env import VecNormalize

    import sb3_ppo_ext  # noqa: F401  (registers the tasks)
    from sb3_ppo_ext.pretrained import agent_folder, load_pretrained, play, save_pretrained
    from sb3_ppo_ext.zoo.hyperparams import load_run_yaml

    run = find_run(os.path.expanduser(args.folder))
    (params,) = [os.path.dirname(path) for path in glob.glob(os.path.join(run, "*", "config.yml"))]
    run_args = dict(load_run_yaml(os.path.join(params, "args.yml")))
    config = dict(load_run_yaml(os.path.join(params, "config.yml")))
    env_id = run_args["env"]
    model_path = os.path.join(run, "best_model.zip" if args.model == "best" else f"{os.path.basename(params)}.zip")

    from rl_zoo3.utils import ALGOS

    from sb3_ppo_ext.zoo import register_algorithm

    register_algorithm()
    model = ALGOS[run_args["algo"]].load(model_path, device="cpu")
    statistics: VecNormalize | None = None
    if os.path.isfile(os.path.join(params, "vecnormalize.pkl")):
        with open(os.path.join(params, "vecnormalize.pkl"), "rb") as stream:
            statistics = pickle.load(stream)  # our own run's file (see the module docstring)
    evaluations = np.load(os.path.join(run, "evaluations.npz"))
    done_path = os.path.join(os.path.dirname(os.path.dirname(run)), "done.json")
    wall_s = None
    if os.path.isfile(done_path):
        with open(done_path, encoding="utf-8") as stream:
            wall_s = json.load(stream)["wall_s"]
    provenance = {
        "algo": run_args["algo"], "seed": run_args["seed"], "timesteps": int(model.num_timesteps),
        "model": args.model, "final_eval_mean": float(evaluations["results"][-1].mean()),
        "final_eval_timesteps": int(evaluations["timesteps"][-1]), "training_wall_s": wall_s,
        "training_vec_env": run_args.get("vec_env"), "torch_threads": run_args.get("num_threads"),
        "hyperparams_overrides": run_args.get("hyperparams"), "note": args.note,
    }
    destination = args.destination or agent_folder(env_id)
    save_pretrained(model, destination, env_id=env_id, vec_normalize=statistics, env_kwargs=config.get("env_kwargs"),
                    env_wrapper=config.get("env_wrapper"), frame_stack=config.get("frame_stack"), hyperparams=config,
                    provenance=provenance)

    shipped, env = load_pretrained(destination, n_envs=1, seed=0)
    episodes = play(shipped, env, 10_000_000, n_episodes=args.eval_episodes)
    env.close()
    returns = [episode["return"] for episode in episodes]
    provenance["shipped_eval"] = {"episodes": len(episodes), "seed": 0, "mean_return": float(np.mean(returns)),
                                  "std_return": float(np.std(returns)),
                                  "fell_or_crashed": sum(not episode["truncated"] for episode in episodes)}
    if "success" in episodes[0]:
        provenance["shipped_eval"]["successes"] = sum(episode["success"] for episode in episodes)
    if "speed" in episodes[0]:
        provenance["shipped_eval"]["mean_speed_m_s"] = float(np.mean([episode["speed"] for episode in episodes]))
    save_pretrained(model, destination, env_id=env_id, vec_normalize=statistics, env_kwargs=config.get("env_kwargs"),
                    env_wrapper=config.get("env_wrapper"), frame_stack=config.get("frame_stack"), hyperparams=config,
                    provenance=provenance)
    size = sum(os.path.getsize(os.path.join(destination, name)) for name in os.listdir(destination))
    print(json.dumps(provenance, indent=1))
    print(f"shipped {env_id} -> {destination} ({size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measure RocketLander speed: env steps/s with random actions (resets included) against its physics floor.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_rocket.py [--steps 50000] [--rounds 10] [--discrete] [--clock cpu|wall]

The floor is that of ``benchmarks/bench_envs.py`` (which reports it for Walker2D, Humanoid and the rocket side by
side): every PyBullet call the env made during the same steps, recorded with their arguments and replayed on a
second env from the same seed, with no Python of ours in between. For the rocket that is, per agent step, three
physics steps each with the force and torque re-applied before it (PyBullet clears them after each), one mass update
as fuel burns, the base pose, the base velocity and one contact query, plus the placements of each reset. The ratio
env / floor is the share of the env's time that is physics; the rest is our Python and gymnasium's wrappers.

An earlier version of this script counted as floor three times ``stepSimulation`` plus the three queries, without
the forces and the mass update, and timed it on a scene held in flight; the replay is what the env really calls.
"""

from __future__ import annotations

import argparse
import time

from bench_envs import own_cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=10, help="alternating timing rounds")
    parser.add_argument("--discrete", action="store_true")
    parser.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="this process's CPU time (default) or wall time"
    )
    arguments = parser.parse_args()
    env_id = "sb3_ppo_ext/RocketLanderDiscrete-v0" if arguments.discrete else "sb3_ppo_ext/RocketLander-v0"
    clock = time.process_time if arguments.clock == "cpu" else time.perf_counter
    result = own_cost(env_id, arguments.steps, arguments.rounds, clock=clock)
    calls = ", ".join(f"{name} {count:.2f}" for name, count in result["calls"].items())
    print(f"{env_id} ({arguments.clock} time, medians of {arguments.rounds} alternating rounds):")
    print(f"  env:   {result['env']:,.0f} steps/s with random actions (resets included)")
    print(f"  floor: {result['floor']:,.0f} steps/s (the env's own PyBullet calls replayed: {calls} per step)")
    print(f"  env / floor: {result['ratio']:.2f} (per round: {' '.join(f'{r:.2f}' for r in result['ratios'])})")


if __name__ == "__main__":
    main()

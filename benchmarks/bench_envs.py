"""Env steps per second of the bundled locomotion tasks against pybullet_envs_gymnasium's equivalents.

Not a test: prints one table. For each task it times, in this one process,

* ``ours``: ``sb3_ppo_ext/<task>`` with uniform random actions, resetting when an episode ends;
* ``reference``: pybullet_envs_gymnasium's equivalent under the same loop and actions;
* ``ceiling``: the ``stepSimulation()`` calls alone, timed inside our env on the same run (same model, physics
  settings and states), the rate no Python wrapper can beat.

The three are timed in alternating rounds so that load from other processes hits them alike; the table shows
the best round of each (as ``timeit`` does) and the median over rounds of the per-round ratio ours / reference.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_envs.py --steps 20000``
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

import sb3_ppo_ext  # noqa: F401  (registers the sb3_ppo_ext/ ids)

PAIRS = {
    "Walker2D": ("sb3_ppo_ext/Walker2D-v0", "Walker2DBulletEnv-v0"),
    "Humanoid": ("sb3_ppo_ext/Humanoid-v0", "HumanoidBulletEnv-v0"),
}


class TimedStepSimulation:
    """Wraps a client's bound ``stepSimulation`` and adds up the seconds spent in it."""

    def __init__(self, step_simulation) -> None:
        self.step_simulation = step_simulation
        self.seconds = 0.0

    def __call__(self) -> None:
        start = time.perf_counter()
        self.step_simulation()
        self.seconds += time.perf_counter() - start


def run_steps(env: gym.Env, actions: np.ndarray) -> float:
    """Seconds to step ``env`` through ``actions``, resetting (unseeded) whenever an episode ends."""
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start


def compare(ours_id: str, reference_id: str, steps: int, rounds: int, seed: int = 0) -> dict[str, float]:
    """Steps per second of ours, the reference and the physics ceiling, from ``rounds`` alternating rounds."""
    ours = gym.make(ours_id, disable_env_checker=True)
    reference = gym.make(reference_id, disable_env_checker=True)
    timed = gym.make(ours_id, disable_env_checker=True)
    client = timed.unwrapped._client
    timer = TimedStepSimulation(client.stepSimulation)
    client.__dict__["stepSimulation"] = timer  # instance attribute: the env's calls go through the timer
    rng = np.random.default_rng(seed)
    per_round = steps // rounds
    for env in (ours, reference, timed):
        env.reset(seed=seed)
    ours_rates, reference_rates, ceiling_rates = [], [], []
    for _ in range(rounds):
        actions = rng.uniform(-1.0, 1.0, size=(per_round, *ours.action_space.shape)).astype(np.float32)
        ours_rates.append(per_round / run_steps(ours, actions))
        reference_rates.append(per_round / run_steps(reference, actions))
        timer.seconds = 0.0
        run_steps(timed, actions)
        ceiling_rates.append(per_round / timer.seconds)
    for env in (ours, reference, timed):
        env.close()
    return {
        "ours": max(ours_rates),
        "reference": max(reference_rates),
        "ceiling": max(ceiling_rates),
        "median_ratio": statistics.median(o / r for o, r in zip(ours_rates, reference_rates)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="env steps per env and task, over all rounds")
    parser.add_argument("--rounds", type=int, default=10, help="alternating timing rounds")
    args = parser.parse_args()
    import pybullet_envs_gymnasium  # noqa: F401  (registers the reference ids)

    header = f"{'task':<10} {'ours/s':>8} {'reference/s':>12} {'best ratio':>11} {'median ratio':>13} {'ceiling/s':>10}"
    print(header + f" {'ours/ceiling':>13}")
    for task, (ours_id, reference_id) in PAIRS.items():
        result = compare(ours_id, reference_id, args.steps, args.rounds)
        print(
            f"{task:<10} {result['ours']:8.0f} {result['reference']:12.0f} {result['ours'] / result['reference']:11.2f}"
            f" {result['median_ratio']:13.2f} {result['ceiling']:10.0f} {result['ours'] / result['ceiling']:13.2f}"
        )


if __name__ == "__main__":
    main()

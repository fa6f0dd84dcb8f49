"""Env steps per second of the bundled locomotion tasks against pybullet_envs_gymnasium's equivalents.

Not a test: prints one table. For each task it times, in this one process,

* ``ours``: ``sb3_ppo_ext/<task>`` with uniform random actions, resetting when an episode ends;
* ``reference``: pybullet_envs_gymnasium's equivalent under the same loop;
* ``ceiling``: the ``stepSimulation()`` calls alone, timed inside our env on the same random-action run (same
  model, physics settings and states), the rate no Python wrapper can beat.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_envs.py --steps 20000``
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import sb3_ppo_ext  # noqa: F401  (registers the sb3_ppo_ext/ ids)

PAIRS = {
    "Walker2D": ("sb3_ppo_ext/Walker2D-v0", "Walker2DBulletEnv-v0"),
    "Humanoid": ("sb3_ppo_ext/Humanoid-v0", "HumanoidBulletEnv-v0"),
}


def env_steps_per_second(env_id: str, steps: int, seed: int = 0) -> float:
    """Steps per second of ``env_id`` (without its TimeLimit-free wrappers' checks) under random actions."""
    env = gym.make(env_id, disable_env_checker=True)
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    actions = rng.uniform(low, high, size=(steps, *env.action_space.shape)).astype(np.float32)
    env.reset(seed=seed)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def raw_step_rate(env_id: str, steps: int, seed: int = 0) -> float:
    """``stepSimulation()`` calls per second, timed inside our env on the same random-action run.

    Only the ``stepSimulation()`` calls are timed (the client's bound function is wrapped), so the physics sees the
    same states as in the ``ours`` run: this is the rate a wrapper with zero Python cost would reach.
    """
    env = gym.make(env_id, disable_env_checker=True)
    client = env.unwrapped._client
    step_simulation = client.stepSimulation
    physics_seconds = 0.0

    def timed_step_simulation() -> None:
        nonlocal physics_seconds
        start = time.perf_counter()
        step_simulation()
        physics_seconds += time.perf_counter() - start

    client.__dict__["stepSimulation"] = timed_step_simulation
    rng = np.random.default_rng(seed)
    actions = rng.uniform(env.action_space.low, env.action_space.high, size=(steps, *env.action_space.shape))
    env.reset(seed=seed)
    for action in actions.astype(np.float32):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    env.close()
    return steps / physics_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="env steps timed per measurement")
    args = parser.parse_args()
    import pybullet_envs_gymnasium  # noqa: F401  (registers the reference ids)

    print(f"{'task':<10} {'ours/s':>9} {'reference/s':>12} {'ratio':>6} {'ceiling/s':>10} {'ours/ceiling':>13}")
    for task, (ours_id, reference_id) in PAIRS.items():
        ours = env_steps_per_second(ours_id, args.steps)
        reference = env_steps_per_second(reference_id, args.steps)
        ceiling = raw_step_rate(ours_id, args.steps)
        print(f"{task:<10} {ours:9.0f} {reference:12.0f} {ours / reference:6.2f} {ceiling:10.0f} {ours / ceiling:13.2f}")


if __name__ == "__main__":
    main()

"""Measure RocketLander speed: env steps/s with random actions (resets included) and the raw physics rate.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_rocket.py [--steps 50000] [--discrete]

"Raw physics" is one ``stepSimulation`` plus the two state queries and the contact query the env makes
per agent step, on the same scene, with no Python-side maths: the floor under the env's own cost.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym


def env_steps_per_second(env_id: str, steps: int, seed: int = 0) -> tuple[float, int]:
    """Random actions (from a seeded action space), reset on episode end; return (steps/s, episodes)."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    episodes = 0
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            episodes += 1
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed, episodes


def raw_physics_cycles_per_second(cycles: int) -> float:
    """``stepSimulation`` + base state + base velocity + contact query on the env's scene, in a loop."""
    from sb3_ppo_ext.envs.rocket_lander import RocketLanderEnv

    env = RocketLanderEnv()
    env.reset(seed=0)
    client, rocket = env._client, env._rocket
    step, pose, velocity, contacts = (
        client.stepSimulation,
        client.getBasePositionAndOrientation,
        client.getBaseVelocity,
        client.getContactPoints,
    )
    start = time.perf_counter()
    for index in range(cycles):
        if index % 300 == 0:  # keep the rocket in the air so that the loop measures flight
            client.resetBasePositionAndOrientation(rocket, [0.0, 0.0, 40.0], [0.0, 0.0, 0.0, 1.0])
            client.resetBaseVelocity(rocket, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
        step()
        pose(rocket)
        velocity(rocket)
        contacts(bodyA=rocket)
    elapsed = time.perf_counter() - start
    env.close()
    return cycles / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--discrete", action="store_true")
    arguments = parser.parse_args()
    import sb3_ppo_ext.envs  # noqa: F401  (registers the ids)
    from sb3_ppo_ext.envs.rocket_lander import RocketLanderEnv

    env_id = "sb3_ppo_ext/RocketLanderDiscrete-v0" if arguments.discrete else "sb3_ppo_ext/RocketLander-v0"
    rate, episodes = env_steps_per_second(env_id, arguments.steps)
    frame_skip = RocketLanderEnv().frame_skip
    physics = raw_physics_cycles_per_second(arguments.steps)
    print(f"{env_id}: {rate:,.0f} env steps/s with random actions ({episodes} episodes in {arguments.steps} steps)")
    print(
        f"raw physics (stepSimulation + 3 queries): {physics:,.0f} cycles/s; frame skip {frame_skip} means at most "
        f"{physics / frame_skip:,.0f} env steps/s from physics alone"
    )


if __name__ == "__main__":
    main()

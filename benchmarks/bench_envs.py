"""Env steps per second of the bundled tasks: against their own physics floor, and against pybullet_envs_gymnasium.

Not a test: prints two tables.

**Own cost** (by default Walker2D, Humanoid and RocketLander, side by side in one run; ``--env`` names other bundled
ids, e.g. ``sb3_ppo_ext/RocketLanderDiscrete-v0``). For each task:

* ``env``: ``gym.make(<id>)`` as a user gets it (time limit, order enforcing and the passive env checker
  included), stepped with seeded uniform random actions and reset (unseeded) whenever an episode ends;
* ``floor``: the same steps with no Python of ours: every PyBullet call the env made on its physics client during
  those steps (resets included), recorded with their arguments on a twin env and replayed, in order, on a third
  env started from the same seed, so that the physics goes through the very same states. The floor holds exactly
  what the env cannot do without: ``stepSimulation``, the forces and torques it applies (the rocket re-applies its
  force and torque before each of its 3 physics steps, as PyBullet clears them after each), the mass it updates as
  fuel burns, the state and contact queries it reads the observation and the reward from (PyBullet builds their
  Python tuples), and the restores and placements of a reset. PyBullet's pure maths helpers
  (``getEulerFromQuaternion`` and the like, which touch no physics) are left out: they count as ours. The table
  lists the calls per step that make the floor.
* ``env/floor``: the fraction of the env's time that is the floor; the rest is our Python (observation, reward
  terms, checks, wrappers).

Both are timed in alternating rounds, in this process's CPU time (``--clock wall`` for wall time), so that load from
other processes hits them alike and the time slices they take count for neither; the table shows the median over
rounds of each rate and of the per-round ratio.

**Reference** (Walker2D and Humanoid, those of them ``--env`` names): ``ours`` against pybullet_envs_gymnasium's
equivalent under the same loop and actions, and ``ceiling``, the ``stepSimulation()`` calls alone timed inside our env
on the same run; the best round of each (as ``timeit`` does) and the median over rounds of the per-round ratio ours /
reference.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_envs.py --steps 20000`` (``--tables own`` for the first
table only). The rockets alone, the continuous and the discrete id::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_envs.py --tables own --steps 50000 \\
        --env sb3_ppo_ext/RocketLander-v0 sb3_ppo_ext/RocketLanderDiscrete-v0
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pybullet

import sb3_ppo_ext  # noqa: F401  (registers the sb3_ppo_ext/ ids)
from sb3_ppo_ext.envs._bullet import BulletClient

#: Our id -> pybullet_envs_gymnasium's equivalent, for the reference table.
REFERENCES = {
    "sb3_ppo_ext/Walker2D-v0": "Walker2DBulletEnv-v0",
    "sb3_ppo_ext/Humanoid-v0": "HumanoidBulletEnv-v0",
}

#: The ids timed when ``--env`` is not given.
DEFAULT_TASKS = ("sb3_ppo_ext/Walker2D-v0", "sb3_ppo_ext/Humanoid-v0", "sb3_ppo_ext/RocketLander-v0")

#: PyBullet functions that are pure maths (no physics client state): what they cost counts as the env's own.
PURE_MATHS = frozenset(
    {
        "getEulerFromQuaternion",
        "getQuaternionFromEuler",
        "getQuaternionFromAxisAngle",
        "getAxisAngleFromQuaternion",
        "getDifferenceQuaternion",
        "getMatrixFromQuaternion",
        "multiplyTransforms",
        "invertTransform",
        "rotateVector",
    }
)

#: One recorded PyBullet call: (function name, args, kwargs).
Call = tuple[str, tuple, dict]


def task_name(env_id: str) -> str:
    """The short name of a task in the tables: ``sb3_ppo_ext/RocketLanderDiscrete-v0`` -> ``RocketLanderDiscrete``."""
    return env_id.rpartition("/")[2].rpartition("-v")[0] or env_id


class TimedStepSimulation:
    """Wraps a client's bound ``stepSimulation`` and adds up the seconds spent in it."""

    def __init__(self, step_simulation) -> None:
        self.step_simulation = step_simulation
        self.seconds = 0.0

    def __call__(self) -> None:
        start = time.perf_counter()
        self.step_simulation()
        self.seconds += time.perf_counter() - start


def run_steps(env: gym.Env, actions: np.ndarray, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds (of ``clock``) to step ``env`` through ``actions``, resetting (unseeded) whenever an episode ends."""
    start = clock()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return clock() - start


def random_actions(space: gym.spaces.Space, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniform random actions: ``float32`` rows for a Box, ``int64`` indices for a Discrete space."""
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=count, dtype=np.int64)
    if isinstance(space, gym.spaces.Box):
        return rng.uniform(space.low, space.high, size=(count, *space.shape)).astype(space.dtype)
    raise TypeError(f"random actions for a Box or a Discrete action space only, not {space}")


def physics_client(env: gym.Env) -> BulletClient:
    """The PyBullet client of one of our tasks (each keeps it as ``_client``)."""
    client = getattr(env.unwrapped, "_client", None)
    if not isinstance(client, BulletClient):
        raise TypeError(f"{env.unwrapped} has no PyBullet client of this package")
    return client


def record_calls(env: gym.Env) -> list[Call]:
    """Make ``env``'s physics client append every PyBullet call it makes (name, args, kwargs) to the returned list.

    The env's client (:class:`sb3_ppo_ext.envs._bullet.BulletClient`) serves its bound functions from its instance
    dictionary; each is replaced by one that records, then calls.
    """
    client = physics_client(env)
    calls: list[Call] = []

    def recording(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, args, kwargs))
            return function(*args, **kwargs)

        return call

    for name in dir(pybullet):
        attribute = getattr(pybullet, name)
        if not name.startswith("_") and callable(attribute) and not isinstance(attribute, type) and name != "disconnect":
            client.__dict__[name] = recording(name, getattr(client, name))
    return calls


def replay_plan(env: gym.Env, calls: list[Call]) -> list[tuple[Callable[..., Any], tuple, dict]]:
    """``calls`` bound to ``env``'s own client, pure maths left out, ready to be replayed in a loop."""
    client = physics_client(env)
    return [(getattr(client, name), args, kwargs) for name, args, kwargs in calls if name not in PURE_MATHS]


def replay(plan: list[tuple[Callable[..., Any], tuple, dict]], clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds (of ``clock``) to make the calls of ``plan``, in order."""
    start = clock()
    for function, args, kwargs in plan:
        function(*args, **kwargs)
    return clock() - start


def own_cost(
    env_id: str, steps: int, rounds: int, seed: int = 0, clock: Callable[[], float] = time.process_time
) -> dict[str, Any]:
    """Median env steps/s, floor steps/s and per-round floor/env ratio of ``env_id`` (see the module docstring).

    :param clock: what a second is: ``time.process_time`` (default) counts only the CPU time of this process, so that
        time slices lost to other processes on a loaded machine count for neither; ``time.perf_counter`` is wall time.

    :return: ``env``, ``floor`` and ``ratio`` (medians over rounds), ``ratios`` (per round) and ``calls`` (the floor's
        PyBullet calls per step, by name).
    """
    timed, recorder, replayer = (gym.make(env_id) for _ in range(3))
    rng = np.random.default_rng(seed)
    per_round = steps // rounds
    actions = [random_actions(timed.action_space, per_round, rng) for _ in range(rounds)]
    for env in (timed, recorder, replayer):
        env.reset(seed=seed)
    calls = record_calls(recorder)
    plans = []
    for round_actions in actions:
        start = len(calls)
        run_steps(recorder, round_actions)
        plans.append(replay_plan(replayer, calls[start:]))
    env_rates, floor_rates, ratios = [], [], []
    for round_actions, plan in zip(actions, plans, strict=True):
        env_seconds = run_steps(timed, round_actions, clock)
        floor_seconds = replay(plan, clock)
        env_rates.append(per_round / env_seconds)
        floor_rates.append(per_round / floor_seconds)
        ratios.append(floor_seconds / env_seconds)
    for env in (timed, recorder, replayer):
        env.close()
    counts = Counter(name for name, _, _ in calls if name not in PURE_MATHS)
    return {
        "env": statistics.median(env_rates),
        "floor": statistics.median(floor_rates),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "calls": {name: count / (per_round * rounds) for name, count in counts.most_common()},
    }


def print_own_cost(
    steps: int, rounds: int, tasks: Sequence[str] = DEFAULT_TASKS, clock: Callable[[], float] = time.process_time
) -> None:
    """Print the own-cost table of the ids ``tasks``, timed with ``clock`` (see :func:`own_cost`)."""
    width = max(13, *(len(task_name(env_id)) for env_id in tasks))
    print(f"{'task':<{width}} {'env/s':>8} {'floor/s':>8} {'env/floor':>10}   per-round env/floor; floor calls per step")
    for env_id in tasks:
        result = own_cost(env_id, steps, rounds, clock=clock)
        spread = " ".join(f"{ratio:.2f}" for ratio in result["ratios"])
        calls = ", ".join(f"{name} {count:.2f}" for name, count in result["calls"].items())
        print(
            f"{task_name(env_id):<{width}} {result['env']:8.0f} {result['floor']:8.0f} {result['ratio']:10.2f}   "
            f"{spread}; {calls}"
        )


def compare(ours_id: str, reference_id: str, steps: int, rounds: int, seed: int = 0) -> dict[str, float]:
    """Steps per second of ours, the reference and the physics ceiling, from ``rounds`` alternating rounds."""
    ours = gym.make(ours_id, disable_env_checker=True)
    reference = gym.make(reference_id, disable_env_checker=True)
    timed = gym.make(ours_id, disable_env_checker=True)
    client = physics_client(timed)
    timer = TimedStepSimulation(client.stepSimulation)
    client.__dict__["stepSimulation"] = timer  # instance attribute: the env's calls go through the timer
    rng = np.random.default_rng(seed)
    per_round = steps // rounds
    for env in (ours, reference, timed):
        env.reset(seed=seed)
    ours_rates, reference_rates, ceiling_rates = [], [], []
    for _ in range(rounds):
        actions = random_actions(ours.action_space, per_round, rng)
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
        "median_ratio": statistics.median(o / r for o, r in zip(ours_rates, reference_rates, strict=True)),
    }


def print_reference(steps: int, rounds: int, tasks: Sequence[str] = DEFAULT_TASKS) -> None:
    """Print the table of ours against pybullet_envs_gymnasium's tasks, for those of the ids ``tasks`` that have one
    (:data:`REFERENCES`)."""
    import pybullet_envs_gymnasium  # noqa: F401  (registers the reference ids)

    header = f"{'task':<10} {'ours/s':>8} {'reference/s':>12} {'best ratio':>11} {'median ratio':>13} {'ceiling/s':>10}"
    print(header + f" {'ours/ceiling':>13}")
    for ours_id in (env_id for env_id in tasks if env_id in REFERENCES):
        result = compare(ours_id, REFERENCES[ours_id], steps, rounds)
        print(
            f"{task_name(ours_id):<10} {result['ours']:8.0f} {result['reference']:12.0f} "
            f"{result['ours'] / result['reference']:11.2f} {result['median_ratio']:13.2f} {result['ceiling']:10.0f} "
            f"{result['ours'] / result['ceiling']:13.2f}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="env steps per env and task, over all rounds")
    parser.add_argument("--rounds", type=int, default=10, help="alternating timing rounds")
    parser.add_argument("--tables", choices=("all", "own", "reference"), default="all", help="which tables to print")
    parser.add_argument(
        "--env",
        nargs="+",
        default=list(DEFAULT_TASKS),
        metavar="ID",
        help="the bundled ids to time (default: %(default)s); the reference table takes those with a reference",
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="own-cost table: this process's CPU time (default) or wall time",
    )
    args = parser.parse_args(argv)
    if args.tables in ("all", "own"):
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        print(f"Own cost ({args.clock} time, median of {args.rounds} alternating rounds):")
        print_own_cost(args.steps, args.rounds, args.env, clock=clock)
    if args.tables in ("all", "reference"):
        print_reference(args.steps, args.rounds, args.env)


if __name__ == "__main__":
    main()

"""Collection and training throughput of RayVecEnv against DummyVecEnv and SubprocVecEnv, side by side, in one run.

Not a test: prints three tables.

1. Collection: env steps per second of ``sb3_ppo_ext/Humanoid-v0`` with random actions, for each ``--n-envs``,
   through DummyVecEnv, SubprocVecEnv and RayVecEnv with each ``--envs-per-actor``. Each RayVecEnv is timed in
   rounds alternating with DummyVecEnv and SubprocVecEnv, so that load from other processes hits them alike; the
   table shows the median rate over rounds and the median of the per-round ratios to SubprocVecEnv (to DummyVecEnv
   with ``--no-subproc``).
2. Training: env steps per second of whole ``PPO.learn`` iterations (collection and update) with the bundled
   ``zoo_configs/ppo_ext.yml`` Humanoid block (its network, rollout length, batch, epochs and VecNormalize; the
   number of envs is ``--n-envs``), ``--train-iterations`` iterations per VecEnv and round, alternating the
   VecEnvs in the same way.
3. The per-call overhead of a Ray step: one actor stepping CartPole (a few microseconds of env work), time per
   ``step`` minus the same envs stepped in-process by DummyVecEnv, for 1 and 8 envs in the actor.

Ray runs locally on 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), its actors asking for no CPU
(``num_cpus=0``) so that as many actors as SubprocVecEnv has processes can be placed on a small machine.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ray_vec_env.py`` (defaults: 16 and 32 envs, 1/4/8/16 envs
per actor, 3 rounds of 64 steps per env; add ``--no-training`` to time collection only). Both cores for one run of
the Humanoid block on a 2-core machine (two actors of 32 envs): ``--n-envs 64 --envs-per-actor 32 --no-collection
--no-subproc --train-iterations 8 --train-rounds 3``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray starts: every address on 127.0.0.1

import numpy as np
import ray
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

import sb3_ppo_ext  # noqa: F401  (registers the sb3_ppo_ext/ ids)
from sb3_ppo_ext.vec_env import RayVecEnv

HUMANOID = "sb3_ppo_ext/Humanoid-v0"
RAY_ACTOR_OPTIONS = {"num_cpus": 0}

#: What :func:`alternate` times: a VecEnv or a model.
Subject = TypeVar("Subject")


def make_ray_vec_env(env_id: str, n_envs: int, envs_per_actor: int) -> VecEnv:
    """``make_vec_env`` with :class:`RayVecEnv` (seed 0), ``envs_per_actor`` envs per Ray actor."""
    return make_vec_env(
        env_id,
        n_envs,
        seed=0,
        # SB3's annotation names its own two VecEnv classes; any VecEnv built from a list of env functions fits.
        vec_env_cls=RayVecEnv,  # type: ignore[arg-type]
        vec_env_kwargs={"envs_per_actor": envs_per_actor, "actor_options": RAY_ACTOR_OPTIONS},
    )


def vec_env_factories(
    env_id: str, n_envs: int, envs_per_actor: list[int], subproc: bool = True
) -> dict[str, Callable[[], VecEnv]]:
    """Name -> function building the VecEnv of that name (seeded alike); SubprocVecEnv only if ``subproc``."""
    factories: dict[str, Callable[[], VecEnv]] = {
        "DummyVecEnv": lambda: make_vec_env(env_id, n_envs, seed=0, vec_env_cls=DummyVecEnv)
    }
    if subproc:
        factories["SubprocVecEnv"] = lambda: make_vec_env(env_id, n_envs, seed=0, vec_env_cls=SubprocVecEnv)
    for per_actor in envs_per_actor:
        if per_actor <= n_envs:
            factories[f"RayVecEnv x{per_actor}"] = functools.partial(make_ray_vec_env, env_id, n_envs, per_actor)
    return factories


def collection_rate(vec_env: VecEnv, actions: np.ndarray) -> float:
    """Env steps per second of ``vec_env`` through ``actions`` (steps x envs x action)."""
    start = time.perf_counter()
    for step_actions in actions:
        vec_env.step(step_actions)
    return actions.shape[0] * actions.shape[1] / (time.perf_counter() - start)


def print_table(title: str, rows: list[tuple[str, float, float]], reference: str) -> None:
    print(f"\n{title}\n{'VecEnv':<18}{'steps/s':>10}{'/ ' + reference.removesuffix('VecEnv'):>11}")
    for name, rate, ratio in rows:
        print(f"{name:<18}{rate:>10.0f}{ratio:>11.2f}")


def reference_name(subproc: bool) -> str:
    """The VecEnv the ratios are taken to: SubprocVecEnv, or DummyVecEnv where SubprocVecEnv is left out."""
    return "SubprocVecEnv" if subproc else "DummyVecEnv"


def alternate(
    factories: Mapping[str, Callable[[], Subject]],
    measure: Callable[[Subject], float],
    rounds: int,
    close: Callable[[Subject], None],
) -> list[tuple[str, float, float]]:
    """Time ``measure`` on DummyVecEnv's and SubprocVecEnv's subject (built once; SubprocVecEnv where ``factories``
    has it) and on each RayVecEnv subject, built in turn (bounding the processes alive at once), in rounds alternating
    them; (name, median rate, median of per-round ratios to :func:`reference_name`)."""
    factories = dict(factories)
    reference = reference_name("SubprocVecEnv" in factories)
    baselines: dict[str, Subject] = {
        name: factories.pop(name)() for name in ("DummyVecEnv", "SubprocVecEnv") if name in factories
    }
    rates: dict[str, list[float]] = {name: [] for name in baselines}
    ratios: dict[str, list[float]] = {name: [] for name in baselines}
    try:
        for name, build in factories.items():
            candidate = build()
            rates[name], ratios[name] = [], []
            try:
                subjects: dict[str, Subject] = {**baselines, name: candidate}
                for _ in range(rounds):
                    round_rates = {other: measure(subject) for other, subject in subjects.items()}
                    for other, rate in round_rates.items():
                        rates[other].append(rate)
                        ratios[other].append(rate / round_rates[reference])
            finally:
                close(candidate)
    finally:
        for subject in baselines.values():
            close(subject)
    return [(name, statistics.median(rates[name]), statistics.median(ratios[name])) for name in rates]


def bench_collection(
    n_envs: int, envs_per_actor: list[int], steps: int, rounds: int, subproc: bool
) -> list[tuple[str, float, float]]:
    def build(factory: Callable[[], VecEnv]) -> Callable[[], VecEnv]:
        def built() -> VecEnv:
            vec_env = factory()
            vec_env.reset()
            collection_rate(vec_env, actions[:8])  # warm-up
            return vec_env

        return built

    probe = make_vec_env(HUMANOID, 1)
    space = probe.action_space
    probe.close()
    space.seed(0)
    actions = np.array([[space.sample() for _ in range(n_envs)] for _ in range(steps)])
    factories = {
        name: build(factory) for name, factory in vec_env_factories(HUMANOID, n_envs, envs_per_actor, subproc).items()
    }
    return alternate(factories, lambda vec_env: collection_rate(vec_env, actions), rounds, lambda vec_env: vec_env.close())


def humanoid_zoo_block() -> dict[str, Any]:
    """Keyword arguments of :class:`sb3_ppo_ext.PPO` from the bundled ``ppo_ext.yml`` Humanoid block, parsed as
    ``sb3-ppo-ext train`` parses it; the number of envs and ``normalize`` are left to the caller."""
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3_ppo_ext.zoo.config.blocks import check_config_document, preprocess_block
    from sb3_ppo_ext.zoo.config.yaml_files import load_yaml_file
    from sb3_ppo_ext.zoo.registration import default_config_path

    path = default_config_path()
    block = check_config_document(load_yaml_file(path), where=path)[HUMANOID]
    hyperparams = preprocess_block(dict(block), where=f"{HUMANOID!r} in {path}")
    for key in ("n_envs", "n_timesteps", "normalize", "policy"):
        hyperparams.pop(key, None)
    return ExperimentManager._preprocess_schedules(hyperparams)


def bench_training(
    n_envs: int, envs_per_actor: list[int], iterations: int, rounds: int, subproc: bool
) -> list[tuple[str, float, float]]:
    from sb3_ppo_ext import PPO

    block = humanoid_zoo_block()
    steps_per_round = iterations * block["n_steps"] * n_envs

    def build(factory: Callable[[], VecEnv]) -> Callable[[], PPO]:
        return lambda: PPO("MlpPolicy", VecNormalize(factory()), seed=0, **block)

    def training_rate(model: PPO) -> float:
        start = time.perf_counter()
        model.learn(steps_per_round, reset_num_timesteps=False)
        return steps_per_round / (time.perf_counter() - start)

    factories = {
        name: build(factory) for name, factory in vec_env_factories(HUMANOID, n_envs, envs_per_actor, subproc).items()
    }

    def close(model: PPO) -> None:
        if model.env is not None:
            model.env.close()

    return alternate(factories, training_rate, rounds, close)


def bench_call_overhead(calls: int) -> list[tuple[int, float, float, float]]:
    """(envs in the actor, microseconds per RayVecEnv step, microseconds per DummyVecEnv step of the same envs,
    CPU microseconds of this process, the driver, per RayVecEnv step: Ray's threads in it included)."""
    rows = []
    for n_envs in (1, 8):
        ray_env = make_ray_vec_env("CartPole-v1", n_envs, n_envs)
        dummy = make_vec_env("CartPole-v1", n_envs, seed=0, vec_env_cls=DummyVecEnv)
        actions = np.zeros((calls, n_envs), dtype=np.int64)
        try:
            for vec_env in (ray_env, dummy):
                vec_env.reset()
                collection_rate(vec_env, actions[:50])
            ray_times, dummy_times, driver_times = [], [], []
            for _ in range(3):
                cpu = time.process_time()
                ray_times.append(n_envs / collection_rate(ray_env, actions))
                driver_times.append((time.process_time() - cpu) / calls)
                dummy_times.append(n_envs / collection_rate(dummy, actions))
            rows.append((n_envs, 1e6 * min(ray_times), 1e6 * min(dummy_times), 1e6 * min(driver_times)))
        finally:
            ray_env.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-envs", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--envs-per-actor", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=64, help="collection steps per env per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train-iterations", type=int, default=1, help="PPO iterations (rollout + update) per round")
    parser.add_argument("--train-rounds", type=int, default=1)
    parser.add_argument("--no-training", action="store_true")
    parser.add_argument("--no-collection", action="store_true")
    parser.add_argument(
        "--no-subproc",
        action="store_true",
        help="leave SubprocVecEnv out (one process per env: 64 Humanoid processes need ~14 GB); "
        "ratios are then to DummyVecEnv",
    )
    parser.add_argument("--overhead-only", action="store_true", help="time only the per-call overhead")
    parser.add_argument("--calls", type=int, default=2000, help="steps timed for the per-call overhead")
    args = parser.parse_args()
    th.set_num_threads(1)
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; Ray {ray.__version__}")
        subproc = not args.no_subproc
        reference = reference_name(subproc)
        for n_envs in [] if args.overhead_only or args.no_collection else args.n_envs:
            print_table(
                f"Collection, Humanoid, {n_envs} envs (median of {args.rounds} rounds of {args.steps} steps)",
                bench_collection(n_envs, args.envs_per_actor, args.steps, args.rounds, subproc),
                reference,
            )
        if not (args.no_training or args.overhead_only):
            for n_envs in args.n_envs:
                print_table(
                    f"Training (PPO.learn, collection + update), Humanoid block, {n_envs} envs, "
                    f"{args.train_iterations} iterations (median of {args.train_rounds} rounds)",
                    bench_training(n_envs, args.envs_per_actor, args.train_iterations, args.train_rounds, subproc),
                    reference,
                )
        print(
            "\nPer-call overhead of a Ray step (CartPole, one actor; best of 3 x "
            f"{args.calls} steps)\n{'envs':>5}{'Ray us/step':>13}{'Dummy us/step':>15}{'overhead us':>13}"
            f"{'driver CPU us':>15}"
        )
        for n_envs, ray_us, dummy_us, driver_us in bench_call_overhead(args.calls):
            print(f"{n_envs:>5}{ray_us:>13.0f}{dummy_us:>15.0f}{ray_us - dummy_us:>13.0f}{driver_us:>15.0f}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()

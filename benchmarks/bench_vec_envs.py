"""Throughput and memory of the local VecEnvs on the bundled blocks: DummyVecEnv, SubprocVecEnv, SharedMemoryVecEnv
(its default, the driver stepping one block of envs and ``--workers`` - 1 workers the others; and ``shared_waiting``:
``--workers`` workers, the driver waiting for them) and RayVecEnv with ``--vec-envs ... ray``, side by side in one run.

Not a test: prints, for each block of ``zoo_configs/ppo_ext.yml`` chosen with ``--blocks`` (Humanoid: 64 envs,
Walker2D: 16, RocketLander: 16; ``--n-envs`` overrides):

1. Collection: env steps per second with random actions (the same actions for every VecEnv), each VecEnv timed in
   ``--rounds`` rounds, the VecEnvs alternating within a round (in a rotated order each round) so that load from
   other processes hits them alike; the median rate, the median of the per-round ratios to DummyVecEnv, and the
   median CPU time per env step of the driver and the VecEnv's workers together (less sensitive to other jobs than
   the rates: on a loaded machine, compare those). With as many workers as cores, the rate is the machine's ceiling
   for env-only stepping.
2. Training: env steps per second of whole ``PPO.learn`` iterations (collection and update) of ``sb3_ppo_ext.PPO``
   with the block's hyperparameters (its network, rollout, batch, epochs, schedules and VecNormalize), alternating
   in the same way; and where the time of one iteration goes: collection, of which waiting in ``step_wait`` (the
   envs stepping, in the driver for DummyVecEnv, in the workers otherwise), and the update.
3. With ``--overhead``: the per-step cost of the communication, on CartPole (a few microseconds of env work): time
   per ``step`` of DummyVecEnv, SubprocVecEnv and SharedMemoryVecEnv with one worker (the driver waiting), for 1 and 8
   envs.
4. Memory: the driver's resident memory grown while building and running each VecEnv, plus the peak resident
   memory of each of its worker processes (``VmHWM`` in ``/proc``; Linux), summed. RayVecEnv's processes are Ray's
   and are not counted.

SubprocVecEnv (one process per env, about 220 MB each with torch imported) is left out of blocks with more than
``--subproc-max-envs`` envs (default 32: 64 Humanoid processes need about 14 GB).

Full run (a quiet machine; an estimate of 10 to 20 minutes on 2 cores, not yet timed):
``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_vec_envs.py --rounds 3 --steps 64 --train-iterations 2
--train-rounds 3 --overhead`` (add ``ray`` to ``--vec-envs dummy subproc shared shared_waiting`` for RayVecEnv, with
the ray extra). A smoke run that only shows it works: ``--n-envs 4 --steps 4 --rounds 1 --train-iterations 1 --train-rounds 1
--n-steps 16 --overhead --calls 50``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

import sb3_ppo_ext  # noqa: F401  (registers the sb3_ppo_ext/ ids)
from sb3_ppo_ext.vec_env import SharedMemoryVecEnv

BLOCKS: dict[str, str] = {
    "humanoid": "sb3_ppo_ext/Humanoid-v0",
    "walker": "sb3_ppo_ext/Walker2D-v0",
    "rocket": "sb3_ppo_ext/RocketLander-v0",
}
VEC_ENV_NAMES: dict[str, str] = {
    "dummy": "DummyVecEnv",
    "subproc": "SubprocVecEnv",
    "shared": "SharedMemoryVecEnv",
    "shared_waiting": "SharedMemoryVecEnv, driver waiting",
    "ray": "RayVecEnv",
}
REFERENCE = "DummyVecEnv"


def zoo_block(env_id: str) -> tuple[dict[str, Any], int, bool]:
    """The keyword arguments of :class:`sb3_ppo_ext.PPO` from the block of ``env_id`` in the bundled ``ppo_ext.yml``,
    parsed as ``sb3-ppo-ext train`` parses it; and the block's ``n_envs`` and ``normalize``."""
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3_ppo_ext.zoo.config.blocks import check_config_document, preprocess_block
    from sb3_ppo_ext.zoo.config.yaml_files import load_yaml_file
    from sb3_ppo_ext.zoo.registration import default_config_path

    path = default_config_path()
    block = check_config_document(load_yaml_file(path), where=path)[env_id]
    hyperparams = preprocess_block(dict(block), where=f"{env_id!r} in {path}")
    n_envs = int(hyperparams.pop("n_envs", 1))
    normalize = bool(hyperparams.pop("normalize", False))
    # rl-zoo3's own keys; the callbacks (the Walker block's PinObservationStatisticsCallback) cost nothing per step
    for key in ("n_timesteps", "policy", "callback", "env_wrapper", "vec_env_wrapper", "frame_stack"):
        hyperparams.pop(key, None)
    return ExperimentManager._preprocess_schedules(hyperparams), n_envs, normalize


def worker_pids(vec_env: VecEnv) -> list[int]:
    """The process ids of a VecEnv's worker processes (none for DummyVecEnv and RayVecEnv)."""
    if isinstance(vec_env, SharedMemoryVecEnv):
        return [pid for pid in vec_env.worker_pids if pid is not None]
    if isinstance(vec_env, SubprocVecEnv):
        return [process.pid for process in vec_env.processes]
    return []


def proc_status_kib(pid: int | str, key: str) -> int:
    """A ``kB`` field (``VmRSS``, ``VmHWM``) of ``/proc/<pid>/status``; 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_ticks(pid: int) -> int:
    """User and system CPU time of process ``pid`` in clock ticks (``/proc/<pid>/stat``); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of the line


@dataclass
class Subject:
    """One VecEnv under test: its name, the object timed (a VecEnv or a PPO model), its VecEnv, and memory."""

    name: str
    timed: Any
    vec_env: VecEnv
    driver_kib: int
    rates: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    #: CPU microseconds per env step, the driver's and the workers' together
    cpu_us: list[float] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        """CPU time used so far by the driver (all of it, every VecEnv's share) and by this VecEnv's workers."""
        ticks = os.sysconf("SC_CLK_TCK")
        return time.process_time() + sum(proc_cpu_ticks(pid) for pid in worker_pids(self.vec_env)) / ticks

    def memory_mib(self) -> float:
        """Driver memory grown while building it, plus its workers' peak resident memory, in MiB."""
        return (max(self.driver_kib, 0) + sum(proc_status_kib(pid, "VmHWM") for pid in worker_pids(self.vec_env))) / 1024


def build_vec_env(kind: str, env_id: str, n_envs: int, workers: int) -> VecEnv:
    if kind == "dummy":
        return make_vec_env(env_id, n_envs, seed=0, vec_env_cls=DummyVecEnv)
    if kind == "subproc":
        return make_vec_env(env_id, n_envs, seed=0, vec_env_cls=SubprocVecEnv)
    if kind in ("shared", "shared_waiting"):
        # `workers` processes step envs: with the driver stepping the last block (the default), one worker fewer
        driver_steps = kind == "shared"
        # make_vec_env's annotation names only SB3's two classes; any VecEnv taking env_fns works
        return make_vec_env(
            env_id,
            n_envs,
            seed=0,
            vec_env_cls=SharedMemoryVecEnv,  # type: ignore[arg-type]
            vec_env_kwargs={"n_workers": max(1, workers - 1) if driver_steps else workers, "step_in_driver": driver_steps},
        )
    if kind == "ray":
        from sb3_ppo_ext.vec_env import RayVecEnv

        return make_vec_env(
            env_id,
            n_envs,
            seed=0,
            vec_env_cls=RayVecEnv,  # type: ignore[arg-type]
            vec_env_kwargs={
                "envs_per_actor": -(-n_envs // workers),
                "actor_options": {"num_cpus": 0},
            },
        )
    raise ValueError(f"unknown VecEnv kind {kind!r}")


def alternate(subjects: list[Subject], run: Callable[[Any], int], rounds: int) -> None:
    """Time ``run`` (which returns the env steps it made) on every subject in each of ``rounds`` rounds (order
    rotated each round); store each rate, its ratio to :data:`REFERENCE`'s rate in the same round, and the CPU time
    per env step of the driver and the subject's workers (less sensitive than rates to other jobs on the machine)."""
    for round_index in range(rounds):
        shift = round_index % len(subjects)
        order = subjects[shift:] + subjects[:shift]
        rates = {}
        for subject in order:
            cpu, start = subject.cpu_seconds(), time.perf_counter()
            steps = run(subject.timed)
            rates[subject.name] = steps / (time.perf_counter() - start)
            subject.cpu_us.append(1e6 * (subject.cpu_seconds() - cpu) / steps)
        for subject in subjects:
            subject.rates.append(rates[subject.name])
            subject.ratios.append(rates[subject.name] / rates[REFERENCE])


def print_table(title: str, subjects: list[Subject], extra: dict[str, str] | None = None, extra_title: str = "") -> None:
    print(f"\n{title}\n{'VecEnv':<36}{'steps/s':>10}{'/ Dummy':>9}{'CPU us/step':>13}{'memory MiB':>12}  {extra_title}")
    for subject in subjects:
        print(
            f"{subject.name:<36}{statistics.median(subject.rates):>10.0f}{statistics.median(subject.ratios):>9.2f}"
            f"{statistics.median(subject.cpu_us):>13.0f}{subject.memory_mib():>12.0f}  "
            f"{(extra or {}).get(subject.name, '')}"
        )


def build_subjects(kinds: list[str], env_id: str, n_envs: int, workers: int, wrap: Callable[[VecEnv], Any]) -> list[Subject]:
    """Build each VecEnv (and what is timed on it), recording how far it grew the driver's resident memory."""
    subjects = []
    for kind in kinds:
        before = proc_status_kib("self", "VmRSS")
        vec_env = build_vec_env(kind, env_id, n_envs, workers)
        timed = wrap(vec_env)
        subjects.append(Subject(VEC_ENV_NAMES[kind], timed, vec_env, proc_status_kib("self", "VmRSS") - before))
    return subjects


def bench_collection(kinds: list[str], env_id: str, n_envs: int, workers: int, steps: int, rounds: int) -> None:
    subjects = build_subjects(kinds, env_id, n_envs, workers, lambda vec_env: vec_env)
    try:
        space = subjects[0].vec_env.action_space
        space.seed(0)
        actions = np.array([[space.sample() for _ in range(n_envs)] for _ in range(steps + 4)])

        def run(vec_env: VecEnv) -> int:
            for step_actions in actions[4:]:
                vec_env.step(step_actions)
            return steps * n_envs

        for subject in subjects:
            before = proc_status_kib("self", "VmRSS")
            subject.vec_env.reset()
            for step_actions in actions[:4]:  # warm-up
                subject.vec_env.step(step_actions)
            subject.driver_kib += proc_status_kib("self", "VmRSS") - before
        alternate(subjects, run, rounds)
        print_table(
            f"Collection, {env_id}, {n_envs} envs, random actions (median of {rounds} rounds of {steps} steps)", subjects
        )
    finally:
        for subject in subjects:
            subject.vec_env.close()


@dataclass
class Timers:
    """Seconds spent in ``collect_rollouts``, in the VecEnv's ``step_wait`` and in ``train`` (the update)."""

    collect: float = 0.0
    step_wait: float = 0.0
    update: float = 0.0


def timed_method(owner: Any, name: str, timers: Timers, slot: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its wall time to ``timers.slot`` (an instance attribute, so that
    calls through ``self`` are timed too)."""
    method = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            setattr(timers, slot, getattr(timers, slot) + time.perf_counter() - start)

    setattr(owner, name, wrapper)


def bench_training(
    kinds: list[str], env_id: str, n_envs: int, workers: int, iterations: int, rounds: int, n_steps: int | None
) -> None:
    from sb3_ppo_ext import PPO

    hyperparams, _, normalize = zoo_block(env_id)
    if n_steps is not None:
        hyperparams["n_steps"] = n_steps
        hyperparams["batch_size"] = min(hyperparams.get("batch_size", 64), n_steps * n_envs)
    steps_per_round = iterations * hyperparams["n_steps"] * n_envs
    timers: dict[int, Timers] = {}

    def model_on(vec_env: VecEnv) -> Any:
        model = PPO("MlpPolicy", VecNormalize(vec_env) if normalize else vec_env, seed=0, **hyperparams)
        timers[id(model)] = Timers()
        timed_method(model, "collect_rollouts", timers[id(model)], "collect")
        timed_method(model, "train", timers[id(model)], "update")
        timed_method(vec_env, "step_wait", timers[id(model)], "step_wait")
        return model

    def run(model: Any) -> int:
        model.learn(steps_per_round, reset_num_timesteps=False)
        return steps_per_round

    subjects = build_subjects(kinds, env_id, n_envs, workers, model_on)
    try:
        alternate(subjects, run, rounds)
        total_iterations = iterations * rounds
        breakdown = {}
        for subject in subjects:
            spent = timers[id(subject.timed)]
            breakdown[subject.name] = (
                f"{spent.collect / total_iterations:7.2f} {spent.step_wait / total_iterations:9.2f} "
                f"{spent.update / total_iterations:7.2f}"
            )
        print_table(
            f"Training (PPO.learn), {env_id} block, {n_envs} envs, n_steps {hyperparams['n_steps']}, "
            f"{iterations} iteration(s) per round (median of {rounds} rounds)",
            subjects,
            breakdown,
            "s per iteration: collect (in step_wait) update",
        )
    finally:
        for subject in subjects:
            subject.timed.env.close()


def bench_overhead(calls: int) -> None:
    print(
        f"\nPer-step overhead (CartPole; best of 3 x {calls} steps), microseconds per step\n"
        f"{'envs':>5}{'Dummy':>8}{'Subproc':>9}{'SharedMemory, 1 worker':>24}"
    )
    for n_envs in (1, 8):
        vec_envs = [
            make_vec_env("CartPole-v1", n_envs, seed=0, vec_env_cls=cls, vec_env_kwargs=kwargs)  # type: ignore[arg-type]
            for cls, kwargs in (
                (DummyVecEnv, None),
                (SubprocVecEnv, None),
                (SharedMemoryVecEnv, {"n_workers": 1, "step_in_driver": False}),
            )
        ]
        actions = np.zeros((calls, n_envs), dtype=np.int64)
        try:
            best = []
            for vec_env in vec_envs:
                vec_env.reset()
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    for step_actions in actions:
                        vec_env.step(step_actions)
                    times.append((time.perf_counter() - start) / calls)
                best.append(1e6 * min(times))
            print(f"{n_envs:>5}{best[0]:>8.0f}{best[1]:>9.0f}{best[2]:>24.0f}")
        finally:
            for vec_env in vec_envs:
                vec_env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", nargs="+", choices=list(BLOCKS), default=list(BLOCKS))
    parser.add_argument(
        "--vec-envs",
        nargs="+",
        choices=list(VEC_ENV_NAMES),
        default=["dummy", "subproc", "shared", "shared_waiting"],
        help="VecEnvs to compare (DummyVecEnv always; ray needs the ray extra)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes stepping envs: SharedMemoryVecEnv's workers (with the driver stepping a block: the driver and "
        "one worker fewer), RayVecEnv's actors",
    )
    parser.add_argument("--n-envs", type=int, default=None, help="envs of every block (default: the block's n_envs)")
    parser.add_argument(
        "--subproc-max-envs",
        type=int,
        default=32,
        help="leave SubprocVecEnv out of blocks with more envs (one process of ~220 MB per env)",
    )
    parser.add_argument("--steps", type=int, default=64, help="collection steps per env per round")
    parser.add_argument("--rounds", type=int, default=3, help="collection rounds")
    parser.add_argument("--train-iterations", type=int, default=1, help="PPO iterations (rollout + update) per round")
    parser.add_argument("--train-rounds", type=int, default=3)
    parser.add_argument(
        "--n-steps",
        type=int,
        default=None,
        help="rollout steps per env for training (default: the block's; smaller for a quick run)",
    )
    parser.add_argument("--no-collection", action="store_true")
    parser.add_argument("--no-training", action="store_true")
    parser.add_argument("--overhead", action="store_true", help="also time the per-step communication overhead")
    parser.add_argument("--calls", type=int, default=2000, help="steps timed for --overhead")
    args = parser.parse_args()
    th.set_num_threads(1)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.workers} workers")
    if "ray" in args.vec_envs:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray starts: every address on 127.0.0.1
        import ray

        ray.init(include_dashboard=False, log_to_driver=False)
    for block in args.blocks:
        env_id = BLOCKS[block]
        n_envs = args.n_envs or zoo_block(env_id)[1]
        kinds = ["dummy"] + [kind for kind in args.vec_envs if kind != "dummy"]
        if "subproc" in kinds and n_envs > args.subproc_max_envs:
            kinds.remove("subproc")
            print(f"\n{env_id}: SubprocVecEnv left out ({n_envs} envs > --subproc-max-envs {args.subproc_max_envs})")
        if not args.no_collection:
            bench_collection(kinds, env_id, n_envs, args.workers, args.steps, args.rounds)
        if not args.no_training:
            bench_training(kinds, env_id, n_envs, args.workers, args.train_iterations, args.train_rounds, args.n_steps)
    if args.overhead:
        bench_overhead(args.calls)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nPeak resident memory of this process (driver, DummyVecEnv's envs included): {peak:.0f} MiB; "
        f"load average now {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

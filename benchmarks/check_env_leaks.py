"""Make / reset / step / close an env many times and report what is left behind.

Not a test (a thousand cycles take about a minute per task): prints, per task, the next free PyBullet client id,
the number of open file descriptors and the resident memory before and after.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/check_env_leaks.py --cycles 1000``
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import gymnasium as gym
import pybullet

import sb3_ppo_ext  # noqa: F401  (registers the ids)


def next_client_id() -> int:
    client = pybullet.connect(pybullet.DIRECT)
    pybullet.disconnect(client)
    return client


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def resident_megabytes() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cycle(env_id: str, seed: int) -> None:
    env = gym.make(env_id)
    env.reset(seed=seed)
    env.step(env.action_space.sample())
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--ids", nargs="+", default=["sb3_ppo_ext/Walker2D-v0", "sb3_ppo_ext/HumanoidFlagrunHarder-v0"])
    args = parser.parse_args()
    print(f"{'task':<38} {'client id':>14} {'open fds':>10} {'RSS MiB':>16} {'s':>6}")
    for env_id in args.ids:
        for seed in range(5):  # warm-up: imports, file caches
            cycle(env_id, seed)
        gc.collect()
        before = (next_client_id(), open_fds(), resident_megabytes())
        start = time.perf_counter()
        for seed in range(args.cycles):
            cycle(env_id, seed)
        gc.collect()
        after = (next_client_id(), open_fds(), resident_megabytes())
        print(
            f"{env_id:<38} {before[0]:>6} -> {after[0]:<5} {before[1]:>4} -> {after[1]:<3}"
            f" {before[2]:7.1f} -> {after[2]:<7.1f} {time.perf_counter() - start:6.1f}"
        )


if __name__ == "__main__":
    main()

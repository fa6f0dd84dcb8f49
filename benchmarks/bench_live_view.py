"""Training speed with and without the live view, side by side in one run.

Runs the same PPO training alternately without and with :class:`~sb3_ppo_ext.callbacks.LiveViewCallback`
(headless ``file`` mode; defaults: 15 fps cap, niceness 10), in the order A B B A A B ... so that slow drifts of a
shared machine hit both sides alike. The viewer process needs a few seconds to start (importing torch at low
priority), so the speed is measured in steady state: from the first update at which the viewer is playing to the end
of training, and over the same steps for the run without it. Printed: the median training fps of each side, the
overhead, the CPU seconds of the training process itself over the same window, and how often the viewer rewrote its
file.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_live_view.py --timesteps 60000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_ppo_ext import PPO
from sb3_ppo_ext.callbacks import LiveViewCallback


class UpdateClock(BaseCallback):
    """Records, at every rollout start and at the end: wall time, CPU time, steps, whether the viewer plays."""

    def __init__(self, live_view: LiveViewCallback | None, path: str):
        super().__init__()
        self.live_view, self.path = live_view, path
        self.records: list[tuple[float, float, int, bool]] = []
        self.file_versions: set[float] = set()

    def _record(self) -> None:
        playing = self.live_view is not None and self.live_view._ready_event.is_set()
        self.records.append((time.perf_counter(), time.process_time(), self.num_timesteps, playing))
        if os.path.exists(self.path):
            self.file_versions.add(os.stat(self.path).st_mtime_ns)

    def _on_rollout_start(self) -> None:
        self._record()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._record()


def run(env_id: str, timesteps: int, path: str, with_view: bool, seed: int, fps: float, niceness: int) -> UpdateClock:
    """Train a fresh PPO for ``timesteps`` steps and return its clock."""
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=512, batch_size=256, n_epochs=10, seed=seed)
    live_view = LiveViewCallback(env_id, mode="file", output_path=path, fps=fps, niceness=niceness) if with_view else None
    clock = UpdateClock(live_view, path)
    model.learn(timesteps, callback=[clock] if live_view is None else [live_view, clock])
    env.close()
    return clock


def window_speed(clock: UpdateClock, from_step: int) -> tuple[float, float]:
    """Steps per second and CPU seconds of the training process from the first record at ``from_step`` or later."""
    start = next(record for record in clock.records if record[2] >= from_step)
    end = clock.records[-1]
    return (end[2] - start[2]) / (end[0] - start[0]), end[1] - start[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--timesteps", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--live-view-fps", type=float, default=15.0)
    parser.add_argument("--niceness", type=int, default=10, help="LiveViewCallback niceness")
    args = parser.parse_args()
    th.set_num_threads(1)

    speeds: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    rewrites: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "live_view.gif")
        for index in range(args.repeats):
            order = ("without", "with") if index % 2 == 0 else ("with", "without")
            clocks = {
                side: run(args.env, args.timesteps, path, side == "with", index, args.live_view_fps, args.niceness)
                for side in order
            }
            playing_from = next((steps for _, _, steps, playing in clocks["with"].records if playing), None)
            if playing_from is None or playing_from >= args.timesteps:
                print(f"repeat {index + 1}: the viewer never played during training; use more --timesteps")
                continue
            rewrites.append(len(clocks["with"].file_versions))
            for side, clock in clocks.items():
                fps, seconds = window_speed(clock, playing_from)
                speeds[side].append(fps)
                cpu[side].append(seconds)
            print(
                f"repeat {index + 1}/{args.repeats}: viewer playing from step {playing_from}; steady-state fps "
                f"without {speeds['without'][-1]:.0f}, with {speeds['with'][-1]:.0f}; {rewrites[-1]} versions of the file seen",
                flush=True,
            )
    if not speeds["with"]:
        raise SystemExit("no repeat had the viewer playing: nothing measured")
    without, with_view = statistics.median(speeds["without"]), statistics.median(speeds["with"])
    cpu_without, cpu_with = statistics.median(cpu["without"]), statistics.median(cpu["with"])
    print(
        f"\nenv {args.env}, {args.timesteps} steps per run, {len(speeds['with'])} measured runs per side, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, viewer niceness {args.niceness}"
    )
    print(
        f"median steady-state fps without live view: {without:8.1f}  (runs: {', '.join(f'{v:.0f}' for v in speeds['without'])})"
    )
    print(
        f"median steady-state fps with live view:    {with_view:8.1f}  (runs: {', '.join(f'{v:.0f}' for v in speeds['with'])})"
    )
    print(f"overhead (fps): {100.0 * (without - with_view) / without:+.1f}%")
    print(
        f"training-process CPU seconds in the window: {cpu_without:.2f} without, {cpu_with:.2f} with "
        f"({100.0 * (cpu_with / cpu_without - 1.0):+.1f}%)"
    )


if __name__ == "__main__":
    main()

"""Training speed with and without the live view, side by side in one run.

Runs the same PPO training alternately without and with :class:`~sb3_ppo_ext.callbacks.LiveViewCallback`
(headless ``file`` mode; defaults: 15 fps cap, niceness 10, ``SCHED_IDLE``), in the order A B B A A B ... so that
slow drifts of a shared machine hit both sides alike. Printed, as medians over the pairs:

- steady-state training fps while the viewer plays: from the first update at which the viewer is playing to the end
  of the last update (before the callback stops the viewer), and over the same steps for the run without it;
- whole-run fps: the timesteps over the wall time of ``learn()``, the viewer's start and stop included;
- the fixed costs: the seconds ``learn()`` spends stopping the viewer after the last update (it writes its last
  file), and the CPU the viewer used.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_live_view.py --timesteps 100000 --repeats 3
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_live_view.py --env sb3_ppo_ext/Walker2D-v0 --timesteps 40000
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
        self.learn_seconds = self.stop_seconds = self.viewer_cpu = 0.0

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


def run(
    env_id: str, timesteps: int, path: str, with_view: bool, seed: int, fps: float, niceness: int, idle: bool
) -> UpdateClock:
    """Train a fresh PPO for ``timesteps`` steps and return its clock, with ``learn_seconds`` (wall time of
    ``learn()``), ``stop_seconds`` (from the end of the last update to the return of ``learn()``: stopping the viewer)
    and ``viewer_cpu`` (the CPU seconds of the viewer process, which is reaped when training ends)."""
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=512, batch_size=256, n_epochs=10, seed=seed)
    live_view = None
    if with_view:
        live_view = LiveViewCallback(env_id, mode="file", output_path=path, fps=fps, niceness=niceness, idle_scheduling=idle)
    clock = UpdateClock(live_view, path)
    before, started = os.times(), time.perf_counter()
    # The clock goes first: its training-end record is taken before the live view stops its process.
    model.learn(timesteps, callback=[clock] if live_view is None else [clock, live_view])
    ended, after = time.perf_counter(), os.times()
    clock.learn_seconds = ended - started
    clock.stop_seconds = ended - clock.records[-1][0]
    clock.viewer_cpu = after.children_user + after.children_system - before.children_user - before.children_system
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
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--live-view-fps", type=float, default=15.0)
    parser.add_argument("--niceness", type=int, default=10, help="LiveViewCallback niceness")
    parser.add_argument(
        "--no-idle-scheduling", action="store_true", help="LiveViewCallback(idle_scheduling=False): niceness only"
    )
    args = parser.parse_args()
    th.set_num_threads(1)

    whole: dict[str, list[float]] = {"without": [], "with": []}
    whole_cpu: dict[str, list[float]] = {"without": [], "with": []}
    speeds: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    viewer_load: list[float] = []
    stop_seconds: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "live_view.gif")
        for index in range(args.repeats):
            order = ("without", "with") if index % 2 == 0 else ("with", "without")
            clocks = {
                side: run(
                    args.env,
                    args.timesteps,
                    path,
                    side == "with",
                    index,
                    args.live_view_fps,
                    args.niceness,
                    not args.no_idle_scheduling,
                )
                for side in order
            }
            for side, clock in clocks.items():
                whole[side].append(args.timesteps / clock.learn_seconds)
                whole_cpu[side].append(window_speed(clock, 0)[1])
            viewer = clocks["with"]
            viewer_load.append(viewer.viewer_cpu / viewer.learn_seconds)
            stop_seconds.append(viewer.stop_seconds)
            line = (
                f"repeat {index + 1}/{args.repeats}: whole-run fps without {whole['without'][-1]:.0f}, "
                f"with {whole['with'][-1]:.0f}; viewer used {viewer.viewer_cpu:.1f} CPU s, "
                f"stopping it took {viewer.stop_seconds:.2f} s"
            )
            playing_from = next((steps for _, _, steps, playing in viewer.records if playing), None)
            if playing_from is None or playing_from >= args.timesteps:
                print(line + "; the viewer never played during training (it was still starting)", flush=True)
                continue
            for side, clock in clocks.items():
                fps, seconds = window_speed(clock, playing_from)
                speeds[side].append(fps)
                cpu[side].append(seconds)
            print(
                line + f"; playing from step {playing_from}: steady-state fps without {speeds['without'][-1]:.0f}, "
                f"with {speeds['with'][-1]:.0f}; {len(viewer.file_versions)} versions of the file seen",
                flush=True,
            )

    def summary(values: dict[str, list[float]]) -> str:
        """Medians of each side and the median of the per-repeat overheads (each repeat is a back-to-back pair)."""
        without, with_view = statistics.median(values["without"]), statistics.median(values["with"])
        pairs = [100.0 * (1.0 - on / off) for off, on in zip(values["without"], values["with"], strict=True)]
        return (
            f"{without:.0f} without, {with_view:.0f} with; overhead per pair "
            f"{', '.join(f'{value:+.1f}%' for value in pairs)}: median {statistics.median(pairs):+.1f}%"
        )

    print(
        f"\nenv {args.env}, {args.timesteps} steps per run, {args.repeats} runs per side, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}, viewer niceness {args.niceness}, "
        f"idle scheduling {not args.no_idle_scheduling}, fps cap {args.live_view_fps:g}"
    )
    print(f"median whole-run fps (viewer start and stop included): {summary(whole)}")
    print(f"stopping the viewer at the end of learn(): median {statistics.median(stop_seconds):.2f} s")
    print(
        f"training-process CPU seconds per run: median {statistics.median(whole_cpu['without']):.2f} without, "
        f"{statistics.median(whole_cpu['with']):.2f} with"
    )
    print(f"viewer process CPU: median {statistics.median(viewer_load):.2f} CPU s per second of training")
    if speeds["with"]:
        print(f"median steady-state fps (viewer playing):       {summary(speeds)}")
        cpu_without, cpu_with = statistics.median(cpu["without"]), statistics.median(cpu["with"])
        print(
            f"training-process CPU seconds in that window: {cpu_without:.2f} without, {cpu_with:.2f} with "
            f"({100.0 * (cpu_with / cpu_without - 1.0):+.1f}%)"
        )
    else:
        print("steady state: the viewer never played during training in any run (starved at its priority)")


if __name__ == "__main__":
    main()

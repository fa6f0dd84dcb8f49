"""Training speed with and without the live view, side by side in one run.

Runs the same PPO training alternately without and with :class:`~sb3_ppo_ext.callbacks.LiveViewCallback`
(headless ``file`` mode, default settings: 15 fps cap, niceness 10), in the order A B B A A B ... so that slow drifts
of a shared machine hit both sides alike, and prints the median training fps of each side and the overhead.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_live_view.py --timesteps 20000 --repeats 3

fps is ``total_timesteps / wall time of learn()``, including the start and the stop of the viewer process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch as th  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from sb3_ppo_ext import PPO  # noqa: E402
from sb3_ppo_ext.callbacks import LiveViewCallback  # noqa: E402


def train_fps(env_id: str, timesteps: int, live_view_path: str | None, seed: int, live_view_fps: float) -> float:
    """Train a fresh PPO for ``timesteps`` steps and return steps per second of ``learn()``."""
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=512, batch_size=256, n_epochs=10, seed=seed)
    callback = None
    if live_view_path is not None:
        callback = LiveViewCallback(env_id, mode="file", output_path=live_view_path, fps=live_view_fps)
    started = time.perf_counter()
    model.learn(timesteps, callback=callback)
    elapsed = time.perf_counter() - started
    env.close()
    return model.num_timesteps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--live-view-fps", type=float, default=15.0)
    args = parser.parse_args()
    th.set_num_threads(1)

    results: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "live_view.gif")
        orders = [("without", "with") if index % 2 == 0 else ("with", "without") for index in range(args.repeats)]
        for index, order in enumerate(orders):
            for side in order:
                fps = train_fps(args.env, args.timesteps, path if side == "with" else None, index, args.live_view_fps)
                results[side].append(fps)
                print(f"repeat {index + 1}/{args.repeats}  live view {side:>7}: {fps:8.1f} steps/s", flush=True)
        written = os.path.exists(path)

    without, with_view = statistics.median(results["without"]), statistics.median(results["with"])
    overhead = 100.0 * (without - with_view) / without
    print(f"\nenv {args.env}, {args.timesteps} steps per run, {args.repeats} runs per side, {os.cpu_count()} CPUs")
    print(f"median fps without live view: {without:8.1f}  (runs: {', '.join(f'{v:.0f}' for v in results['without'])})")
    print(f"median fps with live view:    {with_view:8.1f}  (runs: {', '.join(f'{v:.0f}' for v in results['with'])})")
    print(f"overhead: {overhead:+.1f}% (live view file written: {written})")


if __name__ == "__main__":
    main()

"""Train PPO on RocketLander, with checkpoints, resume, a learning-curve CSV / PNG and a final evaluation.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_rocket.py --total-timesteps 3000000
    # continue an interrupted run from its latest checkpoint:
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_rocket.py --total-timesteps 3000000 --resume

The learning curve (timesteps, mean episode return, success rate over the last 100 episodes) is appended
to ``--curve-csv`` after every rollout and plotted to ``--curve-png``; the final evaluation runs
``--eval-episodes`` deterministic episodes and prints the landing success rate.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

DEFAULT_HYPERPARAMETERS: dict = {
    "n_steps": 256,
    "batch_size": 256,
    "n_epochs": 10,
    "learning_rate": "lin_3e-4",
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "ent_coef": 0.0,
    "policy_kwargs": {"net_arch": [64, 64]},
}


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="sb3_ppo_ext/RocketLander-v0")
    parser.add_argument("--total-timesteps", type=int, default=3_000_000)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=Path("runs/rocket_lander"),
        help="checkpoints (run-dir/checkpoints) and the monitor log go here",
    )
    parser.add_argument("--checkpoint-freq", type=int, default=100_000, help="in total env steps")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in run-dir")
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--curve-csv", type=Path, default=Path("docs/results/rocket_lander_results.csv"))
    parser.add_argument("--curve-png", type=Path, default=Path("docs/results/rocket_lander_curve.png"))
    parser.add_argument(
        "--algo",
        choices=["sb3_ppo_ext", "sb3"],
        default="sb3_ppo_ext",
        help="sb3_ppo_ext.PPO (default) or stable_baselines3.PPO",
    )
    parser.add_argument("--hyperparameters", type=json.loads, default={}, help="JSON dict overriding DEFAULT_HYPERPARAMETERS")
    return parser.parse_args(argv)


def linear_schedule(initial_value: float):
    """Decay linearly from ``initial_value`` to 0 over training (rl-zoo3's ``lin_`` schedules)."""

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial_value

    return schedule


def resolve_schedules(hyperparameters: dict) -> dict:
    """Turn ``"lin_<float>"`` strings (rl-zoo3 notation) for the learning rate and clip range into schedules."""
    resolved = dict(hyperparameters)
    for key in ("learning_rate", "clip_range"):
        value = resolved.get(key)
        if isinstance(value, str):
            if not value.startswith("lin_"):
                raise ValueError(f"{key}={value!r} is invalid: a string must be 'lin_<float>'")
            resolved[key] = linear_schedule(float(value[len("lin_") :]))
    return resolved


def latest_checkpoint(checkpoint_dir: Path, prefix: str = "rocket") -> tuple[Path, Path, int] | None:
    """Return ``(model_zip, vecnormalize_pkl, steps)`` of the newest complete checkpoint, or ``None``."""
    best: tuple[Path, Path, int] | None = None
    for model_path in checkpoint_dir.glob(f"{prefix}_*_steps.zip"):
        match = re.fullmatch(rf"{prefix}_(\d+)_steps\.zip", model_path.name)
        if match is None:
            continue
        steps = int(match.group(1))
        normalize_path = checkpoint_dir / f"{prefix}_vecnormalize_{steps}_steps.pkl"
        if normalize_path.exists() and (best is None or steps > best[2]):
            best = (model_path, normalize_path, steps)
    return best


def read_curve(path: Path) -> list[tuple[int, float, float]]:
    if not path.exists():
        return []
    with path.open() as handle:
        return [
            (int(row["timesteps"]), float(row["mean_return"]), float(row["success_rate"])) for row in csv.DictReader(handle)
        ]


def plot_curve(rows: list[tuple[int, float, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row[0] for row in rows]
    figure, return_axis = plt.subplots(figsize=(7, 4))
    return_axis.plot(steps, [row[1] for row in rows], color="tab:blue", label="mean return")
    return_axis.set_xlabel("environment steps")
    return_axis.set_ylabel("mean episode return (last 100)", color="tab:blue")
    success_axis = return_axis.twinx()
    success_axis.plot(steps, [row[2] for row in rows], color="tab:green", label="success rate")
    success_axis.set_ylabel("landing success rate (last 100)", color="tab:green")
    success_axis.set_ylim(0.0, 1.0)
    return_axis.set_title(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def make_curve_callback(curve_csv: Path):
    from stable_baselines3.common.callbacks import BaseCallback

    class CurveCallback(BaseCallback):
        """Append (timesteps, mean return, success rate) over the last 100 episodes after each rollout."""

        def _init_callback(self) -> None:
            curve_csv.parent.mkdir(parents=True, exist_ok=True)
            if not curve_csv.exists():
                with curve_csv.open("w", newline="") as handle:
                    csv.writer(handle).writerow(["timesteps", "mean_return", "success_rate"])

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            episodes = self.model.ep_info_buffer
            successes = self.model.ep_success_buffer
            if not episodes:
                return
            mean_return = float(np.mean([episode["r"] for episode in episodes]))
            success_rate = float(np.mean(successes)) if successes else 0.0
            with curve_csv.open("a", newline="") as handle:
                csv.writer(handle).writerow([self.model.num_timesteps, f"{mean_return:.3f}", f"{success_rate:.3f}"])

    return CurveCallback()


def evaluate(model, env_id: str, normalize_path: Path, episodes: int, seed: int) -> tuple[float, float]:
    """Deterministic evaluation on fresh seeds; return ``(success_rate, mean_return)``."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs

    env = VecNormalize.load(str(normalize_path), make_vec_env(env_id, n_envs=1, seed=seed))
    env.training = False
    env.norm_reward = False
    successes: list[bool] = []
    returns: list[float] = []
    observation: VecEnvObs = env.reset()
    episode_return = 0.0
    while len(successes) < episodes:
        action, _ = model.predict(observation, deterministic=True)
        observation, reward, done, infos = env.step(action)
        episode_return += float(reward[0])
        if done[0]:
            successes.append(bool(infos[0].get("is_success", False)))
            returns.append(episode_return)
            episode_return = 0.0
    env.close()
    return float(np.mean(successes)), float(np.mean(returns))


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from sb3_ppo_ext import PPO as OurPPO  # importing sb3_ppo_ext also registers the envs

    algorithm = SB3PPO if arguments.algo == "sb3" else OurPPO

    checkpoint_dir = arguments.run_dir / "checkpoints"
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    env = make_vec_env(
        arguments.env_id,
        n_envs=arguments.n_envs,
        seed=arguments.seed,
        vec_env_cls=DummyVecEnv,
        monitor_dir=str(arguments.run_dir / "monitor"),
    )
    found = latest_checkpoint(checkpoint_dir) if arguments.resume else None
    if found is not None:
        model_path, normalize_path, steps = found
        print(f"resuming from {model_path} ({steps} steps)", flush=True)
        env = VecNormalize.load(str(normalize_path), env)
        model = algorithm.load(str(model_path), env=env, device="cpu")
    else:
        if not arguments.resume:
            arguments.curve_csv.unlink(missing_ok=True)
        env = VecNormalize(env, gamma=DEFAULT_HYPERPARAMETERS["gamma"])
        hyperparameters = resolve_schedules({**DEFAULT_HYPERPARAMETERS, **arguments.hyperparameters})
        model = algorithm("MlpPolicy", env, seed=arguments.seed, device="cpu", verbose=0, **hyperparameters)
    remaining = arguments.total_timesteps - model.num_timesteps
    callbacks = CallbackList(
        [
            CheckpointCallback(
                max(arguments.checkpoint_freq // arguments.n_envs, 1),
                str(checkpoint_dir),
                name_prefix="rocket",
                save_vecnormalize=True,
            ),
            make_curve_callback(arguments.curve_csv),
        ]
    )
    if remaining > 0:
        model.learn(remaining, callback=callbacks, reset_num_timesteps=found is None)
    final_model = checkpoint_dir / f"rocket_{model.num_timesteps}_steps.zip"
    final_normalize = checkpoint_dir / f"rocket_vecnormalize_{model.num_timesteps}_steps.pkl"
    model.save(str(final_model))
    env.save(str(final_normalize))
    rows = read_curve(arguments.curve_csv)
    if rows:
        plot_curve(rows, arguments.curve_png, f"PPO on {arguments.env_id}")
    success_rate, mean_return = evaluate(
        model, arguments.env_id, final_normalize, arguments.eval_episodes, seed=arguments.seed + 10_000
    )
    print(
        f"final evaluation over {arguments.eval_episodes} episodes: success rate {success_rate:.3f}, "
        f"mean return {mean_return:.1f} (timesteps {model.num_timesteps})",
        flush=True,
    )
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Kill training runs with SIGKILL at random moments and check that no checkpoint is lost or corrupt.

Each round starts ``sb3-ppo-ext train`` (CartPole-v1, VecNormalize on, a checkpoint every ``--save-freq`` steps,
so that writes are frequent and a kill often lands inside one), kills it after a random delay, then checks the
run's checkpoint folder:

- every ``rl_model_<N>_steps.zip`` under its final name passes its CRC check and has its statistics (pickle and
  plain-data twin) complete: a killed write must leave nothing half-written under a final name;
- the newest intact checkpoint (:func:`~sb3_ppo_ext.callbacks.find_latest_checkpoint`) resumes through the Python
  API with its step count and its VecNormalize statistics (the pickle and the ``.npz`` twin agree);
- ``sb3-ppo-ext train -i <that zip>`` continues it from the command line (a short run that must exit 0).

    python benchmarks/kill_campaign.py --rounds 10

Prints one line per round and the totals.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np


def train_command(folder: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sb3_ppo_ext",
        "train",
        "--env",
        "CartPole-v1",
        "-f",
        folder,
        "--seed",
        "0",
        "--eval-freq",
        "-1",
        "--no-progress",
        "--verbose",
        "0",
        "--num-threads",
        "1",
        "--hyperparams",
        "normalize:True",
        "n_envs:2",
        "n_steps:64",
        "batch_size:64",
        "n_epochs:1",
        *extra,
    ]


def check_round(folder: str, save_freq: int) -> tuple[int, int, str]:
    """(checkpoints under final names, corrupt ones among them, what resumed) for one killed run."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.running_mean_std import RunningMeanStd
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3_ppo_ext.callbacks import checkpoint_defect, find_latest_checkpoint, list_checkpoints, resume_from_checkpoint
    from sb3_ppo_ext.safe_loading import read_vecnormalize_statistics

    folders = glob.glob(os.path.join(folder, "ppo_ext", "CartPole-v1_*"))
    if not folders:
        return 0, 0, "killed before the run folder existed"
    run = folders[0]
    checkpoints = list_checkpoints(run)
    corrupt = [c for c in checkpoints if checkpoint_defect(c, needs_statistics=True) is not None]
    latest = find_latest_checkpoint(run, needs_statistics=True)
    if latest is None:
        return len(checkpoints), len(corrupt), "no checkpoint yet"
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2))
    model = resume_from_checkpoint(run, env)
    assert model.num_timesteps == latest.num_timesteps, (model.num_timesteps, latest.num_timesteps)
    assert latest.statistics_path is not None  # find_latest_checkpoint(needs_statistics=True) gives one
    twin = read_vecnormalize_statistics(latest.statistics_path)
    loaded = model.get_vec_normalize_env()
    assert loaded is not None and isinstance(loaded.obs_rms, RunningMeanStd) and isinstance(twin.obs_rms, RunningMeanStd)
    assert np.array_equal(loaded.obs_rms.mean, twin.obs_rms.mean) and np.array_equal(loaded.obs_rms.var, twin.obs_rms.var)
    continued = subprocess.run(
        train_command(folder + "-continued", "-n", str(save_freq), "-i", latest.model_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if continued.returncode != 0:
        raise RuntimeError(f"train -i {latest.model_path} failed:\n{continued.stderr[-2000:]}")
    return len(checkpoints), len(corrupt), f"resumed {latest.num_timesteps} steps (Python and CLI)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--save-freq", type=int, default=128, help="steps between checkpoints")
    parser.add_argument("--min-delay", type=float, default=6.0, help="seconds before the kill, at least")
    parser.add_argument("--max-delay", type=float, default=14.0, help="seconds before the kill, at most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    totals = {"checkpoints": 0, "corrupt": 0, "resumed": 0}
    with tempfile.TemporaryDirectory() as root:
        for round_index in range(args.rounds):
            folder = os.path.join(root, f"round_{round_index}")
            process = subprocess.Popen(
                train_command(folder, "-n", "1000000", "--save-freq", str(args.save_freq)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            delay = rng.uniform(args.min_delay, args.max_delay)
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
            process.wait()
            checkpoints, corrupt, resumed = check_round(folder, args.save_freq)
            totals["checkpoints"] += checkpoints
            totals["corrupt"] += corrupt
            totals["resumed"] += resumed.startswith("resumed")
            print(
                f"round {round_index}: killed after {delay:.1f} s, {checkpoints} checkpoints, {corrupt} corrupt, {resumed}",
                flush=True,
            )
    print(
        f"{args.rounds} kills: {totals['checkpoints']} checkpoints written, {totals['corrupt']} corrupt or lost, "
        f"{totals['resumed']} runs resumed through the Python API and the CLI"
    )


if __name__ == "__main__":
    main()

"""What a Walker2D policy does with its foot-contact inputs: standing plateau or walking gait.

Plays a model of a run (a ``--save-freq`` checkpoint chosen with ``--steps``, or without it the run's final model,
and the ``VecNormalize`` statistics saved with it, loaded by unpickling: use it on runs you made) for deterministic
episodes on the run's own task settings and env wrappers, and prints per episode: the return, the length, how far
the torso moved (m), the share of steps with both feet, one foot and no foot on the floor and how often a foot's
contact changed (read from the task, so also for a run whose wrappers hide the flags from the policy), and the
policy's sensitivity to its inputs: the mean absolute change of the deterministic action when an input is moved by
one standard deviation of its normalised value over the episode (a contact flag: flipped), for the two contact flags
against the median over the other 20 inputs (for a run that hides the flags, e.g. with
``sb3_ppo_ext.wrappers.MaskObservation``, the flags' sensitivity is that of weights never trained on a non-zero flag).

    python benchmarks/research/walker_plateau.py ~/runs/walker_contacts/sb3_ppo_ext-Walker2D-v0/rlzoo_current/seed_0 \\
        --steps 1000000 --episodes 3
    python benchmarks/research/walker_plateau.py ~/runs/walker_time/sb3_ppo_ext-Walker2D-v0/ppo_ext/seed_1 --episodes 2
"""

from __future__ import annotations

import argparse
import glob
import os
from typing import Any, cast

import numpy as np
import torch as th
from rl_zoo3.utils import get_wrapper_class
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_ppo_ext import PPO
from sb3_ppo_ext.callbacks.checkpoint import list_checkpoints, model_checkpoint_path
from sb3_ppo_ext.zoo.config.run_files import check_run_folder
from sb3_ppo_ext.zoo.loading import played_model_statistics
from sb3_ppo_ext.zoo.packing import find_zoo_run

#: The observation's last two entries are the feet's floor-contact flags (docs/guide/envs.md).
CONTACT_INPUTS = slice(-2, None)


def input_sensitivity(model: PPO, normalised: np.ndarray, raw_contacts: np.ndarray, statistics: VecNormalize) -> np.ndarray:
    """Mean absolute change of the deterministic action per input, over the observations of an episode.

    Each non-contact input is moved by its standard deviation over the episode (in normalised units); each contact
    flag is flipped (0 <-> 1) in raw units and normalised with the run's statistics.
    """

    def actions(observations: np.ndarray) -> np.ndarray:
        with th.no_grad():
            return model.policy.predict(observations, deterministic=True)[0]

    base = actions(normalised)
    scale = normalised.std(axis=0)
    changes = np.zeros(normalised.shape[1])
    for index in range(normalised.shape[1] - 2):
        moved = normalised.copy()
        moved[:, index] += scale[index]
        changes[index] = np.abs(actions(moved) - base).mean()
    observation_statistics = cast(RunningMeanStd, statistics.obs_rms)  # Walker2D's observations are one Box
    mean, var = observation_statistics.mean, observation_statistics.var
    for offset, index in enumerate(range(normalised.shape[1] - 2, normalised.shape[1])):
        moved = normalised.copy()
        flipped = 1.0 - raw_contacts[:, offset]
        moved[:, index] = np.clip(
            (flipped - mean[index]) / np.sqrt(var[index] + statistics.epsilon), -statistics.clip_obs, statistics.clip_obs
        )
        changes[index] = np.abs(actions(moved) - base).mean()
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a grid cell or rl-zoo3 run folder")
    parser.add_argument(
        "--steps", type=int, help="the checkpoint nearest this step count (rl_model_<steps>_steps); default: the final model"
    )
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    th.set_num_threads(1)

    run = find_zoo_run(os.path.expanduser(args.folder))
    (params,) = glob.glob(os.path.join(glob.escape(run), "*", "config.yml"))
    settings = check_run_folder(os.path.dirname(params))
    env_folder_name = os.path.basename(os.path.dirname(params))
    steps = None
    if args.steps is None:
        chosen = os.path.join(run, f"{env_folder_name}.zip")
    else:
        saved = [checkpoint.num_timesteps for checkpoint in list_checkpoints(run)]
        if not saved:
            parser.error(f"{run} has no rl_model_<steps>_steps.zip checkpoints (a run without --save-freq): omit --steps")
        steps = min(saved, key=lambda saved_steps: abs(saved_steps - args.steps))
        chosen = model_checkpoint_path(run, "rl_model", steps)
    statistics_path = played_model_statistics(run, env_folder_name, load_checkpoint=steps)
    for path in (chosen, statistics_path):
        if not os.path.isfile(path):
            parser.error(f"{path} not found: the run has not finished or was saved elsewhere")
    env = make_vec_env(
        settings.arguments["env"],
        n_envs=1,
        seed=args.seed,
        env_kwargs=settings.config.get("env_kwargs"),
        wrapper_class=get_wrapper_class(settings.config),
        vec_env_cls=DummyVecEnv,
    )
    statistics = VecNormalize.load(statistics_path, env)
    statistics.training, statistics.norm_reward = False, False
    model = PPO.load(chosen, device="cpu")
    task: Any = cast(DummyVecEnv, env).envs[0].unwrapped  # the Walker2D env: its options and torso position
    print(f"{chosen}: foot_contacts={task.foot_contacts}")
    for episode in range(args.episodes):
        observation = cast(np.ndarray, statistics.reset())  # one Box: an array of one row
        start_x = float(task._body_xyz[0])
        normalised, raw, feet, total, length = [], [], [], 0.0, 0
        while True:
            normalised.append(observation[0].copy())
            raw.append(cast(np.ndarray, statistics.get_original_obs())[0].copy())
            feet.append(list(task._feet_contact))  # this state's contacts, whatever the observation shows
            action, _ = model.predict(observation, deterministic=True)
            end_x = float(task._body_xyz[0])
            stepped, _, done, _ = statistics.step(action)
            observation = cast(np.ndarray, stepped)
            total += float(statistics.get_original_reward()[0])
            length += 1
            if done[0]:
                break
        contacts = np.array(feet)
        both, none = (contacts.sum(axis=1) == 2).mean(), (contacts.sum(axis=1) == 0).mean()
        switches = int(np.abs(np.diff(contacts, axis=0)).sum())
        shown = np.array(raw)[:, CONTACT_INPUTS]
        sensitivity = input_sensitivity(model, np.array(normalised, dtype=np.float32), shown, statistics)
        moved = f"moved {end_x - start_x:.2f} m, "
        print(
            f"episode {episode}: return {total:.0f}, {length} steps, {moved}both feet down {both:.0%}, one "
            f"{1 - both - none:.0%}, none {none:.0%}, {switches} contact changes; action change per input: contact "
            f"flags {sensitivity[-2]:.4f} and {sensitivity[-1]:.4f}, other inputs median "
            f"{np.median(sensitivity[:-2]):.4f} (max {sensitivity[:-2].max():.4f})"
        )
    env.close()


if __name__ == "__main__":
    main()

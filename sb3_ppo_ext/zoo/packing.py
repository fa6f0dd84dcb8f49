"""Packing the model of an rl-zoo3 run as a shipped agent (:mod:`sb3_ppo_ext.pretrained`).

**This unpickles the run's model zip and ``vecnormalize.pkl``: use it only on runs you made.**
"""

from __future__ import annotations

import glob
import os
import pickle
import re
from typing import Any

import gymnasium as gym
import numpy as np
from rl_zoo3.utils import ALGOS

from sb3_ppo_ext.callbacks.checkpoint import DEFAULT_NAME_PREFIX, list_checkpoints, model_checkpoint_path
from sb3_ppo_ext.pretrained.format import AGENT_FILE, check_agent_env_kwargs
from sb3_ppo_ext.pretrained.saving import save_pretrained
from sb3_ppo_ext.zoo.config.run_files import check_run_folder
from sb3_ppo_ext.zoo.loading import played_model_statistics
from sb3_ppo_ext.zoo.registration import register_algorithm
from sb3_ppo_ext.zoo.resume import read_evaluations


def find_zoo_run(folder: str) -> str:
    """The rl-zoo3 run folder (``<algo>/<env>_<n>``, holding ``<env>/config.yml``) that is ``folder`` or lies under it
    (the newest one, e.g. inside a ``benchmarks/grid.py`` cell folder).

    :raises ValueError: when there is none.
    """
    if glob.glob(os.path.join(glob.escape(folder), "*", "config.yml")):
        return folder
    runs = sorted(glob.glob(os.path.join(glob.escape(folder), "*", "*", "*", "config.yml")), key=os.path.getmtime)
    if not runs:
        raise ValueError(f"no rl-zoo3 run (a folder with <env>/config.yml) in {folder!r}")
    return os.path.dirname(os.path.dirname(runs[-1]))


def save_pretrained_from_run(
    folder: str,
    destination: str,
    *,
    model: str = "final",
    provenance: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Pack the final model of an rl-zoo3 run (or its ``"best"`` one, or a checkpoint) as an agent folder (see
    :func:`~sb3_ppo_ext.pretrained.saving.save_pretrained`), with the statistics saved with that model.

    **This unpickles the run's model zip and ``vecnormalize.pkl``: use it only on runs you made.** Needs the ``zoo``
    extra (the run's algorithm is looked up in rl-zoo3's registry).

    :param folder: an rl-zoo3 run folder or a folder above one (see :func:`find_zoo_run`).
    :param destination: the agent folder to write.
    :param model: ``"final"`` (``<env>.zip``), ``"best"`` (``best_model.zip``) or ``"checkpoint:<steps>"``
        (``rl_model_<steps>_steps.zip``, the ``--save-freq`` checkpoint with its own statistics).
    :param provenance: extra provenance entries (kept with the run's own: algorithm, seed, steps, last evaluation).
    :param env_kwargs: task settings the agent plays with instead of the run's, merged over them (e.g.
        ``{"reset_noise_scale": 0.1}`` for a run trained from wider starts than the task's); the run's own are then kept
        in the provenance as ``training_env_kwargs``.
    :returns: the provenance written.
    :raises ValueError: for an unknown ``model`` or missing checkpoint, or ``env_kwargs`` the task does not take
        (checked before anything is written).
    """
    checkpoint = _checkpoint_steps(model)
    run = find_zoo_run(folder)
    (params,) = [os.path.dirname(path) for path in glob.glob(os.path.join(glob.escape(run), "*", "config.yml"))]
    settings = check_run_folder(params)
    run_args, config = settings.arguments, settings.config
    model_path = _packed_model_path(run, os.path.basename(params), model, checkpoint)
    register_algorithm()
    trained = ALGOS[run_args["algo"]].load(model_path, device="cpu")
    statistics = _packed_statistics(run, os.path.basename(params), model, checkpoint)
    facts: dict[str, Any] = {
        "algo": run_args["algo"],
        "seed": run_args["seed"],
        "timesteps": int(trained.num_timesteps),
        "model": model,
        "training_vec_env": run_args.get("vec_env"),
        "torch_threads": run_args.get("num_threads"),
        "hyperparams_overrides": run_args.get("hyperparams"),
        **_last_evaluation(run, up_to=None if checkpoint is None else trained.num_timesteps),
    }
    played_env_kwargs = config.get("env_kwargs")
    if env_kwargs:
        facts["training_env_kwargs"] = dict(played_env_kwargs or {})
        played_env_kwargs = _checked_env_kwargs(run_args["env"], {**(played_env_kwargs or {}), **env_kwargs}, destination)
    facts.update(provenance or {})
    save_pretrained(
        trained,
        destination,
        env_id=run_args["env"],
        vec_normalize=statistics,
        env_kwargs=played_env_kwargs,
        env_wrapper=config.get("env_wrapper"),
        frame_stack=config.get("frame_stack"),
        hyperparams=config,
        provenance=facts,
    )
    return facts


def _checkpoint_steps(model: str) -> str | None:
    """The steps of ``model`` = ``"checkpoint:<steps>"``, else ``None`` (``"final"``, ``"best"``).

    :raises ValueError: for any other ``model``.
    """
    checkpoint = re.fullmatch(r"checkpoint:(\d+)", model)
    if model not in ("final", "best") and checkpoint is None:
        raise ValueError(f"model must be 'final', 'best' or 'checkpoint:<steps>', got {model!r}")
    return None if checkpoint is None else checkpoint[1]


def _packed_model_path(run: str, env_folder_name: str, model: str, checkpoint: str | None) -> str:
    """The model zip of ``run`` that ``model`` names (as rl-zoo3's ``get_model_path`` names them). Not that function
    itself: it takes a log folder, algorithm and run number where packing has the run folder, and its error for a
    missing checkpoint does not say which checkpoints the run has.

    :raises ValueError: for a checkpoint the run does not have, naming those it has.
    """
    if checkpoint is None:
        return os.path.join(run, "best_model.zip" if model == "best" else f"{env_folder_name}.zip")
    model_path = model_checkpoint_path(run, DEFAULT_NAME_PREFIX, int(checkpoint))
    if not os.path.isfile(model_path):
        saved = [saved.num_timesteps for saved in list_checkpoints(run)]
        raise ValueError(f"no checkpoint {model_path}; the run has checkpoints at {saved or 'no steps'}")
    return model_path


def _packed_statistics(run: str, env_folder_name: str, model: str, checkpoint: str | None) -> Any:
    """The ``VecNormalize`` saved with the packed model (:func:`~sb3_ppo_ext.zoo.loading.played_model_statistics`),
    unpickled (the caller's own run), or ``None`` when the run does not normalise."""
    path = played_model_statistics(run, env_folder_name, load_best=model == "best", load_checkpoint=checkpoint)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as stream:
        return pickle.load(stream)


def _last_evaluation(run: str, *, up_to: int | None) -> dict[str, Any]:
    """``final_eval_mean`` and ``final_eval_timesteps`` of the run's last evaluation (``evaluations.npz``), the last
    one at or before ``up_to`` steps when given (a checkpoint's); empty when there is none."""
    path = os.path.join(run, "evaluations.npz")
    if not os.path.isfile(path):
        return {}
    evaluations = read_evaluations(run)
    last = len(evaluations["timesteps"]) - 1
    if up_to is not None:
        last = int(np.searchsorted(evaluations["timesteps"], up_to, side="right")) - 1
    if last < 0:
        return {}
    return {
        "final_eval_mean": float(evaluations["results"][last].mean()),
        "final_eval_timesteps": int(evaluations["timesteps"][last]),
    }


def _checked_env_kwargs(env_id: str, env_kwargs: dict[str, Any], destination: str) -> dict[str, Any]:
    """``env_kwargs`` for the agent to play with, checked as an agent file's (before a window opens) and by making
    the task with them: a typo must not replace an agent folder (the package's own, by default) with one that cannot
    play.

    :raises ValueError: when the task does not take them.
    """
    check_agent_env_kwargs(env_kwargs, where=os.path.join(destination, AGENT_FILE))
    try:
        gym.make(env_id, **env_kwargs).close()
    except TypeError as error:
        raise ValueError(f"{env_id} does not take env_kwargs {env_kwargs}: {error}") from error
    return env_kwargs

"""Trained agents that ship with the package: saved and loaded as plain data, so that loading one runs no pickle.

An agent is a folder (``sb3_ppo_ext/trained_agents/<env id with "/" as "-">/`` for the shipped ones) with

- ``agent.json``: the task (env id, ``env_kwargs``, wrappers as allow-listed class paths), the policy (class name,
  keyword arguments as plain data, observation and action spaces), the observation normalisation statistics of the
  training run's ``VecNormalize`` (mean, variance, epsilon, clip), the config it was trained with and where it came
  from (seed, steps, score, wall clock, command);
- ``policy.npz``: the actor's weights as float32 arrays (read with ``numpy.load(allow_pickle=False)``). The critic
  and the optimiser state are left out: playing does not need them. To fine-tune, resume from the run's own
  checkpoint instead.

SB3's zips (``data`` holds cloudpickled spaces and schedules) and ``vecnormalize.pkl`` files can run code when
loaded; these files cannot: JSON and ``allow_pickle=False`` arrays carry data only, and a wrapper or activation
named in ``agent.json`` is resolved through an allow-list (:mod:`sb3_ppo_ext.allow_list`).

One module per job: :mod:`~sb3_ppo_ext.pretrained.format` (the folder's files, where the shipped agents lie, the
checks of ``agent.json``), :mod:`~sb3_ppo_ext.pretrained.saving`, :mod:`~sb3_ppo_ext.pretrained.loading` and
:mod:`~sb3_ppo_ext.pretrained.playing` (episodes and their summary); their public names can be imported from this
package. Packing the model of an rl-zoo3 run as an agent is :mod:`sb3_ppo_ext.zoo.packing`. For example::

    from sb3_ppo_ext.pretrained import load_pretrained
    model, env = load_pretrained("sb3_ppo_ext/Walker2D-v0")
    obs = env.reset()
    action, _ = model.predict(obs, deterministic=True)
"""

from sb3_ppo_ext.pretrained.format import (
    AGENT_FILE,
    AGENTS_DIR,
    CRITIC_PREFIXES,
    FORMAT_VERSION,
    WEIGHTS_FILE,
    agent_folder,
    check_normalization,
    list_pretrained,
    read_agent,
    resolve_wrapper,
    wrapper_list,
)
from sb3_ppo_ext.pretrained.loading import load_pretrained, make_pretrained_env
from sb3_ppo_ext.pretrained.playing import evaluate_agent, play, summarise_episodes
from sb3_ppo_ext.pretrained.saving import add_provenance, recorded_env_kwargs, save_pretrained

__all__ = [
    "AGENTS_DIR",
    "AGENT_FILE",
    "CRITIC_PREFIXES",
    "FORMAT_VERSION",
    "WEIGHTS_FILE",
    "add_provenance",
    "agent_folder",
    "check_normalization",
    "evaluate_agent",
    "list_pretrained",
    "load_pretrained",
    "make_pretrained_env",
    "play",
    "read_agent",
    "recorded_env_kwargs",
    "resolve_wrapper",
    "save_pretrained",
    "summarise_episodes",
    "wrapper_list",
]

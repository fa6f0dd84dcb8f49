"""Playing an agent: episodes run on its env, and their summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize

from sb3_ppo_ext.pretrained.loading import load_pretrained

#: The bundled tasks report each term of their reward in ``info`` under this prefix (``reward_alive``,
#: ``reward_progress`` ...); their sum is the step's reward.
REWARD_TERM_PREFIX = "reward_"


def _reset_x(env: VecEnv, index: int) -> float | None:
    while isinstance(env, VecEnvWrapper):  # SB3's wrappers (VecNormalize, VecFrameStack ...) keep empty reset_infos
        env = env.venv
    infos = getattr(env, "reset_infos", None)
    if infos is None or index >= len(infos) or "x_position" not in infos[index]:
        return None
    return float(infos[index]["x_position"])


def add_reward_terms(sums: dict[str, float], info: dict[str, Any]) -> None:
    """Add the reward terms a step reports in ``info`` (``reward_<term>``) to ``sums`` (term -> sum so far)."""
    for key, value in info.items():
        if key.startswith(REWARD_TERM_PREFIX):
            term = key[len(REWARD_TERM_PREFIX) :]
            sums[term] = sums.get(term, 0.0) + float(value)


def play(
    model: Any,
    env: VecEnv,
    n_steps: int,
    *,
    deterministic: bool = True,
    n_episodes: int | None = None,
    on_frame: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``model`` on ``env`` for ``n_steps`` steps (or until ``n_episodes`` episodes have finished) and return the
    episodes that finished.

    Each episode: ``return`` (the task's own reward, before any normalisation), ``length``, ``truncated`` (ended by
    the time limit, not by a fall or a crash), ``success`` where the task reports ``info["is_success"]``,
    ``crash_reason`` where it reports a non-empty ``info["crash_reason"]`` (the RocketLander), ``flags_reached``
    where it reports ``info["flags_reached"]`` (the flag runs) and, for tasks that report ``info["x_position"]`` (the
    locomotion tasks), ``distance`` (torso x at the end minus at the reset, metres) and ``speed`` (distance over the
    episode's simulated time, m/s, where the env has a ``dt``); ``reward_terms`` (term -> its sum over the episode)
    where the task reports its reward terms (``info["reward_<term>"]``, the bundled tasks).

    :param on_frame: called after the reset and after every step (rendering, frame capture).
    """
    if not isinstance(n_steps, (int, np.integer)) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int, got {n_steps!r}")
    observation = env.reset()
    if on_frame is not None:
        on_frame()
    try:
        step_seconds = [float(dt) for dt in env.get_attr("dt")]
    except AttributeError:
        step_seconds = [float("nan")] * env.num_envs
    returns = np.zeros(env.num_envs)
    lengths = np.zeros(env.num_envs, dtype=int)
    start_x = [_reset_x(env, index) for index in range(env.num_envs)]
    term_sums: list[dict[str, float]] = [{} for _ in range(env.num_envs)]
    episodes = []
    for _ in range(n_steps):
        action, _ = model.predict(observation, deterministic=deterministic)
        observation, reward, done, infos = env.step(action)
        if on_frame is not None:
            on_frame()
        returns += env.get_original_reward() if isinstance(env, VecNormalize) else reward
        lengths += 1
        for sums, info in zip(term_sums, infos, strict=True):
            add_reward_terms(sums, info)
        for index in np.flatnonzero(done):
            info = infos[index]
            episode: dict[str, Any] = {
                "return": float(returns[index]),
                "length": int(lengths[index]),
                "truncated": bool(info.get("TimeLimit.truncated", False)),
            }
            if "is_success" in info:
                episode["success"] = bool(info["is_success"])
            if info.get("crash_reason"):
                episode["crash_reason"] = str(info["crash_reason"])
            if "flags_reached" in info:
                episode["flags_reached"] = int(info["flags_reached"])
            if term_sums[index]:
                episode["reward_terms"] = term_sums[index]
                term_sums[index] = {}
            reset_x = start_x[index]
            if reset_x is not None and "x_position" in info:
                episode["distance"] = float(info["x_position"]) - reset_x
                episode["speed"] = episode["distance"] / (lengths[index] * step_seconds[index])
            episodes.append(episode)
            returns[index], lengths[index] = 0.0, 0
            start_x[index] = _reset_x(env, int(index))
        if n_episodes is not None and len(episodes) >= n_episodes:
            return episodes[:n_episodes]
    return episodes


def evaluate_agent(folder: str, n_episodes: int, seed: int = 0) -> dict[str, Any]:
    """Play ``n_episodes`` deterministic episodes of an agent folder from env seed ``seed`` (one env, so the
    episodes and their order are fixed by the seed) and summarise them (:func:`summarise_episodes`)."""
    model, env = load_pretrained(folder, n_envs=1, seed=seed)
    try:
        episodes = play(model, env, 1 << 62, n_episodes=n_episodes)
    finally:
        env.close()
    return {**summarise_episodes(episodes), "seed": seed}


def summarise_episodes(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and standard deviation of the return of episodes from :func:`play`, their mean length, how many ended
    before the time limit, and where the task reports them: landings (``successes``) with how the other episodes ended
    (``failures``: crash reason, or ``time_limit``, -> count, most frequent first; ``failed_episodes``: the index of
    each such episode in play order -> its reason, so that runs evaluated on the same starts can be compared start by
    start), the mean speed, for the flag runs the mean number of flags reached and how many episodes reached at least
    one (``with_a_flag``), and where the task reports its reward terms, each term's mean per step over all the steps
    played (``reward_terms_per_step``: where the return comes from)."""
    returns = [episode["return"] for episode in episodes]
    summary: dict[str, Any] = {
        "episodes": len(episodes),
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "mean_length": float(np.mean([episode["length"] for episode in episodes])),
        "ended_early": sum(not episode["truncated"] for episode in episodes),
    }
    if "success" in episodes[0]:
        summary["successes"] = sum(episode["success"] for episode in episodes)
        failed = {
            index: episode.get("crash_reason", "time_limit" if episode["truncated"] else "other")
            for index, episode in enumerate(episodes)
            if not episode["success"]
        }
        summary["failures"] = dict(Counter(failed.values()).most_common())
        summary["failed_episodes"] = failed
    if "speed" in episodes[0]:
        summary["mean_speed_m_s"] = float(np.mean([episode["speed"] for episode in episodes]))
    if "reward_terms" in episodes[0]:
        steps = sum(episode["length"] for episode in episodes)
        summary["reward_terms_per_step"] = {
            term: sum(episode["reward_terms"].get(term, 0.0) for episode in episodes) / steps
            for term in episodes[0]["reward_terms"]
        }
    if "flags_reached" in episodes[0]:
        summary["mean_flags"] = float(np.mean([episode["flags_reached"] for episode in episodes]))
        summary["with_a_flag"] = sum(episode["flags_reached"] >= 1 for episode in episodes)
    return summary

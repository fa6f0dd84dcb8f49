"""``enjoy``, ``record-video`` and ``export`` with ``--pretrained``: play, record and export the agents shipped with the
package (plain data, nothing unpickled), and the lines that report the episodes played."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from huggingface_sb3 import EnvironmentName

from sb3_ppo_ext.callbacks import export_onnx
from sb3_ppo_ext.callbacks._media import env_fps, mp4_writer
from sb3_ppo_ext.envs._bullet import display_available
from sb3_ppo_ext.pretrained import load_pretrained, play, summarise_episodes
from sb3_ppo_ext.zoo.parsers import OPSET, add_debug_option, at_least_one


def _positive(value: str) -> int:
    """A count of episodes or steps: :func:`~sb3_ppo_ext.zoo.parsers.at_least_one` (argparse names this function in
    the error for a value that is not a number)."""
    return at_least_one(value)


def _pretrained_parser(command: str, description: str | None) -> argparse.ArgumentParser:
    parser = add_debug_option(
        argparse.ArgumentParser(prog=f"sb3-ppo-ext {command}", description=description, allow_abbrev=False)
    )
    parser.add_argument(
        "--pretrained",
        action="store_true",
        required=True,
        help="play the agent shipped with the package (no training run, no pickle loaded)",
    )
    parser.add_argument("--env", required=True, help="env id with a shipped agent, or an agent folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env")
    return parser


def _default_output(env_id_or_folder: str, folder: str, extension: str) -> str:
    """``<folder>/<env name>-pretrained<extension>``, numbered (``-2``, ``-3``...) rather than replacing a file."""

    if os.path.isdir(env_id_or_folder):
        name = os.path.basename(os.path.normpath(env_id_or_folder))
    else:
        name = str(EnvironmentName(env_id_or_folder))
    path, number = os.path.join(folder, f"{name}-pretrained{extension}"), 1
    while os.path.exists(path):
        number += 1
        path = os.path.join(folder, f"{name}-pretrained-{number}{extension}")
    return path


def episode_line(episode: dict[str, Any]) -> str:
    """One line of an episode played by :func:`~sb3_ppo_ext.pretrained.playing.play`: return, length, and what the task
    reports (distance and speed, flags, success and how a failure ended)."""
    line = f"Episode Reward: {episode['return']:.2f}  Episode Length: {episode['length']}"
    if "speed" in episode:
        line += f"  distance {episode['distance']:.1f} m  mean speed {episode['speed']:.2f} m/s"
    if "flags_reached" in episode:
        line += f"  flags reached {episode['flags_reached']}"
    if "success" in episode:
        ended = episode.get("crash_reason", "time limit" if episode["truncated"] else "ended")
        line += "  success" if episode["success"] else f"  no success ({ended})"
    elif episode["truncated"]:
        line += "  (time limit)"
    return line


def episodes_summary(episodes: list[dict[str, Any]]) -> list[str]:
    """The lines that sum up the episodes played (:func:`~sb3_ppo_ext.pretrained.playing.summarise_episodes`): the mean
    return with its spread (standard deviation, lowest and highest) and the mean length; the success rate with how
    the other episodes ended, where the task reports success; the mean speed and the flags, where it has them; the
    reward per step, term by term, where the task reports its terms."""

    if not episodes:
        return ["no episode finished within the steps played (raise -n)"]
    summary = summarise_episodes(episodes)
    count = summary["episodes"]
    returns = [episode["return"] for episode in episodes]
    lines = [
        f"{count} episode{'s' if count > 1 else ''}: mean return {summary['mean_return']:.2f} (std "
        f"{summary['std_return']:.2f}, min {min(returns):.2f}, max {max(returns):.2f}), mean length "
        f"{summary['mean_length']:.0f}"
    ]
    if "successes" in summary:
        failures = ", ".join(f"{reason} {number}" for reason, number in summary["failures"].items())
        lines.append(
            f"success rate: {summary['successes']}/{count} ({100 * summary['successes'] / count:.0f}%)"
            + (f"; the others ended by: {failures}" if failures else "")
        )
    if "mean_speed_m_s" in summary:
        lines.append(f"mean speed {summary['mean_speed_m_s']:.2f} m/s")
    if "mean_flags" in summary:
        lines.append(
            f"flags reached: mean {summary['mean_flags']:.2f}, at least one in {summary['with_a_flag']}/{count} episodes"
        )
    if "reward_terms_per_step" in summary:
        terms = ", ".join(f"{term} {value:.3f}" for term, value in summary["reward_terms_per_step"].items())
        lines.append(f"reward per step: {terms}")
    return lines


def _print_episodes(episodes: list[dict[str, Any]]) -> None:
    for episode in episodes:
        print(episode_line(episode))
    for line in episodes_summary(episodes):
        print(line)


def _episode_step_limit(env: Any) -> int:
    """The time limit of the episodes of ``env`` (a ``VecEnv``), 1000 steps where its spec has none."""
    spec = env.get_attr("spec")[0]
    return int(getattr(spec, "max_episode_steps", None) or 1000)


def enjoy_pretrained(argv: Sequence[str]) -> None:
    """``enjoy --pretrained``: play a shipped agent for a few episodes, printing each one's return (and distance and
    speed, success), then their mean, spread and success rate."""

    parser = _pretrained_parser("enjoy", enjoy_pretrained.__doc__)
    parser.add_argument("--n-episodes", type=_positive, default=5, help="episodes to play (default: 5)")
    parser.add_argument(
        "-n",
        "--n-timesteps",
        type=_positive,
        default=None,
        help="steps to play at most (default: what --n-episodes episodes of the task's time limit take)",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    parser.add_argument("--no-render", action="store_true", help="no window (the default on a headless machine)")
    args = parser.parse_args(list(argv))
    render = not args.no_render and display_available()
    model, env = load_pretrained(args.env, seed=args.seed, render_mode="human" if render else None)
    try:
        steps = args.n_timesteps or args.n_episodes * _episode_step_limit(env)
        _print_episodes(play(model, env, steps, deterministic=not args.stochastic, n_episodes=args.n_episodes))
    finally:
        env.close()


def record_video_pretrained(argv: Sequence[str]) -> None:
    """``record-video --pretrained``: an MP4 of a shipped agent (rendered off-screen)."""

    parser = _pretrained_parser("record-video", record_video_pretrained.__doc__)
    parser.add_argument("-n", "--n-timesteps", type=_positive, default=1000, help="steps to record")
    parser.add_argument(
        "-o",
        "--output-folder",
        default="videos",
        help="folder of the video (<env>-pretrained.mp4; numbered instead of replacing an earlier one)",
    )
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    args = parser.parse_args(list(argv))
    model, env = load_pretrained(args.env, seed=args.seed, render_mode="rgb_array")
    try:
        fps = env_fps(env.envs[0]) if hasattr(env, "envs") else 30.0
        os.makedirs(args.output_folder, exist_ok=True)
        path = _default_output(args.env, args.output_folder, ".mp4")
        frames = 0
        with mp4_writer(path, fps) as append:  # each frame goes to the file as it is rendered

            def write_frame() -> None:
                nonlocal frames
                frame = env.render()
                if frame is None:
                    raise RuntimeError(f"{args.env} rendered no frame in rgb_array mode")
                append(frame)
                frames += 1

            episodes = play(model, env, args.n_timesteps, deterministic=not args.stochastic, on_frame=write_frame)
    finally:
        env.close()
    _print_episodes(episodes)
    print(f"Saved {frames} frames to {path}")


def export_pretrained(argv: Sequence[str]) -> None:
    """``export --pretrained``: the ONNX policy of a shipped agent (raw observation -> action)."""

    parser = _pretrained_parser("export", export_pretrained.__doc__)
    parser.add_argument(
        "-o", "--output", help="ONNX file (default: <env>-pretrained.onnx here, numbered instead of replacing an earlier one)"
    )
    parser.add_argument(*OPSET[0], **OPSET[1])
    args = parser.parse_args(list(argv))
    model, env = load_pretrained(args.env, seed=args.seed)
    output = args.output or _default_output(args.env, ".", ".onnx")
    try:
        export_onnx(model, output, opset=args.opset)  # bakes in the statistics of the model's env (frozen VecNormalize)
    finally:
        env.close()
    print(f"Exported the pretrained agent of {args.env} to {output}")

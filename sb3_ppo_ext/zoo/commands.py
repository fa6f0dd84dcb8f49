"""The subcommands of ``sb3-ppo-ext``: rl-zoo3's scripts with ``ppo_ext``, our configs and safe config parsing.

Each zoo-backed command runs rl-zoo3's own script function on an argument list that starts with our defaults
(``--algo ppo_ext``, the bundled config, ``-f logs``, a progress bar), so any option the user gives later wins,
and with rl-zoo3's ``StoreDict`` / ``ExperimentManager`` swapped for the safe versions while it runs.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sb3_ppo_ext.zoo.experiment import (
    ALGORITHM_NAME,
    SafeExperimentManager,
    SafeStoreDict,
    default_config_path,
    patched_zoo_module,
    register_algorithm,
)

DEFAULT_LOG_FOLDER = "logs"


def _peek(argv: Sequence[str], *flags: str) -> str | None:
    """The value the user gave for an option (any of ``flags``), or ``None``; rl-zoo3's parser does the real work."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument(*flags, dest="value", default=None)
    known, _ = parser.parse_known_args(list(argv))
    return known.value


@contextmanager
def _script_argv(program: str, argv: Sequence[str]) -> Iterator[None]:
    """Run an rl-zoo3 script function as if called as ``program argv...``."""
    saved = sys.argv
    sys.argv = [program, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def _zoo_train_argv(argv: Sequence[str], *, optimize: bool) -> list[str]:
    """Our defaults followed by the user's arguments (later options win in argparse)."""
    argv = list(argv)
    defaults = ["--algo", ALGORITHM_NAME]
    algo = _peek(argv, "--algo") or ALGORITHM_NAME
    if algo == ALGORITHM_NAME and _peek(argv, "-conf", "--conf-file") is None:
        defaults += ["--conf-file", default_config_path()]
    no_progress = "--no-progress" in argv
    argv = [token for token in argv if token != "--no-progress"]
    if optimize:
        defaults += ["--optimize-hyperparameters", "--no-optim-plots"]
    elif not no_progress:
        defaults.append("--progress")
    return defaults + argv


def train(argv: Sequence[str], *, optimize: bool = False) -> None:
    """``train`` / ``optimize``: rl-zoo3's ``train.py`` with ``ppo_ext`` and our config by default."""
    register_algorithm()
    import rl_zoo3.train

    program = f"sb3-ppo-ext {'optimize' if optimize else 'train'}"
    with (
        _script_argv(program, _zoo_train_argv(argv, optimize=optimize)),
        patched_zoo_module(rl_zoo3.train, StoreDict=SafeStoreDict, ExperimentManager=SafeExperimentManager),
    ):
        rl_zoo3.train.train()


def _zoo_play_argv(argv: Sequence[str], *, headless_no_render: bool) -> list[str]:
    argv = list(argv)
    defaults = ["--algo", ALGORITHM_NAME, "--folder", DEFAULT_LOG_FOLDER]
    if headless_no_render and not is_display_available() and "--no-render" not in argv:
        print("No display found: running without a window (use `sb3-ppo-ext record-video` for a video).")
        defaults.append("--no-render")
    return defaults + argv


def is_display_available() -> bool:
    """Whether a window can be opened (always assumed on macOS / Windows; ``DISPLAY`` or Wayland on Linux)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _check_run_files(argv: Sequence[str]) -> None:
    """Refuse a run folder whose saved files would make rl-zoo3's enjoy / record_video run code (see
    :func:`~sb3_ppo_ext.zoo.hyperparams.check_run_folder`); finds the folder as rl-zoo3's ``get_model_path`` does."""
    from huggingface_sb3 import EnvironmentName
    from rl_zoo3.utils import get_latest_run_id

    from sb3_ppo_ext.zoo.hyperparams import check_run_folder

    folder = _peek(argv, "-f", "--folder") or DEFAULT_LOG_FOLDER
    env_name = EnvironmentName(_peek(argv, "--env") or "CartPole-v1")
    algo = _peek(argv, "--algo") or ALGORITHM_NAME
    exp_id = int(_peek(argv, "--exp-id") or 0)
    if exp_id == 0:
        exp_id = get_latest_run_id(os.path.join(folder, algo), env_name)
    log_path = os.path.join(folder, algo, f"{env_name}_{exp_id}") if exp_id > 0 else os.path.join(folder, algo)
    check_run_folder(os.path.join(log_path, env_name))


def _pretrained_parser(command: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"sb3-ppo-ext {command}", description=description)
    parser.add_argument("--pretrained", action="store_true", required=True,
                        help="play the agent shipped with the package (no training run, no pickle loaded)")
    parser.add_argument("--env", required=True, help="env id with a shipped agent, or an agent folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env")
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return number


def _load_pretrained_or_exit(env_id: str, **kwargs: Any) -> tuple[Any, Any]:
    """:func:`~sb3_ppo_ext.pretrained.load_pretrained`; a missing or unreadable agent ends the command in one line."""
    from sb3_ppo_ext.pretrained import load_pretrained

    try:
        return load_pretrained(env_id, **kwargs)
    except (ValueError, OSError) as error:
        raise SystemExit(f"sb3-ppo-ext: {error}") from None


def _default_output(env_id_or_folder: str, folder: str, extension: str) -> str:
    """``<folder>/<env name>-pretrained<extension>``, numbered (``-2``, ``-3``...) rather than replacing a file."""
    from huggingface_sb3 import EnvironmentName

    if os.path.isdir(env_id_or_folder):
        name = os.path.basename(os.path.normpath(env_id_or_folder))
    else:
        name = str(EnvironmentName(env_id_or_folder))
    path, number = os.path.join(folder, f"{name}-pretrained{extension}"), 1
    while os.path.exists(path):
        number += 1
        path = os.path.join(folder, f"{name}-pretrained-{number}{extension}")
    return path


def _print_episodes(episodes: list[dict]) -> None:
    for episode in episodes:
        line = f"Episode Reward: {episode['return']:.2f}  Episode Length: {episode['length']}"
        if "speed" in episode:
            line += f"  distance {episode['distance']:.1f} m  mean speed {episode['speed']:.2f} m/s"
        line += "  (time limit)" if episode["truncated"] else ""
        print(line)
    if episodes:
        returns = [episode["return"] for episode in episodes]
        print(f"{len(episodes)} episodes: mean return {sum(returns) / len(returns):.2f}")
    else:
        print("no episode finished within the steps played (raise -n)")


def enjoy_pretrained(argv: Sequence[str]) -> None:
    """``enjoy --pretrained``: play a shipped agent, printing each episode's return (and distance and speed)."""
    from sb3_ppo_ext.pretrained import play

    parser = _pretrained_parser("enjoy", enjoy_pretrained.__doc__)
    parser.add_argument("-n", "--n-timesteps", type=_positive, default=1000, help="steps to play")
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    parser.add_argument("--no-render", action="store_true", help="no window (the default on a headless machine)")
    args = parser.parse_args(list(argv))
    render = not args.no_render and is_display_available()
    model, env = _load_pretrained_or_exit(args.env, seed=args.seed, render_mode="human" if render else None)
    try:
        _print_episodes(play(model, env, args.n_timesteps, deterministic=not args.stochastic))
    finally:
        env.close()


def record_video_pretrained(argv: Sequence[str]) -> None:
    """``record-video --pretrained``: an MP4 of a shipped agent (rendered off-screen)."""
    from sb3_ppo_ext.callbacks._media import env_fps, write_mp4
    from sb3_ppo_ext.pretrained import play

    parser = _pretrained_parser("record-video", record_video_pretrained.__doc__)
    parser.add_argument("-n", "--n-timesteps", type=_positive, default=1000, help="steps to record")
    parser.add_argument("-o", "--output-folder", default="videos",
                        help="folder of the video (<env>-pretrained.mp4; numbered instead of replacing an earlier one)")
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean action")
    args = parser.parse_args(list(argv))
    model, env = _load_pretrained_or_exit(args.env, seed=args.seed, render_mode="rgb_array")
    try:
        frames: list = []
        episodes = play(model, env, args.n_timesteps, deterministic=not args.stochastic,
                        on_frame=lambda: frames.append(env.render()))
        fps = env_fps(env.envs[0]) if hasattr(env, "envs") else 30.0
    finally:
        env.close()
    os.makedirs(args.output_folder, exist_ok=True)
    path = _default_output(args.env, args.output_folder, ".mp4")
    write_mp4(path, frames, fps)
    _print_episodes(episodes)
    print(f"Saved {len(frames)} frames to {path}")


def export_pretrained(argv: Sequence[str]) -> None:
    """``export --pretrained``: the ONNX policy of a shipped agent (raw observation -> action)."""
    from sb3_ppo_ext.callbacks import export_onnx

    parser = _pretrained_parser("export", export_pretrained.__doc__)
    parser.add_argument("-o", "--output", help="ONNX file (default: <env>-pretrained.onnx here, numbered instead of "
                        "replacing an earlier one)")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    args = parser.parse_args(list(argv))
    model, env = _load_pretrained_or_exit(args.env, seed=args.seed)
    output = args.output or _default_output(args.env, ".", ".onnx")
    try:
        export_onnx(model, output, opset=args.opset)  # bakes in the statistics of the model's env (frozen VecNormalize)
    finally:
        env.close()
    print(f"Exported the pretrained agent of {args.env} to {output}")


def enjoy(argv: Sequence[str]) -> None:
    """``enjoy``: rl-zoo3's ``enjoy.py`` on ``logs/ppo_ext`` runs; no window on a headless machine."""
    if "--pretrained" in argv:
        enjoy_pretrained(argv)
        return
    register_algorithm()
    import rl_zoo3.enjoy

    zoo_argv = _zoo_play_argv(argv, headless_no_render=True)
    _check_run_files(zoo_argv)
    with _script_argv("sb3-ppo-ext enjoy", zoo_argv), patched_zoo_module(rl_zoo3.enjoy, StoreDict=SafeStoreDict):
        rl_zoo3.enjoy.enjoy()


def record_video(argv: Sequence[str]) -> None:
    """``record-video``: rl-zoo3's ``record_video.py`` (renders ``rgb_array``, works headless)."""
    if "--pretrained" in argv:
        record_video_pretrained(argv)
        return
    register_algorithm()
    import rl_zoo3.utils

    zoo_argv = _zoo_play_argv(argv, headless_no_render=False)
    _check_run_files(zoo_argv)
    # record_video.py is a __main__ script: it imports StoreDict from rl_zoo3.utils when it runs.
    with _script_argv("sb3-ppo-ext record-video", zoo_argv), patched_zoo_module(rl_zoo3.utils, StoreDict=SafeStoreDict):
        runpy.run_module("rl_zoo3.record_video", run_name="__main__")


def plot(argv: Sequence[str]) -> None:
    """``plot``: training curves of the runs of one or more environments into an image file."""
    from sb3_ppo_ext.zoo.plotting import X_AXES, find_runs, plot_runs

    parser = argparse.ArgumentParser(prog="sb3-ppo-ext plot", description=plot.__doc__)
    parser.add_argument("--env", nargs="+", required=True, help="environment id(s)")
    parser.add_argument("--algo", default=ALGORITHM_NAME, help="algorithm folder under the log folder")
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument("--exp-id", type=int, nargs="+", help="run numbers to include (default: all)")
    parser.add_argument("-o", "--output", help="image file (default: <folder>/<algo>/<env>_curves.png)")
    parser.add_argument("-x", "--x-axis", choices=X_AXES, default="steps")
    parser.add_argument("-w", "--window", type=int, default=20, help="episodes in the moving average")
    args = parser.parse_args(list(argv))
    runs = [run for env_id in args.env for run in find_runs(args.folder, args.algo, env_id)]
    if args.exp_id:
        runs = [run for run in runs if int(run.rsplit("_", 1)[1]) in args.exp_id]
    if not runs:
        raise SystemExit(f"no runs of {args.env} under {os.path.join(args.folder, args.algo)}")
    from huggingface_sb3 import EnvironmentName

    output = args.output or os.path.join(args.folder, args.algo, f"{EnvironmentName(args.env[0])}_curves.png")
    plotted = plot_runs(runs, output, x_axis=args.x_axis, window=args.window, title=", ".join(args.env))
    print(f"Plotted {plotted} of {len(runs)} runs to {output}")


def export(argv: Sequence[str]) -> None:
    """``export``: write the ONNX policy of a run (raw observation -> action, normalisation included)."""
    if "--pretrained" in argv:
        export_pretrained(argv)
        return
    register_algorithm()
    from huggingface_sb3 import EnvironmentName
    from rl_zoo3.utils import ALGOS, get_model_path

    from sb3_ppo_ext.callbacks import export_onnx

    parser = argparse.ArgumentParser(prog="sb3-ppo-ext export", description=export.__doc__)
    parser.add_argument("--env", required=True, help="environment id of the run")
    parser.add_argument("--algo", default=ALGORITHM_NAME, choices=list(ALGOS))
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument("--exp-id", type=int, default=0, help="run number (default 0: the latest)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--load-best", action="store_true", help="export best_model.zip instead of the final model")
    which.add_argument("--load-checkpoint", type=int, help="export the checkpoint of this many timesteps")
    which.add_argument("--load-last-checkpoint", action="store_true", help="export the latest checkpoint")
    parser.add_argument("-o", "--output", help="ONNX file (default: next to the model, with .onnx)")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    args = parser.parse_args(list(argv))

    env_name = EnvironmentName(args.env)
    _, model_path, log_path = get_model_path(
        args.exp_id, args.folder, args.algo, env_name, args.load_best, args.load_checkpoint, args.load_last_checkpoint
    )
    model = ALGOS[args.algo].load(model_path, device="cpu")
    vecnormalize_path = os.path.join(log_path, env_name, "vecnormalize.pkl")
    output = args.output or os.path.splitext(model_path)[0] + ".onnx"
    export_onnx(model, output, vecnormalize_path if os.path.isfile(vecnormalize_path) else None, opset=args.opset)
    print(f"Exported {model_path} to {output}")

"""``enjoy``, ``record-video``, ``export`` and ``plot`` of one's own runs under a log folder (rl-zoo3's layout); the
run is chosen by :mod:`~sb3_ppo_ext.zoo.run_selection`, and loaded without unpickling
(:class:`~sb3_ppo_ext.zoo.loading.PlayedRunLoading`) unless ``--trust-pickles`` is given. With ``--pretrained``, the
first three play a shipped agent instead (:mod:`~sb3_ppo_ext.zoo.pretrained_commands`)."""

from __future__ import annotations

import argparse
import os
import runpy
from collections.abc import Callable, Sequence
from typing import Any
from unittest.mock import patch

import rl_zoo3.utils
from huggingface_sb3 import EnvironmentName
from rl_zoo3.utils import ALGOS, get_model_path

from sb3_ppo_ext.callbacks import export_onnx
from sb3_ppo_ext.envs._bullet import display_available
from sb3_ppo_ext.safe_loading import load_without_pickles, read_vecnormalize_statistics, statistics_saved
from sb3_ppo_ext.zoo.config.command_line import SafeStoreDict
from sb3_ppo_ext.zoo.config.run_files import check_run_folder, checked_get_saved_hyperparams
from sb3_ppo_ext.zoo.loading import PlayedRunLoading, played_model_statistics
from sb3_ppo_ext.zoo.parsers import (
    DEBUG,
    DEFAULT_LOG_FOLDER,
    OPSET,
    PLAY_OPTION_CHANGES,
    TRUST_PICKLES,
    add_debug_option,
    asks_help,
    script_argv,
    zoo_parser,
)
from sb3_ppo_ext.zoo.plotting import X_AXES, find_runs, plot_runs
from sb3_ppo_ext.zoo.pretrained_commands import enjoy_pretrained, export_pretrained, record_video_pretrained
from sb3_ppo_ext.zoo.registration import register_algorithm
from sb3_ppo_ext.zoo.run_selection import choose_played_run, newest_algorithm, played_run


def _play_options(loading: PlayedRunLoading) -> Callable[[argparse.Namespace, argparse.ArgumentParser], None]:
    """Complete the options rl-zoo3's enjoy / record_video parsed: the played run (:func:`choose_played_run`) and
    whether ``loading`` trusts pickles."""

    def complete(parsed: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
        choose_played_run(parsed)
        loading.complete(parsed)

    return complete


def _zoo_play_argv(argv: Sequence[str], *, headless_no_render: bool) -> list[str]:
    """The user's arguments, after ``--no-render`` on a headless machine for ``enjoy``; the other defaults are set
    on rl-zoo3's parser (:data:`PLAY_OPTION_CHANGES`, :func:`choose_played_run`)."""
    argv = list(argv)
    if headless_no_render and not display_available() and "--no-render" not in argv and not asks_help(argv):
        print("No display found: running without a window (use `sb3-ppo-ext record-video` for a video).")
        return ["--no-render", *argv]
    return argv


def enjoy(argv: Sequence[str]) -> None:
    """``enjoy``: rl-zoo3's ``enjoy.py`` on the runs under ``logs/``; no window on a headless machine."""
    if "--pretrained" in argv:
        enjoy_pretrained(argv)
        return
    register_algorithm()
    import rl_zoo3.enjoy  # rl-zoo3's script, imported when it runs: it imports rl_zoo3.import_envs (other packages' envs)

    program = "sb3-ppo-ext enjoy"
    zoo_argv = _zoo_play_argv(argv, headless_no_render=True)
    loading = PlayedRunLoading()
    # The run's config.yml / args.yml are checked by the function that reads them, in the folder it reads them from;
    # the model and the statistics are loaded through `loading` (no pickle unless --trust-pickles).
    with (
        script_argv(program, zoo_argv),
        zoo_parser(program, PLAY_OPTION_CHANGES, [DEBUG, TRUST_PICKLES], complete=_play_options(loading)),
        patch.multiple(
            rl_zoo3.enjoy,
            StoreDict=SafeStoreDict,
            get_saved_hyperparams=checked_get_saved_hyperparams,
            ALGOS=loading.algorithms(rl_zoo3.enjoy.ALGOS),
            create_test_env=loading.recording(rl_zoo3.enjoy.create_test_env),
        ),
        patch.multiple(rl_zoo3.utils, VecNormalize=loading.statistics_loader()),
    ):
        rl_zoo3.enjoy.enjoy()


def record_video(argv: Sequence[str]) -> None:
    """``record-video``: rl-zoo3's ``record_video.py`` (renders ``rgb_array``, works headless)."""
    if "--pretrained" in argv:
        record_video_pretrained(argv)
        return
    register_algorithm()

    program = "sb3-ppo-ext record-video"
    zoo_argv = _zoo_play_argv(argv, headless_no_render=False)
    loading = PlayedRunLoading()
    # record_video.py is a __main__ script: it imports ALGOS, StoreDict, create_test_env and get_saved_hyperparams from
    # rl_zoo3.utils when it runs; the run's config.yml / args.yml are checked by the function that reads them; the
    # model and the statistics are loaded through `loading` (no pickle unless --trust-pickles).
    with (
        script_argv(program, zoo_argv),
        zoo_parser(program, PLAY_OPTION_CHANGES, [DEBUG, TRUST_PICKLES], complete=_play_options(loading)),
        patch.multiple(
            rl_zoo3.utils,
            StoreDict=SafeStoreDict,
            get_saved_hyperparams=checked_get_saved_hyperparams,
            ALGOS=loading.algorithms(rl_zoo3.utils.ALGOS),
            create_test_env=loading.recording(rl_zoo3.utils.create_test_env),
            VecNormalize=loading.statistics_loader(),
        ),
    ):
        runpy.run_module("rl_zoo3.record_video", run_name="__main__")


def plot(argv: Sequence[str]) -> None:
    """``plot``: training curves of the runs of one or more environments into an image file."""

    parser = add_debug_option(argparse.ArgumentParser(prog="sb3-ppo-ext plot", description=plot.__doc__, allow_abbrev=False))
    parser.add_argument("--env", nargs="+", required=True, help="environment id(s)")
    parser.add_argument("--algo", help="algorithm folder under the log folder (default: that of the newest run of each env)")
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument("--exp-id", type=int, nargs="+", help="run numbers to include (default: all)")
    parser.add_argument("-o", "--output", help="image file, .png / .pdf / .svg (default: <folder>/<algo>/<env>_curves.png)")
    parser.add_argument("-x", "--x-axis", choices=X_AXES, default="steps")
    parser.add_argument("-w", "--window", type=int, default=20, help="episodes in the moving average")
    args = parser.parse_args(list(argv))
    register_algorithm()
    algorithms = {env_id: args.algo or newest_algorithm(args.folder, env_id) for env_id in args.env}
    runs = [run for env_id, algo in algorithms.items() for run in find_runs(args.folder, algo, env_id)]
    if args.exp_id:
        runs = [run for run in runs if int(run.rsplit("_", 1)[1]) in args.exp_id]
    if not runs:
        where = ", ".join(sorted({os.path.join(args.folder, algo) for algo in algorithms.values()}))
        raise ValueError(
            f"no runs of {' '.join(args.env)} numbered {args.exp_id} under {where}"
            if args.exp_id
            else f"no runs of {' '.join(args.env)} under {where}"
        )
    first_env = args.env[0]
    output = args.output or os.path.join(args.folder, algorithms[first_env], f"{EnvironmentName(first_env)}_curves.png")
    plotted = plot_runs(runs, output, x_axis=args.x_axis, window=args.window, title=", ".join(args.env))
    unfinished = "" if plotted == len(runs) else f" ({len(runs) - plotted} without a finished episode yet)"
    print(f"Plotted {plotted} of {len(runs)} runs{unfinished} into {os.path.abspath(output)}; -o chooses the file")


def export(argv: Sequence[str]) -> None:
    """``export``: write the ONNX policy of a run (raw observation -> action, normalisation included); nothing is
    unpickled unless ``--trust-pickles`` is given."""
    if "--pretrained" in argv:
        export_pretrained(argv)
        return
    register_algorithm()

    parser = add_debug_option(
        argparse.ArgumentParser(prog="sb3-ppo-ext export", description=export.__doc__, allow_abbrev=False)
    )
    parser.add_argument("--env", required=True, help="environment id of the run")
    parser.add_argument(
        "--algo",
        choices=list(ALGOS),
        help="RL algorithm of the run (default: the algorithm of the newest run of --env under --folder)",
    )
    parser.add_argument("-f", "--folder", default=DEFAULT_LOG_FOLDER, help="log folder (rl-zoo3 layout)")
    parser.add_argument(
        "--exp-id", type=int, default=0, help="run number (default 0: the newest run that holds the model to export)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--load-best", action="store_true", help="export best_model.zip instead of the final model")
    which.add_argument("--load-checkpoint", type=int, help="export the checkpoint of this many timesteps")
    which.add_argument("--load-last-checkpoint", action="store_true", help="export the latest checkpoint")
    parser.add_argument("-o", "--output", help="ONNX file (default: next to the model, with .onnx)")
    parser.add_argument(*OPSET[0], **OPSET[1])
    parser.add_argument(*TRUST_PICKLES[0], **TRUST_PICKLES[1])
    args = parser.parse_args(list(argv))

    env_name = EnvironmentName(args.env)
    algo, exp_id = played_run(
        args.folder,
        args.env,
        args.algo,
        args.exp_id,
        load_best=args.load_best,
        load_checkpoint=args.load_checkpoint,
        load_last_checkpoint=args.load_last_checkpoint,
    )
    _, model_path, log_path = get_model_path(
        exp_id, args.folder, algo, env_name, args.load_best, args.load_checkpoint, args.load_last_checkpoint
    )
    check_run_folder(os.path.join(log_path, str(env_name)))
    vecnormalize_path = played_model_statistics(
        log_path,
        str(env_name),
        load_best=args.load_best,
        load_checkpoint=args.load_checkpoint,
        load_last_checkpoint=args.load_last_checkpoint,
    )
    statistics: Any = None
    if args.trust_pickles:
        model = ALGOS[algo].load(model_path, device="cpu")
        statistics = vecnormalize_path if os.path.isfile(vecnormalize_path) else None
    else:
        model = load_without_pickles(model_path, algorithm=ALGOS[algo], device="cpu", training=False)
        if statistics_saved(vecnormalize_path):
            statistics = read_vecnormalize_statistics(vecnormalize_path)  # refuses a pickle without its plain twin
    output = args.output or os.path.splitext(model_path)[0] + ".onnx"
    export_onnx(model, output, statistics, opset=args.opset)
    print(f"Exported {model_path} to {output}")

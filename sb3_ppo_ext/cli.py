"""``sb3-ppo-ext``: train, tune, watch, record, export and plot zoo-style runs of our PPO (``ppo_ext``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = """usage: sb3-ppo-ext COMMAND [options]

Commands (each takes --help):
  train          train with rl-zoo3's machinery; defaults: --algo ppo_ext, the bundled zoo_configs/ppo_ext.yml,
                 a progress bar (--no-progress turns it off); e.g. sb3-ppo-ext train --env sb3_ppo_ext/Walker2D-v0
  optimize       Optuna search over PPO and adaptive-KL settings; share a study with --storage FILE.log|DB-URL
                 --study-name NAME
  enjoy          run a trained agent from logs/ppo_ext (no window on a headless machine)
  record-video   record a video of a trained agent (rgb_array rendering, works headless)
  export         write the ONNX policy of a run
  plot           plot the training curves of runs into an image file

Runs follow rl-zoo3's layout: logs/ppo_ext/<env>_<n>/. Config strings are parsed safely, never eval'd.
"""


def _commands() -> dict[str, Callable[[Sequence[str]], None]]:
    from sb3_ppo_ext.zoo import commands

    return {
        "train": commands.train,
        "optimize": lambda argv: commands.train(argv, optimize=True),
        "enjoy": commands.enjoy,
        "record-video": commands.record_video,
        "export": commands.export,
        "plot": commands.plot,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``sb3-ppo-ext`` and ``python -m sb3_ppo_ext``.

    :param argv: arguments after the program name (default: ``sys.argv[1:]``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return
    command, rest = argv[0], argv[1:]
    commands = _commands()
    if command not in commands:
        import difflib

        near = difflib.get_close_matches(command, list(commands), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise SystemExit(f"sb3-ppo-ext: unknown command {command!r}{hint}; commands: {', '.join(commands)}")
    commands[command](rest)


if __name__ == "__main__":
    main()

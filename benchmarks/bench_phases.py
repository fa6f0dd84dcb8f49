"""Where the wall clock of one ``sb3-ppo-ext train`` goes, on each VecEnv: start-up, collection, update, evaluation.

Not a test. Each variant runs ``sb3-ppo-ext train --env ENV -n STEPS --seed S --no-progress`` (plus the variant's
arguments) in a fresh process of its own, the variants alternating in ``--rounds`` rounds (in a rotated order each
round, so that a drift in the machine's load hits them alike). Inside that process the training command's phases are
timed by wrapping, for the run's duration, the methods that own them:

- ``start-up``: from the process's first line (before any import) to the first ``collect_rollouts``: imports,
  config, the env, VecEnv and its workers, the evaluation env, the model;
- ``collection``: ``PPO.collect_rollouts`` less the evaluation inside it, of which ``in step_wait`` is the time spent
  in the VecEnv's ``step_wait`` (the envs stepping: in this process for ``DummyVecEnv``; for
  ``SharedMemoryVecEnv``, its own block and the wait for its workers; the evaluation env's steps not counted); the
  rest is the driver's own work (the policy's actions, normalisation, the rollout buffer, callbacks);
- ``update``: ``PPO.train``;
- ``evaluation``: rl-zoo3's periodic evaluation (``EvalCallback._on_step``);
- ``total``: the process's first line to the command's return (saving included).

The ratio of each variant's total to the first variant's (``--vec-env dummy`` against no flag) says what the second
core gives; the phases say where the rest goes (a phase that does not shrink with more cores bounds the ratio,
Amdahl's law). The machine should be idle: a second busy process takes a core from the two-process VecEnv and not
from ``DummyVecEnv``.

Usage (the humanoid block, as a user runs it, against ``--vec-env dummy``; about 4 minutes per round on 2 cores)::

    python benchmarks/bench_phases.py --env sb3_ppo_ext/Humanoid-v0 --steps 196608 --rounds 2 \\
        --variants "" "--vec-env dummy"

A smoke run (seconds)::

    python benchmarks/bench_phases.py --env CartPole-v1 --steps 2048 --rounds 1 --variants "" "--vec-env dummy"
"""

from __future__ import annotations

import time

PROCESS_START = time.perf_counter()

import argparse  # noqa: E402  (after the clock starts: the imports are part of the start-up)
import json  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

#: The phases, in the order of the printed table.
PHASES = ("total", "start-up", "collection", "in step_wait", "update", "evaluation")
#: The line of a run's output that carries its phases (JSON after it).
MARK = "PHASES "


def timed_command(env_id: str, steps: int, seed: int, extra: Sequence[str]) -> dict[str, float]:
    """Run the training command in this process with its phases timed (see the module's docstring)."""
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from sb3_ppo_ext import PPO
    from sb3_ppo_ext.cli import main
    from sb3_ppo_ext.vec_env import SharedMemoryVecEnv

    seconds = {"collect_rollouts": 0.0, "step_wait": 0.0, "train": 0.0, "evaluation": 0.0}
    first_collection: list[float] = []
    evaluating: list[bool] = []  # non-empty while the evaluation runs: its env's steps are not the training envs'

    def wrap(owner: type, name: str, key: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if key == "step_wait" and evaluating:
                return original(*args, **kwargs)
            start = time.perf_counter()
            if key == "collect_rollouts" and not first_collection:
                first_collection.append(start)
            if key == "evaluation":
                evaluating.append(True)
            try:
                return original(*args, **kwargs)
            finally:
                seconds[key] += time.perf_counter() - start
                if key == "evaluation":
                    evaluating.pop()

        setattr(owner, name, timed)

    wrap(PPO, "collect_rollouts", "collect_rollouts")
    wrap(PPO, "train", "train")
    wrap(EvalCallback, "_on_step", "evaluation")
    wrap(DummyVecEnv, "step_wait", "step_wait")
    wrap(SharedMemoryVecEnv, "step_wait", "step_wait")
    with tempfile.TemporaryDirectory() as folder:
        argv = ["train", "--env", env_id, "-n", str(steps), "--seed", str(seed), "-f", folder, "--no-progress", *extra]
        try:
            main(argv)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                raise
        end = time.perf_counter()
    if not first_collection:
        raise RuntimeError(f"`sb3-ppo-ext {shlex.join(argv)}` collected nothing")
    return {
        "total": end - PROCESS_START,
        "start-up": first_collection[0] - PROCESS_START,
        "collection": seconds["collect_rollouts"] - seconds["evaluation"],  # the evaluation runs inside a callback
        "in step_wait": seconds["step_wait"],
        "update": seconds["train"],
        "evaluation": seconds["evaluation"],
    }


def run_variant(env_id: str, steps: int, seed: int, variant: str) -> dict[str, float]:
    """One run of ``variant`` (its extra ``train`` arguments, shell-quoted) in a fresh process; its phases."""
    argv = [sys.executable, __file__, "--child", "--env", env_id, "--steps", str(steps), "--seed", str(seed)]
    completed = subprocess.run([*argv, "--variants", variant], capture_output=True, text=True, check=False)
    lines = [line for line in completed.stdout.splitlines() if line.startswith(MARK)]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"the run of {variant!r} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    return {key: float(value) for key, value in json.loads(lines[-1][len(MARK) :]).items()}


def table(variants: Sequence[str], runs: dict[str, list[dict[str, float]]]) -> str:
    """A Markdown table: per variant the median of each phase over its runs, and the ratio of its median total to the
    first variant's (above 1: the first variant is that many times faster)."""
    names = [variant or "(no flag)" for variant in variants]
    lines = ["| phase (s, median) | " + " | ".join(f"`{name}`" for name in names) + " |"]
    lines.append("|---|" + "---|" * len(variants))
    medians = {
        variant: {phase: statistics.median(run[phase] for run in runs[variant]) for phase in PHASES} for variant in variants
    }
    for phase in PHASES:
        lines.append(f"| {phase} | " + " | ".join(f"{medians[variant][phase]:.2f}" for variant in variants) + " |")
    reference = medians[variants[0]]["total"]
    lines.append(
        f"| total / `{names[0]}`'s total | "
        + " | ".join(f"{medians[variant]['total'] / reference:.2f}" for variant in variants)
        + " |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--env", required=True, help="the task's env id")
    parser.add_argument("--steps", type=int, required=True, help="training steps of every run (-n)")
    parser.add_argument("--seed", type=int, default=0, help="the runs' seed (default: 0)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of alternating runs (default: 1)")
    parser.add_argument(
        "--variants", nargs="+", default=["", "--vec-env dummy"], help='each variant\'s extra `train` arguments ("": none)'
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds must be >= 1")
    if args.child:
        phases = timed_command(args.env, args.steps, args.seed, shlex.split(args.variants[0]))
        print(MARK + json.dumps({key: round(value, 3) for key, value in phases.items()}), flush=True)
        return 0
    print(f"$ python benchmarks/bench_phases.py {shlex.join(sys.argv[1:] if argv is None else argv)}")
    runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in args.variants}
    for round_ in range(args.rounds):
        shift = round_ % len(args.variants)
        for variant in [*args.variants[shift:], *args.variants[:shift]]:
            phases = run_variant(args.env, args.steps, args.seed, variant)
            runs[variant].append(phases)
            summary = ", ".join(f"{phase} {phases[phase]:.2f}" for phase in PHASES)
            print(f"round {round_} {variant or '(no flag)'}: {summary}", flush=True)
    print()
    print(table(args.variants, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

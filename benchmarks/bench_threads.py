"""A run on a busy machine: ``sb3-ppo-ext train`` with no flags against ``--num-threads 1``, alone, beside one busy
single-threaded process, and two runs at once, side by side in one run of this script.

Not a test: prints one Markdown table per block (the bundled Walker2D, Humanoid and RocketLander configs), each row a
scenario and each column a variant, the cell the env steps per second of the whole command (``--steps`` training
steps over the wall clock from starting the process to its exit: imports, env set-up and saving included, evaluation
off; give a multiple of the block's rollout: 8192 for Walker2D and RocketLander, 4096 for Humanoid), and the
ratios the thread policy is judged by.

Variants (each ``sb3-ppo-ext train --env ENV -n STEPS --eval-freq -1 --no-progress --seed S`` in a fresh folder, the
task's preferred VecEnv, the environment's ``OMP_*`` / ``GOMP_*`` variables removed):

- ``default``: no other flag (the update's threads chosen by ``update_threads="auto"``, OpenMP threads that sleep
  at a barrier: :mod:`sb3_ppo_ext.ppo.threads`, :mod:`sb3_ppo_ext.openmp_wait`);
- ``one_thread``: ``--num-threads 1``;
- ``torch_first``: no flag, but torch imported before ``sb3_ppo_ext`` (as a Python program that imports torch or SB3
  first: libgomp's default waiting), so only ``update_threads`` acts;
- ``before``: ``torch_first`` with ``--hyperparams update_threads:None``: the update on torch's default threads, as
  every run was before the thread policy;
- ``dummy``: ``--vec-env dummy``, every env in the training process (``default`` against it: what the second core
  gives a user who sets nothing; not in the default ``--variants``).

Scenarios: ``alone``; ``busy`` (one process spinning on a core the whole time, started before the command);
``two_runs`` (the same variant twice at once, seeds S and S + 1: the summed steps per second of the two). Within a
round the variants alternate in a rotated order, so that a drift in the machine's load hits them alike.

Run (a quiet machine; about 30 s per command on 2 cores)::

    python benchmarks/bench_threads.py --blocks walker humanoid rocket --steps 32768 --rounds 1

What the second core gives a user who sets nothing, evaluation on as in their run::

    python benchmarks/bench_threads.py --blocks humanoid --steps 196608 --rounds 2 --scenarios alone \
        --variants default dummy --evaluation

A smoke run: ``--blocks walker --steps 1024 --rounds 1 --scenarios alone --variants default one_thread``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

BLOCKS: dict[str, str] = {
    "walker": "sb3_ppo_ext/Walker2D-v0",
    "humanoid": "sb3_ppo_ext/Humanoid-v0",
    "rocket": "sb3_ppo_ext/RocketLander-v0",
}
VARIANTS: tuple[str, ...] = ("default", "one_thread", "torch_first", "before", "dummy")
SCENARIOS: tuple[str, ...] = ("alone", "busy", "two_runs")
#: Variables that set OpenMP's threads or their waiting: removed from every command's environment.
THREAD_VARIABLES: tuple[str, ...] = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")
#: A Python program that imports torch, then runs the command line (libgomp reads its settings when torch loads).
TORCH_FIRST = "import sys, torch; from sb3_ppo_ext.cli import main; sys.argv[0] = 'sb3-ppo-ext'; sys.exit(main())"
CLI = "import sys; from sb3_ppo_ext.cli import main; sys.argv[0] = 'sb3-ppo-ext'; sys.exit(main())"


def command(variant: str, env_id: str, steps: int, seed: int, folder: str, evaluation: bool = False) -> list[str]:
    """The command line of one run of ``variant`` (with rl-zoo3's periodic evaluation if ``evaluation``)."""
    train = ["train", "--env", env_id, "-n", str(steps), "--no-progress", "--seed", str(seed), "-f", folder]
    if not evaluation:
        train += ["--eval-freq", "-1"]
    if variant == "one_thread":
        train += ["--num-threads", "1"]
    if variant == "before":
        train += ["--hyperparams", "update_threads:None"]
    if variant == "dummy":
        train += ["--vec-env", "dummy"]
    program = TORCH_FIRST if variant in ("torch_first", "before") else CLI
    return [sys.executable, "-c", program, *train]


def clean_environment() -> dict[str, str]:
    """This process's environment without the variables of :data:`THREAD_VARIABLES`."""
    return {key: value for key, value in os.environ.items() if key not in THREAD_VARIABLES}


def timed_runs(argvs: Sequence[list[str]]) -> list[float]:
    """Start the commands together and return each one's wall clock in seconds; a failed command raises."""
    start = time.perf_counter()
    processes = [
        subprocess.Popen(argv, env=clean_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for argv in argvs
    ]
    walls = []
    for process, argv in zip(processes, argvs, strict=True):
        _, err = process.communicate()
        walls.append(time.perf_counter() - start)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({process.returncode}):\n{err.decode()[-2000:]}")
    return walls


def measure(variant: str, scenario: str, env_id: str, steps: int, seed: int, root: str, evaluation: bool) -> float:
    """Env steps per second of ``variant`` in ``scenario`` (two runs: the sum of both runs' rates)."""
    folders = [tempfile.mkdtemp(dir=root) for _ in range(2 if scenario == "two_runs" else 1)]
    argvs = [command(variant, env_id, steps, seed + index, folder, evaluation) for index, folder in enumerate(folders)]
    busy = None
    if scenario == "busy":
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
    try:
        walls = timed_runs(argvs)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    return sum(steps / wall for wall in walls)


def rotated(items: Sequence[str], by: int) -> list[str]:
    """``items`` rotated left by ``by``."""
    return [*items[by % len(items) :], *items[: by % len(items)]]


def block_table(
    block: str, rates: dict[tuple[str, str], list[float]], scenarios: Sequence[str], variants: Sequence[str]
) -> str:
    """The Markdown table of one block: median steps per second per scenario and variant, then the ratios."""
    lines = [f"### {block}", "", "| scenario | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]

    def median(scenario: str, variant: str) -> float | None:
        values = rates.get((scenario, variant))
        return statistics.median(values) if values else None

    for scenario in scenarios:
        cells = [median(scenario, variant) for variant in variants]
        lines.append(f"| {scenario} | " + " | ".join("" if cell is None else f"{cell:.0f}" for cell in cells) + " |")
    # (label, numerator, denominator): each a (scenario, variant) cell; a ratio is printed where both were measured.
    definitions = [
        (f"{scenario}: {top} / {bottom}", (scenario, top), (scenario, bottom))
        for scenario in scenarios
        for top, bottom in (("default", "one_thread"), ("torch_first", "one_thread"), ("default", "before"))
    ]
    definitions.append(("alone: default / dummy", ("alone", "default"), ("alone", "dummy")))
    definitions.append(("two runs summed / one alone (default)", ("two_runs", "default"), ("alone", "default")))
    ratios = []
    for label, numerator, denominator in definitions:
        top, bottom = median(*numerator), median(*denominator)
        if top and bottom:
            ratios.append(f"{label} = {top / bottom:.2f}")
    return "\n".join([*lines, "", *(f"- {ratio}" for ratio in ratios)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", nargs="+", choices=sorted(BLOCKS), default=["walker", "humanoid", "rocket"])
    parser.add_argument("--steps", type=int, default=32768, help="training steps per command (default: 32768)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every variant (default: 1)")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS[:4]))
    parser.add_argument("--two-runs-variants", nargs="+", choices=VARIANTS, default=["default", "before"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--evaluation", action="store_true", help="keep rl-zoo3's periodic evaluation on (as a user's run has it)"
    )
    args = parser.parse_args(argv)
    print(f"$ python benchmarks/bench_threads.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"cores usable: {len(os.sched_getaffinity(0))}, load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench_threads_") as root:
        for block in args.blocks:
            rates: dict[tuple[str, str], list[float]] = {}
            for round_index in range(args.rounds):
                for scenario in args.scenarios:
                    variants = args.two_runs_variants if scenario == "two_runs" else args.variants
                    for variant in rotated(variants, round_index):
                        rate = measure(variant, scenario, BLOCKS[block], args.steps, args.seed, root, args.evaluation)
                        rates.setdefault((scenario, variant), []).append(rate)
                        print(f"  {block} round {round_index} {scenario:9s} {variant:12s} {rate:7.0f} steps/s", flush=True)
            print(block_table(block, rates, args.scenarios, args.variants), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

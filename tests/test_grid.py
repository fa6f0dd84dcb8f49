"""sb3_ppo_ext.grid (and its script, benchmarks/grid.py): grid files, resumable cells, the evaluation CSV and the
rliable report."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from sb3_ppo_ext import grid
from sb3_ppo_ext.grid import run as grid_run

ROOT = Path(__file__).resolve().parents[1]


def write_grid(tmp_path, text):
    path = tmp_path / "grid.yml"
    path.write_text(text)
    return str(path)


def test_load_grid_expands_tasks_variants_seeds(tmp_path):
    path = write_grid(
        tmp_path,
        """
defaults: {eval_freq: 1000}
variants:
  ours: {}
  sb3: {algo: ppo, conf: benchmarks/configs/reference_ppo.yml}
  penalty: {hyperparams: {objective: clip_kl_penalty, kl_penalty_target: 0.02}}
tasks:
  CartPole-v1: {seeds: [0, 1], variants: [ours, penalty], n_timesteps: 2e3}
  Pendulum-v1: {seeds: [3], eval_episodes: 4}
""",
    )
    cells = grid.load_grid(path, relative_to=str(ROOT))
    assert [(c.task, c.variant, c.seed) for c in cells] == [
        ("CartPole-v1", "ours", 0),
        ("CartPole-v1", "ours", 1),
        ("CartPole-v1", "penalty", 0),
        ("CartPole-v1", "penalty", 1),
        ("Pendulum-v1", "ours", 3),
        ("Pendulum-v1", "sb3", 3),
        ("Pendulum-v1", "penalty", 3),
    ]
    argv = cells[2].train_argv("/runs/x")
    assert argv[:6] == ["train", "--algo", "ppo_ext", "--env", "CartPole-v1", "--seed"]
    assert argv[argv.index("-n") + 1] == "2000" and argv[argv.index("--eval-freq") + 1] == "1000"
    assert argv[argv.index("--hyperparams") + 1 :] == ["kl_penalty_target:0.02", "objective:'clip_kl_penalty'"]
    # one cell per core: the envs step in the cell's process, whatever the task's preferred VecEnv
    assert argv[argv.index("--vec-env") + 1] == "dummy"
    resume = cells[2].resume_argv("/runs/x/ppo_ext/CartPole-v1_1")
    assert resume[resume.index("--vec-env") + 1] == "dummy"
    assert cells[5].conf == str(ROOT / "benchmarks" / "configs" / "reference_ppo.yml")
    assert cells[4].eval_episodes == 4 and cells[4].n_timesteps is None
    assert cells[0].folder("/runs") == "/runs/CartPole-v1/ours/seed_0"


def test_defaults_give_every_variant_a_conf_and_algo_a_variant_may_override(tmp_path):
    path = write_grid(
        tmp_path,
        """
defaults: {conf: benchmarks/configs/walker_gsde_1280.yml, eval_freq: 1000}
variants:
  inherits: {hyperparams: {gamma: 0.98}}
  own: {algo: ppo, conf: benchmarks/configs/reference_ppo.yml}
  bundled: {conf: null}
tasks:
  sb3_ppo_ext/Walker2D-v0: {seeds: [0]}
""",
    )
    inherits, own, bundled = grid.load_grid(path, relative_to=str(ROOT))
    assert inherits.conf == str(ROOT / "benchmarks" / "configs" / "walker_gsde_1280.yml")
    assert inherits.algo == "ppo_ext" and inherits.eval_freq == 1000
    assert (own.algo, own.conf) == ("ppo", str(ROOT / "benchmarks" / "configs" / "reference_ppo.yml"))
    assert bundled.conf is None
    refused = write_grid(tmp_path, "defaults: {trained_agent: a.zip}\ntasks: {CartPole-v1: {}}\n")
    with pytest.raises(ValueError, match=r"defaults: unknown key\(s\) \['trained_agent'\]"):
        grid.load_grid(refused)


def test_defaults_hyperparams_lie_under_each_variants_own_key_by_key(tmp_path):
    path = write_grid(
        tmp_path,
        """
defaults: {hyperparams: {n_epochs: 2, learning_rate: lin_3e-3}}
variants:
  plain: {}
  more_epochs: {hyperparams: {n_epochs: 5, ent_coef: 0.002}}
  empty: {hyperparams: null}
tasks:
  CartPole-v1: {seeds: [0]}
""",
    )
    plain, more_epochs, empty = grid.load_grid(path)
    assert plain.hyperparams == (("learning_rate", "lin_3e-3"), ("n_epochs", 2))
    assert more_epochs.hyperparams == (("ent_coef", 0.002), ("learning_rate", "lin_3e-3"), ("n_epochs", 5))
    assert empty.hyperparams == plain.hyperparams
    refused = write_grid(tmp_path, "defaults: {hyperparams: [n_epochs]}\ntasks: {CartPole-v1: {}}\n")
    with pytest.raises(ValueError, match=r"defaults: hyperparams must be a mapping"):
        grid.load_grid(refused)
    refused = write_grid(
        tmp_path, "defaults: {hyperparams: {n_epochs: 2}}\nvariants: {a: {hyperparams: 3}}\ntasks: {CartPole-v1: {}}\n"
    )
    with pytest.raises(ValueError, match=r"variant 'a': hyperparams must be a mapping"):
        grid.load_grid(refused)


@pytest.mark.parametrize("grid_file", sorted((ROOT / "benchmarks" / "grids").glob("*.yml")), ids=lambda path: path.name)
def test_every_grid_file_of_the_repository_names_config_blocks_that_exist(grid_file):
    """A grid whose variant points at a config without a block for its task fails only when that cell starts, maybe
    hours into a run: every shipped grid file is checked here."""
    cells = grid.load_grid(str(grid_file), relative_to=str(ROOT))
    assert cells
    blocks_of = {}
    for cell in cells:
        conf = cell.conf or str(ROOT / "zoo_configs" / "ppo_ext.yml")
        if conf not in blocks_of:
            with open(conf, encoding="utf-8") as stream:
                blocks_of[conf] = yaml.safe_load(stream)
        assert cell.task in blocks_of[conf], (
            f"{grid_file.name}: {cell.variant} runs {cell.task}, which {conf} has no block for"
        )


@pytest.mark.parametrize(
    "text, message",
    [
        ("tasks: {}", "non-empty 'tasks'"),
        ("tasks: {CartPole-v1: {seed: [0]}}", r"task 'CartPole-v1': unknown key\(s\) \['seed'\]"),
        ("tasks: {CartPole-v1: {variants: [nope]}}", "names variant 'nope'"),
        ("tasks: {CartPole-v1: {seeds: [-1]}}", "seeds must be a list of non-negative integers"),
        ("tasks: {CartPole-v1: {seeds: [true]}}", r"seeds must be a list of non-negative integers .*got True"),
        ("tasks: {CartPole-v1: {seeds: [4294967296]}}", "at most 4294967295"),
        ("tasks: {CartPole-v1: {seeds: 3}}", "seeds must be a non-empty list"),
        ("tasks: {CartPole-v1: {n_timesteps: lots}}", "task 'CartPole-v1': n_timesteps must be an integer, got 'lots'"),
        ("tasks: {CartPole-v1: {eval_freq: 0}}", "eval_freq must be >= 1, got 0"),
        ("tasks: {CartPole-v1: !!python/name:os.system {}}", "is not plain YAML"),
        ("tasks: {CartPole-v1: [1]}", r"task 'CartPole-v1' must be a mapping, got \[1\]"),
        ("variants: {../../../../x/victim: {}}\ntasks: {CartPole-v1: {}}", "the variant '../../../../x/victim' cannot"),
        ("variants: {.hidden: {}}\ntasks: {CartPole-v1: {}}", "the variant '.hidden' cannot name a folder"),
        ("tasks: {../CartPole-v1: {}}", "the task '..-CartPole-v1' cannot name a folder"),
        ("variants: {a: {hyperparams: {-n: 5}}}\ntasks: {CartPole-v1: {}}", "argument names must be identifier strings"),
        ("variants: {a: {conf: [x]}}\ntasks: {CartPole-v1: {}}", r"variant 'a': conf must be a string"),
        ("variants: {a: {algoo: ppo}}\ntasks: {CartPole-v1: {}}", r"variant 'a': unknown key\(s\) \['algoo'\]"),
    ],
)
def test_load_grid_names_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        grid.load_grid(write_grid(tmp_path, text))


def fake_run(root, task, variant, seed, evaluations, episode_ends, successes=None):
    """A cell folder as rl-zoo3 leaves it: evaluations.npz (with ``successes`` per evaluation, if given) and two
    monitor files (t_start 100 and 101)."""
    run = Path(root) / task.replace("/", "-") / variant / f"seed_{seed}" / "ppo_ext" / f"{task.replace('/', '-')}_1"
    run.mkdir(parents=True)
    steps = np.array([step for step, _ in evaluations])
    results = np.array([[value - 1, value + 1] for _, value in evaluations], dtype=float)
    (run / task.replace("/", "-")).mkdir()
    (run / task.replace("/", "-") / "args.yml").write_text(f"env: {task}\n")  # what rl-zoo3 writes (among more)
    extra = {} if successes is None else {"successes": np.array(successes, dtype=bool)}
    np.savez(run / "evaluations.npz", timesteps=steps, results=results, ep_lengths=np.ones_like(results), **extra)
    for index, ends in enumerate(episode_ends):
        with open(run / f"{index}.monitor.csv", "w") as stream:
            stream.write(json.dumps({"t_start": 100.0 + index, "env_id": task}) + "\n")
            stream.write("r,l,t\n")
            stream.writelines(f"1.0,{length},{end}\n" for end, length in ends)
    return run


def test_collect_reads_evaluations_and_wall_clock(tmp_path):
    # env 0 ends episodes of 500 steps at 10 s and 30 s, env 1 one of 500 at 19 s (absolute 20 s): 1000 steps
    # are reached at 20 s, 1500 at 30 s.
    fake_run(
        tmp_path,
        "sb3_ppo_ext/Walker2D-v0",
        "ours",
        0,
        [(1000, 50.0), (1500, 80.0), (4000, 90.0)],
        [[(10.0, 500), (30.0, 500)], [(19.0, 500)]],
    )
    rows = grid.collect(str(tmp_path))
    assert [(r["kind"], r["timesteps"], r["episodes"], r["eval_mean"], r["eval_std"], r["wall_s"]) for r in rows[:2]] == [
        ("periodic", 1000, 2, 50.0, 1.0, 20.0),
        ("periodic", 1500, 2, 80.0, 1.0, 30.0),
    ]
    assert np.isnan(rows[2]["wall_s"])  # after the last finished episode
    # Unfinished (no done.json): the env id comes from the run's args.yml, not from the folder name.
    assert rows[0]["task"] == "sb3_ppo_ext/Walker2D-v0" and rows[0]["variant"] == "ours" and rows[0]["seed"] == 0
    assert not rows[0]["finished"]
    path = tmp_path / "out" / "evaluations.csv"
    grid.write_csv(rows, str(path))
    with open(path) as stream:
        assert next(csv.reader(stream)) == list(grid.CSV_FIELDS)
    assert grid.read_csv(str(path))[1]["eval_mean"] == 80.0
    assert grid.read_csv(str(path))[1]["finished"] is False


def test_read_csv_takes_empty_cells_as_nan(tmp_path):
    """A grid CSV joined by pandas or a spreadsheet writes NaN as an empty cell; it reads back as NaN."""
    fields = dict.fromkeys(grid.CSV_FIELDS, "")
    fields.update(task="T", variant="a", seed="0", kind="periodic", timesteps="2000", episodes="10")
    fields.update(eval_mean="12.5", eval_std="1.0", finished="True")
    path = tmp_path / "joined.csv"
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=grid.CSV_FIELDS)
        writer.writeheader()
        writer.writerow(fields)
    (row,) = grid.read_csv(str(path))
    assert row["eval_mean"] == 12.5 and row["finished"] is True and row["success_rate"] is None
    assert np.isnan(row["wall_s"]) and np.isnan(row["eval_length"]) and np.isnan(row["train_std"])


def test_report_mean_iqm_and_time_to_score(tmp_path):
    for seed, final in enumerate([100.0, 200.0, 300.0, 1000.0]):
        fake_run(tmp_path, "T", "a", seed, [(1000, 10.0), (2000, final)], [[(5.0, 1000), (9.0, 1000)]])
    rows = grid.collect(str(tmp_path))
    text = grid.report(rows, at=None, threshold={"T": 250.0}, reps=200)
    line = next(line for line in text.splitlines() if line.startswith("| a |"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:5] == ["a", "0, 1, 2, 3", "100, 200, 300, 1000", "0.002M", "last periodic, 2 episodes"]
    assert cells[5].startswith("400 [")  # mean of the four finals
    assert cells[6].startswith("250 [")  # IQM: the mean of the middle two
    assert cells[7] == "not reached, not reached, 0.1 min (0.00M), 0.1 min (0.00M)"
    earlier = grid.report(rows, at=1500, threshold={}, reps=200)
    assert "| 10, 10, 10, 10 |" in earlier
    assert grid.time_to_score(rows[:2], 5.0) == (rows[0]["wall_s"], 1000)


def test_report_joins_several_csvs(tmp_path, capsys):
    """``report A.csv B.csv`` reports the variants of both grids side by side, as one CSV of all their rows."""
    for variant, final in (("a", 100.0), ("b", 300.0)):
        fake_run(tmp_path / variant, "T", variant, 0, [(1000, 10.0), (2000, final)], [[(5.0, 1000), (9.0, 1000)]])
        grid.write_csv(grid.collect(str(tmp_path / variant)), str(tmp_path / f"{variant}.csv"))
    assert grid.main(["report", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--include-unfinished", "--reps", "50"]) == 0
    text = capsys.readouterr().out
    assert "| a | 0 | 100 |" in text and "| b | 0 | 300 |" in text
    with pytest.raises(SystemExit, match=r"T / a / seed 0 is in .*a\.csv and again in .*a\.csv"):
        grid.main(["report", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), str(tmp_path / "a.csv")])


def test_plot_draws_each_variants_iqm_over_seeds_and_its_band_with_rliable(tmp_path, monkeypatch):
    """One panel per task, one curve per variant: the IQM over seeds at each evaluation step with its bootstrap band,
    drawn by rliable, and a variant in the same colour in every panel."""
    from rliable import plot_utils
    from scipy import stats

    for seed, final in enumerate([10.0, 20.0, 30.0, 100.0]):
        for task in ("T", "U"):
            fake_run(tmp_path, task, "a", seed, [(1000, float(seed)), (2000, final)], [[(5.0, 1000)]])
    fake_run(tmp_path, "U", "b", 0, [(1000, 5.0)], [[(5.0, 1000)]])
    drawn = []
    original = plot_utils.plot_sample_efficiency_curve

    def recording(frames, points, intervals, **kwargs):
        drawn.append((kwargs["ax"].get_title(), frames, points, intervals, kwargs["colors"]))
        return original(frames, points, intervals, **kwargs)

    monkeypatch.setattr(plot_utils, "plot_sample_efficiency_curve", recording)
    output = tmp_path / "plots" / "curves.png"
    grid.plot(grid.collect(str(tmp_path)), str(output), reps=100)
    assert output.stat().st_size > 1000
    assert [(title, sorted(points)) for title, _, points, _, _ in drawn] == [
        ("T", ["a (4 seeds)"]),
        ("U", ["a (4 seeds)"]),
        ("U", ["b (1 seeds)"]),
    ]
    _, frames, points, intervals, colors = drawn[0]
    np.testing.assert_allclose(frames, [0.001, 0.002])
    iqm = [stats.trim_mean([0.0, 1.0, 2.0, 3.0], 0.25), stats.trim_mean([10.0, 20.0, 30.0, 100.0], 0.25)]
    np.testing.assert_allclose(points["a (4 seeds)"], iqm)
    lower, upper = intervals["a (4 seeds)"]
    assert np.all(lower <= points["a (4 seeds)"]) and np.all(points["a (4 seeds)"] <= upper)
    assert drawn[1][4] == colors and drawn[2][4]["b (1 seeds)"] != colors["a (4 seeds)"]


def test_collect_into_an_existing_csv_keeps_the_runs_another_root_holds(tmp_path, capsys):
    # Session 1 trained seeds 0 and 1 under one root; session 2, on a fresh machine, resumed seed 1 and ran seed 2.
    first, second = tmp_path / "first", tmp_path / "second"
    fake_run(first, "T", "a", 0, [(1000, 10.0)], [[(5.0, 1000)]])
    fake_run(first, "T", "a", 1, [(1000, 20.0)], [[(5.0, 1000)]])
    fake_run(second, "T", "a", 1, [(1000, 20.0), (2000, 25.0)], [[(5.0, 1000)]])
    fake_run(second, "T", "a", 2, [(1000, 30.0)], [[(5.0, 1000)]])
    path = str(tmp_path / "a.csv")
    assert grid.main(["collect", "--root", str(first), "--csv", path]) == 0
    assert grid.main(["collect", "--root", str(second), "--csv", path]) == 0
    assert "2 runs from" in capsys.readouterr().out.splitlines()[-1]
    rows = grid.read_csv(path)
    assert [(r["seed"], r["timesteps"], r["eval_mean"]) for r in rows] == [
        (0, 1000, 10.0),  # kept: only the first root holds it
        (1, 1000, 20.0),  # replaced in place by the newer, longer run
        (1, 2000, 25.0),
        (2, 1000, 30.0),  # new: appended
    ]
    assert rows[0]["wall_s"] == grid.collect(str(first))[0]["wall_s"] == 5.0  # a kept row reads back unchanged
    assert grid.main(["collect", "--root", str(second), "--csv", path, "--replace"]) == 0
    assert [r["seed"] for r in grid.read_csv(path)] == [1, 1, 2]


def test_report_counts_successes_where_the_task_reports_them(tmp_path):
    fake_run(tmp_path, "R", "a", 0, [(1000, 10.0), (2000, 50.0)], [[(5.0, 1000)]], successes=[[0, 0], [1, 0]])
    fake_run(tmp_path, "R", "a", 1, [(1000, 10.0), (2000, 60.0)], [[(5.0, 1000)]], successes=[[0, 1], [1, 1]])
    rows = grid.collect(str(tmp_path))
    assert [row["success_rate"] for row in rows] == [0.0, 0.5, 0.5, 1.0]
    path = tmp_path / "evaluations.csv"
    grid.write_csv(rows, str(path))
    text = grid.report(grid.read_csv(str(path)), at=None, threshold={}, reps=100)
    assert "successes per seed |" in text and text.splitlines()[-1].endswith("| 1/2, 2/2 |")


def test_collect_places_the_successes_of_a_run_that_began_reporting_them_on_its_last_evaluations(tmp_path):
    """A run resumed after its task began reporting ``is_success`` holds success rows for its last evaluations only."""
    fake_run(tmp_path, "R", "a", 0, [(1000, 10.0), (2000, 50.0), (3000, 60.0)], [[(5.0, 1000)]], successes=[[1, 1]])
    assert [row["success_rate"] for row in grid.collect(str(tmp_path))] == [None, None, 1.0]


def test_run_is_resumable_at_the_cell_level(tmp_path):
    path = write_grid(
        tmp_path,
        """
tasks:
  CartPole-v1: {seeds: [0], n_timesteps: 1024, eval_freq: 512, eval_episodes: 2}
""",
    )
    (cell,) = grid.load_grid(path)
    root = str(tmp_path / "runs")
    partial = Path(cell.folder(root))
    partial.mkdir(parents=True)
    (partial / "leftover").write_text("from an interrupted run")
    assert grid.run_grid([cell], root, jobs=1)
    done = json.loads((partial / "done.json").read_text())
    assert done["task"] == "CartPole-v1" and done["command"][:2] == ["sb3-ppo-ext", "train"]
    assert not (partial / "leftover").exists()
    assert [p for p in os.listdir(partial.parent) if ".interrupted-" in p]
    rows = grid.collect(root)
    assert [(r["timesteps"], r["finished"]) for r in rows] == [(512, True), (1024, True)]
    assert grid.run_cell(cell, root).startswith("skip")
    (line,) = grid.evaluate_cells(root, episodes=5)
    assert line.startswith("eval ")
    final = json.loads((partial / grid.FINAL_EVAL_FILE).read_text())
    assert final["episodes"] == 5 and final["seed"] == grid.FINAL_EVAL_SEED and final["timesteps"] == 1024
    assert grid.evaluate_cells(root, episodes=5)[0].startswith("skip")
    rows = grid.collect(root)
    assert [r["kind"] for r in rows] == ["periodic", "periodic", "final"]
    assert "| final, 5 episodes |" in grid.report(rows, at=None, threshold={}, reps=100)


def test_a_stopped_grid_records_the_session_of_each_running_cell_and_starts_no_other(tmp_path, monkeypatch):
    """SIGTERM to the grid (its handler, called here) stops the training processes; each running cell still writes
    its session's wall clock, which a resumed cell adds up, and no further cell starts."""
    path = write_grid(tmp_path, "tasks:\n  CartPole-v1: {seeds: [0, 1], n_timesteps: 1024}\n")
    first, second = grid.load_grid(path)
    root = str(tmp_path / "runs")
    monkeypatch.setattr(grid_run, "sb3_ppo_ext_command", lambda: [sys.executable, "-c", "import time; time.sleep(60)"])
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(grid.run_cell(first, root)))
    worker.start()
    try:
        deadline = time.time() + 30
        while not grid_run._TRAINING and time.time() < deadline:
            time.sleep(0.05)
        grid.stop_training()
        worker.join(30)
        assert outcome and outcome[0].startswith("stop"), outcome
        (session,) = [json.loads(line) for line in Path(first.folder(root), "sessions.jsonl").read_text().splitlines()]
        assert session["exit"] != 0 and session["wall_s"] >= 0
        assert not Path(first.folder(root), "done.json").exists()
        assert grid.run_cell(second, root).startswith("stop") and not Path(second.folder(root)).exists()
    finally:
        grid_run._STOPPING.clear()


@pytest.fixture
def ctrl_c_as_in_a_terminal():
    """SIGINT raising ``KeyboardInterrupt`` in this process and, through exec, its default in the processes it starts,
    as in a terminal: a suite started in the background of a non-interactive shell (as CI may start it) ignores
    SIGINT, and the processes it starts inherit the ignore."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c_as_in_a_terminal")
def test_ctrl_c_stops_the_grid_as_sigterm_does_and_leaves_the_handlers_as_they_were(tmp_path, monkeypatch):
    """A terminal's Ctrl-C (SIGINT to the grid's process) stops the running cells through the grid's handler and starts
    no further cell; the training processes, in sessions of their own, are not hit by the terminal directly."""
    path = write_grid(tmp_path, "tasks:\n  CartPole-v1: {seeds: [0, 1], n_timesteps: 1024}\n")
    cells = grid.load_grid(path)
    root = str(tmp_path / "runs")
    monkeypatch.setattr(grid_run, "sb3_ppo_ext_command", lambda: [sys.executable, "-c", "import time; time.sleep(60)"])
    before = signal.getsignal(signal.SIGINT)

    def press_ctrl_c():
        deadline = time.time() + 30
        while not grid_run._TRAINING and time.time() < deadline:
            time.sleep(0.05)
        (process,) = grid_run._TRAINING
        assert os.getsid(process.pid) != os.getsid(0)
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        started = time.time()
        assert not grid.run_grid(cells, root, jobs=1)
        assert time.time() - started < 30
    finally:
        presser.join(30)
        grid_run._STOPPING.clear()
    assert signal.getsignal(signal.SIGINT) is before
    (session,) = [json.loads(line) for line in Path(cells[0].folder(root), "sessions.jsonl").read_text().splitlines()]
    assert session["exit"] == -signal.SIGTERM
    assert not Path(cells[0].folder(root), "done.json").exists() and not Path(cells[1].folder(root)).exists()


#: ``sb3-ppo-ext grid ARGS`` whose cells' trainer is a process that says it started, and on SIGTERM takes a second to
#: exit 143 (as ``train`` saving its model).
GRID_OF_SLOW_STOPPING_TRAINERS = """
import sys
from sb3_ppo_ext.cli import main
from sb3_ppo_ext.grid import run

TRAINER = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(143))); "
    "print('training', flush=True); time.sleep(60)"
)
run.sb3_ppo_ext_command = lambda: [sys.executable, "-c", TRAINER]
main(["grid", *sys.argv[1:]])
"""


def test_ctrl_c_pressed_again_while_the_grid_stops_ends_it_with_status_1(tmp_path):
    """A terminal's Ctrl-C stops the grid; more Ctrl-C's while it stops (its trainers saving, then the interpreter
    shutting down) neither kill it with SIGINT (exit status -2) nor its trainers: it ends with 1, the cell stopped."""
    path = write_grid(tmp_path, "tasks:\n  CartPole-v1: {seeds: [0]}\n")
    root = tmp_path / "runs"
    argv = [sys.executable, "-c", GRID_OF_SLOW_STOPPING_TRAINERS, "run", path, "--root", str(root)]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    log = root / "CartPole-v1" / "ppo_ext" / "seed_0" / "train.log"
    deadline = time.time() + 60
    while not (log.is_file() and "training" in log.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    while process.poll() is None and time.time() < deadline:  # Ctrl-C, again and again until the grid has ended
        process.send_signal(signal.SIGINT)
        time.sleep(0.05)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 1, output
    assert "stop  " in output and "Traceback" not in output, output
    (session,) = [json.loads(line) for line in (log.parent / "sessions.jsonl").read_text().splitlines()]
    assert session["exit"] == 143  # the trainer's own exit after its save: not killed by a second SIGTERM


@pytest.mark.usefixtures("ctrl_c_as_in_a_terminal")
def test_a_cell_whose_training_was_ctrl_c_ed_short_of_its_budget_is_not_done(tmp_path):
    """``train`` stopped by Ctrl-C saves the model trained so far and exits 0, as rl-zoo3's does: the cell stays
    unfinished (no done.json) and resumes from that model."""
    path = write_grid(
        tmp_path,
        """
tasks:
  CartPole-v1: {seeds: [0], n_timesteps: 1000000, eval_freq: 100000, save_freq: 512}
""",
    )
    (cell,) = grid.load_grid(path)
    root = str(tmp_path / "runs")
    folder = Path(cell.folder(root))

    def press_ctrl_c_after_a_checkpoint():
        deadline = time.time() + 60
        while not list(folder.glob("ppo_ext/*/rl_model_*_steps.zip")) and time.time() < deadline:
            time.sleep(0.1)
        for process in list(grid_run._TRAINING):
            process.send_signal(signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c_after_a_checkpoint)
    presser.start()
    try:
        line = grid.run_cell(cell, root)
    finally:
        presser.join(60)
    assert line.startswith("stop") and "of 1000000 steps" in line, line
    (session,) = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    assert session["exit"] == 0
    assert not (folder / "done.json").exists()
    assert (folder / "ppo_ext" / "CartPole-v1_1" / "CartPole-v1.zip").is_file()


def test_a_session_line_cut_short_by_a_kill_costs_its_seconds_not_the_cell(tmp_path):
    """The grid killed while it appends to ``sessions.jsonl`` leaves a line without its end: the next session's line
    starts on a line of its own, and the cell's wall clock sums the lines that are sessions'."""
    path = str(tmp_path / grid_run.SESSIONS_FILE)
    grid_run.append_session(path, {"wall_s": 12.5, "exit": 0, "command": []})
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('{"wall_s": 40.0, "ex')  # cut short
    grid_run.append_session(path, {"wall_s": 7.5, "exit": 0, "command": ["--resume"]})
    lines = Path(path).read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["command"] == ["--resume"]
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('[1]\n{"wall_s": "9"}\n{"wall_s": 1e999}\n\xff\n')  # not sessions: no seconds
    assert grid_run.sessions_wall_seconds(path) == 20.0


def test_an_interrupted_cell_with_checkpoints_resumes_instead_of_starting_again(tmp_path):
    path = write_grid(
        tmp_path,
        """
tasks:
  CartPole-v1: {seeds: [0], n_timesteps: 2048, eval_freq: 512, eval_episodes: 2, save_freq: 512}
""",
    )
    (cell,) = grid.load_grid(path)
    assert "--save-freq" in cell.train_argv("f") and cell.resume_argv("r")[-2:] == ["--save-freq", "512"]
    root = str(tmp_path / "runs")
    assert grid.run_grid([cell], root, jobs=1)
    folder = Path(cell.folder(root))
    run = folder / "ppo_ext" / "CartPole-v1_1"
    # What a stop after the checkpoint at 1024 steps leaves behind.
    for name in ("done.json", "CartPole-v1.zip", "rl_model_1536_steps.zip"):
        (folder / name if name == "done.json" else run / name).unlink()
    assert grid.run_cell(cell, root).endswith("s in several sessions)")
    assert not [p for p in os.listdir(folder.parent) if ".interrupted-" in p]
    rows = grid.collect(root)
    assert [(r["timesteps"], r["finished"]) for r in rows] == [(512, True), (1024, True), (1536, True), (2048, True)]
    # The training values are progress.csv's, exact; after 1024 steps those of the resumed session (the file's last
    # rows), not those the stopped session logged at the same steps.
    with open(run / "progress.csv", newline="") as stream:
        logged = [row for row in csv.DictReader(stream) if row["train/approx_kl"]]
    by_step = {int(row["time/total_timesteps"]): float(row["train/approx_kl"]) for row in logged}  # the last wins
    assert len(by_step) < len(logged)  # the stopped session's rows after the checkpoint are kept in the file
    for row in rows:
        before = max(step for step in by_step if step <= row["timesteps"])
        assert row["train_approx_kl"] == by_step[before], row
    sessions = (folder / "sessions.jsonl").read_text().splitlines()
    assert len(sessions) == 2 and "--resume" in json.loads(sessions[1])["command"]
    assert json.loads((folder / "done.json").read_text())["wall_s"] == pytest.approx(
        sum(json.loads(line)["wall_s"] for line in sessions)
    )


def test_a_finished_cell_copied_to_a_grid_with_a_larger_budget_trains_on_from_its_final_model(tmp_path):
    short, long = (
        grid.load_grid(
            write_grid(
                tmp_path,
                f"""
tasks:
  CartPole-v1: {{seeds: [0], n_timesteps: {steps}, eval_freq: 512, eval_episodes: 2{checkpoints}}}
""",
            )
        )[0]
        for steps, checkpoints in ((1024, ""), (2048, ", save_freq: 512"))
    )
    assert grid.run_grid([short], str(tmp_path / "screen"), jobs=1)  # no checkpoints: only the final model
    shutil.copytree(short.folder(str(tmp_path / "screen")), long.folder(str(tmp_path / "long")))
    folder = Path(long.folder(str(tmp_path / "long")))
    (folder / "done.json").unlink()
    assert grid.run_cell(long, str(tmp_path / "long")).endswith("s in several sessions)")
    rows = grid.collect(str(tmp_path / "long"))
    assert [r["timesteps"] for r in rows] == [512, 1024, 1536, 2048]
    assert os.path.isfile(folder / "ppo_ext" / "CartPole-v1_1" / "rl_model_1536_steps.zip")


def test_a_snapshot_of_an_unfinished_cell_resumes_on_a_fresh_root(tmp_path):
    path = write_grid(
        tmp_path,
        """
tasks:
  CartPole-v1: {seeds: [0], n_timesteps: 1536, eval_freq: 512, eval_episodes: 2, save_freq: 512}
""",
    )
    (cell,) = grid.load_grid(path)
    root, stash = tmp_path / "runs", tmp_path / "repo" / "run_state"
    assert grid.run_grid([cell], str(root), jobs=1)
    assert grid.snapshot_cells(str(root), str(stash)) == []  # finished cells are collected, not carried
    folder = Path(cell.folder(str(root)))
    (folder / "done.json").unlink()
    (folder / "ppo_ext" / "CartPole-v1_1" / "CartPole-v1.zip").unlink()
    (line,) = grid.snapshot_cells(str(root), str(stash))
    assert line.endswith("at 1024 steps")
    shutil.rmtree(root)  # the machine did not come back
    shutil.copytree(stash, root)
    kept = sorted(
        p.name
        for p in (root / os.path.relpath(folder, tmp_path / "runs") / "ppo_ext" / "CartPole-v1_1").iterdir()
        if not p.name.endswith(".monitor.csv")
    )
    assert kept == ["CartPole-v1", "evaluations.npz", "progress.csv", "rl_model_1024_steps.zip"]
    assert grid.run_cell(cell, str(root)).endswith("in several sessions)")
    rows = grid.collect(str(root))
    assert [(r["timesteps"], r["finished"]) for r in rows] == [(512, True), (1024, True), (1536, True)]


def test_train_log_values_are_read_from_sb3s_printed_tables(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("""sb3-ppo-ext train ...
----------------------------------
| rollout/           |           |
|    ep_len_mean     | 53        |
| time/              |           |
|    total_timesteps | 8192      |
----------------------------------
-----------------------------------------
| train/                  |             |
|    approx_kl            | 0.0237      |
|    learning_rate        | 0.00025     |
|    std                  | 0.34        |
| time/                   |             |
|    total_timesteps      | 16384       |
-----------------------------------------
Eval num_timesteps=20000, episode_reward=81.20 +/- 3.1
-----------------------------------------
| train/                  |             |
|    approx_kl            | 0.05        |
|    kl_coef              | 2           |
|    learning_rate        | 0.0001      |
|    std                  | 0.3         |
|    total_timesteps      | 24576       |
-----------------------------------------
""")
    steps, values = grid.train_log_values(str(log))
    assert steps.tolist() == [16384, 24576]
    assert values["std"].tolist() == [0.34, 0.3] and values["learning_rate"].tolist() == [0.00025, 0.0001]
    assert np.isnan(values["kl_coef"][0]) and values["kl_coef"][1] == 2.0
    missing_steps, missing = grid.train_log_values(str(tmp_path / "none.log"))
    assert missing_steps.size == 0 and missing["std"].size == 0


def printed_table(step: int, std: float, approx_kl: float) -> str:
    """SB3's printed table of one dump (``--verbose 1``), its values rounded as SB3 prints them."""
    return (
        "-----------------------------------------\n"
        "| train/                  |             |\n"
        f"|    approx_kl            | {approx_kl:<8.3g}    |\n"
        f"|    std                  | {std:<8.3g}    |\n"
        "| time/                   |             |\n"
        f"|    total_timesteps      | {step:<8.3g}    |\n"
        "-----------------------------------------\n"
    )


def write_progress_csv(run: Path, rows: list[tuple[int, float, float]]) -> None:
    """A ``progress.csv`` as ``train`` writes it: SB3's logger rows, here with a rollout-only row before each."""
    with open(run / "progress.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["rollout/ep_rew_mean", "time/total_timesteps", "train/approx_kl", "train/std"])
        for step, std, approx_kl in rows:
            writer.writerows([[1.0, step - 1, "", ""], ["", step, repr(approx_kl), repr(std)]])


def test_collect_takes_the_training_values_from_progress_csv_else_from_train_log(tmp_path):
    """Exact values from the run's ``progress.csv``; the 3 digits printed in ``train.log`` for a run trained before
    ``train`` wrote that file, and for the steps before its first row when such a run was resumed since. A resumed
    session's rows replace those of the stopped one from the step it resumed at."""
    evaluations = [(1000, 1.0), (2000, 2.0), (3000, 3.0)]
    old = fake_run(tmp_path, "T", "old", 0, evaluations, [[(5.0, 1000)]])
    (old.parents[1] / "train.log").write_text(printed_table(900, 0.123456, 0.0123456) + printed_table(2900, 0.5, 0.02))
    new = fake_run(tmp_path, "T", "new", 0, evaluations, [[(5.0, 1000)]])
    (new.parents[1] / "train.log").write_text(printed_table(900, 0.123456, 0.0123456))
    write_progress_csv(new, [(900, 0.123456, 0.0123456), (1900, 0.2345678, 0.01), (2900, 0.3456789, 0.03)])
    # Resumed at 1000 steps: train.log from its first session, progress.csv from the second one on, which it
    # continued twice (stopped again after 2900 steps, resumed at 2000).
    resumed = fake_run(tmp_path, "T", "resumed", 0, evaluations, [[(5.0, 1000)]])
    (resumed.parents[1] / "train.log").write_text(printed_table(900, 0.123456, 0.0123456) + printed_table(1900, 0.9, 0.9))
    write_progress_csv(resumed, [(1900, 0.2345678, 0.01), (2900, 0.9, 0.9), (2900, 0.3456789, 0.03)])

    rows = {(row["variant"], row["timesteps"]): row for row in grid.collect(str(tmp_path))}
    assert [rows["old", step]["train_std"] for step in (1000, 2000, 3000)] == [0.123, 0.123, 0.5]
    assert [rows["new", step]["train_std"] for step in (1000, 2000, 3000)] == [0.123456, 0.2345678, 0.3456789]
    assert [rows["resumed", step]["train_std"] for step in (1000, 2000, 3000)] == [0.123, 0.2345678, 0.3456789]
    assert rows["new", 3000]["train_approx_kl"] == 0.03 and np.isnan(rows["new", 3000]["train_kl_coef"])
    path = tmp_path / "evaluations.csv"
    grid.write_csv(list(rows.values()), str(path))
    with open(path, newline="") as stream:
        assert next(csv.reader(stream)) == list(grid.CSV_FIELDS)  # the same columns as before progress.csv


def test_failures_lists_the_starts_every_seed_failed(tmp_path):
    for seed, failed in enumerate(
        [
            {"3": "sea_contact", "7": "time_limit"},
            {"3": "engine_contact"},
            {"3": "sea_contact", "7": "sea_contact", "9": "hard_touchdown"},
        ]
    ):
        folder = tmp_path / "T" / "v" / f"seed_{seed}"
        folder.mkdir(parents=True)
        (folder / "done.json").write_text(json.dumps({"task": "ns/T-v0"}))
        (folder / grid.FINAL_EVAL_FILE).write_text(json.dumps({"episodes": 10, "failed_episodes": failed}))
    (line,) = grid.shared_failures(str(tmp_path))
    assert line == ("ns/T-v0 v: 3 seeds, 6 failed episodes on 3 starts; failed by every seed: [3]; by all but one: [7]")


def test_curve_table_shows_each_run_at_the_given_steps(tmp_path):
    fake_run(tmp_path, "T", "a", 0, [(1000, 10.0), (2000, 20.0), (3000, 30.0)], [[(1.0, 10)]])
    fake_run(tmp_path, "T", "a", 1, [(1000, 5.0)], [[(1.0, 10)]])
    text = grid.curve_table(grid.collect(str(tmp_path)), [1500, 3000])
    assert "| a | 0 | 10 | 30 | 30 at 0.003M |" in text
    assert "| a | 1 |  |  | 5 at 0.001M |" in text  # not yet at 1500 steps: blank, not its 1000-step score
    lengths = grid.curve_table(grid.collect(str(tmp_path)), [1500, 3000], value="eval_length")
    assert "| a | 0 | 1 | 1 | 1 at 0.003M |" in lengths  # fake_run's episodes last 1 step


@pytest.mark.parametrize(
    "flag, value, named",
    [
        ("--seeds", "2", "--seeds: 2 not in"),
        ("--only", "sb3", "--only: sb3"),
        ("--tasks", "Pendulum-v1", "--tasks: Pendulum-v1"),
    ],
)
def test_run_filters_that_match_no_cell_of_the_grid_are_named(tmp_path, capsys, flag, value, named):
    path = write_grid(tmp_path, "variants: {ours: {}}\ntasks:\n  CartPole-v1: {seeds: [0, 1]}\n")
    with pytest.raises(SystemExit):
        grid.main(["run", path, "--root", str(tmp_path / "runs"), "--dry-run", flag, value])
    assert named in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    grid.main(["run", path, "--root", str(tmp_path / "runs"), "--dry-run", "--seeds", "1"])
    assert "--seed 1" in capsys.readouterr().out


def test_a_trained_agent_cell_starts_from_that_checkpoint_with_its_statistics(tmp_path):
    """``trained_agent``: the cell's first session is ``train -i MODEL`` (weights and the checkpoint's VecNormalize
    statistics; a new step count), and a missing model fails that cell by name without training."""
    (source,) = grid.load_grid(
        write_grid(
            tmp_path,
            """
variants:
  ppo_ext: {hyperparams: {n_envs: 2, n_steps: 256, batch_size: 128, n_epochs: 1, normalize: true}}
tasks:
  Pendulum-v1: {seeds: [0], n_timesteps: 1024, eval_freq: 512, eval_episodes: 1, save_freq: 512}
""",
        )
    )
    assert grid.run_grid([source], str(tmp_path / "source"), jobs=1)
    checkpoint = Path(source.folder(str(tmp_path / "source")), "ppo_ext", "Pendulum-v1_1", "rl_model_512_steps.zip")
    (tuned, missing) = grid.load_grid(
        write_grid(
            tmp_path,
            f"""
variants:
  tuned: {{trained_agent: {checkpoint}, hyperparams: {{n_envs: 2, n_steps: 256, normalize: true, learning_rate: 1.0e-5}}}}
  missing: {{trained_agent: {tmp_path / "nowhere.zip"}}}
tasks:
  Pendulum-v1: {{seeds: [0], n_timesteps: 512, eval_freq: 512, eval_episodes: 1}}
""",
        )
    )
    assert tuned.train_argv("f")[tuned.train_argv("f").index("-i") + 1] == str(checkpoint)
    root = str(tmp_path / "tuned")
    assert grid.run_cell(tuned, root).startswith("done")
    log = Path(tuned.folder(root), "train.log").read_text()
    assert "Loading the checkpoint's VecNormalize statistics" in log and str(checkpoint) in log
    assert [r["timesteps"] for r in grid.collect(root) if r["variant"] == "tuned"] == [512]
    line = grid.run_cell(missing, root)
    assert line.startswith("FAIL") and "nowhere.zip does not exist" in line and not Path(missing.folder(root)).exists()
    with pytest.raises(ValueError, match=r"trained_agent must be a model \.zip"):
        grid.load_grid(write_grid(tmp_path, "variants: {v: {trained_agent: run}}\ntasks: {Pendulum-v1: {}}\n"))


def test_the_script_resolves_relative_paths_from_the_repository_and_the_module_from_the_current_directory(tmp_path):
    """``python benchmarks/grid.py`` (the command line the grid files' headers and running campaigns use) reads a
    grid file's relative ``conf`` from the repository root, wherever it is started; ``python -m
    sb3_ppo_ext.grid`` from the current directory."""
    path = write_grid(
        tmp_path,
        "variants: {sb3: {algo: ppo, conf: benchmarks/configs/reference_ppo.yml}}\ntasks:\n  CartPole-v1: {seeds: [0]}\n",
    )
    dry_run = ["run", path, "--root", str(tmp_path / "runs"), "--dry-run"]
    for command, base in (([str(ROOT / "benchmarks" / "grid.py")], ROOT), (["-m", "sb3_ppo_ext.grid"], tmp_path)):
        out = subprocess.run(
            [sys.executable, *command, *dry_run], cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout
        assert f"--conf-file {base / 'benchmarks' / 'configs' / 'reference_ppo.yml'}" in out
    assert not (tmp_path / "runs").exists()


def test_an_alias_bomb_in_a_grid_file_is_refused_at_once(tmp_path, refused_within):
    laughs = ["a: &a [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]"] + [
        f"{chr(98 + level)}: &{chr(98 + level)} [{', '.join(['*' + chr(97 + level)] * 10)}]" for level in range(8)
    ]
    path = write_grid(tmp_path, "\n".join(laughs) + "\ntasks: {CartPole-v1: {seeds: *i}}\n")
    error, seconds, grown = refused_within(lambda: grid.load_grid(path))
    assert "expands to more than 100000 YAML nodes" in str(error)
    assert seconds < 1.0 and grown < 300 << 20


def test_a_grid_never_touches_a_folder_outside_its_root(tmp_path, capsys):
    """A variant named like a path, run twice: before, the first run crashed and the second moved the user's folder
    aside and trained into its place."""
    victim = tmp_path / "x" / "victim" / "seed_0"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("mine")
    root = tmp_path / "a" / "b" / "c" / "root"
    path = write_grid(tmp_path, "variants: {../../../../x/victim: {}}\ntasks: {CartPole-v1: {n_timesteps: 64}}\n")
    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            grid.main(["run", path, "--root", str(root)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "the variant '../../../../x/victim' cannot name a folder under the grid's root" in err.strip().splitlines()[-1]
    assert [item.name for item in victim.parent.iterdir()] == ["seed_0"] and (victim / "precious.txt").read_text() == "mine"
    assert not root.exists()


def test_a_cell_folder_reached_through_a_link_out_of_the_root_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "CartPole-v1").symlink_to(outside, target_is_directory=True)
    (cell,) = grid.load_grid(write_grid(tmp_path, "tasks: {CartPole-v1: {}}\n"))
    with pytest.raises(ValueError, match="leads outside the grid's root"):
        cell.folder(str(root))
    assert list(outside.iterdir()) == []

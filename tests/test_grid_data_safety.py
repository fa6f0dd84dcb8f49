"""The grid never loses a run: snapshots that would delete their source, CSVs that collect cannot merge, and cells that
would share a folder are refused before anything is changed."""

import csv
import os
import time

import pytest
from stable_baselines3 import PPO
from test_grid import fake_run, write_grid

from sb3_ppo_ext import grid
from sb3_ppo_ext.grid.run import check_snapshot_destination
from sb3_ppo_ext.validation import MAX_GRID_CELLS


def files_under(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(path, name), folder) for path, _, names in os.walk(folder) for name in names)


def unfinished_cell(root):
    """A cell that stopped after its checkpoint at 1024 steps (no done.json), as snapshot finds one."""
    run = fake_run(root, "CartPole-v1", "a", 0, [(1024, 10.0)], [[(5.0, 1024)]])
    PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64).save(run / "rl_model_1024_steps.zip")
    return run


@pytest.mark.parametrize("where", ["the root", "inside the root", "holding the root"])
def test_a_snapshot_into_its_own_root_is_refused_before_anything_is_deleted(tmp_path, where, user_error):
    root = tmp_path / "runs"
    unfinished_cell(root)
    before = files_under(root)
    destination = {"the root": root, "inside the root": root / "stash", "holding the root": tmp_path}[where]
    with pytest.raises(ValueError, match=r"must be a folder outside the grid's root"):
        check_snapshot_destination(str(root), str(destination))
    message = user_error(["grid", "snapshot", "--root", str(root), "--to", str(destination)])
    assert "must be a folder outside the grid's root" in message and "\n" not in message.strip()
    assert files_under(root) == before


def test_a_link_inside_the_snapshot_folder_is_not_followed_by_the_delete(tmp_path):
    root, stash, elsewhere = tmp_path / "runs", tmp_path / "stash", tmp_path / "elsewhere"
    unfinished_cell(root)
    (elsewhere / "seed_0").mkdir(parents=True)
    (elsewhere / "seed_0" / "precious.txt").write_text("keep me")
    (stash / "CartPole-v1").mkdir(parents=True)
    os.symlink(elsewhere, stash / "CartPole-v1" / "a")
    with pytest.raises(ValueError, match="CartPole-v1/a is a symbolic link"):
        grid.snapshot_cells(str(root), str(stash))
    assert (elsewhere / "seed_0" / "precious.txt").read_text() == "keep me"
    os.unlink(stash / "CartPole-v1" / "a")
    (line,) = grid.snapshot_cells(str(root), str(stash))  # the same snapshot without the link
    assert line.endswith("at 1024 steps")


@pytest.mark.parametrize("linked", ["--to", "its task folder"])
def test_a_snapshot_folder_reached_through_a_link_is_refused_before_anything_is_deleted(tmp_path, linked, user_error):
    """A link as --to itself (or as a folder between it and a cell's snapshot) would let the snapshot replace a
    folder the link points to: another run's, kept under --to's name."""
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    unfinished_cell(root)
    older = elsewhere / "CartPole-v1" / "a" / "seed_0"
    older.mkdir(parents=True)
    (older / "precious.txt").write_text("keep me")
    if linked == "--to":
        os.symlink(elsewhere, tmp_path / "stash")
    else:
        (tmp_path / "stash").mkdir()
        os.symlink(elsewhere / "CartPole-v1", tmp_path / "stash" / "CartPole-v1")
    message = user_error(["grid", "snapshot", "--root", str(root), "--to", str(tmp_path / "stash")])
    assert "is a symbolic link" in message, message
    assert (older / "precious.txt").read_text() == "keep me"


def test_collect_keeps_the_notes_a_user_added_to_the_rows_it_collects_again(tmp_path):
    """The rows of a run collected again take the place of its old rows, but not of the columns a user added."""
    root, path = tmp_path / "runs", tmp_path / "a.csv"
    fake_run(root, "T", "a", 0, [(1000, 10.0), (2000, 20.0)], [[(5.0, 1000)]])
    assert grid.main(["collect", "--root", str(root), "--csv", str(path)]) == 0
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    with open(path, "w", newline="") as stream:  # a pandas index first, a notes column last
        writer = csv.DictWriter(stream, fieldnames=["", *rows[0], "notes"])
        writer.writeheader()
        writer.writerows({"": str(index), **row, "notes": f"note {index}"} for index, row in enumerate(rows))
    fake_run(root, "T", "a", 1, [(1000, 30.0)], [[(5.0, 1000)]])  # a new run, collected with the old one
    assert grid.main(["collect", "--root", str(root), "--csv", str(path)]) == 0
    with open(path, newline="") as stream:
        merged = list(csv.DictReader(stream))
    assert [(row["seed"], row["timesteps"], row[""], row["notes"]) for row in merged] == [
        ("0", "1000", "0", "note 0"),
        ("0", "2000", "1", "note 1"),
        ("1", "1000", "", ""),
    ]


@pytest.mark.parametrize("added", ["notes", "pandas index"])
def test_collect_keeps_the_columns_a_user_added_to_its_csv(tmp_path, added):
    root = tmp_path / "runs"
    fake_run(root, "T", "a", 0, [(1000, 10.0)], [[(5.0, 1000)]])
    fake_run(tmp_path / "other", "T", "a", 1, [(1000, 20.0)], [[(5.0, 1000)]])
    path = tmp_path / "a.csv"
    assert grid.main(["collect", "--root", str(tmp_path / "other"), "--csv", str(path)]) == 0
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    column = "notes" if added == "notes" else ""
    with open(path, "w", newline="") as stream:  # as a spreadsheet or DataFrame.to_csv saves it back
        writer = csv.DictWriter(stream, fieldnames=[column, *rows[0]] if column == "" else [*rows[0], column])
        writer.writeheader()
        writer.writerows({**row, column: "seed 1 ran on the old machine" if column else "0"} for row in rows)
    assert grid.main(["collect", "--root", str(root), "--csv", str(path)]) == 0
    with open(path, newline="") as stream:
        merged = list(csv.DictReader(stream))
    assert [(row["seed"], row[column]) for row in merged] == [
        ("1", "seed 1 ran on the old machine" if column else "0"),  # the user's cell, kept
        ("0", ""),  # the new run has none
    ]


def test_collect_leaves_a_csv_it_cannot_read_as_it_was(tmp_path, user_error):
    fake_run(tmp_path / "runs", "T", "a", 0, [(1000, 10.0)], [[(5.0, 1000)]])
    path = tmp_path / "a.csv"
    header = "task,variant,seed,kind,timesteps,episodes,eval_mean,eval_std,wall_s,finished\n"
    for text, rule in (
        ("task,variant\nT,a\n", "has no column seed"),
        (header + "T,a,x,periodic,1,1,1,1,,True\n", "line 2"),
        (header + "T,a,0,periodic,1,1,1,1,,True,extra\n", "more"),
    ):
        path.write_text(text)
        message = user_error(["grid", "collect", "--root", str(tmp_path / "runs"), "--csv", str(path)])
        assert str(path) in message and rule in message, message
        assert path.read_text() == text


def test_a_failing_write_leaves_the_old_csv_whole(tmp_path):
    path = tmp_path / "a.csv"
    fake_run(tmp_path / "runs", "T", "a", 0, [(1000, 10.0)], [[(5.0, 1000)]])
    grid.write_csv(grid.collect(str(tmp_path / "runs")), str(path))
    before = path.read_text()

    class Unwritable:
        def __str__(self) -> str:
            raise RuntimeError("this value cannot be written")

    with pytest.raises(RuntimeError, match="cannot be written"):  # half-way through the file
        grid.write_csv([*grid.read_csv(str(path)), {"task": Unwritable()}], str(path))
    assert path.read_text() == before and sorted(os.listdir(tmp_path)) == ["a.csv", "runs"]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("variants:\n  a: {}\n  a: {hyperparams: {n_steps: 64}}\ntasks:\n  CartPole-v1: {}\n", "names the key 'a' twice"),
        ("tasks:\n  CartPole-v1: {seeds: [0]}\n  CartPole-v1: {seeds: [1]}\n", "names the key 'CartPole-v1' twice"),
    ],
)
def test_a_task_or_variant_written_twice_is_refused_by_name(tmp_path, text, rule, user_error):
    """YAML keeps the last of two entries of one key silently: the first task or variant would be lost."""
    path = write_grid(tmp_path, text)
    message = user_error(["grid", "run", path, "--root", str(tmp_path / "runs"), "--dry-run"])
    assert rule in message and "(line 3)" in message, message


def test_defaults_merged_with_an_alias_may_still_be_overridden(tmp_path):
    path = write_grid(
        tmp_path,
        "variants:\n  a: &base {hyperparams: {n_steps: 64}}\n  b: {<<: *base, hyperparams: {n_steps: 128}}\n"
        "tasks:\n  CartPole-v1: {}\n",
    )
    assert [dict(cell.hyperparams)["n_steps"] for cell in grid.load_grid(path)] == [64, 128]


@pytest.mark.parametrize(
    ("tasks", "rule"),
    [
        ("CartPole-v1: {seeds: [0, 0]}", r"seeds names 0 twice"),
        ("CartPole-v1: {seeds: [0], variants: [a, a]}", r"variants names 'a' twice"),
        ("a/b-v1: {seeds: [0]}\n  a-b-v1: {seeds: [0]}", r"tasks 'a/b-v1' and 'a-b-v1' would train in one folder"),
    ],
)
def test_two_cells_in_one_folder_are_refused_by_name(tmp_path, tasks, rule):
    path = write_grid(tmp_path, f"variants: {{a: {{}}}}\ntasks:\n  {tasks}\n")
    with pytest.raises(ValueError, match=rule):
        grid.load_grid(path)


def test_a_grid_of_too_many_cells_is_refused_at_once(tmp_path):
    variants = ", ".join(f"v{index}: {{}}" for index in range(1000))
    seeds = list(range(1000))
    path = write_grid(tmp_path, f"variants: {{{variants}}}\ntasks:\n  CartPole-v1: {{seeds: {seeds}}}\n")
    start = time.monotonic()
    with pytest.raises(ValueError, match=f"more than {MAX_GRID_CELLS} cells"):
        grid.load_grid(path)
    assert time.monotonic() - start < 2.0


# --- collect on damaged or crafted cell files: one line naming the file, within bounded memory and time -----------


def evaluations_path(root):
    return fake_run(root, "T", "a", 0, [(1000, 10.0), (2000, 20.0)], [[(5.0, 1000)]]) / "evaluations.npz"


def write_npz_entry(path, name, header_shape, zero_bytes=0):
    """An .npz whose entry ``name`` declares ``header_shape`` float64 and holds ``zero_bytes`` zeros (deflated, written
    in chunks so that the test itself stays small)."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": header_shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("timesteps.npy", _npy_bytes(np.array([1000])))
        with archive.open(f"{name}.npy", "w", force_zip64=True) as entry:
            entry.write(header.getvalue())
            chunk = bytes(1 << 20)
            for _ in range(zero_bytes >> 20):
                entry.write(chunk)


def _npy_bytes(array) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def collect_error(tmp_path, user_error) -> str:
    start = time.monotonic()
    message = user_error(["grid", "collect", "--root", str(tmp_path / "runs"), "--csv", str(tmp_path / "out.csv")])
    assert time.monotonic() - start < 2.0
    assert not (tmp_path / "out.csv").exists()
    return message


def test_collect_names_a_truncated_or_foreign_evaluation_history(tmp_path, user_error):
    path = evaluations_path(tmp_path / "runs")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert "evaluations.npz: not a readable .npz file" in collect_error(tmp_path, user_error)
    import numpy as np

    np.savez(path, timesteps=np.array([1000]), ep_lengths=np.ones((1, 2)))
    assert "it has no results" in collect_error(tmp_path, user_error)
    np.savez(path, timesteps=np.array([1e400]), results=np.ones((1, 2)), ep_lengths=np.ones((1, 2)))
    assert "timesteps must hold finite numbers" in collect_error(tmp_path, user_error)


def test_collect_refuses_bombs_before_inflating_them(tmp_path, user_error):
    path = evaluations_path(tmp_path / "runs")
    write_npz_entry(path, "results", (10**12,))  # 10**12 floats declared in a few bytes
    assert "declares (1000000000000,) float64" in collect_error(tmp_path, user_error)
    write_npz_entry(path, "results", (100 << 17,), zero_bytes=100 << 20)  # 100 MB of zeros deflate ~1000-fold
    assert "inflates to" in collect_error(tmp_path, user_error)


@pytest.mark.parametrize(
    ("content", "rule"),
    [
        ("#[1, 2]\nr,l,t\n1.0,10,1.0\n", "line 1 is not a Monitor header"),
        ('#{"env_id": "T"}\nr,l,t\n1.0,10,1.0\n', "line 1 is not a Monitor header"),
        ('#{"t_start": 100.0}\nr,l\n1.0,10\n1.0,10\n', "episode 1: not a Monitor row"),
        ('#{"t_start": NaN}\nr,l,t\n1.0,10,1.0\n', "t_start must be a finite number"),
        ('#{"t_start": 100.0}\nr,l,t\n1.0,10,1.0\n1.0,10,inf\n', "episode 2: not a Monitor row"),  # whole, not cut
    ],
)
def test_collect_names_a_monitor_file_that_is_not_the_monitors(tmp_path, user_error, content, rule):
    run = evaluations_path(tmp_path / "runs").parent
    (run / "0.monitor.csv").write_text(content)
    message = collect_error(tmp_path, user_error)
    assert "0.monitor.csv" in message and rule in message, message


def test_a_half_written_last_monitor_row_is_left_out(tmp_path):
    run = evaluations_path(tmp_path / "runs").parent
    (run / "0.monitor.csv").write_text('#{"t_start": 100.0}\nr,l,t\n1.0,1000,5.0\n1.0,10')
    assert [row["timesteps"] for row in grid.collect(str(tmp_path / "runs"))] == [1000, 2000]


#: The keys of a final_eval.json, open for one more.
FINAL = '{"timesteps": 2000, "episodes": 5, "mean_return": 1, "std_return": 0'


@pytest.mark.parametrize(
    ("name", "content", "rule"),
    [
        ("done.json", "[1, 2]", "must hold a JSON object, got list"),
        ("done.json", "{}", "task must be str"),
        ("final_eval.json", '{"timesteps": 2000, "episodes": 0, "mean_return": 1, "std_return": 0}', "episodes must"),
        ("final_eval.json", '{"timesteps": 2000, "episodes": 5}', "mean_return must be"),
        ("final_eval.json", '{"timesteps": 1e400, "episodes": 5, "mean_return": 1, "std_return": 0}', "timesteps must"),
        ("done.json", b'{"task": "\xff"}', "done.json: not UTF-8 text"),
        ("final_eval.json", '{"timesteps": 1' + "0" * 5000 + "}", "final_eval.json: not JSON"),
        ("final_eval.json", FINAL + ', "successes": 7}', "successes must lie in [0, episodes (5)], got 7"),
        ("final_eval.json", FINAL + ', "mean_length": "long"}', "mean_length must be int or float"),
        ("final_eval.json", FINAL + ', "mean_length": -1}', "std_return and mean_length must be >= 0"),
    ],
)
def test_collect_names_a_cell_file_it_cannot_use(tmp_path, user_error, name, content, rule):
    seed_folder = evaluations_path(tmp_path / "runs").parents[2]
    (seed_folder / "done.json").write_text('{"task": "T"}')
    (seed_folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    message = collect_error(tmp_path, user_error)
    assert name in message and rule in message, message


@pytest.mark.parametrize(
    ("option", "rule"),
    [
        (["--reps", "0"], "--reps: must be a whole number from 1 to 100000"),
        (["--reps", "20000000"], "--reps: must be a whole number from 1 to 100000"),
        (["--at", "inf"], "--at: must be a whole number of steps"),
        (["--curve-steps", "1e400"], "--curve-steps: must be a whole number of steps"),
        (["--threshold", "=5"], "--threshold: takes TASK=SCORE"),
        (["--threshold", "T=nan"], "--threshold: takes TASK=SCORE"),
    ],
)
def test_report_refuses_bad_options_in_one_line(tmp_path, user_error, option, rule):
    fake_run(tmp_path / "runs", "T", "a", 0, [(1000, 10.0)], [[(5.0, 1000)]])
    path = str(tmp_path / "a.csv")
    assert grid.main(["collect", "--root", str(tmp_path / "runs"), "--csv", path]) == 0
    assert rule in user_error(["grid", "report", path, *option])


def test_report_names_a_csv_with_infinite_scores(tmp_path, user_error):
    path = tmp_path / "a.csv"
    path.write_text(
        "task,variant,seed,kind,timesteps,episodes,eval_mean,eval_std,wall_s,finished\nT,a,0,periodic,1000,10,inf,1.0,,True\n"
    )
    message = user_error(["grid", "report", str(path)])
    assert f"{path}, line 2: eval_mean must be a finite number" in message


@pytest.mark.parametrize(
    ("column", "value", "rule"),
    [
        ("wall_s", "inf", "wall_s must be a finite number >= 0"),
        ("success_rate", "7", "success_rate must be a finite number >= 0 and <= 1"),
        ("success_rate", "nan", "success_rate must be a finite number"),
        ("eval_length", "-inf", "eval_length must be a finite number >= 0"),
        ("train_std", "inf", "train_std must be a finite number"),
        ("timesteps", "-5", "timesteps must be a whole number from 0"),
        ("timesteps", "nan", "timesteps must be a whole number from 0"),
        ("episodes", "0", "episodes must be a whole number from 1"),
        ("seed", "-1", "seed must be a whole number from 0 to 4294967295"),
        ("finished", "maybe", "finished True or False"),
        ("kind", "best", "kind must be periodic or final"),
    ],
)
def test_report_names_a_value_out_of_its_range_in_a_csv(tmp_path, user_error, column, value, rule):
    """Every value report reads is typed and in range: an infinity, a NaN where a number is needed, a rate above 1,
    a negative step count, a seed or kind no collect writes."""
    row = dict(zip(grid.CSV_FIELDS, "T a 0 periodic 1000 2 5.0 1.0 3.0 True 0.5 10 nan 0.001 0.01 1.0".split(), strict=True))
    row[column] = value
    path = tmp_path / "a.csv"
    path.write_text(",".join(grid.CSV_FIELDS) + "\n" + ",".join(row.values()) + "\n")
    message = user_error(["grid", "report", str(path), "--reps", "10", "--threshold", "T=1"])
    assert f"{path}, line 2: " in message and rule in message, message


def test_report_reads_the_csvs_of_the_repository(tmp_path):
    """The rules above refuse no CSV the grids of this repository collected (NaN where a value is unknown)."""
    from test_grid import ROOT

    for path in sorted((ROOT / "docs" / "results").glob("*.csv")):
        if path.read_text().startswith("task,variant,seed,"):
            assert grid.read_csv(str(path)), path


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("variants: {a: {algo: '--trust-pickles'}}\ntasks: {CartPole-v1: {}}", "algo must be an algorithm's name"),
        ("variants: {a: {hyperparams: {note: 2026-12-06}}}\ntasks: {CartPole-v1: {}}", "must be plain data"),
        ("tasks: {CartPole-v1: {env_kwargs: {render_mode: human}}}", "env_kwargs must not hold render_mode"),
        (
            "variants: {a: {hyperparams: {env_kwargs: {render_mode: human}}}}\ntasks: {CartPole-v1: {}}",
            "variant 'a', task 'CartPole-v1': env_kwargs must not hold render_mode",
        ),
        ("tasks: {CartPole-v1: {env_kwargs: \"dict(render_mode='human')\"}}", "env_kwargs must be a mapping"),
    ],
)
def test_a_grid_file_value_that_would_change_how_a_cell_runs_is_refused(tmp_path, text, rule):
    with pytest.raises(ValueError, match=rule):
        grid.load_grid(write_grid(tmp_path, text + "\n"))


def test_a_line_too_long_is_refused_or_skipped_without_holding_it(tmp_path, user_error, monkeypatch):
    """Every text file the grid reads is read line by line within MAX_LINE_CHARACTERS (here lowered to 200 so that
    the test stays small): a long line of a CSV is refused by name, one of train.log skipped."""
    import importlib

    text_files = importlib.import_module("sb3_ppo_ext.zoo.run_text_files")
    monkeypatch.setattr(text_files, "MAX_LINE_CHARACTERS", 200)
    run = evaluations_path(tmp_path / "runs").parent
    log = run.parents[2] / "train.log"
    log.write_text("x" * 1000 + "\n|    approx_kl | 0.5 |\n|    total_timesteps | 1000 |\n------\n")
    steps, values = grid.train_log_values(str(log))
    assert steps.tolist() == [1000] and values["approx_kl"].tolist() == [0.5]
    (run / "progress.csv").write_text("time/total_timesteps,train/approx_kl\n" + "1" * 1000 + ",0.1\n")
    message = collect_error(tmp_path, user_error)
    assert "progress.csv, line 2: longer than 200 characters" in message, message
    (run / "progress.csv").unlink()
    path = tmp_path / "a.csv"
    path.write_text(",".join(grid.CSV_FIELDS) + "\n" + "T" * 1000 + "\n")
    assert f"{path}, line 2: longer than 200 characters" in user_error(["grid", "report", str(path)])

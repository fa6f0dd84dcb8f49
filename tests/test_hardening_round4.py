"""Damaged or edited files and out-of-range options end in one line naming the file or option, never a traceback or a
silently wrong run: grid cells' ``done.json`` / ``final_eval.json``, a model zip's ``update_threads``, a shipped agent's
``agent.json``, a run's monitor files and ``export --opset``."""

from __future__ import annotations

import json
import os
import zipfile

import pytest
from test_untrusted_files import rewrite_agent

from sb3_ppo_ext import PPO, grid
from sb3_ppo_ext.callbacks import ExportPolicyCallback
from sb3_ppo_ext.callbacks.export import check_onnx_opset, newest_onnx_opset
from sb3_ppo_ext.pretrained import load_pretrained, play
from sb3_ppo_ext.validation import MIN_ONNX_OPSET, HyperparameterError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- grid evaluate and failures ----------------------------------------------------------------------------------


def grid_cell(root, done: object | None, final: object | None, *, seed: int = 0):
    """A cell folder ``<root>/T/v/seed_<seed>`` holding the given ``done.json`` and ``final_eval.json`` (left out when
    ``None``; a string is written as it is, anything else as JSON)."""
    folder = root / "T" / "v" / f"seed_{seed}"
    folder.mkdir(parents=True)
    for name, content in ((grid.DONE_FILE, done), (grid.FINAL_EVAL_FILE, final)):
        if content is not None:
            (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def grid_main(argv: list[str], capsys) -> tuple[int, list[str]]:
    """``grid.main(argv)``'s exit status and the lines it printed."""
    status = grid.main(argv)
    return status, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    "done, message",
    [
        ([], "must hold a JSON object, got list"),
        ({"seed": 0}, "task must be str, got None"),
        ({"task": 3}, "task must be str, got 3"),
        ("{", "not JSON"),
        ("\udcff", "not UTF-8 text"),
    ],
)
@pytest.mark.parametrize("command", ["evaluate", "failures"])
def test_grid_evaluate_and_failures_name_a_damaged_done_json_and_go_on(tmp_path, capsys, command, done, message):
    """One damaged cell is reported by name (exit status 1) and the other cells are still read."""
    failed = {"episodes": 5, "failed_episodes": {"1": "time_limit"}}
    folder = grid_cell(tmp_path, None, failed)
    (folder / grid.DONE_FILE).write_bytes(
        done.encode(errors="surrogateescape") if isinstance(done, str) else json.dumps(done).encode()
    )
    for seed in (1, 2):
        grid_cell(tmp_path, {"task": "T-v0"}, failed, seed=seed)
    extra = ["--episodes", "5"] if command == "evaluate" else []
    status, lines = grid_main([command, "--root", str(tmp_path), *extra], capsys)
    assert status == 1
    assert f"FAIL  {folder} ({folder / grid.DONE_FILE}: {message}" in lines[0], lines
    if command == "failures":
        assert lines[1:] == ["T-v0 v: 2 seeds, 2 failed episodes on 1 starts; failed by every seed: [1]; by all but one: []"]
    else:
        assert [line.split()[0] for line in lines[1:]] == ["skip", "skip"]  # evaluated with 5 episodes already


@pytest.mark.parametrize(
    "final, message",
    [
        ({"episodes": 5, "failed_episodes": [1, 2]}, "failed_episodes must be dict, got [1, 2]"),
        ({"episodes": 5, "failed_episodes": {"one": "time_limit"}}, "failed_episodes must map episode indices"),
        ({"episodes": 5, "failed_episodes": {"1": 7}}, "failed_episodes must map episode indices"),
        ([], "must hold a JSON object, got list"),
    ],
)
def test_grid_failures_names_a_damaged_final_eval_json_and_goes_on(tmp_path, capsys, final, message):
    folder = grid_cell(tmp_path, {"task": "T-v0"}, final)
    grid_cell(tmp_path, {"task": "T-v0"}, {"episodes": 5, "failed_episodes": {"2": "crash"}}, seed=1)
    status, lines = grid_main(["failures", "--root", str(tmp_path)], capsys)
    assert status == 1
    assert lines[0].startswith(f"FAIL  {folder} ({folder / grid.FINAL_EVAL_FILE}: {message}"), lines
    assert lines[1].startswith("T-v0 v: 1 seeds, 1 failed episodes")


def test_grid_evaluate_names_a_final_eval_json_without_its_episode_count(tmp_path, capsys):
    folder = grid_cell(tmp_path, {"task": "T-v0"}, {"episodes": [5]})
    status, lines = grid_main(["evaluate", "--root", str(tmp_path), "--episodes", "5"], capsys)
    assert status == 1
    assert lines == [f"FAIL  {folder} ({folder / grid.FINAL_EVAL_FILE}: episodes must be int, got [5])"]


def test_grid_failures_skips_a_cell_being_trained_further(tmp_path):
    """A cell whose ``done.json`` was removed (to train it further) keeps its old ``final_eval.json``: left out."""
    for seed in range(3):
        grid_cell(tmp_path, {"task": "ns/T-v0"}, {"episodes": 5, "failed_episodes": {"3": "time_limit"}}, seed=seed)
    grid_cell(tmp_path, None, {"episodes": 5, "failed_episodes": {"4": "time_limit"}}, seed=3)
    (line,) = grid.shared_failures(str(tmp_path))
    assert line == "ns/T-v0 v: 3 seeds, 3 failed episodes on 1 starts; failed by every seed: [3]; by all but one: []"


# --- update_threads saved in a model zip -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cartpole_zip(tmp_path_factory):
    """An untrained tiny PPO of CartPole-v1, saved."""
    path = tmp_path_factory.mktemp("model") / "model.zip"
    PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [8]}).save(path)
    return path


def zip_with_data(source, destination, **entries) -> str:
    """A copy of the model zip ``source`` whose ``data`` entries are replaced by ``entries`` (as plain JSON)."""
    with zipfile.ZipFile(source) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    data.update(entries)
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(destination, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return str(destination)


@pytest.mark.parametrize("stored", ["abc", [2], -5, 0, True])
def test_a_bad_update_threads_in_a_model_zip_is_refused_naming_the_file(cartpole_zip, tmp_path, user_error, stored):
    model = zip_with_data(cartpole_zip, tmp_path / "tampered.zip", update_threads=stored)
    with pytest.raises(HyperparameterError, match=f"{model}: update_threads must be"):
        PPO.load(model)
    argv = ["train", "--env", "CartPole-v1", "-n", "64", "-f", str(tmp_path / "logs"), "--no-progress", "-i", model]
    line = user_error([*argv, "--eval-freq", "-1", "--verbose", "0", "--num-threads", "1", "--vec-env", "dummy"])
    assert f"{model}: update_threads must be 'auto', None (torch's setting) or an int >= 1, got {stored!r}" in line


@pytest.mark.parametrize("stored", ["auto", None, 2])
def test_a_valid_update_threads_in_a_model_zip_loads(cartpole_zip, tmp_path, stored):
    assert PPO.load(zip_with_data(cartpole_zip, tmp_path / "model.zip", update_threads=stored)).update_threads == stored


def test_an_update_threads_given_to_load_is_named_as_given(cartpole_zip):
    with pytest.raises(HyperparameterError, match="the update_threads given to load: update_threads must be"):
        PPO.load(cartpole_zip, update_threads=-1)


# --- agent.json: the task, its arguments, its wrappers and its keys ----------------------------------------------


def enjoy(folder) -> list[str]:
    return ["enjoy", "--pretrained", "--env", str(folder), "-n", "5", "--no-render"]


def test_an_env_kwarg_the_task_does_not_take_is_named_with_the_nearest(shipped_agent_copy, user_error):
    rewrite_agent(shipped_agent_copy, lambda agent: agent["env_kwargs"].update(gg=9.81))
    line = user_error(enjoy(shipped_agent_copy))
    assert f"{shipped_agent_copy / 'agent.json'}: env_kwargs of Pendulum-v1: no argument 'gg' (did you mean 'g'?)" in line


def test_an_env_id_changed_to_another_task_is_refused_naming_agent_json(shipped_agent_copy, user_error):
    """Pendulum's ``g`` passed to MountainCarContinuous, which does not take it."""
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_id="MountainCarContinuous-v0", env_kwargs={"g": 9.81}))
    line = user_error(enjoy(shipped_agent_copy))
    assert f"{shipped_agent_copy / 'agent.json'}: env_kwargs of MountainCarContinuous-v0: no argument 'g'" in line
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_kwargs={}))
    line = user_error(enjoy(shipped_agent_copy))  # then the spaces differ
    assert f"{shipped_agent_copy / 'agent.json'}: the observation_space of MountainCarContinuous-v0" in line
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_id="Pendulum-v9"))
    line = user_error(enjoy(shipped_agent_copy))
    assert f"{shipped_agent_copy / 'agent.json'}: env_id 'Pendulum-v9' cannot be made here" in line


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"max_episode_step": 200}, "env_wrapper gymnasium.wrappers.TimeLimit: no argument 'max_episode_step' "),
        ({"max_episode_steps": "x"}, "its task 'Pendulum-v1' cannot be built with its env_kwargs {} and env_wrapper"),
    ],
)
def test_a_wrapper_argument_it_does_not_take_is_named(shipped_agent_copy, user_error, arguments, message):
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_wrapper=[{"gymnasium.wrappers.TimeLimit": arguments}]))
    line = user_error(enjoy(shipped_agent_copy))
    assert f"{shipped_agent_copy / 'agent.json'}: {message}" in line


def test_a_wrapper_with_the_arguments_it_takes_still_plays(shipped_agent_copy):
    time_limit = {"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 7}}
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_wrapper=[time_limit]))
    model, env = load_pretrained(str(shipped_agent_copy))
    try:
        assert [episode["length"] for episode in play(model, env, 14)] == [7, 7]
    finally:
        env.close()


def test_an_unknown_agent_json_key_is_refused_naming_the_nearest(shipped_agent_copy, user_error):
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(normalisation=agent.pop("normalization")))
    line = user_error(enjoy(shipped_agent_copy))
    assert f"{shipped_agent_copy / 'agent.json'}: unknown key 'normalisation' (did you mean 'normalization'?)" in line


# --- plot on damaged monitor files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, message",
    [
        ("garbage", "line 1 is not a Monitor header (# and a JSON object with a t_start)"),
        ('{"t_start": 1.0}', "line 1 is not a Monitor header (# and a JSON object with a t_start)"),
        ("#garbage", "line 1 is not a Monitor header (a JSON object with a t_start)"),
        ('#{"t_start": NaN}', "its t_start must be a finite number of seconds, got nan"),
    ],
)
def test_plot_names_a_monitor_file_with_a_damaged_header(tmp_path, user_error, header, message):
    run = tmp_path / "logs" / "ppo_ext" / "CartPole-v1_1"
    run.mkdir(parents=True)
    (run / "0.monitor.csv").write_text(f"{header}\nr,l,t\n10.0,10,1.5\n")
    argv = ["plot", "--env", "CartPole-v1", "--algo", "ppo_ext", "-f", str(tmp_path / "logs")]
    line = user_error([*argv, "-o", str(tmp_path / "curves.png")])
    assert f"{run / '0.monitor.csv'}: {message}" in line


# --- export --opset ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset, message", [("1000", "opset must be <= "), ("-1", f"opset must be >= {MIN_ONNX_OPSET}")])
def test_export_refuses_an_opset_out_of_range_before_loading(user_error, opset, message):
    pytest.importorskip("onnx")
    line = user_error(["export", "--pretrained", "--env", "Pendulum-v1", "--opset", opset, "-o", os.devnull])
    assert f"argument --opset: {message}" in line and f"got {opset}" in line


def test_the_opset_bounds_are_those_of_the_installed_onnx_and_torch(tmp_path):
    onnx = pytest.importorskip("onnx")
    newest = newest_onnx_opset()
    assert newest is not None and MIN_ONNX_OPSET <= newest <= onnx.defs.onnx_opset_version()
    assert check_onnx_opset("opset", newest) == newest
    with pytest.raises(HyperparameterError, match="the newest the installed onnx and torch write"):
        check_onnx_opset("opset", newest + 1)
    with pytest.raises(HyperparameterError, match=f"opset must be <= {newest}"):
        ExportPolicyCallback(str(tmp_path), formats="onnx", opset=newest + 1)


@pytest.mark.parametrize(
    ("header", "last_t", "message"),
    [
        ('{"t_start": NaN}', "1.5", ": its t_start must be a finite number of seconds, got nan"),
        ('{"t_start": 1.0}', "inf", ", episode 2: not a Monitor row of t and l"),
        ('{"t_start": 1.0}', "-2.0", ": the elapsed time t of its last row must be a finite number >= 0, got -2.0"),
    ],
)
def test_a_monitor_file_without_a_finite_clock_is_not_continued(tmp_path, header, last_t, message):
    import gymnasium as gym

    from sb3_ppo_ext.zoo.resume import ContinuedMonitor, ResumeError

    path = tmp_path / "0.monitor.csv"
    path.write_text(f"#{header}\nr,l,t\n10.0,10,1.0\n10.0,10,{last_t}\n")
    with pytest.raises(ResumeError, match=f"{path}{message}"):
        ContinuedMonitor(gym.make("CartPole-v1"), str(tmp_path / "0"))

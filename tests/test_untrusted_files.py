"""Run folders and agents a user downloads name code: no command runs it.

A run's ``config.yml`` can name classes that rl-zoo3 imports and calls (``env_wrapper``, ``vec_env_wrapper``), and an
env id ``module:Env-v0`` (a run's ``args.yml``, an agent's ``agent.json``) makes gymnasium import that module. Every
command that reads a run folder goes through one check (:func:`sb3_ppo_ext.zoo.config.run_files.check_run_folder`); these
tests plant each attack in a real run and try every command on it: each ends in a one-line error naming the setting,
and the marker file the attack would write never appears.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile

import numpy as np
import pytest
import torch as th
import yaml

from sb3_ppo_ext.cli import main
from sb3_ppo_ext.pretrained import load_pretrained, read_agent
from sb3_ppo_ext.safe_loading import read_zip_data
from sb3_ppo_ext.validation import check_env_id
from sb3_ppo_ext.zoo.packing import save_pretrained_from_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENV = "Pendulum-v1"


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """A tiny ``ppo_ext`` run of Pendulum-v1 with a checkpoint (so that ``--resume`` has something to continue)."""
    folder = tmp_path_factory.mktemp("logs")
    th.set_num_threads(1)
    main(
        [
            "train",
            "--env",
            ENV,
            "-n",
            "128",
            "-f",
            str(folder),
            "--seed",
            "0",
            "--eval-freq",
            "-1",
            "--no-progress",
            "--verbose",
            "0",
            "--num-threads",
            "1",
            "--save-freq",
            "64",
            "--hyperparams",
            "n_envs:1",
            "n_steps:64",
            "batch_size:64",
            "n_epochs:1",
            "policy_kwargs:dict(net_arch=[8])",
        ]
    )
    return folder


def planted(clean_run, tmp_path, marker, *, config=None, arguments=None):
    """A copy of the clean run whose ``config.yml`` / ``args.yml`` get the given entries."""
    logs = tmp_path / "logs"
    shutil.copytree(clean_run, logs)
    params = logs / "ppo_ext" / f"{ENV}_1" / ENV
    for name, entries in (("config.yml", config), ("args.yml", arguments)):
        if entries:
            document = yaml.safe_load((params / name).read_text())
            document.update(entries)
            (params / name).write_text(yaml.safe_dump(document))
    return logs


def wrapper_chain(marker) -> dict:
    """rl-zoo3 wraps the env in each listed class in turn: ``hash(env)``, ``str(...)``, then ``timeit.timeit`` runs
    its ``setup`` string as code."""
    return {
        "env_wrapper": [
            "builtins.hash",
            "builtins.str",
            {"timeit.timeit": {"setup": f"open({str(marker)!r}, 'w').close()", "number": 1}},
        ]
    }


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """A module on the path that writes a marker file when imported."""
    marker = tmp_path / "imported"
    (tmp_path / "evil_wrappers.py").write_text(f"open({str(marker)!r}, 'w').close()\n\nclass Wrap:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    sys.modules.pop("evil_wrappers", None)


def commands(logs, tmp_path) -> dict[str, list[str]]:
    run = str(logs / "ppo_ext" / f"{ENV}_1")
    return {
        "enjoy": ["enjoy", "--env", ENV, "-f", str(logs), "-n", "5", "--no-render"],
        "record-video": ["record-video", "--env", ENV, "-f", str(logs), "-n", "5", "-o", str(tmp_path / "video")],
        "export": ["export", "--env", ENV, "-f", str(logs), "-o", str(tmp_path / "policy.onnx")],
        "train --resume": ["train", "--resume", run, "-n", "256", "--no-progress", "--verbose", "0"],
    }


@pytest.mark.parametrize("command", ["enjoy", "record-video", "export", "train --resume"])
def test_a_wrapper_chain_in_config_yml_runs_nowhere(command, clean_run, tmp_path, user_error):
    marker = tmp_path / "pwned"
    logs = planted(clean_run, tmp_path, marker, config=wrapper_chain(marker))
    line = user_error(commands(logs, tmp_path)[command])
    assert "env_wrapper: 'builtins.hash' is not an allow-listed class import path" in line
    assert "config.yml" in line or command == "train --resume"
    assert not marker.exists()


@pytest.mark.parametrize("command", ["enjoy", "record-video", "export", "train --resume"])
def test_a_wrapper_module_in_config_yml_is_never_imported(command, clean_run, tmp_path, evil_module, user_error):
    logs = planted(clean_run, tmp_path, evil_module, config={"vec_env_wrapper": "evil_wrappers.Wrap"})
    line = user_error(commands(logs, tmp_path)[command])
    assert "vec_env_wrapper: 'evil_wrappers.Wrap' is not an allow-listed class import path" in line
    assert not evil_module.exists() and "evil_wrappers" not in sys.modules


def test_packing_a_run_refuses_it_too(clean_run, tmp_path):
    marker = tmp_path / "pwned"
    logs = planted(clean_run, tmp_path, marker, config=wrapper_chain(marker))
    with pytest.raises(ValueError, match=r"env_wrapper: 'builtins\.hash' is not an allow-listed"):
        save_pretrained_from_run(str(logs), str(tmp_path / "agent"))
    assert not marker.exists() and not (tmp_path / "agent").exists()


def test_resume_refuses_a_module_qualified_env_id(clean_run, tmp_path, evil_module, user_error):
    logs = planted(clean_run, tmp_path, evil_module, arguments={"env": f"evil_wrappers:{ENV}"})
    line = user_error(commands(logs, tmp_path)["train --resume"])
    assert "the env id 'evil_wrappers:Pendulum-v1' names the module 'evil_wrappers', which gymnasium would import" in line
    assert not evil_module.exists() and "evil_wrappers" not in sys.modules


def test_the_clean_run_still_plays_and_resumes(clean_run, tmp_path, capsys):
    logs = planted(clean_run, tmp_path, None)
    main(commands(logs, tmp_path)["enjoy"])
    main(commands(logs, tmp_path)["train --resume"])
    assert read_zip_data(str(logs / "ppo_ext" / f"{ENV}_1" / f"{ENV}.zip"))["num_timesteps"] == 256


# --- agents ----------------------------------------------------------------------------------------------------


def test_env_ids_of_registered_or_imported_modules_are_accepted():
    assert check_env_id("sb3_ppo_ext/Humanoid-v0", where="f") == "sb3_ppo_ext/Humanoid-v0"
    assert check_env_id("sb3_ppo_ext.envs:sb3_ppo_ext/Humanoid-v0", where="f")  # ours
    assert check_env_id("gymnasium:CartPole-v1", where="f")  # already imported: importing it runs nothing


@pytest.mark.parametrize("refused", ["not_imported_yet_module:CartPole-v1", ":CartPole-v1", "a:b:CartPole-v1", "", 3, None])
def test_env_ids_that_import_a_module_are_refused(refused):
    with pytest.raises(ValueError, match=r"agent\.json"):
        check_env_id(refused, where="agent.json")


def rewrite_agent(folder, change) -> None:
    path = folder / "agent.json"
    agent = json.loads(path.read_text())
    change(agent)
    path.write_text(json.dumps(agent))


def test_an_agent_naming_a_module_is_refused_before_the_import(shipped_agent_copy, evil_module, user_error):
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(env_id=f"evil_wrappers:{ENV}"))
    with pytest.raises(ValueError, match="names the module 'evil_wrappers'"):
        load_pretrained(str(shipped_agent_copy))
    line = user_error(["enjoy", "--pretrained", "--env", str(shipped_agent_copy), "-n", "5"])
    assert "which gymnasium would import" in line
    assert not evil_module.exists() and "evil_wrappers" not in sys.modules


def normalised(agent) -> dict:
    if agent.get("normalization") is None:
        agent["normalization"] = {"mean": [0.0, 0.0, 0.0], "var": [1.0, 1.0, 1.0], "clip_obs": 10.0, "epsilon": 1e-8}
    return agent["normalization"]


@pytest.mark.parametrize(
    "entry, value, message",
    [
        ("mean", [float("nan"), 0.0, 0.0], "normalization mean holds a non-finite value"),
        ("var", [1.0, float("inf"), 1.0], "normalization var holds a non-finite value"),
        ("var", [1.0, -1.0, 1.0], "normalization var must be >= 0"),
        ("var", [1.0, 1.0], "normalization mean and var differ in length"),
        ("var", "1,1,1", "normalization var must be a list of numbers"),
        ("clip_obs", 0.0, "normalization clip_obs must be a finite number > 0"),
        ("clip_obs", float("nan"), "normalization clip_obs must be a finite number > 0"),
        ("epsilon", -1.0, "normalization epsilon must be a finite number > 0"),
    ],
)
def test_an_agents_statistics_are_checked(shipped_agent_copy, entry, value, message):
    rewrite_agent(shipped_agent_copy, lambda agent: normalised(agent).update({entry: value}))
    with pytest.raises(ValueError, match=message):
        read_agent(str(shipped_agent_copy))


def test_a_fine_agent_still_loads(shipped_agent_copy):
    rewrite_agent(shipped_agent_copy, normalised)
    model, env = load_pretrained(str(shipped_agent_copy))
    action, _ = model.predict(env.reset(), deterministic=True)
    assert np.isfinite(action).all()
    env.close()


# --- weights and options ---------------------------------------------------------------------------------------


def test_a_pickle_inside_policy_pth_is_a_named_error(clean_run, tmp_path):
    import io
    import zipfile

    from sb3_ppo_ext.safe_loading import PickleRefusedError, load_without_pickles

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    payload = io.BytesIO()
    th.save({"weight": Evil()}, payload)
    source = clean_run / "ppo_ext" / f"{ENV}_1" / f"{ENV}.zip"
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(evil, "w") as copy:
        for item in original.infolist():
            copy.writestr(item, payload.getvalue() if item.filename == "policy.pth" else original.read(item.filename))
    with pytest.raises(PickleRefusedError, match=r"evil.zip: a weights file inside \(policy.pth"):
        load_without_pickles(str(evil))
    assert not marker.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--env", ENV, "--fold", "logs"],
        ["plot", "--env", ENV, "--fold", "logs"],
        ["enjoy", "--pretrained", "--env", ENV, "--stoch"],
    ],
)
def test_no_command_takes_an_abbreviated_option(argv, user_error):
    assert "unrecognized arguments: --" in user_error(argv)


# --- a shipped-agent folder: bombs, bad values and damaged files -------------------------------------------------

#: What refusing a bomb may cost: CPU seconds and growth of the process's peak memory.
REFUSAL_SECONDS = 1.0
REFUSAL_BYTES = 300 << 20


def test_a_frame_stack_bomb_in_agent_json_is_refused_by_the_config_bound(shipped_agent_copy, refused_within, user_error):
    rewrite_agent(shipped_agent_copy, lambda agent: agent.update(frame_stack=10**9))
    error, seconds, grown = refused_within(lambda: load_pretrained(str(shipped_agent_copy)))
    assert f"{shipped_agent_copy / 'agent.json'}: frame_stack must be <= 256 (MAX_FRAME_STACK), got 1000000000" in str(error)
    assert seconds < REFUSAL_SECONDS and grown < REFUSAL_BYTES
    line = user_error(["enjoy", "--pretrained", "--env", str(shipped_agent_copy), "-n", "5", "--no-render"])
    assert "frame_stack must be <= 256 (MAX_FRAME_STACK)" in line


def weights_entries(folder) -> dict[str, bytes]:
    from test_safe_loading import zip_entries

    return zip_entries((folder / "policy.npz").read_bytes())


def test_a_policy_npz_bomb_is_refused_before_it_is_inflated(shipped_agent_copy, refused_within):
    from test_safe_loading import GIB, deflated_zeros, zip_with_bomb

    entries = weights_entries(shipped_agent_copy)
    (shipped_agent_copy / "policy.npz").write_bytes(
        zip_with_bomb(entries, "action_net.weight.npy", deflated_zeros(3 * GIB), 3 * GIB)
    )
    error, seconds, grown = refused_within(lambda: load_pretrained(str(shipped_agent_copy)))
    assert "policy.npz: its entry 'action_net.weight.npy' inflates to" in str(error) and "a zip bomb" in str(error)
    assert seconds < REFUSAL_SECONDS and grown < REFUSAL_BYTES


def test_a_policy_npz_header_claiming_gigabytes_is_refused_before_reading(shipped_agent_copy, refused_within):
    from test_safe_loading import npy_header

    entries = dict(weights_entries(shipped_agent_copy), **{"action_net.weight.npy": npy_header((30_000, 30_000)) + bytes(8)})
    with zipfile.ZipFile(shipped_agent_copy / "policy.npz", "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    error, seconds, grown = refused_within(lambda: load_pretrained(str(shipped_agent_copy)))
    assert "policy.npz: its array 'action_net.weight' is float64(30000, 30000), the policy's parameter" in str(error)
    assert seconds < REFUSAL_SECONDS and grown < REFUSAL_BYTES


def rewrite_weights(folder, change) -> None:
    with np.load(folder / "policy.npz") as weights:
        arrays = {name: weights[name] for name in weights.files}
    change(arrays)
    np.savez(folder / "policy.npz", **arrays)


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_weights_with_a_non_finite_value_are_refused_naming_the_tensor(shipped_agent_copy, value, user_error):
    rewrite_weights(shipped_agent_copy, lambda arrays: arrays["action_net.weight"].__setitem__((0, 3), value))
    with pytest.raises(ValueError, match=r"policy.npz: the tensor 'action_net.weight' holds 1 non-finite value"):
        load_pretrained(str(shipped_agent_copy))
    line = user_error(["enjoy", "--pretrained", "--env", str(shipped_agent_copy), "-n", "5", "--no-render"])
    assert "the tensor 'action_net.weight' holds 1 non-finite value" in line


def test_a_model_zip_with_non_finite_weights_is_refused_naming_the_tensor(clean_run, tmp_path):
    import io

    from sb3_ppo_ext.safe_loading import load_without_pickles

    source = clean_run / "ppo_ext" / f"{ENV}_1" / f"{ENV}.zip"
    with zipfile.ZipFile(source) as original:
        state = th.load(io.BytesIO(original.read("policy.pth")), weights_only=True)
        state["action_net.bias"][0] = float("nan")
        payload = io.BytesIO()
        th.save(state, payload)
        with zipfile.ZipFile(tmp_path / "nan.zip", "w") as copy:
            for item in original.infolist():
                copy.writestr(item, payload.getvalue() if item.filename == "policy.pth" else original.read(item.filename))
    with pytest.raises(ValueError, match=r"nan.zip \(policy.pth\): the tensor 'action_net.bias' holds 1 non-finite"):
        load_without_pickles(str(tmp_path / "nan.zip"))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda agent: agent.update(use_sde="yes"), "agent.json: use_sde must be True or False, got 'yes'"),
        (lambda agent: agent.update(frame_stack=-3), "agent.json: frame_stack must be >= 1, got -3"),
        (lambda agent: agent.update(frame_stack="4"), "agent.json: frame_stack must be an integer, got '4'"),
        (
            lambda agent: agent.update(env_wrapper=["sb3_ppo_ext.wrappers.FrameSkip"]),
            r"agent.json: env_wrapper items must be one-key \{class path: keyword arguments\} objects, got "
            "'sb3_ppo_ext.wrappers.FrameSkip'",
        ),
        (
            lambda agent: agent.update(env_wrapper=[{"builtins.print": {}}]),
            "env wrapper 'builtins.print' in .*agent.json is not an allow-listed gymnasium wrapper",
        ),
        (lambda agent: agent.update(env_kwargs=[1]), r"agent.json: env_kwargs must be an object, got \[1\]"),
        (
            lambda agent: agent.update(env_kwargs={"render_mode": "human"}),
            "agent.json: env_kwargs must not hold render_mode",
        ),
        (
            lambda agent: agent["policy_kwargs"].update(activation_fn="Module"),
            "activation_fn 'Module' in .*agent.json is not an allow-listed torch.nn activation",
        ),
        (
            lambda agent: agent["policy_kwargs"].update(ortho_init="no"),
            "agent.json: policy_kwargs ortho_init must be True or False, got 'no'",
        ),
        (
            lambda agent: agent["policy_kwargs"].update(net_arch=[10**6]),
            r"agent.json: policy_kwargs net_arch must be <= 8192 \(MAX_LAYER_WIDTH\)",
        ),
        (
            lambda agent: agent["observation_space"].update(low=-1.0, shape=[10**9]),
            r"the Box space in .*agent.json is malformed .*not its shape \(1000000000,\)",
        ),
    ],
)
def test_bad_values_in_agent_json_are_refused_naming_the_file(shipped_agent_copy, change, message, refused_within):
    rewrite_agent(shipped_agent_copy, change)
    error, seconds, grown = refused_within(lambda: load_pretrained(str(shipped_agent_copy)))
    assert re.search(message, str(error)), error
    assert seconds < REFUSAL_SECONDS and grown < REFUSAL_BYTES


@pytest.mark.parametrize(
    "content, message",
    [
        (lambda text: text[: len(text) // 2], r"agent.json is not valid JSON \(.*\); a truncated or damaged file"),
        (lambda text: "[" * 100_000 + "]" * 100_000, "agent.json nests JSON arrays / objects deeper than"),
        (lambda text: " " * (8 << 20) + text, r"agent.json is larger than 8388608 bytes \(MAX_AGENT_FILE_BYTES\)"),
        (lambda text: "\udcff", "agent.json is not a UTF-8 text file"),
    ],
)
def test_a_damaged_agent_json_is_refused_naming_the_file(shipped_agent_copy, content, message, user_error):
    path = shipped_agent_copy / "agent.json"
    path.write_bytes(content(path.read_text()).encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=message):
        load_pretrained(str(shipped_agent_copy))
    assert re.search(message, user_error(["enjoy", "--pretrained", "--env", str(shipped_agent_copy), "-n", "5"]))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda path: path.write_bytes(path.read_bytes()[:-200]), r"policy.npz is not a readable weights file \(BadZipFile"),
        (lambda path: path.write_bytes(b""), r"policy.npz is not a readable weights file"),
        (
            lambda path: rewrite_weights(path.parent, lambda arrays: arrays.update({"action_net.weight": np.zeros((2, 64))})),
            r"policy.npz: its array 'action_net.weight' is float64\(2, 64\), the policy's parameter is a float array "
            r"of shape \(1, 64\)",
        ),
        (
            lambda path: rewrite_weights(path.parent, lambda arrays: arrays.pop("action_net.bias")),
            r"policy.npz lacks the policy's parameters \['action_net.bias'\]",
        ),
        (
            lambda path: rewrite_weights(path.parent, lambda arrays: arrays.update(extra=np.zeros(3))),
            "policy.npz: its array 'extra' is not a parameter of the policy",
        ),
    ],
)
def test_a_damaged_policy_npz_is_refused_naming_the_file(shipped_agent_copy, damage, message, user_error):
    damage(shipped_agent_copy / "policy.npz")
    with pytest.raises(ValueError, match=message):
        load_pretrained(str(shipped_agent_copy))
    assert re.search(message, user_error(["enjoy", "--pretrained", "--env", str(shipped_agent_copy), "-n", "5"]))


def test_an_agent_is_not_saved_with_a_render_mode(tmp_path):
    from sb3_ppo_ext.ppo import PPO
    from sb3_ppo_ext.pretrained import save_pretrained

    model = PPO("MlpPolicy", ENV, n_steps=64, batch_size=64, policy_kwargs={"net_arch": [8]})
    with pytest.raises(ValueError, match="env_kwargs must not hold render_mode"):
        save_pretrained(model, str(tmp_path / "agent"), env_id=ENV, env_kwargs={"render_mode": "human"})
    assert not (tmp_path / "agent" / "agent.json").exists()


def test_an_agent_too_large_to_hold_or_whose_weights_are_a_device_is_refused_at_once(shipped_agent_copy):
    """A tampered agent within the width and depth bounds but with 8 layers of 8192 for each network (3.5 GB), and
    one whose policy.npz is a link to /dev/zero, are refused before anything is allocated."""
    import time

    rewrite_agent(
        shipped_agent_copy, lambda agent: agent["policy_kwargs"].update(net_arch={"pi": [8192] * 8, "vf": [8192] * 8})
    )
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"agent.json: policy_kwargs net_arch has 939524096 weights .*MAX_HIDDEN_WEIGHTS"):
        load_pretrained(str(shipped_agent_copy))
    rewrite_agent(shipped_agent_copy, lambda agent: agent["policy_kwargs"].update(net_arch={"pi": [64], "vf": [64]}))
    weights = shipped_agent_copy / "policy.npz"
    weights.unlink()
    weights.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=r"policy.npz must be a regular file"):
        load_pretrained(str(shipped_agent_copy))
    assert time.monotonic() - start < 2.0


def test_the_hidden_weights_bound_counts_a_plain_list_for_the_actor_and_the_critic():
    from sb3_ppo_ext.validation import MAX_HIDDEN_WEIGHTS, HyperparameterError, check_net_arch

    check_net_arch({"pi": [8192, 8192], "vf": [256]})  # 2**26 weights: the largest of its kind
    check_net_arch([4096, 4096])  # 2 x 2**24
    with pytest.raises(HyperparameterError, match=f"has {2 * 8192 * 8192} weights .* the limit is {MAX_HIDDEN_WEIGHTS}"):
        check_net_arch([8192, 8192])

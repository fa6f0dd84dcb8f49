"""The ``sb3-ppo-ext`` command on rl-zoo3's machinery: every bundled config trains, runs are watched, recorded,
exported, plotted, continued and searched, and unsafe or misspelt configs are refused."""

from __future__ import annotations

import csv
import glob
import os
import re
import subprocess
import sys
import zipfile

import gymnasium as gym
import numpy as np
import optuna
import pytest
import torch as th
import yaml

import sb3_ppo_ext
from sb3_ppo_ext import PPO
from sb3_ppo_ext.cli import main
from sb3_ppo_ext.zoo import check_block_keys, default_config_path, preprocess_block, valid_keys

BUNDLED_CONFIG = default_config_path()
with open(BUNDLED_CONFIG) as _file:
    CONFIG_KEYS = list(yaml.safe_load(_file))
#: The ``default`` block is exercised through an env id that has no block of its own.
ENV_FOR_KEY = {"default": "Acrobot-v1"}
WALKER = "sb3_ppo_ext/Walker2D-v0"
#: Tiny rollouts so that each config trains in seconds; everything else comes from the bundled block.
TINY = ["--hyperparams", "n_envs:2", "n_steps:128", "batch_size:64", "n_epochs:2"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def train_argv(env_id: str, folder, n_timesteps: int, *extra: str) -> list[str]:
    return [
        "train",
        "--env",
        env_id,
        "-n",
        str(n_timesteps),
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
        *extra,
    ]


def run_folder(folder, env_id: str, run: int = 1) -> str:
    return os.path.join(str(folder), "ppo_ext", f"{env_id.replace('/', '-')}_{run}")


def test_bundled_config_blocks_are_valid():
    with open(BUNDLED_CONFIG) as file:
        config = yaml.safe_load(file)
    assert set(sb3_ppo_ext.envs.ENV_IDS) | {"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "default"} <= set(config)
    for key, block in config.items():
        check_block_keys(block, valid_keys(PPO), where=key)
        preprocess_block(block, where=key)
        assert block["n_timesteps"] > 0


@pytest.mark.parametrize("config_key", CONFIG_KEYS)
def test_every_config_entry_trains(config_key, tmp_path):
    env_id = ENV_FOR_KEY.get(config_key, config_key)
    main(train_argv(env_id, tmp_path, 2048, *TINY))
    run = run_folder(tmp_path, env_id)
    env_name = env_id.replace("/", "-")
    model = PPO.load(os.path.join(run, f"{env_name}.zip"), device="cpu")
    assert model.num_timesteps >= 2048
    with open(os.path.join(run, env_name, "config.yml")) as file:
        saved = yaml.safe_load(file)  # plain YAML: no Python tags
    assert saved["n_envs"] == 2
    assert glob.glob(os.path.join(run, "*.monitor.csv"))


@pytest.fixture(scope="module")
def walker_run(tmp_path_factory):
    """A tiny normalised Walker2D run with evaluations, shared by the tests that use a finished run."""
    folder = tmp_path_factory.mktemp("logs")
    th.set_num_threads(1)
    main(train_argv(WALKER, folder, 512, "--eval-freq", "256", "--eval-episodes", "1", *TINY))
    return folder


def test_run_layout_is_rl_zoo3s(walker_run):
    run = run_folder(walker_run, WALKER)
    for name in (
        "sb3_ppo_ext-Walker2D-v0.zip",
        "best_model.zip",
        "evaluations.npz",
        "sb3_ppo_ext-Walker2D-v0/config.yml",
        "sb3_ppo_ext-Walker2D-v0/args.yml",
        "sb3_ppo_ext-Walker2D-v0/command.txt",
        "sb3_ppo_ext-Walker2D-v0/vecnormalize.pkl",
        "progress.csv",
    ):
        assert os.path.isfile(os.path.join(run, name)), name
    from rl_zoo3.utils import get_trained_models

    assert list(get_trained_models(str(walker_run)).values()) == [("ppo_ext", WALKER)]
    # Every dump of SB3's logger (--verbose 0 here: nothing printed) is a row of progress.csv.
    with open(os.path.join(run, "progress.csv"), newline="") as stream:
        rows = list(csv.DictReader(stream))
    logged = {key for row in rows for key, value in row.items() if value}
    assert {"time/total_timesteps", "rollout/ep_rew_mean", "eval/mean_reward"} <= logged
    assert {"train/std", "train/approx_kl", "train/kl_coef", "train/learning_rate", "train/loss"} <= logged
    assert int(rows[-1]["time/total_timesteps"]) == 512


def test_progress_csv_holds_the_dumps_printed_and_sent_to_tensorboard(tmp_path, capsys):
    """``progress.csv`` is added to SB3's outputs, not put in their place: with ``--verbose 1`` and ``-tb`` the tables
    are printed and the tensorboard events written as before, and each printed table is a row of the CSV whose values
    are the printed ones before rounding."""
    pytest.importorskip("tensorboard")
    argv = train_argv("CartPole-v1", tmp_path, 768, *TINY, "-tb", str(tmp_path / "tb"))
    main([*argv[: argv.index("--verbose") + 1], "1", *argv[argv.index("--verbose") + 2 :]])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|    approx_kl ")]
    with open(os.path.join(run_folder(tmp_path, "CartPole-v1"), "progress.csv"), newline="") as stream:
        rows = [row for row in csv.DictReader(stream) if row["train/approx_kl"]]
    assert len(printed) == len(rows) >= 1
    for line, row in zip(printed, rows, strict=True):
        assert line.split("|")[2].strip() == f"{float(row['train/approx_kl']):.3g}"
    assert glob.glob(str(tmp_path / "tb" / "CartPole-v1" / "*" / "events.out.tfevents.*"))


def test_a_run_records_the_foot_contact_flags_it_trained_with(walker_run):
    # Written out though the command line and config did not give them: enjoy and --resume read these files, and the
    # run keeps its task if a later version changes the default.
    params = os.path.join(run_folder(walker_run, WALKER), "sb3_ppo_ext-Walker2D-v0")
    for name in ("args.yml", "config.yml"):
        with open(os.path.join(params, name)) as file:
            assert yaml.safe_load(file)["env_kwargs"] == {"foot_contacts": "previous"}, name


def test_enjoy_headless(walker_run, capsys, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    main(["enjoy", "--env", WALKER, "-f", str(walker_run), "-n", "300", "--num-threads", "1"])
    output = capsys.readouterr().out
    assert "No display found" in output
    assert "Episode Reward" in output


def test_record_video_headless(walker_run, tmp_path):
    main(["record-video", "--env", WALKER, "-f", str(walker_run), "-n", "20", "-o", str(tmp_path)])
    videos = glob.glob(str(tmp_path / "*.mp4"))
    assert len(videos) == 1 and os.path.getsize(videos[0]) > 1000


def test_export_writes_an_onnx_policy_that_matches_the_model(walker_run, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    output = tmp_path / "walker.onnx"
    main(["export", "--env", WALKER, "-f", str(walker_run), "-o", str(output)])
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    run = run_folder(walker_run, WALKER)
    model = PPO.load(os.path.join(run, "sb3_ppo_ext-Walker2D-v0.zip"), device="cpu")
    stats = VecNormalize.load(
        os.path.join(run, "sb3_ppo_ext-Walker2D-v0", "vecnormalize.pkl"), DummyVecEnv([lambda: gym.make(WALKER)])
    )
    observations = np.stack([model.observation_space.sample() for _ in range(4)]).astype(np.float32)
    expected, _ = model.predict(stats.normalize_obs(observations), deterministic=True)
    session = onnxruntime.InferenceSession(str(output))
    (actions,) = session.run(None, {"obs": observations})
    np.testing.assert_allclose(actions, expected, atol=1e-4)


def test_plot_writes_the_learning_curves(walker_run, tmp_path):
    output = tmp_path / "curves.png"
    main(["plot", "--env", WALKER, "-f", str(walker_run), "-o", str(output), "-w", "2"])
    assert output.stat().st_size > 1000


def test_trained_agent_continues_the_run(walker_run):
    run = run_folder(walker_run, WALKER)
    first = PPO.load(os.path.join(run, "sb3_ppo_ext-Walker2D-v0.zip"), device="cpu")
    main(train_argv(WALKER, walker_run, 256, "--trained-agent", os.path.join(run, "sb3_ppo_ext-Walker2D-v0.zip"), *TINY))
    continued_run = run_folder(walker_run, WALKER, run=2)
    continued = PPO.load(os.path.join(continued_run, "sb3_ppo_ext-Walker2D-v0.zip"), device="cpu")
    # The update counter is saved with the model and only grows: the second run started from the first's model.
    assert continued._n_updates > first._n_updates > 0
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    def count(folder):
        dummy = DummyVecEnv([lambda: gym.make(WALKER)])
        return VecNormalize.load(os.path.join(folder, "sb3_ppo_ext-Walker2D-v0", "vecnormalize.pkl"), dummy).obs_rms.count

    assert count(continued_run) > count(run)  # the normalisation statistics carried over too


@pytest.mark.slow
def test_optimize_two_processes_share_one_journal_study(tmp_path):
    storage = tmp_path / "study.log"
    command = [
        sys.executable,
        "-m",
        "sb3_ppo_ext",
        "optimize",
        "--env",
        "CartPole-v1",
        "-n",
        "256",
        "-f",
        str(tmp_path),
        "--num-threads",
        "1",
        "--storage",
        str(storage),
        "--study-name",
        "shared",
        "--n-trials",
        "2",
        "--n-evaluations",
        "1",
        "--eval-episodes",
        "2",
        "--verbose",
        "0",
        "--hyperparams",
        "n_envs:2",
        "n_steps:64",
        "batch_size:64",
        "n_epochs:1",
        "policy_kwargs:dict(net_arch=[16])",
    ]
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    workers = [
        subprocess.Popen(
            [*command, "--seed", str(seed)], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for seed in (1, 2)
    ]
    outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    study = optuna.load_study(
        study_name="shared", storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(storage)))
    )
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    assert len(trials) == 4  # 2 per process, one study
    assert all("objective" in trial.params and "lr_kl_target" in trial.params for trial in trials)
    # Pinned settings (--hyperparams) are not searched.
    assert not any("n_steps_pow" in trial.params or "net_arch" in trial.params for trial in trials)

    # A trial's settings train through --trial-id (rl-zoo3's converter path), trial 0 included.
    first = study.trials[0]
    main(
        train_argv(
            "CartPole-v1",
            tmp_path / "from_trial",
            128,
            "--storage",
            str(storage),
            "--study-name",
            "shared",
            "--trial-id",
            "0",
            *TINY,
        )
    )
    with open(os.path.join(run_folder(tmp_path / "from_trial", "CartPole-v1"), "CartPole-v1", "config.yml")) as file:
        saved = yaml.safe_load(file)
    assert saved["objective"] == first.params["objective"]
    assert saved["lr_kl_target"] == first.params["lr_kl_target"]


MALICIOUS_BLOCKS = {
    "policy_kwargs": ("policy_kwargs: \"__import__('os').system('touch {marker}')\"", "__import__('os').system"),
    "normalize": ("normalize: \"exec('open(\\\\'{marker}\\\\', \\\\'w\\\\')')\"", "exec("),
    "callback": ("callback:\n    - os.system:\n        command: 'touch {marker}'", "'os.system' is not an allow-listed"),
    "env_wrapper": ("env_wrapper: subprocess.getoutput", "'subprocess.getoutput' is not an allow-listed"),
}


@pytest.mark.parametrize("key", list(MALICIOUS_BLOCKS))
def test_malicious_config_values_are_refused(key, tmp_path, user_error):
    marker = tmp_path / "pwned"
    line, message = MALICIOUS_BLOCKS[key]
    config = tmp_path / "evil.yml"
    config.write_text(f"CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 1000\n  {line.format(marker=marker)}\n")
    assert message in user_error(train_argv("CartPole-v1", tmp_path, 128, "-conf", str(config)))
    assert not marker.exists()


def test_allow_listed_wrappers_and_callbacks_work_from_a_config(tmp_path):
    config = tmp_path / "custom.yml"
    checkpoints = tmp_path / "checkpoints"
    config.write_text(f"""
CartPole-v1:
  policy: 'MlpPolicy'
  n_timesteps: 1000
  n_envs: 2
  n_steps: 64
  batch_size: 64
  n_epochs: 1
  normalize: "dict(norm_obs=True, norm_reward=False)"
  policy_kwargs: "dict(net_arch=[16], activation_fn=th.nn.Tanh, optimizer_class=th.optim.AdamW)"
  env_wrapper:
    - sb3_ppo_ext.wrappers.FrameSkip:
        skip: 2
  callback:
    - sb3_ppo_ext.callbacks.RotatingCheckpointCallback:
        save_freq: 64
        save_path: {checkpoints}
        keep_last: 2
""")
    main(train_argv("CartPole-v1", tmp_path, 512, "-conf", str(config)))
    run = run_folder(tmp_path, "CartPole-v1")
    model = PPO.load(os.path.join(run, "CartPole-v1.zip"), device="cpu")
    assert isinstance(model.policy.optimizer, th.optim.AdamW)
    assert len(glob.glob(str(checkpoints / "rl_model_*_steps.zip"))) == 2
    # rl-zoo3 puts the Monitor inside env_wrapper, so it counts raw env steps: about 2 per agent step with a skip of 2
    # (without the wrapper the finished episodes would hold at most model.num_timesteps steps).
    raw_steps = 0
    for path in glob.glob(os.path.join(run, "*.monitor.csv")):
        with open(path) as file:
            raw_steps += sum(int(line.split(",")[1]) for line in file.readlines()[2:])
    assert raw_steps > 1.5 * model.num_timesteps
    with open(os.path.join(run, "CartPole-v1", "config.yml")) as file:
        assert yaml.safe_load(file)["normalize"] == {"norm_obs": True, "norm_reward": False}


def test_video_callback_of_the_trained_env_gets_the_config_env_wrapper(tmp_path):
    imageio = pytest.importorskip("imageio")
    config = tmp_path / "wrapped.yml"
    videos = tmp_path / "videos"
    config.write_text(f"""
Pendulum-v1:
  policy: 'MlpPolicy'
  n_timesteps: 64
  n_steps: 64
  batch_size: 64
  n_epochs: 1
  policy_kwargs: "dict(net_arch=[16])"
  env_wrapper:
    - gymnasium.wrappers.TimeLimit:
        max_episode_steps: 4
  callback:
    - sb3_ppo_ext.callbacks.VideoRecorderCallback:
        env: Pendulum-v1
        video_freq: 1000
        video_folder: {videos}
        max_steps: 100
        gif: true
        mp4: false
""")
    main(train_argv("Pendulum-v1", tmp_path, 64, "-conf", str(config)))
    (gif,) = glob.glob(str(videos / "*.gif"))
    # The video env went through the config's TimeLimit(4): reset frame + 4 steps (Pendulum's own limit is 200).
    assert imageio.v3.imread(gif, index=None).shape[0] == 5


def test_a_config_number_written_without_a_dot_trains_as_that_number(tmp_path):
    """``learning_rate: 1e-3`` is a string to PyYAML (YAML 1.1); the run trains with, and saves, the number."""
    config = tmp_path / "numbers.yml"
    config.write_text(
        "CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 64\n  n_envs: 1\n  n_steps: 64\n"
        "  batch_size: 64\n  n_epochs: 1\n  learning_rate: 1e-3\n  ent_coef: 1e-2\n"
        "  policy_kwargs: 'dict(net_arch=[8])'\n"
    )
    main(train_argv("CartPole-v1", tmp_path, 64, "-conf", str(config)))
    folder = run_folder(tmp_path, "CartPole-v1")
    with open(os.path.join(folder, "CartPole-v1", "config.yml")) as file:
        saved = dict(yaml.safe_load(file))
    assert saved["learning_rate"] == 1e-3 and saved["ent_coef"] == 1e-2
    model = PPO.load(os.path.join(folder, "CartPole-v1.zip"))
    assert model.lr_schedule(1.0) == 1e-3 and model.ent_coef == 1e-2


def test_misspelt_config_key_names_the_nearest_valid_key(tmp_path, user_error):
    config = tmp_path / "typo.yml"
    config.write_text("CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 1000\n  lr_kl_traget: 0.01\n")
    line = user_error(train_argv("CartPole-v1", tmp_path, 128, "-conf", str(config)))
    assert re.search("unknown key 'lr_kl_traget'.*did you mean 'lr_kl_target'", line)


def test_a_block_is_printed_only_once_it_is_checked(tmp_path, capsys):
    # rl-zoo3 prints the block it reads; printed before the checks, aliases of a long string print as gigabytes.
    config = tmp_path / "c.yml"
    config.write_text(
        "CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 64\n  env_kwargs: {note: '"
        + "z" * 5000
        + "'}\n  lr_kl_traget: 0.01\n"
    )
    with pytest.raises(SystemExit):
        main(train_argv("CartPole-v1", tmp_path, 64, "-conf", str(config)))
    captured = capsys.readouterr()
    assert "unknown key 'lr_kl_traget'" in captured.err and "zzzzz" not in captured.out
    config.write_text("CartPole-v1:\n  policy: 'MlpPolicy'\n  n_timesteps: 64\n  lr_kl_target: 0.01\n")
    main(train_argv("CartPole-v1", tmp_path, 64, "-conf", str(config), *TINY))
    printed = capsys.readouterr().out.partition("Default hyperparameters for environment")[2]
    assert "lr_kl_target" in printed and "n_timesteps" in printed


def test_python_config_files_are_refused(tmp_path, user_error):
    config = tmp_path / "hyperparams.py"
    config.write_text("hyperparams = {}\n")
    assert "conf_file must be a YAML file" in user_error(train_argv("CartPole-v1", tmp_path, 128, "-conf", str(config)))


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("train", "--hyperparams"),
        ("train", "--env-kwargs"),
        ("optimize", "--hyperparams"),
        ("enjoy", "--env-kwargs"),
        ("record-video", "--env-kwargs"),
    ],
)
def test_command_line_values_are_parsed_safely(command, option, tmp_path, capsys):
    marker = tmp_path / "pwned"
    with pytest.raises(SystemExit):
        main(
            [
                command,
                "--env",
                "CartPole-v1",
                "--algo",
                "ppo_ext",
                "-f",
                str(tmp_path),
                option,
                f"x:__import__('os').system('touch {marker}')",
            ]
        )
    assert "__import__('os').system" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize(
    "config_line",
    [
        "normalize: \"__import__('os').system('touch {marker}')\"",
        "normalize: !!python/object/apply:os.system ['touch {marker}']",
    ],
)
@pytest.mark.parametrize("command", ["enjoy", "record-video"])
def test_run_files_that_rl_zoo3_would_evaluate_are_refused(command, config_line, tmp_path, user_error):
    marker = tmp_path / "pwned"
    run = tmp_path / "ppo_ext" / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    (run / "CartPole-v1.zip").write_bytes(b"")
    (run / "CartPole-v1" / "config.yml").write_text(config_line.format(marker=marker) + "\n")
    line = user_error([command, "--env", "CartPole-v1", "-f", str(tmp_path), "--no-render"])
    assert re.search(r"is not plain YAML|normalize in .*config.yml: .*__import__", line)
    assert not marker.exists()


def test_misspelt_hyperparams_override_is_refused(tmp_path, user_error):
    line = user_error(train_argv("CartPole-v1", tmp_path, 128, "--hyperparams", "n_step:64"))
    assert re.search("unknown key 'n_step'.*did you mean 'n_steps'", line)


def test_train_defaults_come_first_so_user_options_win():
    from sb3_ppo_ext.zoo.train_command import _zoo_train_argv

    argv = _zoo_train_argv(["--env", "CartPole-v1"], optimize=False)
    assert argv == ["--algo", "ppo_ext", "--conf-file", BUNDLED_CONFIG, "--progress", "--env", "CartPole-v1"]
    argv = _zoo_train_argv(["--env", "CartPole-v1", "--algo", "ppo", "--no-progress"], optimize=False)
    # rl-zoo3's own ppo.yml; --no-progress, after --progress, turns the bar off
    assert argv == ["--algo", "ppo_ext", "--progress", "--env", "CartPole-v1", "--algo", "ppo", "--no-progress"]
    argv = _zoo_train_argv(["-conf", "mine.yml"], optimize=True)
    assert argv == ["--algo", "ppo_ext", "--optimize-hyperparameters", "--no-optim-plots", "-conf", "mine.yml"]


def test_unknown_command_suggests_the_nearest(user_error, capsys):
    assert "did you mean 'record-video'" in user_error(["record_video"])
    main([])
    assert "optimize" in capsys.readouterr().out


def test_sb3_algorithms_stay_available(tmp_path):
    """--algo ppo uses SB3's PPO with rl-zoo3's own config; our safety checks apply to it too."""
    main(
        train_argv(
            "CartPole-v1",
            tmp_path,
            256,
            "--algo",
            "ppo",
            "--hyperparams",
            "n_envs:1",
            "n_steps:128",
            "batch_size:64",
            "n_epochs:1",
        )
    )
    archive = os.path.join(tmp_path, "ppo", "CartPole-v1_1", "CartPole-v1.zip")
    with zipfile.ZipFile(archive) as zipped:
        assert "policy.pth" in zipped.namelist()
    from stable_baselines3 import PPO as SB3PPO

    assert type(SB3PPO.load(archive, device="cpu")) is SB3PPO


def _statistics_count(path: str) -> float:
    import pickle

    with open(path, "rb") as handle:
        return float(pickle.load(handle).obs_rms.count)


PENDULUM_NORMALIZED = ("--hyperparams", "normalize:True", "n_envs:2", "n_steps:256", "batch_size:64")


def test_save_freq_checkpoints_carry_their_statistics_and_resume_with_them(tmp_path):
    main(train_argv("Pendulum-v1", tmp_path, 2048, "--save-freq", "1024", *PENDULUM_NORMALIZED))
    run = run_folder(tmp_path, "Pendulum-v1")
    checkpoints = sorted(os.path.basename(path) for path in glob.glob(os.path.join(run, "rl_model_*")))
    assert checkpoints == [
        "rl_model_1024_steps.zip",
        "rl_model_vecnormalize_1024_steps.npz",
        "rl_model_vecnormalize_1024_steps.pkl",
    ]  # the statistics as a pickle and as plain data
    saved = _statistics_count(os.path.join(run, "rl_model_vecnormalize_1024_steps.pkl"))
    assert saved > 1000  # the statistics at the checkpoint, not the final ones (2048 steps)
    main(train_argv("Pendulum-v1", tmp_path, 512, "-i", os.path.join(run, "rl_model_1024_steps.zip"), *PENDULUM_NORMALIZED))
    resumed = _statistics_count(os.path.join(run_folder(tmp_path, "Pendulum-v1", run=2), "Pendulum-v1", "vecnormalize.pkl"))
    assert resumed == pytest.approx(saved + 512, abs=2)  # continued from the checkpoint's statistics


def test_resuming_a_normalised_run_without_statistics_warns(tmp_path):
    main(train_argv("Pendulum-v1", tmp_path, 512, *PENDULUM_NORMALIZED))
    model = os.path.join(str(tmp_path), "lonely.zip")
    os.replace(os.path.join(run_folder(tmp_path, "Pendulum-v1"), "Pendulum-v1.zip"), model)
    with pytest.warns(UserWarning, match="NEW VecNormalize statistics"):
        main(train_argv("Pendulum-v1", tmp_path, 256, "-i", model, *PENDULUM_NORMALIZED))

"""``train --vec-env``: the ``shared`` choice (SharedMemoryVecEnv), each task's preferred VecEnv when none is given,
the fallback to DummyVecEnv of a preferred SharedMemoryVecEnv that cannot start, the evaluation envs on DummyVecEnv,
and a resumed run's monitor files continued by envs built in worker processes."""

from __future__ import annotations

import glob
import multiprocessing as mp
import os
from argparse import Namespace

import gymnasium as gym
import pytest
import yaml
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from sb3_ppo_ext.cli import main
from sb3_ppo_ext.vec_env.shared_memory_vec_env import EnvWorkerError, SharedMemoryVecEnv
from sb3_ppo_ext.zoo import vec_env_choice
from sb3_ppo_ext.zoo.experiment import SafeExperimentManager
from sb3_ppo_ext.zoo.registration import default_config_path, register_algorithm
from sb3_ppo_ext.zoo.vec_env_choice import PREFERRED_VEC_ENVS, preferred_vec_env, shared_memory_vec_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HUMANOID = "sb3_ppo_ext/Humanoid-v0"
#: A cheap env that the tests make prefer ``shared`` (``monkeypatch``), so that a run starts in seconds.
ENV = "Pendulum-v1"
TINY = ["--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1"]


@pytest.fixture(scope="module", autouse=True)
def forkserver_with_imports_done():
    """Have the forkserver import SB3 and the VecEnv once, so that each worker is a fork of it rather than a fresh
    interpreter importing torch (no effect if this process's forkserver is running already)."""
    mp.get_context("forkserver").set_forkserver_preload(
        ["sb3_ppo_ext.vec_env.shared_memory_vec_env", "stable_baselines3.common.env_util"]
    )
    yield


@pytest.fixture
def env_prefers_shared(monkeypatch):
    monkeypatch.setitem(PREFERRED_VEC_ENVS, ENV, "shared")


class UnstartableSharedMemoryVecEnv(SharedMemoryVecEnv):
    """Fails to start as SharedMemoryVecEnv does on a machine without ``/dev/shm`` (same signature, so that
    ``--vec-env-kwargs`` are checked against the real one)."""

    def __init__(
        self, env_fns, n_workers=None, start_method=None, timeout_s=600.0, start_timeout_s=300.0, step_in_driver=True
    ):
        raise OSError(38, "Function not implemented", "/dev/shm")


@pytest.fixture
def shared_memory_unavailable(monkeypatch):
    monkeypatch.setattr(vec_env_choice, "SharedMemoryVecEnv", UnstartableSharedMemoryVecEnv)


def manager(env_id: str, vec_env: str | None, **options) -> SafeExperimentManager:
    """The manager ``train`` builds for ``env_id`` and ``--vec-env`` (``None``: not given); builds no env."""
    register_algorithm()
    args = Namespace(vec_env=vec_env, vec_env_kwargs=None, ray_address=None, **options)
    return SafeExperimentManager(args, "ppo_ext", env_id, "unused-log-folder", vec_env_type=vec_env)


def train_argv(folder, *extra: str, env_id: str = ENV, n_timesteps: int = 256) -> list[str]:
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
        "128",
        "--eval-episodes",
        "1",
        "--no-progress",
        "--verbose",
        "0",
        "--num-threads",
        "1",
        *TINY,
        *extra,
    ]


def saved_arguments(folder, env_id: str = ENV) -> dict:
    (path,) = glob.glob(os.path.join(str(folder), "ppo_ext", "*", "*", "args.yml"))
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def cartpole_fns(n_envs: int):
    return [lambda: gym.make("CartPole-v1") for _ in range(n_envs)]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the choice and the preferred VecEnvs --------------------------------------------------------------------------------


def test_shared_is_a_choice_of_vec_env(tmp_path, user_error):
    line = user_error(["train", "--env", ENV, "-f", str(tmp_path), "--vec-env", "shm"])
    assert "invalid choice: 'shm'" in line and "'shared'" in line


def test_the_humanoid_and_rocket_tasks_prefer_shared_the_others_dummy():
    with open(default_config_path(), encoding="utf-8") as stream:
        blocks = yaml.safe_load(stream)
    preferring_shared = {env_id for env_id in blocks if preferred_vec_env(env_id) == "shared"}
    assert preferring_shared == {
        "sb3_ppo_ext/Humanoid-v0",
        "sb3_ppo_ext/HumanoidFlagrun-v0",
        "sb3_ppo_ext/HumanoidFlagrunHarder-v0",
        "sb3_ppo_ext/RocketLander-v0",
        "sb3_ppo_ext/RocketLanderDiscrete-v0",
        "sb3_ppo_ext/Walker2D-v0",
    }
    assert all(blocks[env_id]["n_envs"] >= 8 for env_id in preferring_shared)
    assert preferred_vec_env("sb3_ppo_ext/Walker2D-v0") == "shared"
    assert preferred_vec_env("CartPole-v1") == preferred_vec_env("Pendulum-v1") == "dummy"


def test_without_vec_env_a_humanoid_run_trains_on_shared_memory_and_evaluates_in_the_driver():
    preferred = manager(HUMANOID, None)
    assert (preferred.vec_env_type, preferred.args.vec_env) == ("shared", "shared")
    assert preferred.vec_env_class is SharedMemoryVecEnv
    assert preferred.vec_env_falls_back
    assert preferred.vec_env_builder(64, eval_env=False) == (preferred.shared_memory_vec_env_or_dummy, {})
    # evaluation envs and a single env: a worker process would only add a pipe round trip per step
    assert preferred.vec_env_builder(1, eval_env=True) == (DummyVecEnv, {})
    assert preferred.vec_env_builder(4, eval_env=True) == (DummyVecEnv, {})
    assert preferred.vec_env_builder(1, eval_env=False) == (DummyVecEnv, {})


def test_a_given_vec_env_overrides_the_preferred_one_and_does_not_fall_back():
    dummy = manager(HUMANOID, "dummy")
    assert (dummy.vec_env_type, dummy.args.vec_env) == ("dummy", "dummy")
    assert dummy.vec_env_builder(64, eval_env=False) == (DummyVecEnv, {})
    chosen = manager(HUMANOID, "shared")
    assert chosen.vec_env_type == "shared" and not chosen.vec_env_falls_back
    assert chosen.vec_env_builder(64, eval_env=False) == (shared_memory_vec_env, {})  # SharedMemoryVecEnv's builder
    # the shared choice is any task's
    assert manager("CartPole-v1", "shared").vec_env_builder(8, eval_env=False) == (shared_memory_vec_env, {})
    assert manager("CartPole-v1", None).vec_env_type == "dummy"


def test_vec_env_kwargs_are_those_of_the_preferred_vec_env(tmp_path, user_error):
    register_algorithm()
    args = Namespace(vec_env=None, vec_env_kwargs={"n_workers": 2}, ray_address=None)
    preferred = SafeExperimentManager(args, "ppo_ext", HUMANOID, "unused", vec_env_type=None)
    assert preferred.vec_env_builder(8, eval_env=False)[1] == {"n_workers": 2}
    assert preferred.vec_env_builder(8, eval_env=True) == (DummyVecEnv, {})

    line = user_error(["train", "--env", HUMANOID, "-f", str(tmp_path), "--vec-env-kwargs", "n_worker:2"])
    refusal = (
        "SharedMemoryVecEnv takes no n_worker (it takes n_workers, start_method, start_timeout_s, step_in_driver, timeout_s)"
    )
    assert refusal in line and f"{HUMANOID} trains on --vec-env shared when --vec-env is not given" in line
    line = user_error(
        ["train", "--env", HUMANOID, "-f", str(tmp_path), "--vec-env", "shared", "--vec-env-kwargs", "n_worker:2"]
    )
    assert line.endswith(refusal)
    line = user_error(["train", "--env", "CartPole-v1", "-f", str(tmp_path), "--vec-env-kwargs", "n_workers:2"])
    assert "DummyVecEnv takes no n_workers" in line and "CartPole-v1 trains on --vec-env dummy" in line
    line = user_error(["train", "--env", HUMANOID, "-f", str(tmp_path), "--ray-address", "auto"])
    assert "--ray-address is for --vec-env ray, not --vec-env shared" in line
    assert not os.path.exists(tmp_path / "ppo_ext")


# -- the fallback ------------------------------------------------------------------------------------------------------


def test_a_preferred_shared_memory_vec_env_that_cannot_start_gives_way_to_dummy_vec_env(shared_memory_unavailable, capsys):
    preferred = manager(HUMANOID, None)
    vec_env = preferred.shared_memory_vec_env_or_dummy(cartpole_fns(2), n_workers=2)
    try:
        assert type(vec_env) is DummyVecEnv and vec_env.num_envs == 2
    finally:
        vec_env.close()
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        "SharedMemoryVecEnv could not start (OSError: [Errno 38] Function not implemented: '/dev/shm'); the envs step "
        "in this process on DummyVecEnv, --vec-env-kwargs n_workers ignored (--vec-env chooses the VecEnv)"
    )
    assert preferred.vec_env_builder(8, eval_env=False) == (DummyVecEnv, {})  # not tried again


def test_an_env_that_fails_to_build_is_an_error_not_a_fallback(monkeypatch):
    def env_raises(env_fns, **kwargs):
        raise EnvWorkerError(0, 123, [0, 1], 1, "raised while being built")

    monkeypatch.setattr(vec_env_choice, "SharedMemoryVecEnv", env_raises)
    preferred = manager(HUMANOID, None)
    with pytest.raises(EnvWorkerError, match="env 1 in worker 0"):
        preferred.shared_memory_vec_env_or_dummy(cartpole_fns(2))
    assert preferred.shared_memory_failure is None


def test_train_falls_back_to_dummy_vec_env_and_records_it(tmp_path, env_prefers_shared, shared_memory_unavailable, capsys):
    main(train_argv(tmp_path, "--vec-env-kwargs", "n_workers:2"))
    out = capsys.readouterr().out
    assert out.count("SharedMemoryVecEnv could not start (OSError: [Errno 38]") == 1
    saved = saved_arguments(tmp_path)
    assert (saved["vec_env"], saved["vec_env_kwargs"]) == ("dummy", None)  # what the training envs stepped on
    (model,) = glob.glob(os.path.join(str(tmp_path), "ppo_ext", "*", f"{ENV}.zip"))
    # the run resumes on what it recorded (DummyVecEnv would refuse n_workers)
    main(["train", "--resume", os.path.dirname(model), "-n", "512", "--no-progress", "--verbose", "0"])
    assert "SharedMemoryVecEnv" not in capsys.readouterr().out


def test_a_given_shared_vec_env_that_cannot_start_is_an_error(tmp_path, shared_memory_unavailable, user_error):
    line = user_error(train_argv(tmp_path, "--vec-env", "shared"))
    assert line.endswith("[Errno 38] Function not implemented: '/dev/shm'")
    assert glob.glob(os.path.join(str(tmp_path), "ppo_ext", "*")) == []  # the unstarted run folder is removed


def test_a_given_dummy_vec_env_does_not_try_shared_memory(tmp_path, env_prefers_shared, shared_memory_unavailable, capsys):
    main(train_argv(tmp_path, "--vec-env", "dummy"))
    assert "SharedMemoryVecEnv" not in capsys.readouterr().out
    assert saved_arguments(tmp_path)["vec_env"] == "dummy"


# -- a run on SharedMemoryVecEnv, stopped and resumed --------------------------------------------------------------------


def monitor_files(run: str) -> dict[str, list[str]]:
    files = {}
    for path in sorted(glob.glob(os.path.join(run, "*.monitor.csv"))):
        with open(path, encoding="utf-8") as stream:
            files[os.path.basename(path)] = stream.read().splitlines()
    return files


@pytest.fixture
def built_envs(monkeypatch) -> list[tuple[bool, VecEnv]]:
    """``(eval_env, the built VecEnv without its wrappers)`` for each env the runs of the test build, in order."""
    built: list[tuple[bool, VecEnv]] = []
    create_envs = SafeExperimentManager.create_envs

    def recording(self, n_envs, eval_env=False, no_log=False):
        env = create_envs(self, n_envs, eval_env=eval_env, no_log=no_log)
        built.append((eval_env, env.unwrapped))
        return env

    monkeypatch.setattr(SafeExperimentManager, "create_envs", recording)
    return built


def test_a_run_on_shared_memory_resumes_with_its_monitor_files_continued(tmp_path, env_prefers_shared, built_envs, recwarn):
    """The training envs step in worker processes, the evaluation env in the driver (without SB3's warning that the
    two differ); the workers end with the run; resumed, the envs the workers build continue the monitor files (their
    first rows and header kept)."""
    built = built_envs
    main(train_argv(tmp_path, "--save-freq", "256", n_timesteps=512))
    (run,) = glob.glob(os.path.join(str(tmp_path), "ppo_ext", f"{ENV}_*"))
    assert [(eval_env, type(env)) for eval_env, env in built] == [(True, DummyVecEnv), (False, SharedMemoryVecEnv)]
    workers = built[1][1].worker_pids  # with the driver stepping one of the two envs: one worker
    assert len(workers) == len(built[1][1].blocks) >= 1 and all(gone(pid) for pid in workers)
    assert saved_arguments(tmp_path)["vec_env"] == "shared"
    before = monitor_files(run)
    assert len(before) == 2 and all(len(lines) >= 3 for lines in before.values())  # header, columns, an episode each
    os.unlink(os.path.join(run, f"{ENV}.zip"))  # stopped after its checkpoint at 512 steps

    built.clear()
    main(["train", "--resume", run, "-n", "1024", "--no-progress", "--verbose", "0"])
    assert [type(env) for eval_env, env in built if not eval_env] == [SharedMemoryVecEnv]
    after = monitor_files(run)
    for name, lines in before.items():
        assert after[name][: len(lines)] == lines, name  # continued, not started again
        assert len(after[name]) > len(lines), name
    assert not [warning for warning in recwarn if "not of the same type" in str(warning.message)]


# -- the evaluation env plays the task the policy trains on ------------------------------------------------------------


def test_the_evaluation_env_gets_the_config_env_kwargs_unless_told_otherwise(tmp_path, built_envs):
    """rl-zoo3 binds the evaluation env's keyword arguments before it reads the config block, so a block's (or
    ``--hyperparams``') ``env_kwargs`` reached the training envs only; ``--eval-env-kwargs`` still overrides them."""

    def gravities() -> list[tuple[bool, list[float]]]:
        return sorted((eval_env, env.get_attr("g")) for eval_env, env in built_envs)

    gravity = ["--vec-env", "dummy", "--hyperparams", *TINY[1:], "env_kwargs:{'g': 5.0}"]
    main(train_argv(tmp_path / "config", *gravity, n_timesteps=128))
    assert gravities() == [(False, [5.0, 5.0]), (True, [5.0])]

    built_envs.clear()
    main(train_argv(tmp_path / "told", *gravity, "--eval-env-kwargs", "g:7.0", n_timesteps=128))
    assert gravities() == [(False, [5.0, 5.0]), (True, [7.0])]

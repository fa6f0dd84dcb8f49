"""SharedMemoryVecEnv: its pure pieces; the VecEnv contract checked against SB3's DummyVecEnv step for step (and after
same-seed PPO training); faults (an env raising, a worker killed or hung, an env that cannot be built); clean-up of
processes and shared memory.

The envs are built without ``Monitor`` where results are compared: its ``episode`` info holds wall-clock times.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

import sb3_ppo_ext.envs  # noqa: F401  (registers the sb3_ppo_ext/ ids)
from sb3_ppo_ext import PPO
from sb3_ppo_ext.vec_env.shared_memory_vec_env import (
    SEGMENT_PREFIX,
    EnvWorkerError,
    SharedMemoryVecEnv,
    plan_segment,
    split_evenly,
)


@pytest.fixture(scope="module", autouse=True)
def forkserver_with_imports_done():
    """Have the forkserver import the package, pybullet's envs and this module once, so that each worker is a fork
    of it rather than a fresh interpreter importing torch (seconds each on a loaded machine). No effect if the
    forkserver of this process is running already (then workers import as usual)."""
    mp.get_context("forkserver").set_forkserver_preload(
        ["__main__", "sb3_ppo_ext.vec_env.shared_memory_vec_env", "sb3_ppo_ext.envs.walker2d", __name__]
    )
    yield


def env_fns(env_id: str, n_envs: int, **kwargs) -> list[Callable[[], gym.Env]]:
    return [lambda: gym.make(env_id, **kwargs) for _ in range(n_envs)]


def shared(fns: list[Callable[[], gym.Env]], step_in_driver: bool = False, **kwargs) -> SharedMemoryVecEnv:
    """Two workers, or with ``step_in_driver`` the driver and up to two workers (one block each at most 3 envs)."""
    n_workers = min(2, len(fns) - 1) if step_in_driver else 2
    return SharedMemoryVecEnv(fns, **{"n_workers": n_workers, "step_in_driver": step_in_driver, **kwargs})


@pytest.fixture(params=[False, True], ids=["workers_only", "step_in_driver"])
def step_in_driver(request) -> bool:
    """Whether the driver steps the last block of envs itself (the contract is the same either way)."""
    return request.param


def segments() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith(SEGMENT_PREFIX)} if os.path.isdir("/dev/shm") else set()


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (and been reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def assert_infos_equal(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for got_info, want_info in zip(got, want, strict=True):
        assert list(got_info) == list(want_info)
        np.testing.assert_equal(got_info, want_info)


def assert_same_step(step, expected) -> None:
    for got, want in zip(step[:3], expected[:3], strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    assert_infos_equal(step[3], expected[3])


# -- pure pieces -------------------------------------------------------------------------------------------------------


def test_split_evenly_gives_contiguous_blocks_larger_first():
    assert split_evenly(5, 2) == [range(3), range(3, 5)]
    assert split_evenly(64, 2) == [range(32), range(32, 64)]
    assert split_evenly(3, 3) == [range(1), range(1, 2), range(2, 3)]


def test_plan_segment_aligns_every_array():
    arrays, size = plan_segment(
        [("a", (3, 5), np.dtype(np.float32)), ("b", (3,), np.dtype(bool)), ("c", (3, 2), np.dtype(np.float64))], alignment=64
    )
    assert [array.offset for array in arrays] == [0, 64, 128]
    assert size == 128 + 48
    assert plan_segment([("empty", (0,), np.dtype(np.float32))])[1] == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_workers": 0}, "n_workers"),
        ({"n_workers": 4}, "n_workers"),
        ({"start_method": "teleport"}, "start_method"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"start_timeout_s": -1}, "start_timeout_s"),
        ({"n_workers": 3, "step_in_driver": True}, r"from 1 to 2 \(the 3 envs less one for the driver\)"),
        ({"step_in_driver": "yes"}, "step_in_driver"),
    ],
)
def test_bad_settings_are_refused_before_any_worker_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SharedMemoryVecEnv(env_fns("CartPole-v1", 3), **kwargs)


# -- the contract, against DummyVecEnv ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id, steps", [("CartPole-v1", 120), ("Pendulum-v1", 210), ("sb3_ppo_ext/Walker2D-v0", 150)])
def test_steps_equal_dummy_vec_env_for_the_same_seeds(env_id, steps, step_in_driver):
    """CartPole and the walker (random actions) end by termination, Pendulum by its time limit (200 steps): auto
    resets with terminal_observation and TimeLimit.truncated; 3 envs in blocks of 2 and 1 (with the driver: 1 each)."""
    venv, dummy = shared(env_fns(env_id, 3), step_in_driver), DummyVecEnv(env_fns(env_id, 3))
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(3)
        np.testing.assert_array_equal(venv.reset(), dummy.reset())
        np.testing.assert_equal(venv.reset_infos, dummy.reset_infos)
        dummy.action_space.seed(0)
        ends = 0
        for _ in range(steps):
            actions = np.array([dummy.action_space.sample() for _ in range(3)])
            expected = dummy.step(actions)
            assert_same_step(venv.step(actions), expected)
            np.testing.assert_equal(venv.reset_infos, dummy.reset_infos)
            ends += int(expected[2].sum())
        assert ends >= 3
    finally:
        venv.close()


def test_actions_of_another_dtype_reach_the_envs_unchanged(step_in_driver):
    """Float64 actions for a float32 space (not the shared buffer's dtype) are sent as they are, as DummyVecEnv
    passes them."""
    venv, dummy = shared(env_fns("Pendulum-v1", 2), step_in_driver), DummyVecEnv(env_fns("Pendulum-v1", 2))
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(1)
            vec_env.reset()
        rng = np.random.default_rng(0)
        for _ in range(5):
            actions = rng.uniform(-2, 2, size=(2, 1))  # float64
            assert_same_step(venv.step(actions), dummy.step(actions))
    finally:
        venv.close()


class DictObservationEnv(gym.Env):
    """CartPole with a Dict observation: its state (float32 box) and a step counter modulo 5 (discrete)."""

    def __init__(self) -> None:
        self.inner = gym.make("CartPole-v1")
        self.observation_space = gym.spaces.Dict({"state": self.inner.observation_space, "phase": gym.spaces.Discrete(5)})
        self.action_space = self.inner.action_space
        self.count = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        observation, info = self.inner.reset(seed=seed, options=options)
        return {"state": observation, "phase": 0}, info

    def step(self, action):
        self.count += 1
        observation, reward, terminated, truncated, _ = self.inner.step(action)
        return {"state": observation, "phase": self.count % 5}, reward, terminated, truncated, {"count": self.count}


def test_dict_observations_equal_dummy_vec_env(step_in_driver):
    venv, dummy = shared([DictObservationEnv] * 3, step_in_driver), DummyVecEnv([DictObservationEnv] * 3)
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(5)
        first, expected_first = venv.reset(), dummy.reset()
        assert first.keys() == expected_first.keys()
        for key in first:
            np.testing.assert_array_equal(first[key], expected_first[key])
            assert first[key].dtype == expected_first[key].dtype
        for step in range(60):
            actions = np.array([step % 2, 1, 0], dtype=np.int64)
            got, want = venv.step(actions), dummy.step(actions)
            for key in want[0]:
                np.testing.assert_array_equal(got[0][key], want[0][key])
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[2], want[2])
            assert_infos_equal(got[3], want[3])
    finally:
        venv.close()


def test_reset_with_seed_and_options_like_dummy_vec_env(step_in_driver):
    venv, dummy = shared(env_fns("CartPole-v1", 3), step_in_driver), DummyVecEnv(env_fns("CartPole-v1", 3))
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(42)
            vec_env.set_options({"low": -0.01, "high": 0.01})
        np.testing.assert_array_equal(venv.reset(), dummy.reset())
        assert np.abs(venv.reset()).max() <= 0.05  # seeds and options used once: the default bounds again
    finally:
        venv.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_trained_on_it_equals_ppo_trained_on_dummy_vec_env(env_id, step_in_driver):
    def trained(vec_env: VecEnv) -> dict[str, th.Tensor]:
        model = PPO(
            "MlpPolicy", vec_env, n_steps=32, batch_size=32, n_epochs=2, seed=0, policy_kwargs={"net_arch": [16]}, device="cpu"
        )
        model.learn(4 * 32 * 2)
        vec_env.close()
        return model.policy.state_dict()

    got, want = trained(shared(env_fns(env_id, 4), step_in_driver)), trained(DummyVecEnv(env_fns(env_id, 4)))
    assert got.keys() == want.keys()
    for name in want:
        assert th.equal(got[name], want[name]), name


@pytest.mark.parametrize(
    "step_in_driver, holder_of_env_4",
    [(False, "env 4 in worker 1"), (True, "env 4 in the driver")],
    ids=["workers_only", "step_in_driver"],
)
def test_attributes_and_methods_by_index(step_in_driver, holder_of_env_4):
    """5 envs: workers of [0, 1, 2] and [3, 4], or workers of [0, 1] and [2, 3] and the driver's [4]."""
    settings = {"n_workers": 2, "step_in_driver": step_in_driver}
    venv = make_vec_env("CartPole-v1", 5, seed=0, vec_env_cls=SharedMemoryVecEnv, vec_env_kwargs=settings)
    try:
        assert [spec.id for spec in venv.get_attr("spec", indices=[4, 0])] == ["CartPole-v1"] * 2
        venv.set_attr("marker", "x", indices=[1, 3])
        assert venv.get_attr("marker", indices=[3, 1]) == ["x", "x"]
        assert not venv.has_attr("marker") and venv.has_attr("spec")
        assert venv.env_method("get_wrapper_attr", "marker", indices=1) == ["x"]
        assert venv.env_is_wrapped(Monitor) == [True] * 5
        with pytest.raises(AttributeError, match="no_such_attribute") as raised:
            venv.get_attr("no_such_attribute", indices=[4])
        assert any(holder_of_env_4 in note for note in getattr(raised.value, "__notes__", []))
        venv.reset()  # still usable after an attribute error
        venv.step(np.zeros(5, dtype=np.int64))
    finally:
        venv.close()


def test_render_rgb_array_like_dummy_vec_env(step_in_driver):
    fns = env_fns("CartPole-v1", 2, render_mode="rgb_array")
    venv, dummy = shared(fns, step_in_driver), DummyVecEnv(fns)
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(1)
            vec_env.reset()
        assert venv.render_mode == "rgb_array"
        np.testing.assert_array_equal(venv.render(), dummy.render())
    finally:
        venv.close()


# -- faults and clean-up -----------------------------------------------------------------------------------------------


class FaultyEnv(gym.Env):
    """CartPole that raises in ``step`` (``fail_at``: which step) or sleeps there (``hang_at``), once set."""

    def __init__(self) -> None:
        self.inner = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self.inner.observation_space, self.inner.action_space
        self.steps = 0
        self.fail_at: int | None = None
        self.hang_at: int | None = None
        self.interrupt_at: int | None = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.inner.reset(seed=seed)

    def close(self) -> None:
        FaultyEnv.closed_here += 1  # counts the envs closed in this process (the driver's own)
        self.inner.close()

    closed_here = 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError(f"physics exploded at step {self.steps}")
        if self.steps == self.hang_at:
            time.sleep(120)
        if self.steps == self.interrupt_at:
            raise KeyboardInterrupt
        observation, reward, _, _, info = self.inner.step(action)
        return observation, reward, False, False, info  # never ends: the step count is the one to fail or hang at


def failing_to_build() -> gym.Env:
    raise OSError("no such robot model")


def assert_cleaned_up(venv: SharedMemoryVecEnv, pids: list[int]) -> None:
    assert venv.closed
    assert all(gone(pid) for pid in pids), pids
    assert not segments()
    venv.close()  # closing again is harmless


def test_an_env_raising_in_step_is_an_error_naming_it_and_its_worker():
    venv = shared([FaultyEnv] * 4)
    pids = venv.worker_pids
    venv.set_attr("fail_at", 3, indices=[3])
    venv.reset()
    actions = np.zeros(4, dtype=np.int64)
    venv.step(actions)
    venv.step(actions)
    with pytest.raises(
        EnvWorkerError,
        match=r"env 3 in worker 1 \(pid \d+, holding envs \[2, 3\]\) raised ValueError: "
        r"physics exploded at step 3 during step",
    ) as raised:
        venv.step(actions)
    assert raised.value.env_index == 3 and raised.value.env_indices == [2, 3]
    assert "physics exploded" in raised.value.remote_traceback
    assert_cleaned_up(venv, pids)
    with pytest.raises(RuntimeError, match="closed after a failure"):
        venv.reset()


def test_an_env_raising_in_the_drivers_block_is_an_error_naming_it_and_the_driver():
    """4 envs: workers of [0, 1] and [2], the driver's [3]; its env raising in step closes the VecEnv as a worker's."""
    venv = shared([FaultyEnv] * 4, step_in_driver=True)
    pids = venv.worker_pids
    assert venv.driver_block == range(3, 4) and venv.blocks == [range(0, 2), range(2, 3)]
    venv.set_attr("fail_at", 2, indices=[3])
    venv.reset()
    actions = np.zeros(4, dtype=np.int64)
    venv.step(actions)
    with pytest.raises(
        EnvWorkerError,
        match=rf"env 3 in the driver \(pid {os.getpid()}, holding envs \[3\]\) raised ValueError: physics exploded at "
        r"step 2 during step; the workers were stopped",
    ) as raised:
        venv.step(actions)
    assert raised.value.worker_index is None and raised.value.env_index == 3
    assert "physics exploded" in raised.value.remote_traceback
    assert_cleaned_up(venv, pids)


def test_ctrl_c_in_the_drivers_block_closes_the_vec_env():
    """A KeyboardInterrupt while the driver steps its own envs leaves them part stepped: the VecEnv is closed and the
    interrupt raised as it is."""
    venv = shared([FaultyEnv] * 4, step_in_driver=True)
    pids = venv.worker_pids
    venv.set_attr("interrupt_at", 1, indices=[3])
    venv.reset()
    closed_before = FaultyEnv.closed_here
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.zeros(4, dtype=np.int64))
    assert FaultyEnv.closed_here == closed_before + 1  # the driver's one env
    assert_cleaned_up(venv, pids)
    with pytest.raises(RuntimeError, match="closed after KeyboardInterrupt"):
        venv.reset()


def test_close_with_a_dead_worker_and_a_pending_step_still_closes_the_drivers_envs():
    venv = shared([FaultyEnv] * 3, step_in_driver=True)
    pids = venv.worker_pids
    venv.reset()
    closed_before = FaultyEnv.closed_here
    venv.step_async(np.zeros(3, dtype=np.int64))
    os.kill(pids[0], signal.SIGKILL)
    venv.close()
    assert FaultyEnv.closed_here == closed_before + 1
    assert_cleaned_up(venv, pids)


def test_an_env_the_driver_cannot_build_is_an_error_naming_it():
    with pytest.raises(EnvWorkerError, match=r"env 2 in the driver .* raised OSError: no such robot model during start"):
        shared([FaultyEnv, FaultyEnv, failing_to_build], step_in_driver=True)
    assert not segments()


def test_by_default_the_driver_steps_envs_and_the_processes_match_the_cores():
    venv = SharedMemoryVecEnv(env_fns("CartPole-v1", 8))
    try:
        cores = len(os.sched_getaffinity(0))
        assert venv.driver_block is not None and len(venv.blocks) == max(1, min(8, cores) - 1)
        assert venv.blocks[0].start == 0 and venv.driver_block.stop == 8
    finally:
        venv.close()


def test_a_killed_worker_is_an_error_naming_its_envs_not_a_hang():
    venv = shared(env_fns("CartPole-v1", 4))
    pids = venv.worker_pids
    venv.reset()
    os.kill(pids[0], signal.SIGKILL)
    started = time.monotonic()
    died = r"worker 0 \(pid \d+, holding envs \[0, 1\]\) died \(exit code -9, killed by SIGKILL\)"
    with pytest.raises(EnvWorkerError, match=died):
        venv.step(np.zeros(4, dtype=np.int64))
    assert time.monotonic() - started < 30
    assert_cleaned_up(venv, pids)


def test_a_hung_worker_is_an_error_after_timeout_s():
    venv = shared([FaultyEnv] * 2, timeout_s=5)
    pids = venv.worker_pids
    venv.set_attr("hang_at", 1, indices=[1])
    venv.reset()
    started = time.monotonic()
    with pytest.raises(EnvWorkerError, match=r"worker 1 .*holding envs \[1\]\) did not answer step within 5 s"):
        venv.step(np.zeros(2, dtype=np.int64))
    assert time.monotonic() - started < 30
    assert_cleaned_up(venv, pids)


def test_an_env_that_cannot_be_built_is_an_error_naming_it():
    with pytest.raises(EnvWorkerError, match=r"env 2 in worker 1 .* raised OSError: no such robot model during start"):
        shared([FaultyEnv, FaultyEnv, failing_to_build])
    assert not segments()


def test_close_twice_leaves_no_process_or_segment(step_in_driver):
    venv = shared(env_fns("CartPole-v1", 3), step_in_driver)
    pids = venv.worker_pids
    assert not segments()  # the name is removed once the workers have mapped the segment
    venv.reset()
    venv.step_async(np.zeros(3, dtype=np.int64))  # closed while a step is pending: its answers are drained
    venv.close()
    assert_cleaned_up(venv, pids)


def test_a_vec_env_dropped_without_close_ends_its_workers(step_in_driver):
    venv = shared(env_fns("CartPole-v1", 2), step_in_driver)
    pids = venv.worker_pids
    del venv
    gc.collect()
    assert all(gone(pid) for pid in pids)


class ClosingFails(FaultyEnv):
    """A FaultyEnv whose ``close`` raises."""

    def close(self) -> None:
        super().close()
        raise OSError("the simulator's connection was lost")


@pytest.mark.parametrize("failing", ["worker", "driver"])
def test_an_env_raising_in_close_is_raised_after_everything_is_released(failing):
    fns: list[Callable[[], gym.Env]] = [FaultyEnv] * 4
    fns[1 if failing == "worker" else 3] = ClosingFails
    venv = shared(fns, step_in_driver=True)  # one worker holds envs 0-1 ... the driver the last block
    pids = venv.worker_pids
    closed_before = FaultyEnv.closed_here
    with pytest.raises(OSError, match="the simulator's connection was lost") as raised:
        venv.close()
    where = "env 1 in worker 0" if failing == "worker" else "env 3 in the driver"
    assert any(where in note for note in getattr(raised.value, "__notes__", [])), raised.value
    assert FaultyEnv.closed_here - closed_before == len(venv.driver_block or ())  # the driver's other envs closed too
    assert_cleaned_up(venv, pids)


def test_the_fork_start_method_leaves_no_false_leak_warning(tmp_path):
    script = tmp_path / "fork_run.py"
    script.write_text(
        "import gymnasium as gym\n"
        "from sb3_ppo_ext.vec_env.shared_memory_vec_env import SharedMemoryVecEnv\n"
        "if __name__ == '__main__':\n"
        "    venv = SharedMemoryVecEnv([lambda: gym.make('CartPole-v1')] * 3, n_workers=2, start_method='fork')\n"
        "    venv.reset()\n"
        "    venv.close()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "leaked" not in done.stderr and "resource_tracker" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"timeout_s": "abc"}, "timeout_s must be a finite number, got 'abc'"),
        ({"timeout_s": 1e-9}, r"timeout_s must be >= 1.0, got 1e-09 \(seconds; None waits for ever\)"),
        ({"timeout_s": 10**9}, "timeout_s must be <= 86400.0"),
        ({"start_timeout_s": True}, "start_timeout_s must be a finite number, got True"),
        ({"step_in_driver": "yes"}, "step_in_driver must be True or False, got 'yes'"),
        ({"start_method": "teleport"}, "start_method must be one of"),
    ],
)
def test_settings_are_checked_before_any_worker_starts(settings, message):
    with pytest.raises(ValueError, match=message):
        SharedMemoryVecEnv(env_fns("CartPole-v1", 2), **settings)

"""The update's thread policy (sb3_ppo_ext.ppo.threads) and OpenMP's wait policy (sb3_ppo_ext.openmp_wait)."""

import os
import subprocess
import sys

import pytest
import torch as th

from sb3_ppo_ext import PPO, HyperparameterError
from sb3_ppo_ext.openmp_wait import prefer_sleeping_openmp_threads
from sb3_ppo_ext.ppo.threads import (
    AUTO,
    ROWS_PER_EXTRA_THREAD,
    check_update_threads,
    intra_op_threads,
    update_thread_count,
)
from sb3_ppo_ext.vec_env.shared_memory_vec_env import usable_cores


@pytest.mark.parametrize("setting", [AUTO, None, 1, 2, 64])
@pytest.mark.parametrize("rows", [1, 64, ROWS_PER_EXTRA_THREAD - 1, ROWS_PER_EXTRA_THREAD, 10 * ROWS_PER_EXTRA_THREAD])
@pytest.mark.parametrize("caller_threads", [1, 2, 16])
@pytest.mark.parametrize("cores", [1, 2, 8])
def test_never_more_threads_than_usable_cores(setting, rows, caller_threads, cores):
    count = update_thread_count(setting, rows, caller_threads, cores)
    if setting is None:
        assert count is None
    else:
        assert count is not None and 1 <= count <= cores


def test_auto_keeps_small_minibatches_on_one_thread():
    assert update_thread_count(AUTO, 128, caller_threads=16, cores=16) == 1
    assert update_thread_count(AUTO, ROWS_PER_EXTRA_THREAD - 1, caller_threads=16, cores=16) == 1
    assert update_thread_count(AUTO, 2 * ROWS_PER_EXTRA_THREAD, caller_threads=16, cores=16) == 2
    assert update_thread_count(AUTO, 100 * ROWS_PER_EXTRA_THREAD, caller_threads=4, cores=16) == 4  # the caller's cap
    assert update_thread_count(AUTO, 100 * ROWS_PER_EXTRA_THREAD, caller_threads=16, cores=3) == 3  # the cores' cap
    assert update_thread_count(3, 1, caller_threads=1, cores=8) == 3  # an explicit count is taken as given


def test_usable_cores_is_the_affinity():
    assert usable_cores() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "all", "AUTO", [2]])
def test_bad_update_threads_are_refused(bad):
    with pytest.raises(HyperparameterError, match="update_threads"):
        check_update_threads(bad)
    with pytest.raises(HyperparameterError, match="update_threads"):
        PPO("MlpPolicy", "CartPole-v1", update_threads=bad, _init_setup_model=False)


def test_intra_op_threads_gives_the_count_back_after_an_error():
    previous = th.get_num_threads()
    with pytest.raises(RuntimeError), intra_op_threads(previous + 1):
        assert th.get_num_threads() == previous + 1
        raise RuntimeError("in the update")
    assert th.get_num_threads() == previous


@pytest.mark.parametrize(("setting", "expected"), [(AUTO, 1), (2, 2), (None, 2)])
def test_the_update_runs_on_its_threads_and_restores_the_callers(monkeypatch, setting, expected):
    if usable_cores() < 2:
        pytest.skip("needs two usable cores")
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=1, update_threads=setting, seed=0)
    seen: list[int] = []
    update = model._update

    def recording_update() -> None:
        seen.append(th.get_num_threads())
        update()

    monkeypatch.setattr(model, "_update", recording_update)
    previous = th.get_num_threads()
    th.set_num_threads(2)
    try:
        model.learn(128)
        assert th.get_num_threads() == 2
    finally:
        th.set_num_threads(previous)
    assert seen == [expected, expected]


def test_update_threads_survives_save_and_load(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, update_threads=None)
    model.save(tmp_path / "model")
    assert PPO.load(tmp_path / "model").update_threads is None


def test_wait_policy_is_set_only_before_torch_and_when_the_user_chose_none():
    environ: dict[str, str] = {}
    assert prefer_sleeping_openmp_threads(environ, loaded_modules={})
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}
    for users in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        environ = dict(users)
        assert not prefer_sleeping_openmp_threads(environ, loaded_modules={})
        assert environ == users
    environ = {}
    assert not prefer_sleeping_openmp_threads(environ, loaded_modules={"torch": object()})
    assert environ == {}


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")], ids=["unset", "the user's"])
def test_importing_the_package_sets_the_wait_policy_before_torch_loads(given, expected):
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = "import os, sys, sb3_ppo_ext; assert 'torch' not in sys.modules; print(os.environ['OMP_WAIT_POLICY'])"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == expected


def test_the_benchmark_runs_each_variant_as_described():
    import bench_threads

    before = bench_threads.command("before", "sb3_ppo_ext/Walker2D-v0", 8192, 3, "/tmp/run")
    assert before[2] == bench_threads.TORCH_FIRST and before[-2:] == ["--hyperparams", "update_threads:None"]
    assert ["--eval-freq", "-1"] == before[before.index("--eval-freq") : before.index("--eval-freq") + 2]
    default = bench_threads.command("default", "sb3_ppo_ext/Walker2D-v0", 8192, 3, "/tmp/run", evaluation=True)
    assert default[2] == bench_threads.CLI and "--eval-freq" not in default and "--num-threads" not in default
    assert bench_threads.command("one_thread", "E", 1, 0, "f")[-2:] == ["--num-threads", "1"]
    assert bench_threads.command("dummy", "E", 1, 0, "f")[-2:] == ["--vec-env", "dummy"]
    rates = {
        ("alone", "default"): [100.0],
        ("alone", "one_thread"): [50.0],
        ("busy", "default"): [90.0],
        ("busy", "one_thread"): [100.0],
        ("two_runs", "default"): [80.0],
    }
    table = bench_threads.block_table("walker", rates, ["alone", "busy", "two_runs"], ["default", "one_thread"])
    assert "| alone | 100 | 50 |" in table and "busy: default / one_thread = 0.90" in table
    assert "two runs summed / one alone (default) = 0.80" in table


def test_the_phase_benchmark_times_a_real_command_and_its_phases_add_up():
    """A real ``train`` on CartPole (2 updates) in a fresh process: the phases are positive, the envs' stepping is
    part of the collection, and start-up, collection, update and evaluation together are the total less the saving."""
    import bench_phases

    phases = bench_phases.run_variant("CartPole-v1", 1024, 0, "--vec-env dummy --eval-freq 256 --eval-episodes 2")
    assert set(phases) == set(bench_phases.PHASES)
    assert all(phases[phase] > 0 for phase in bench_phases.PHASES)
    assert phases["in step_wait"] < phases["collection"]
    parts = sum(phases[phase] for phase in ("start-up", "collection", "update", "evaluation"))
    assert parts <= phases["total"] < parts + 5.0
    runs = {"": [{**phases, "total": 10.0}], "--vec-env dummy": [{**phases, "total": 18.0}, {**phases, "total": 20.0}]}
    table = bench_phases.table(["", "--vec-env dummy"], runs)
    assert "| total | 10.00 | 19.00 |" in table and "| total / `(no flag)`'s total | 1.00 | 1.90 |" in table

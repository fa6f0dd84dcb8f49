"""benchmarks/bench_ppo.py: its configurations are the config files' blocks, and one timed run splits its wall clock."""

import math

import bench_ppo
import pytest

from sb3_ppo_ext import PPO


def test_the_walker_configuration_is_the_bundled_block_and_builds_its_model():
    walker = bench_ppo.CONFIGS["walker"]
    assert walker["n_envs"] == 16 and walker["normalize"] is True
    env, _ = bench_ppo.make_env("sb3_ppo_ext/Walker2D-v0", 2, walker["normalize"], 0, walker["kwargs"]["gamma"])
    model = PPO("MlpPolicy", env, device="cpu", **walker["kwargs"])
    assert (model.gamma, model.batch_size, model.n_epochs, model.use_sde) == (0.98, 1024, 10, False)
    assert env.gamma == 0.98  # the return normaliser discounts as the block does
    assert math.isclose(model.policy.log_std.mean().item(), -0.5)
    env.close()


def test_the_zoo_configuration_reads_rl_zoo3s_schedules():
    zoo = bench_ppo.CONFIGS["zoo"]["kwargs"]
    assert zoo["use_sde"] is True and zoo["n_epochs"] == 20
    assert zoo["clip_range"](1.0) == pytest.approx(0.4) and zoo["clip_range"](0.5) == pytest.approx(0.2)


def test_measure_splits_the_wall_clock_of_a_short_run():
    config = dict(n_envs=1, normalize=False, kwargs=dict(n_steps=256, batch_size=64, n_epochs=2))
    timing = bench_ppo.measure(PPO, "Pendulum-v1", config, iterations=2, seed=0, extra={})
    assert timing["fps"] > 0 and timing["cpu_fps"] > 0
    assert timing["env"] + timing["update"] + timing["other"] == pytest.approx(1.0)
    assert 0 < timing["update"] < 1 and 0 < timing["env"] < 1

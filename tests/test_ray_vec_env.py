"""RayVecEnv: its pure pieces, and the VecEnv contract on a two-node Ray cluster simulated on this machine, checked
against SB3's DummyVecEnv for the same env functions and seeds; faults by killing an actor and removing a node.

Every Ray address stays on 127.0.0.1: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray starts.
"""

import os
import time
from typing import cast

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3 import A2C
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecMonitor, VecNormalize

ray = pytest.importorskip("ray")
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before any Ray process starts: bind to 127.0.0.1

# After the importorskip above (these modules need Ray; without it the file is skipped), hence E402.
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from sb3_ppo_ext import PPO  # noqa: E402
from sb3_ppo_ext.vec_env.ray_vec_env import (  # noqa: E402
    EnvActorLostError,
    EnvGroup,
    RayVecEnv,
    concatenate_observations,
    locate,
    split_into_groups,
    stack_observations,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# -- pure pieces, no Ray ---------------------------------------------------------------------------------------------


def test_split_into_groups_keeps_order_and_a_smaller_last_group():
    assert split_into_groups(5, 2) == [range(2), range(2, 4), range(4, 5)]
    assert split_into_groups(3, 8) == [range(3)]


def test_locate_maps_indices_to_actors_and_positions():
    assert locate([3, 0, 4], 2) == {1: [(0, 1)], 0: [(1, 0)], 2: [(2, 0)]}


def test_dict_observations_stack_and_concatenate_per_key_in_the_space_dtype():
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)})
    first = stack_observations([{"a": np.zeros(2, np.float64), "b": 1}, {"a": np.ones(2), "b": 2}], space)
    second = stack_observations([{"a": -np.ones(2), "b": 0}], space)
    both = concatenate_observations([first, second], space)
    assert both["a"].dtype == np.float32 and both["a"].shape == (3, 2)
    assert both["b"].tolist() == [1, 2, 0]


def test_env_group_steps_like_dummy_vec_env():
    env_fns = [lambda: gym.make("CartPole-v1") for _ in range(3)]
    group, dummy = EnvGroup(env_fns), DummyVecEnv(env_fns)
    dummy.seed(7)
    observations, _ = group.reset([7, 8, 9], [{}, {}, {}])
    np.testing.assert_array_equal(observations, dummy.reset())
    for _ in range(60):  # CartPole falls within 60 steps of constant pushes: auto reset included
        actions = np.ones(3, dtype=np.int64)
        observations, rewards, dones, infos, _ = group.step(actions)
        expected = dummy.step(actions)
        np.testing.assert_array_equal(observations, expected[0])
        np.testing.assert_array_equal(rewards, expected[1])
        np.testing.assert_array_equal(dones, expected[2])
        assert [info.keys() for info in infos] == [info.keys() for info in expected[3]]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"envs_per_actor": 0}, "envs_per_actor"),
        ({"on_actor_loss": "ignore"}, "on_actor_loss"),
        ({"start_timeout_s": 0}, "start_timeout_s"),
    ],
)
def test_bad_settings_are_refused_before_ray_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RayVecEnv([lambda: gym.make("CartPole-v1")], **kwargs)


# -- on a two-node cluster ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    """A head and one more node, 2 CPUs each, on 127.0.0.1; this process connected to it."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def ray_vec_env(env_id: str, n_envs: int, seed: int, **kwargs) -> RayVecEnv:
    # make_vec_env's annotation names only SB3's two classes; any VecEnv taking env_fns works
    env = make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        vec_env_cls=RayVecEnv,  # type: ignore[arg-type]
        vec_env_kwargs={"actor_options": {"num_cpus": 1}, **kwargs},
    )
    return cast(RayVecEnv, env)


def dummy_vec_env(env_id: str, n_envs: int, seed: int) -> DummyVecEnv:
    return cast(DummyVecEnv, make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv))


def assert_same_step(step, expected):
    for got, want in zip(step[:3], expected[:3], strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    for got, want in zip(step[3], expected[3], strict=True):
        assert got.keys() == want.keys()
        if "terminal_observation" in want:
            np.testing.assert_array_equal(got["terminal_observation"], want["terminal_observation"])
            assert got["TimeLimit.truncated"] == want["TimeLimit.truncated"]


@pytest.mark.slow
def test_actors_spread_over_both_nodes(cluster):
    venv = ray_vec_env("CartPole-v1", n_envs=4, seed=0, envs_per_actor=1)
    try:
        assert len(venv.actors) == 4
        assert set(venv.actor_nodes) == {node.node_id for node in cluster.list_all_nodes()}
    finally:
        venv.close()


@pytest.mark.slow
@pytest.mark.parametrize("env_id, steps", [("CartPole-v1", 120), ("Pendulum-v1", 230)])
def test_steps_equal_dummy_vec_env_for_the_same_seeds(cluster, env_id, steps):
    """CartPole ends by termination, Pendulum by its time limit (200 steps): both auto resets, 5 envs in groups of 2."""
    venv, dummy = ray_vec_env(env_id, 5, seed=3, envs_per_actor=2), dummy_vec_env(env_id, 5, seed=3)
    try:
        np.testing.assert_array_equal(venv.reset(), dummy.reset())
        assert venv.reset_infos == dummy.reset_infos
        dummy.action_space.seed(0)
        saw_done = False
        for _ in range(steps):
            actions = np.array([dummy.action_space.sample() for _ in range(5)])
            expected = dummy.step(actions)
            assert_same_step(venv.step(actions), expected)
            saw_done |= bool(expected[2].any())
        assert saw_done
    finally:
        venv.close()


@pytest.mark.slow
def test_reset_with_seed_and_options_like_dummy_vec_env(cluster):
    venv, dummy = ray_vec_env("CartPole-v1", 3, seed=0, envs_per_actor=2), dummy_vec_env("CartPole-v1", 3, seed=0)
    try:
        for vec_env in (venv, dummy):
            vec_env.seed(42)
            vec_env.set_options({"low": -0.01, "high": 0.01})
        np.testing.assert_array_equal(venv.reset(), dummy.reset())
        assert np.abs(venv.reset()).max() <= 0.05  # options used once: the default bounds again
    finally:
        venv.close()


@pytest.mark.slow
def test_attributes_and_methods_by_index(cluster):
    venv = ray_vec_env("CartPole-v1", 5, seed=0, envs_per_actor=2)
    try:
        assert [spec.id for spec in venv.get_attr("spec", indices=[4, 0])] == ["CartPole-v1"] * 2
        venv.set_attr("marker", "x", indices=[1, 3])
        assert venv.get_attr("marker", indices=[3, 1]) == ["x", "x"]
        assert not venv.has_attr("marker") and venv.has_attr("spec")
        assert venv.env_method("get_wrapper_attr", "marker", indices=1) == ["x"]
        assert venv.env_is_wrapped(Monitor) == [True] * 5
        with pytest.raises(AttributeError):
            venv.get_attr("no_such_attribute")
    finally:
        venv.close()


@pytest.mark.slow
def test_render_rgb_array_like_dummy_vec_env(cluster):
    env_kwargs = {"render_mode": "rgb_array"}
    venv = make_vec_env(
        "CartPole-v1", 2, seed=1, env_kwargs=env_kwargs, vec_env_cls=RayVecEnv, vec_env_kwargs={"envs_per_actor": 2}
    )
    dummy = make_vec_env("CartPole-v1", 2, seed=1, env_kwargs=env_kwargs)
    try:
        venv.reset(), dummy.reset()
        assert venv.render_mode == "rgb_array"
        np.testing.assert_array_equal(venv.render(), dummy.render())
    finally:
        venv.close()


def kill_and_wait(actor) -> None:
    """``ray.kill`` the actor and wait until it is gone: the kill is asynchronous, and a step sent at once may still
    be answered."""
    ray.kill(actor, no_restart=True)
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(60):
            ray.get(actor.describe.remote(), timeout=30)
            time.sleep(0.5)


@pytest.mark.slow
def test_close_ends_the_actors(cluster):
    venv = ray_vec_env("CartPole-v1", 2, seed=0, envs_per_actor=1)
    actors = list(venv.actors)
    venv.close()
    venv.close()  # twice is fine
    for actor in actors:  # ray.kill is asynchronous: the actor answers until it is gone
        with pytest.raises(ray.exceptions.RayActorError):
            for _ in range(60):
                ray.get(actor.describe.remote(), timeout=30)
                time.sleep(0.5)


@pytest.mark.slow
def test_vec_env_wrappers_see_what_they_see_on_dummy_vec_env(cluster):
    def wrap(vec_env):
        return VecFrameStack(VecNormalize(VecMonitor(vec_env)), n_stack=2)

    venv, dummy = wrap(ray_vec_env("Pendulum-v1", 3, seed=5, envs_per_actor=2)), wrap(dummy_vec_env("Pendulum-v1", 3, seed=5))
    try:
        np.testing.assert_allclose(venv.reset(), dummy.reset())
        dummy.action_space.seed(1)
        for _ in range(210):
            actions = np.array([dummy.action_space.sample() for _ in range(3)])
            step, expected = venv.step(actions), dummy.step(actions)
            np.testing.assert_allclose(step[0], expected[0], rtol=1e-6)
            np.testing.assert_allclose(step[1], expected[1], rtol=1e-6)
            episodes = [
                [(info["episode"]["r"], info["episode"]["l"]) for info in infos if "episode" in info]
                for infos in (step[3], expected[3])
            ]
            assert episodes[0] == episodes[1]  # VecMonitor's returns and lengths ("t", the wall time, differs)
    finally:
        venv.close()


def parameters(model) -> list[th.Tensor]:
    return [parameter.detach().clone() for parameter in model.policy.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", [PPO, A2C])
def test_training_on_ray_equals_training_on_dummy_vec_env(cluster, algorithm):
    kwargs = {"n_steps": 32, "seed": 0, "policy_kwargs": {"net_arch": [16]}}
    if algorithm is PPO:
        kwargs.update(batch_size=64, n_epochs=2)
    venv = ray_vec_env("CartPole-v1", 4, seed=0, envs_per_actor=2)
    try:
        on_ray = algorithm("MlpPolicy", venv, **kwargs).learn(256)
        on_dummy = algorithm("MlpPolicy", dummy_vec_env("CartPole-v1", 4, seed=0), **kwargs).learn(256)
        for got, want in zip(parameters(on_ray), parameters(on_dummy), strict=True):
            th.testing.assert_close(got, want, rtol=0, atol=0)
    finally:
        venv.close()


# -- faults --------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_killed_actor_is_a_clear_error_and_the_model_is_untouched(cluster):
    venv = ray_vec_env("CartPole-v1", 4, seed=0, envs_per_actor=2)
    try:
        model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [16]}, seed=0)
        model.learn(64)
        before = parameters(model)
        kill_and_wait(venv.actors[1])
        with pytest.raises(EnvActorLostError, match=r"Ray actor 1 .*holding envs \[2, 3\] died") as error:
            model.learn(64, reset_num_timesteps=False)
        assert error.value.node_id == venv.actor_nodes[1]
        for got, want in zip(parameters(model), before, strict=True):
            assert th.equal(got, want)
    finally:
        venv.close()


@pytest.mark.slow
def test_restart_policy_rebuilds_a_killed_actor_and_reports_truncation(cluster):
    venv = ray_vec_env("Pendulum-v1", 4, seed=0, envs_per_actor=2, on_actor_loss="restart")
    try:
        last = venv.reset()
        actions = np.zeros((4, 1), dtype=np.float32)
        for _ in range(3):
            last = venv.step(actions)[0]
        kill_and_wait(venv.actors[0])
        with pytest.warns(UserWarning, match="rebuilding envs \\[0, 1\\]"):
            _, rewards, dones, infos = venv.step(actions)
        assert dones.tolist() == [True, True, False, False]
        assert rewards[:2].tolist() == [0.0, 0.0]
        for index in (0, 1):
            assert infos[index]["TimeLimit.truncated"] and infos[index]["actor_lost"]
            np.testing.assert_array_equal(infos[index]["terminal_observation"], last[index])
        assert [restart.env_indices for restart in venv.restarts] == [[0, 1]]
        assert venv.step(actions)[0].shape == (4, 3)  # the rebuilt actor steps on
        kill_and_wait(venv.actors[1])  # lost during a reset: rebuilt and reset with the seeds asked for
        dummy = dummy_vec_env("Pendulum-v1", 4, seed=11)
        venv.seed(11)
        with pytest.warns(UserWarning, match="rebuilding envs \\[2, 3\\]"):
            np.testing.assert_array_equal(venv.reset(), dummy.reset())
    finally:
        venv.close()


@pytest.mark.slow
def test_node_removed_mid_run(cluster):
    """Actors pinned (softly) to a node that is then removed: an error under the default policy; under restart,
    Ray places the rebuilt actor on a node still alive and the run goes on."""
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    pinned = {"num_cpus": 1, "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=True)}
    raising = ray_vec_env("Pendulum-v1", 2, seed=0, envs_per_actor=2, actor_options=pinned)
    restarting = ray_vec_env("Pendulum-v1", 2, seed=0, envs_per_actor=2, actor_options=pinned, on_actor_loss="restart")
    try:
        assert raising.actor_nodes == restarting.actor_nodes == [node.node_id]
        actions = np.zeros((2, 1), dtype=np.float32)
        raising.reset(), restarting.reset()
        raising.step(actions), restarting.step(actions)
        cluster.remove_node(node)
        with pytest.raises(EnvActorLostError, match=f"node {node.node_id}"):
            raising.step(actions)
        _, _, dones, infos = restarting.step(actions)
        assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)
        assert restarting.actor_nodes[0] != node.node_id
        assert restarting.step(actions)[0].shape == (2, 3)
    finally:
        raising.close(), restarting.close()


# -- zoo and CLI -----------------------------------------------------------------------------------------------------


def test_vec_env_settings_choose_ray_vec_env_with_its_address():
    from argparse import Namespace

    from sb3_ppo_ext.zoo.vec_env_choice import vec_env_settings

    args = Namespace(vec_env_kwargs={"envs_per_actor": 4}, ray_address="auto")
    assert vec_env_settings("ray", DummyVecEnv, args) == (RayVecEnv, {"envs_per_actor": 4, "address": "auto"})
    assert vec_env_settings("dummy", DummyVecEnv, Namespace()) == (DummyVecEnv, {})
    with pytest.raises(ValueError, match="--ray-address is for --vec-env ray"):
        vec_env_settings("dummy", DummyVecEnv, Namespace(ray_address="auto"))
    with pytest.raises(ValueError, match="RayVecEnv takes no env_per_actor"):
        vec_env_settings("ray", DummyVecEnv, Namespace(vec_env_kwargs={"env_per_actor": 4}))


@pytest.mark.slow
def test_cli_trains_with_vec_env_ray(cluster, tmp_path):
    from sb3_ppo_ext.cli import main

    main(
        [
            "train",
            "--algo",
            "ppo",
            "--env",
            "CartPole-v1",
            "-n",
            "64",
            "-f",
            str(tmp_path),
            "--seed",
            "0",
            "--eval-freq",
            "-1",
            "--no-progress",
            "--verbose",
            "0",
            "--num-threads",
            "1",
            "--vec-env",
            "ray",
            "--ray-address",
            cluster.address,
            "--vec-env-kwargs",
            "envs_per_actor:2",
            "--hyperparams",
            "n_envs:4",
            "n_steps:16",
            "policy_kwargs:dict(net_arch=[8])",
        ]
    )
    run = tmp_path / "ppo" / "CartPole-v1_1"
    assert (run / "CartPole-v1.zip").is_file()
    assert "vec_env: ray" in (run / "CartPole-v1" / "args.yml").read_text()


def test_cli_refuses_a_ray_address_without_vec_env_ray(tmp_path, user_error):
    line = user_error(
        [
            "train",
            "--algo",
            "ppo",
            "--env",
            "CartPole-v1",
            "-n",
            "64",
            "-f",
            str(tmp_path),
            "--vec-env",
            "subproc",
            "--ray-address",
            "auto",
        ]
    )
    assert line.endswith("--ray-address is for --vec-env ray, not --vec-env subproc")

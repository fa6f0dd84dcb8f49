"""Walker2D, Humanoid and the flag runs: per-step maths, equivalence to pybullet_envs, task rules, options."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pybullet
import pytest

import sb3_ppo_ext  # noqa: F401  (registers the ids)
from sb3_ppo_ext.envs._bullet import check_integer, check_non_negative, check_positive, check_probability, check_range
from sb3_ppo_ext.envs.humanoid import (
    HUMANOID_START_HEIGHT,
    HumanoidEnv,
    HumanoidFlagrunEnv,
    HumanoidFlagrunHarderEnv,
    crawl_filtered_progress,
    cube_throw,
    random_flag_position,
)
from sb3_ppo_ext.envs.locomotion import (
    CONTROL_TIMESTEP,
    camera_ray,
    count_joints_at_limit,
    electricity_costs,
    humanoid_alive_bonus,
    resolve_foot_contacts,
    rotate_to_heading_frame,
    scale_joint_positions,
    standing_potential_leak,
    target_from_user_events,
    target_heading,
    walker_alive_bonus,
)
from sb3_ppo_ext.envs.walker2d import Walker2DEnv

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def walker():
    env = Walker2DEnv()
    yield env
    env.close()


@pytest.fixture
def humanoid():
    env = HumanoidEnv()
    yield env
    env.close()


def run_episode(env, policy, seed: int, max_steps: int = 1000) -> tuple[int, float, dict]:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total, info = 0.0, {}
    for step in range(1, max_steps + 1):
        _, reward, terminated, truncated, info = env.step(policy(rng, env.action_space.shape))
        total += reward
        if terminated or truncated:
            return step, total, info
    return max_steps, total, info


def zero_policy(rng, shape):
    return np.zeros(shape)


def random_policy(rng, shape):
    return rng.uniform(-1.0, 1.0, size=shape)


# --- pure functions ------------------------------------------------------------------------------------------


def test_scale_joint_positions_maps_limits_to_unit_interval():
    lower, upper = np.array([-2.0, 0.0]), np.array([0.0, 1.0])
    np.testing.assert_allclose(scale_joint_positions(lower, lower, upper), [-1.0, -1.0])
    np.testing.assert_allclose(scale_joint_positions(upper, lower, upper), [1.0, 1.0])
    np.testing.assert_allclose(scale_joint_positions(np.array([-1.0, 0.75]), lower, upper), [0.0, 0.5])


def test_count_joints_at_limit_uses_strict_threshold():
    assert count_joints_at_limit(np.array([0.99, -0.995, 1.2, 0.0])) == 2


def test_rotate_to_heading_frame():
    # Facing +y (yaw 90 deg), moving along +y is straight ahead; moving along +x is to the right (negative y).
    np.testing.assert_allclose(rotate_to_heading_frame((0.0, 2.0, 0.5), math.pi / 2), (2.0, 0.0, 0.5), atol=1e-12)
    np.testing.assert_allclose(rotate_to_heading_frame((1.0, 0.0, 0.0), math.pi / 2), (0.0, -1.0, 0.0), atol=1e-12)


def test_target_heading():
    angle, distance = target_heading((1.0, 1.0), (4.0, 5.0), 0.0)
    assert distance == pytest.approx(5.0)
    assert angle == pytest.approx(math.atan2(4.0, 3.0))
    angle, _ = target_heading((0.0, 0.0), (0.0, 3.0), math.pi / 2)
    assert angle == pytest.approx(0.0)


def test_electricity_costs_by_hand():
    action = np.array([1.0, -0.5, 0.0])
    speeds = np.array([0.2, 0.4, 9.0])
    power, stall = electricity_costs(action, speeds)
    assert power == pytest.approx((0.2 + 0.2 + 0.0) / 3)
    assert stall == pytest.approx((1.0 + 0.25 + 0.0) / 3)


def test_electricity_costs_add_as_pybullet_envs_means_to_the_bit():
    # pybullet_envs computes np.square(a).mean() and np.abs(a * v).mean(): numpy's own sum, whose order is the same on
    # every CPU. A BLAS dot product (a @ a) picks its kernel by CPU and changes the last bits from machine to machine.
    rng = np.random.default_rng(0)
    for size in (6, 17) * 200:
        action = rng.uniform(-1.3, 1.3, size)
        speeds = rng.normal(0.0, 0.5, size)
        power, stall = electricity_costs(action, speeds)
        assert power.hex() == float(np.abs(action * speeds).mean()).hex()
        assert stall.hex() == float(np.square(action).mean()).hex()


def test_alive_bonuses():
    assert walker_alive_bonus(0.81, 0.99) == 1.0
    assert walker_alive_bonus(0.80, 0.0) == -1.0
    assert walker_alive_bonus(1.2, -1.0) == -1.0
    assert humanoid_alive_bonus(0.79) == 2.0
    assert humanoid_alive_bonus(0.78) == -1.0


def test_standing_potential_leak():
    assert standing_potential_leak(-0.1) == 1.0
    assert standing_potential_leak(0.4) == pytest.approx(1.5)
    assert standing_potential_leak(1.3) == 2.0


def test_crawl_filtered_progress():
    assert crawl_filtered_progress(3.0, previous_z=0.5, z=0.6) == 0.0  # down before and after: crawling
    assert crawl_filtered_progress(3.0, previous_z=0.9, z=0.6) == 3.0  # falling step still counts
    assert crawl_filtered_progress(3.0, previous_z=0.5, z=0.85) == 3.0  # getting up counts


def test_cube_throw_aims_at_the_robot():
    rng = np.random.default_rng(0)
    robot = np.array([2.0, -1.0, 1.0])
    start, velocity = cube_throw(rng, robot, np.zeros(3))
    assert np.linalg.norm(start[:2] - robot[:2]) == pytest.approx(4.0)
    assert start[2] == pytest.approx(robot[2] + 1.0)
    to_robot = (robot - start) / np.linalg.norm(robot - start)
    assert 19.0 - math.sqrt(3) <= np.linalg.norm(velocity) <= 31.0 + math.sqrt(3)
    assert velocity @ to_robot / np.linalg.norm(velocity) > 0.99


def test_random_flag_position_stays_in_half_the_stadium():
    rng = np.random.default_rng(1)
    points = np.array([random_flag_position(rng) for _ in range(500)])
    assert np.all(np.abs(points[:, 0]) <= 105 * 0.25 * 0.5)
    assert np.all(np.abs(points[:, 1]) <= 50 * 0.25 * 0.5)
    assert points[:, 0].std() > 3.0


def gui_camera(target=(1.0, 2.0, 0.0), distance=5.0):
    """A getDebugVisualizerCamera tuple for a camera looking straight down at ``target``."""
    width, height = 640, 480
    forward = (0.0, 0.0, -1.0)
    horizontal = (20000.0, 0.0, 0.0)  # far-plane spans, as the GUI reports them
    vertical = (0.0, 15000.0, 0.0)
    return (width, height, None, None, (0.0, 1.0, 0.0), forward, horizontal, vertical, 0.0, -90.0, distance, target)


def test_camera_ray_through_centre_and_corner():
    ray_from, ray_to = camera_ray(320, 240, gui_camera())
    np.testing.assert_allclose(ray_from, [1.0, 2.0, 5.0])
    np.testing.assert_allclose(ray_to, [1.0, 2.0, 5.0 - 10000.0])
    _, corner = camera_ray(0, 0, gui_camera())
    np.testing.assert_allclose(corner, [1.0 - 10000.0, 2.0 + 7500.0, 5.0 - 10000.0])


def test_target_from_user_events():
    def pick(x, y):
        return (x / 10.0, y / 10.0)

    click = [(2, 30.0, 40.0, 0, pybullet.KEY_WAS_TRIGGERED)]
    assert target_from_user_events((0.0, 0.0), {}, click, pick) == (3.0, 4.0)
    mouse_move = [(1, 30.0, 40.0, -1, 0)]
    assert target_from_user_events((0.0, 0.0), {}, mouse_move, pick) is None
    keys = {pybullet.B3G_UP_ARROW: pybullet.KEY_WAS_TRIGGERED, pybullet.B3G_LEFT_ARROW: pybullet.KEY_IS_DOWN}
    assert target_from_user_events((1.0, 1.0), keys, [], pick, key_step=2.0) == (3.0, 1.0)
    both = {pybullet.B3G_RIGHT_ARROW: pybullet.KEY_WAS_TRIGGERED}
    assert target_from_user_events((0.0, 0.0), both, click, pick) == (3.0, 4.0)  # the click wins
    assert target_from_user_events((0.0, 0.0), both, click, lambda x, y: None) == (0.0, -1.0)  # missed click


def test_check_range_rejects_bad_ranges():
    assert check_range("friction_range", None) is None
    assert check_range("friction_range", [0.5, 1.5]) == (0.5, 1.5)
    with pytest.raises(ValueError, match="friction_range"):
        check_range("friction_range", (1.5, 0.5))
    with pytest.raises(ValueError, match="mass_scale_range"):
        check_range("mass_scale_range", (0.0, 1.0), minimum=1e-3)
    with pytest.raises(ValueError, match="friction_range"):
        check_range("friction_range", 3.0)
    with pytest.raises(ValueError, match="friction_range"):
        check_range("friction_range", "12")  # two characters are no pair of numbers
    with pytest.raises(ValueError, match="friction_range"):
        check_range("friction_range", (math.nan, 1.0))


def test_scalar_checks_name_the_parameter():
    assert check_integer("flag_timeout_steps", np.int64(5), 1) == 5
    for bad in (0, 2.5, True, "3"):
        with pytest.raises(ValueError, match="flag_timeout_steps"):
            check_integer("flag_timeout_steps", bad, 1)
    assert check_probability("push_probability", 1) == 1.0
    for bad in (-0.1, 1.1, math.nan, "0.5"):
        with pytest.raises(ValueError, match="push_probability"):
            check_probability("push_probability", bad)
    assert check_positive("target_key_step", np.float32(0.5)) == 0.5
    with pytest.raises(ValueError, match="target_key_step"):
        check_positive("target_key_step", 0.0)
    assert check_non_negative("push_force", 0) == 0.0
    with pytest.raises(ValueError, match="push_force"):
        check_non_negative("push_force", math.inf)
    for check in (check_positive, check_non_negative, check_probability):  # True is no quantity
        with pytest.raises(ValueError, match="push_force"):
            check("push_force", True)


# --- equivalence to pybullet_envs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "default"),
    [
        (Walker2DEnv, "previous"),
        (HumanoidEnv, "previous"),
        (HumanoidFlagrunEnv, "current"),
        (HumanoidFlagrunHarderEnv, "current"),
    ],
)
def test_each_task_shows_the_contact_flags_its_runs_chose(task, default):
    # The defaults chosen by learning (docs/guide/envs.md); the quirk and the option still override them.
    env = task()
    try:
        assert env.foot_contacts == default
    finally:
        env.close()
    assert resolve_foot_contacts(None, frozenset({"late_foot_contacts"}), default) == "previous"
    assert resolve_foot_contacts("current", frozenset(), default) == "current"


@pytest.mark.parametrize(
    ("ours", "reference_id"), [(Walker2DEnv, "Walker2DBulletEnv-v0"), (HumanoidEnv, "HumanoidBulletEnv-v0")]
)
def test_reference_quirks_reproduce_pybullet_envs_exactly(ours, reference_id):
    pybullet_envs_gymnasium = pytest.importorskip("pybullet_envs_gymnasium")
    assert pybullet_envs_gymnasium
    reference = gym.make(reference_id, disable_env_checker=True).unwrapped
    env = ours(reference_quirks=True)
    try:
        # Episode 0 of the reference counts the floor only from its second step on; compare episodes 1 and 2.
        reference.reset(seed=0)
        for episode in (1, 2):
            ref_obs, _ = reference.reset(seed=episode)
            obs, _ = env.reset(seed=episode)
            np.testing.assert_array_equal(obs, ref_obs)
            rng = np.random.default_rng(episode)
            for _ in range(60):
                action = rng.uniform(-1.2, 1.2, size=env.action_space.shape)  # also outside [-1, 1]
                ref_obs, ref_reward, ref_done, _, _ = reference.step(action)
                obs, reward, done, _, _ = env.step(action)
                np.testing.assert_array_equal(obs, ref_obs)
                assert reward == pytest.approx(ref_reward, abs=1e-6)  # the reference rounds speeds to float32
                assert done == ref_done
                if done:
                    break
    finally:
        env.close()
        reference.close()


@pytest.mark.parametrize("quirks", [True, ["floor_in_centre"]])
def test_fixed_body_centre_reads_progress_17_over_16_of_the_reference(walker, quirks):
    quirky = Walker2DEnv(reference_quirks=quirks)
    try:
        walker.reset(seed=4)
        quirky.reset(seed=4)
        action = np.full(6, 0.3)
        for _ in range(5):
            *_, info = walker.step(action)
            *_, quirky_info = quirky.step(action)
            # The dynamics are the same; only the floor body (at x = 0) in the reference's average differs.
            assert info["reward_progress"] == pytest.approx(quirky_info["reward_progress"] * 17 / 16, rel=1e-6)
    finally:
        quirky.close()


@pytest.mark.parametrize("quirks", [True, ["raw_action_electricity"]])
def test_electricity_cost_uses_clipped_action_unless_quirks(walker, quirks):
    quirky = Walker2DEnv(reference_quirks=quirks)
    try:
        walker.reset(seed=0)
        quirky.reset(seed=0)
        *_, info = walker.step(np.full(6, 3.0))
        *_, quirky_info = quirky.step(np.full(6, 3.0))
        assert info["reward_stall_torque"] == pytest.approx(-0.1 * 1.0)
        assert quirky_info["reward_stall_torque"] == pytest.approx(-0.1 * 9.0)
    finally:
        quirky.close()


@pytest.mark.parametrize(
    "late_kwargs",
    [
        dict(reference_quirks=True),
        dict(reference_quirks=("late_foot_contacts",)),
        dict(foot_contacts="previous"),
    ],
)
def test_contact_flags_are_current_or_one_step_old(late_kwargs):
    current_env, late_env = Walker2DEnv(foot_contacts="current"), Walker2DEnv(**late_kwargs)
    try:
        assert (current_env.foot_contacts, late_env.foot_contacts) == ("current", "previous")
        current_env.reset(seed=2)
        late_env.reset(seed=2)
        current = []
        late = []
        for _ in range(25):
            obs, *_ = current_env.step(np.zeros(6))
            late_obs, *_ = late_env.step(np.zeros(6))
            current.append(obs[-2:])
            late.append(late_obs[-2:])
        assert np.any(np.array(current) > 0)
        np.testing.assert_array_equal(np.array(late[1:]), np.array(current[:-1]))
    finally:
        current_env.close()
        late_env.close()


@pytest.mark.parametrize(
    ("ours", "reference_id"), [(Walker2DEnv, "Walker2DBulletEnv-v0"), (HumanoidEnv, "HumanoidBulletEnv-v0")]
)
def test_the_named_contact_option_is_the_reference_quirk(ours, reference_id):
    """``foot_contacts="previous"`` with the two other quirks is pybullet_envs exactly, whatever the default."""
    pytest.importorskip("pybullet_envs_gymnasium")
    reference = gym.make(reference_id, disable_env_checker=True).unwrapped
    env = ours(reference_quirks=["floor_in_centre", "raw_action_electricity"], foot_contacts="previous")
    try:
        reference.reset(seed=0)
        ref_obs, _ = reference.reset(seed=1)
        obs, _ = env.reset(seed=1)
        rng = np.random.default_rng(1)
        for _ in range(40):
            action = rng.uniform(-1.0, 1.0, size=env.action_space.shape)
            ref_obs, *_ = reference.step(action)
            obs, *_ = env.step(action)
            np.testing.assert_array_equal(obs, ref_obs)
    finally:
        env.close()
        reference.close()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(foot_contacts="late"), r"foot_contacts must be None or one of \['current', 'previous'\]"),
        (dict(foot_contacts="current", reference_quirks=True), "not be 'current' when reference_quirks holds"),
    ],
)
def test_bad_contact_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Walker2DEnv(**kwargs)


# --- episode rules -------------------------------------------------------------------------------------------


def test_spaces_match_the_reference_layout(walker, humanoid):
    assert walker.observation_space.shape == (22,) and walker.action_space.shape == (6,)
    assert humanoid.observation_space.shape == (44,) and humanoid.action_space.shape == (17,)
    np.testing.assert_allclose(walker.robot.max_torques, [40, 40, 12, 40, 40, 12])
    assert humanoid.robot.max_torques[5] == pytest.approx(0.41 * 300)


def test_walker_terminates_when_it_falls_and_pays_minus_one(walker):
    walker.reset(seed=0)
    alive_terms = []
    for _ in range(1000):
        _, _, terminated, truncated, info = walker.step(np.zeros(6))
        alive_terms.append(info["reward_alive"])
        if terminated:
            break
    assert terminated and not truncated
    assert alive_terms[-1] == -1.0 and set(alive_terms[:-1]) == {1.0}
    assert walker._body_xyz[2] <= 0.8 or abs(walker._rpy[1]) >= 1.0


def test_humanoid_terminates_below_078_m(humanoid):
    humanoid.reset(seed=0)
    for _ in range(1000):
        _, _, terminated, _, info = humanoid.step(np.zeros(17))
        if terminated:
            break
    assert terminated and info["reward_alive"] == -1.0
    assert humanoid._body_xyz[2] <= 0.78


# The reference episode ranges of zero and random actions (pybullet_envs' robots), widened by 15 % for our mean over
# five seeds.
EPISODE_TABLE = {
    ("walker", "zero"): ((31, 69), (24, 48)),
    ("humanoid", "zero"): ((26, 37), (45, 70)),
    ("walker", "random"): ((14, 27), (18, 25)),
    ("humanoid", "random"): ((19, 21), (-44, -20)),
}


@pytest.mark.parametrize(("robot", "policy_name"), list(EPISODE_TABLE))
def test_zero_and_random_action_episodes_match_the_reference_table(robot, policy_name, walker, humanoid):
    env = walker if robot == "walker" else humanoid
    policy = zero_policy if policy_name == "zero" else random_policy
    results = [run_episode(env, policy, seed) for seed in range(5)]
    mean_length = np.mean([length for length, _, _ in results])
    mean_return = np.mean([total for _, total, _ in results])
    (low_length, high_length), (low_return, high_return) = EPISODE_TABLE[(robot, policy_name)]
    assert 0.85 * low_length <= mean_length <= 1.15 * high_length
    assert low_return - 0.15 * abs(low_return) <= mean_return <= high_return + 0.15 * abs(high_return)


def test_physics_blow_up_ends_the_episode_with_a_flag(humanoid):
    humanoid.reset(seed=0)
    humanoid._client.resetBaseVelocity(humanoid.robot.body_id, [math.nan] * 3, [0.0, 0.0, 0.0])
    obs, reward, terminated, _, info = humanoid.step(np.zeros(17))
    assert terminated and info["physics_blowup"]
    assert np.all(np.isfinite(obs)) and math.isfinite(reward)


@pytest.mark.parametrize(
    "action", [np.zeros(5), np.zeros((1, 6)), np.array([0, 0, 0, math.nan, 0, 0]), np.array([math.inf] * 6), "abc"]
)
def test_bad_actions_raise_value_error(walker, action):
    walker.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        walker.step(action)


def test_large_finite_actions_are_clipped(walker):
    walker.reset(seed=0)
    big, _, _, _, _ = walker.step(np.full(6, 50.0))
    walker.reset(seed=0)
    one, _, _, _, _ = walker.step(np.ones(6))
    np.testing.assert_array_equal(big, one)


def test_step_before_reset_raises(walker):
    with pytest.raises(RuntimeError, match="reset"):
        walker.step(np.zeros(6))


def test_rgb_array_frame_is_320_by_240():
    env = Walker2DEnv(render_mode="rgb_array")
    try:
        env.reset(seed=0)
        frame = env.render()
        assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    finally:
        env.close()


def test_bad_constructor_arguments_raise_value_error():
    with pytest.raises(ValueError, match="render_mode"):
        Walker2DEnv(render_mode="rgb")
    with pytest.raises(ValueError, match="electricity_weight"):
        Walker2DEnv(electricity_weight=math.nan)
    with pytest.raises(ValueError, match="alive_weight"):
        Walker2DEnv(alive_weight=True)
    with pytest.raises(ValueError, match="friction_range"):
        Walker2DEnv(friction_range="12")
    with pytest.raises(ValueError, match="push_probability"):
        Walker2DEnv(push_probability=1.5)
    with pytest.raises(ValueError, match="reset_noise_scale"):
        Walker2DEnv(reset_noise_scale=-0.1)
    with pytest.raises(ValueError, match="flag_timeout_steps"):
        HumanoidFlagrunEnv(flag_timeout_steps=0)
    with pytest.raises(ValueError, match="target_key_step"):
        HumanoidEnv(target_key_step=0.0)
    with pytest.raises(ValueError, match="lying_start_probability"):
        HumanoidFlagrunHarderEnv(lying_start_probability=2.0)


def test_reward_weights_scale_their_terms():
    env = Walker2DEnv(alive_weight=0.5, joints_at_limit_weight=0.0, feet_collision_weight=-1.0)
    try:
        env.reset(seed=0)
        _, reward, _, _, info = env.step(np.zeros(6))
        assert info["reward_alive"] == 0.5
        assert info["reward_joints_at_limit"] == 0.0
        assert reward == pytest.approx(sum(v for k, v in info.items() if k.startswith("reward_")))
    finally:
        env.close()


# --- flag runs -----------------------------------------------------------------------------------------------


def test_flag_moves_after_200_steps():
    env = HumanoidFlagrunEnv()
    try:
        _, info = env.reset(seed=3)
        first_target = info["target"]
        for step in range(1, 201):
            # Keep stepping the unwrapped env past a fall: only the flag clock matters here.
            _, _, _, _, info = env.step(np.zeros(17))
            if step < 200:
                assert not info["flag_moved"]
                np.testing.assert_array_equal(info["target"], first_target)
        assert info["flag_moved"] and info["flags_reached"] == 0 and not info["is_success"]
        assert not np.array_equal(info["target"], first_target)
        flag_position = env._client.getBasePositionAndOrientation(env._flag_id)[0]
        np.testing.assert_allclose(flag_position[:2], info["target"])
    finally:
        env.close()


def test_flag_moves_when_reached_without_a_progress_jump():
    env = HumanoidFlagrunEnv(random_yaw=False)
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step(np.zeros(17))
        assert not info["is_success"]
        env.set_target(float(env._body_xyz[0]) + 0.5, float(env._body_xyz[1]))
        obs, _, _, _, info = env.step(np.zeros(17))
        assert info["flag_moved"] and info["flags_reached"] == 1 and info["is_success"]
        assert abs(info["reward_progress"]) < 5.0  # m/s: measured against the old flag, no jump
        bearing, _ = target_heading(env._body_xyz, info["target"], env._rpy[2])
        assert obs[1] == pytest.approx(math.sin(bearing), abs=1e-5)  # the new flag is in the observation
        assert obs[2] == pytest.approx(math.cos(bearing), abs=1e-5)
        _, _, _, _, info = env.step(np.zeros(17))
        assert abs(info["reward_progress"]) < 5.0
    finally:
        env.close()


def test_flagrun_starts_facing_a_random_direction():
    env = HumanoidFlagrunEnv()
    try:
        yaws = []
        for seed in range(6):
            env.reset(seed=seed)
            yaws.append(env._rpy[2])
            assert env._body_xyz[2] == pytest.approx(HUMANOID_START_HEIGHT)
        assert np.std(yaws) > 0.5
    finally:
        env.close()


def test_harder_starts_lying_on_the_ground_in_some_episodes():
    env = HumanoidFlagrunHarderEnv()
    try:
        lying = []
        for seed in range(10):
            env.reset(seed=seed)
            lying.append(env.started_lying)
            assert (env._body_xyz[2] < 0.5) == env.started_lying
        assert any(lying) and not all(lying)
    finally:
        env.close()


def test_harder_episode_ends_after_170_steps_on_the_ground():
    env = HumanoidFlagrunHarderEnv(lying_start_probability=1.0, throw_cubes=False)
    try:
        length, _, info = run_episode(env, zero_policy, seed=0)
        assert length == 170 and info["reward_alive"] == -1.0
        assert info["reward_progress"] == 0.0  # no progress counted while down
    finally:
        env.close()


def test_harder_rewards_getting_up_and_halves_nothing_else():
    env = HumanoidFlagrunHarderEnv(lying_start_probability=0.0)
    try:
        assert env.weights["electricity"] == pytest.approx(-8.5 / 4)
        assert env.weights["stall_torque"] == pytest.approx(-0.425)
        env.reset(seed=0)
        env._previous_z = 0.3  # as if the torso had just come up from the ground
        _, _, _, _, info = env.step(np.zeros(17))
        assert env._body_xyz[2] > 0.8  # standing: the height part is at its cap
        # By hand: 100 * ((1 + 0.8 / 0.8) - (1 + 0.3 / 0.8)) = 100 * (2 - 1.375).
        assert info["reward_standing_up"] == pytest.approx(62.5)
    finally:
        env.close()


def test_harder_throws_cubes_at_a_standing_robot():
    env = HumanoidFlagrunHarderEnv(lying_start_probability=0.0, cube_throw_interval=1, cube_throw_after_steps=0)
    try:
        env.reset(seed=0)
        env.step(np.zeros(17))
        env.step(np.zeros(17))  # thrown after the first step, in flight during the second
        velocity = np.array(env._client.getBaseVelocity(env._cube_id)[0])
        assert np.linalg.norm(velocity) > 15.0
    finally:
        env.close()


# --- domain randomisation ------------------------------------------------------------------------------------


def test_randomisation_is_off_by_default(walker):
    for seed in range(2):
        walker.reset(seed=seed)
        assert walker._client.getDynamicsInfo(walker.scene.floor_id, -1)[1] == pytest.approx(0.8)
        masses = [walker._client.getDynamicsInfo(walker.robot.body_id, link)[0] for link in range(-1, 16)]
        np.testing.assert_allclose(masses, walker.robot.masses)


def test_friction_and_mass_randomisation_draw_per_episode():
    env = Walker2DEnv(friction_range=(0.5, 1.5), mass_scale_range=(0.8, 1.2))
    try:
        frictions = []
        for seed in range(3):
            env.reset(seed=seed)
            frictions.append(env._client.getDynamicsInfo(env.scene.floor_id, -1)[1])
            masses = np.array([env._client.getDynamicsInfo(env.robot.body_id, link)[0] for link in range(-1, 16)])
            heavy = env.robot.masses > 0
            ratios = masses[heavy] / env.robot.masses[heavy]
            assert np.all((ratios >= 0.8 - 1e-9) & (ratios <= 1.2 + 1e-9)) and ratios.std() > 0
        assert all(0.4 - 1e-9 <= f <= 1.2 + 1e-9 for f in frictions) and len(set(frictions)) == 3
    finally:
        env.close()


def test_pushes_change_the_motion_deterministically():
    pushed = Walker2DEnv(push_probability=1.0, push_force=300.0)
    plain = Walker2DEnv()
    pushed_again = Walker2DEnv(push_probability=1.0, push_force=300.0)
    try:
        observations = []
        for env in (pushed, plain, pushed_again):
            env.reset(seed=0)
            for _ in range(5):
                obs, *_ = env.step(np.zeros(6))
            observations.append(obs)
        assert not np.allclose(observations[0], observations[1])
        np.testing.assert_array_equal(observations[0], observations[2])
    finally:
        for env in (pushed, plain, pushed_again):
            env.close()


def test_reset_noise_scale_sets_the_initial_joint_spread():
    still = Walker2DEnv(reset_noise_scale=0.0)
    noisy = Walker2DEnv(reset_noise_scale=0.3)
    try:
        still.reset(seed=0)
        np.testing.assert_allclose(still._state.joint_positions, 0.0, atol=1e-12)
        spread = []
        for seed in range(5):
            noisy.reset(seed=seed)
            spread.extend(noisy._state.joint_positions)
        assert 0.1 < np.max(np.abs(spread)) <= 0.3
    finally:
        still.close()
        noisy.close()


def test_registered_ids_pass_kwargs():
    env = gym.make("sb3_ppo_ext/Walker2D-v0", reference_quirks=True, push_probability=0.1, push_force=10.0)
    try:
        assert env.unwrapped.reference_quirks and env.unwrapped.push_probability == 0.1
        assert env.unwrapped.dt == CONTROL_TIMESTEP
    finally:
        env.close()


# --- GUI (human render mode), under a virtual X server -------------------------------------------------------

GUI_SCRIPT = """
import json, math, sys
import numpy as np, pybullet
from sb3_ppo_ext.envs.humanoid import HumanoidFlagrunEnv
env = HumanoidFlagrunEnv(render_mode="human")
env.reset(seed=0)
for _ in range(40):  # the GUI ignores camera moves for its first few hundred milliseconds
    env.step(np.zeros(17))
camera = env._client.getDebugVisualizerCamera()
robot = env._body_xyz.tolist()
width, height = camera[0], camera[1]
env._client.__dict__["getMouseEvents"] = lambda: [(2, width / 2, height / 2, 0, pybullet.KEY_WAS_TRIGGERED)]
_, _, _, _, info = env.step(np.zeros(17))
flag = env._client.getBasePositionAndOrientation(env._flag_id)[0]
print("RESULT", json.dumps({"camera_target": camera[11], "pitch": camera[9], "forward": camera[5], "robot": robot,
                           "target": info["target"].tolist(), "flag": flag}), flush=True)
env.close()
"""


@pytest.mark.slow
def test_gui_follows_the_robot_and_a_click_sets_the_target(tmp_path):
    import json
    import shutil
    import subprocess
    import sys

    if shutil.which("xvfb-run") is None:
        pytest.skip("xvfb-run is not installed (apt-get install xvfb)")
    script = tmp_path / "gui.py"
    script.write_text(GUI_SCRIPT)
    result = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 800x600x24", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    report = json.loads(line[len("RESULT ") :])
    # The camera looks at the robot (1 m up); a click in the middle of the window hits the floor on the
    # camera's line of sight: 1 m below the look-at point, 1 / tan(-pitch) m further along its heading.
    # (the GUI thread applies camera moves a frame late: allow one step of motion)
    np.testing.assert_allclose(report["camera_target"], [report["robot"][0], report["robot"][1], 1.0], atol=0.05)
    heading = np.array(report["forward"][:2]) / np.linalg.norm(report["forward"][:2])
    expected = np.array(report["camera_target"][:2]) + heading / math.tan(math.radians(-report["pitch"]))
    np.testing.assert_allclose(report["target"], expected, atol=0.05)
    np.testing.assert_allclose(report["flag"][:2], report["target"], atol=1e-9)


def test_human_mode_without_a_display_raises_instead_of_exiting(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    with pytest.raises(RuntimeError, match="DISPLAY"):
        Walker2DEnv(render_mode="human")


def test_one_quirk_leaves_the_other_fixes_in_place(walker):
    quirky = Walker2DEnv(reference_quirks=["raw_action_electricity"])
    try:
        assert quirky.reference_quirks == frozenset({"raw_action_electricity"})
        walker.reset(seed=5)
        quirky.reset(seed=5)
        for _ in range(20):
            obs, reward, *_ = walker.step(np.full(6, 0.5))
            quirky_obs, quirky_reward, *_ = quirky.step(np.full(6, 0.5))
            np.testing.assert_array_equal(obs, quirky_obs)  # current contact flags, same body centre
            assert reward == quirky_reward  # in-range actions: the raw and the clipped action cost the same
    finally:
        quirky.close()


@pytest.mark.parametrize(
    "value, message",
    [
        ("floor_in_centre", "must be True, False or a collection"),
        (1, "must be True, False or a collection"),
        (["floor_in_centre", "wobble"], r"unknown quirk name\(s\) \['wobble'\]"),
    ],
)
def test_bad_quirk_settings_are_named(value, message):
    with pytest.raises(ValueError, match=message):
        Walker2DEnv(reference_quirks=value)

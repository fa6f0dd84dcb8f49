"""RocketLander: physics checks, the gymnasium contract, rewards, and a scripted controller that lands.

The scripted controller is written from the dynamics (attitude PD on the gimbal and cold-gas thrusters,
proportional-descent throttle law); it only reads the observation and the vehicle's public parameters.
"""

from __future__ import annotations

import math
import resource

import gymnasium as gym
import numpy as np
import pytest

import sb3_ppo_ext.envs  # noqa: F401  (registers the ids)
from sb3_ppo_ext.envs.rocket_lander import (
    ENGINE_ARM,
    N_LEGS,
    RCS_ARM,
    STANDARD_GRAVITY,
    RewardWeights,
    RocketLanderEnv,
    body_to_world,
    engine_force_and_torque,
    landing_state,
    potential,
    quaternion_axes,
    tilt_angle,
    world_to_body,
)
from sb3_ppo_ext.envs.rocket_rendering import camera_view, plume_index
from sb3_ppo_ext.envs.rocket_vehicle import VehicleReading, add_thruster_force_and_torque, rate_limited
from sb3_ppo_ext.envs.rocket_world import DECK_TOP, deck_path, wind_drag

MIN_THROTTLE = np.array([-1.0, 0.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)
FULL_THROTTLE = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)
# An estimate of the pitch / yaw inertia about the centre of mass (kg m^2): body cylinder, legs and engine.
PITCH_INERTIA_ESTIMATE = 25_000.0


def scripted_action(observation: np.ndarray, env: RocketLanderEnv) -> np.ndarray:
    """Attitude PD + proportional-descent throttle law, computed from the observation alone."""
    position = observation[0:3] * np.array([10.0, 10.0, 50.0])
    velocity = observation[3:6] * 10.0
    up_axis, x_axis = observation[6:9], observation[9:12]
    y_axis = np.cross(up_axis, x_axis)
    body_spin = observation[12:15]
    roll_damping = float(np.clip(-body_spin[2] / 0.1, -1.0, 1.0))
    mass = env.dry_mass + observation[22] * env.initial_fuel_mass
    # Lateral: PD on position, acceleration capped at 0.2 g (about 11 degrees of tilt).
    lateral = -0.15 * position[:2] - 0.7 * velocity[:2]
    lateral_limit = 0.2 * STANDARD_GRAVITY
    lateral *= min(1.0, lateral_limit / max(float(np.linalg.norm(lateral)), 1e-9))
    # Vertical: descend at a speed proportional to altitude, 0.8 m/s at touchdown.
    target_vertical_speed = -min(15.0, 0.8 + 0.3 * max(position[2], 0.0))
    vertical = 1.5 * (target_vertical_speed - velocity[2])
    force = mass * np.array([lateral[0], lateral[1], max(STANDARD_GRAVITY + vertical, 0.1 * STANDARD_GRAVITY)])
    direction = force / np.linalg.norm(force)
    throttle = float(force @ up_axis) / env.max_thrust
    throttle_action = 2.0 * float(np.clip((throttle - env.min_throttle) / (1.0 - env.min_throttle), 0.0, 1.0)) - 1.0
    # Attitude: turn the up-axis toward the thrust direction (error about body x and y), with rate damping.
    error = np.cross(up_axis, direction)
    body_error = np.array([error @ x_axis, error @ y_axis])
    torque = PITCH_INERTIA_ESTIMATE * (2.25 * body_error - 2.7 * body_spin[:2])
    gimbal_torque = env.max_thrust * max(throttle, env.min_throttle) * math.sin(env.gimbal_limit) * ENGINE_ARM
    gimbal = np.clip(torque / gimbal_torque, -1.0, 1.0)
    cold_gas = np.clip(torque / (env.rcs_force * RCS_ARM), -1.0, 1.0)
    return np.array([throttle_action, gimbal[0], gimbal[1], cold_gas[0], cold_gas[1], roll_damping], dtype=np.float32)


def run_episode(env: gym.Env, seed: int, policy) -> tuple[dict, float, int]:
    observation, _ = env.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return info, total, steps


def engine_test_env(**kwargs) -> RocketLanderEnv:
    """Upright, still start, so that forces can be read off the acceleration."""
    return RocketLanderEnv(start_tilt=0.0, start_spin=0.0, start_lateral_speed=0.0, **kwargs)


# ---------------------------------------------------------------------------------------------- maths
def test_quaternion_axes_identity_and_quarter_turn() -> None:
    assert quaternion_axes(0.0, 0.0, 0.0, 1.0) == ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    half = math.sqrt(0.5)
    x_axis, y_axis, z_axis = quaternion_axes(half, 0.0, 0.0, half)  # +90 degrees about world x
    np.testing.assert_allclose(x_axis, (1.0, 0.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(y_axis, (0.0, 0.0, 1.0), atol=1e-12)
    np.testing.assert_allclose(z_axis, (0.0, -1.0, 0.0), atol=1e-12)
    assert tilt_angle(z_axis[2]) == pytest.approx(math.pi / 2)
    assert tilt_angle(1.0 + 1e-12) == 0.0


def test_engine_force_keeps_magnitude_and_torque_sign() -> None:
    fx, fy, fz, tx, ty, tz = engine_force_and_torque(1000.0, 0.1, -0.05)
    assert math.hypot(fx, fy, fz) == pytest.approx(1000.0)
    assert tx > 0 and ty < 0 and tz == 0.0
    assert tx == pytest.approx(ENGINE_ARM * 1000.0 * math.sin(0.1))
    assert engine_force_and_torque(500.0, 0.0, 0.0) == (0.0, 0.0, 500.0, 0.0, 0.0, 0.0)


def test_potential_parts_follow_the_weights() -> None:
    weights = RewardWeights(distance=2.0, speed=3.0, tilt=4.0, spin=5.0, legs=6.0)
    assert potential(1.0, 1.0, 1.0, 1.0, 2, weights) == {
        "distance": -2.0,
        "speed": -3.0,
        "tilt": -4.0,
        "spin": -5.0,
        "legs": 12.0,
    }


def test_rotations_between_body_and_world_axes() -> None:
    half = math.sqrt(0.5)
    axes = quaternion_axes(0.0, 0.0, half, half)  # +90 degrees about world z: body x is world y
    np.testing.assert_allclose(body_to_world((1.0, 0.0, 0.0), axes), (0.0, 1.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(world_to_body((0.0, 1.0, 0.0), axes), (1.0, 0.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(world_to_body((0.0, 1.0, 0.0), axes, add_to=(1.0, 2.0, 3.0)), (2.0, 2.0, 3.0), atol=1e-12)
    # Without add_to nothing is added, not even the sign of a zero.
    assert math.copysign(1.0, world_to_body((-0.0, -0.0, -0.0), quaternion_axes(0.0, 0.0, 0.0, 1.0))[0]) == -1.0


def test_thrusters_push_sideways_above_the_base() -> None:
    assert add_thruster_force_and_torque((0.0,) * 6, 1.0, 0.0, 0.0, 400.0, 200.0) == (
        0.0,
        -400.0,
        0.0,
        RCS_ARM * 400.0,
        0.0,
        0.0,
    )
    assert add_thruster_force_and_torque((0.0,) * 6, 0.0, -1.0, 0.5, 400.0, 200.0) == (
        -400.0,
        0.0,
        0.0,
        0.0,
        -RCS_ARM * 400.0,
        100.0,
    )
    assert rate_limited(0.4, 1.0, 0.1) == pytest.approx(0.5)
    assert rate_limited(0.4, 0.45, 0.1) == pytest.approx(0.45)
    assert rate_limited(0.4, 0.0, 0.1) == pytest.approx(0.3)


def test_deck_path_and_wind_drag() -> None:
    centre, velocity = deck_path(2.0, 0.5, 0.0)
    assert centre == pytest.approx((0.0, math.sin(1.0), DECK_TOP / 2 + 0.4 * math.sin(2.0)))
    assert velocity == pytest.approx((1.0, 0.35 * math.cos(1.0), 0.26 * math.cos(2.0)))
    assert deck_path(0.0, 0.5, 1.3) == ((0.0, 0.0, DECK_TOP / 2), (0.0, 0.0, 0.0))
    # Quadratic drag along the relative wind: 0.5 * 1.2 kg/m^3 * Cd 1 * (2 * 0.6 m * 12 m) * v^2.
    assert wind_drag(3.0, 0.0, 1.0, 0.0) == pytest.approx((0.5 * 1.2 * 14.4 * 4.0, 0.0))
    assert wind_drag(0.0, 0.0, 0.0, -2.0) == pytest.approx((0.0, 0.5 * 1.2 * 14.4 * 4.0))


def test_plume_and_camera_choices() -> None:
    assert [plume_index(fraction, 4) for fraction in (0.0, 0.1, 0.4, 0.99, 1.0)] == [-1, 0, 1, 3, 3]
    target, distance = camera_view((0.0, 0.0, 100.0), (0.0, 0.0, 1.0))
    assert target == pytest.approx((0.0, 0.0, (100.0 + 6.0 + 1.0) / 2))
    assert distance == pytest.approx(0.9 * 99.0 + 20.0)
    assert camera_view((0.0, 0.0, 2.0), (0.0, 0.0, 1.0))[1] == 25.0


def test_landing_state_is_relative_to_the_landing_point_and_flags_non_finite() -> None:
    upright = quaternion_axes(0.0, 0.0, 0.0, 1.0)
    reading = VehicleReading(
        (3.0, 4.0, 1.0 + 7.2 + 10.0),
        (0.0, 0.0, 0.0, 1.0),
        (1.0, 0.0, -2.0),
        (0.0, 0.0, 0.5),
        upright,
        (0.0, 0.0, 0.5),
        [1, 0, 0, 1],
        False,
        False,
        False,
    )
    state = landing_state(reading, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0))
    assert state.finite and state.lateral == pytest.approx(5.0) and state.altitude == pytest.approx(10.0)
    assert state.speed == pytest.approx(2.0) and state.tilt == 0.0 and state.spin == 0.5 and state.legs == 2
    broken = landing_state(reading._replace(velocity=(math.nan, 0.0, 0.0)), (0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    assert not broken.finite and math.isnan(broken.distance) and math.isnan(broken.speed)


# ---------------------------------------------------------------------------------------------- physics
def test_free_fall_matches_gravity() -> None:
    env = engine_test_env()
    env.reset(seed=3)
    env.engine_on = False  # shut the landing burn down to fall freely
    start_velocity, start_height = env.vehicle.velocity[2], env.vehicle.position[2]
    steps = 20
    for _ in range(steps):
        env.step(MIN_THROTTLE)
    elapsed = steps * env.dt
    assert (env.vehicle.velocity[2] - start_velocity) / elapsed == pytest.approx(-STANDARD_GRAVITY, rel=1e-9)
    # Semi-implicit Euler: the height lags the exact parabola by g * dt * t / 2.
    exact = start_height + start_velocity * elapsed - 0.5 * STANDARD_GRAVITY * elapsed**2
    assert env.vehicle.position[2] == pytest.approx(exact - 0.5 * STANDARD_GRAVITY * env.physics_time_step * elapsed)
    env.close()


def test_full_throttle_matches_thrust_to_weight() -> None:
    env = engine_test_env(throttle_rate=1000.0, thrust_to_weight=2.0)
    env.reset(seed=4)
    start_mass = env.total_mass
    velocity = env.vehicle.velocity[2]
    env.step(FULL_THROTTLE)
    acceleration = (env.vehicle.velocity[2] - velocity) / env.dt
    # The propellant of the step is taken out before the step, so the step flies at the lighter mass.
    thrust = (acceleration + STANDARD_GRAVITY) * env.total_mass
    assert thrust / (start_mass * STANDARD_GRAVITY) == pytest.approx(2.0, rel=1e-6)
    # The vehicle gets lighter: the same thrust accelerates it more on the next step.
    velocity = env.vehicle.velocity[2]
    env.step(FULL_THROTTLE)
    assert (env.vehicle.velocity[2] - velocity) / env.dt > acceleration
    env.close()


def test_fuel_flow_matches_specific_impulse_and_runs_out() -> None:
    env = engine_test_env(throttle_rate=1000.0, specific_impulse=282.0, fuel_mass=150.0)
    env.reset(seed=5)
    expected_flow = env.max_thrust / (282.0 * STANDARD_GRAVITY)
    env.step(FULL_THROTTLE)
    assert 150.0 - env.fuel == pytest.approx(expected_flow * env.dt)
    # Minimum throttle burns min_throttle of the full flow.
    env.reset(seed=5)
    env.step(MIN_THROTTLE)
    assert 150.0 - env.fuel == pytest.approx(env.min_throttle * expected_flow * env.dt)
    env.close()
    # With little propellant the engine flames out and cannot be relit.
    env = engine_test_env(throttle_rate=1000.0, fuel_mass=5.0, start_altitude=(80.0, 80.0), bounds=(50.0, 200.0))
    env.reset(seed=5)
    for _ in range(15):  # 5 kg lasts about 0.5 s (10 steps) at full throttle
        _, _, terminated, _, _info = env.step(FULL_THROTTLE)
    assert env.fuel == 0.0 and not env.engine_on and not terminated
    velocity = env.vehicle.velocity[2]
    env.step(FULL_THROTTLE)
    assert (env.vehicle.velocity[2] - velocity) / env.dt == pytest.approx(-STANDARD_GRAVITY)
    assert env.total_mass == pytest.approx(env.dry_mass)
    env.close()


def test_engine_is_lit_at_minimum_throttle_and_cut_at_touchdown() -> None:
    env = engine_test_env(throttle_rate=1000.0, min_throttle=0.4)
    observation, _ = env.reset(seed=6)
    assert env.engine_on and observation[19] == pytest.approx(0.4)
    observation, *_ = env.step(np.array([0.0, 0, 0, 0, 0, 0], dtype=np.float32))
    assert observation[19] == pytest.approx(0.7)  # the middle of [min_throttle, 1]
    observation, *_ = env.step(MIN_THROTTLE)
    assert env.engine_on and observation[19] == pytest.approx(0.4)
    while observation[15:19].sum() == 0:
        observation, _, terminated, _, _ = env.step(scripted_action(observation, env))
        assert not terminated
    assert not env.engine_on and observation[19] == 0.0
    env.close()


# ---------------------------------------------------------------------------------------------- the task
def test_scripted_controller_lands_and_random_actions_do_not() -> None:
    env = gym.make("sb3_ppo_ext/RocketLander-v0")
    landed = [run_episode(env, seed, lambda obs: scripted_action(obs, env.unwrapped))[0]["is_success"] for seed in range(100)]
    assert sum(landed) >= 90
    env.action_space.seed(0)
    random_landed = [
        run_episode(env, 1000 + seed, lambda obs: env.action_space.sample())[0]["is_success"] for seed in range(100)
    ]
    assert sum(random_landed) <= 2
    env.close()


def test_reward_terms_sum_to_reward_and_landing_pays() -> None:
    env = gym.make("sb3_ppo_ext/RocketLander-v0")
    observation, info = env.reset(seed=7)
    names = {
        "reward_distance",
        "reward_speed",
        "reward_tilt",
        "reward_spin",
        "reward_legs",
        "reward_fuel",
        "reward_rcs",
        "reward_landing",
        "reward_crash",
    }
    while True:
        observation, reward, terminated, truncated, info = env.step(scripted_action(observation, env.unwrapped))
        assert {k for k in info if k.startswith("reward_")} == names
        assert reward == pytest.approx(sum(info[name] for name in names))
        if terminated or truncated:
            break
    assert info["is_success"] and info["reward_landing"] == 100.0 and info["legs_down"] == N_LEGS
    env.close()


def test_crash_is_penalised_and_reported() -> None:
    env = gym.make("sb3_ppo_ext/RocketLander-v0")
    info, _, _ = run_episode(env, 8, lambda obs: MIN_THROTTLE)
    assert not info["is_success"]
    assert info["crash_reason"] in {"hard_touchdown", "body_contact", "engine_contact", "sea_contact"}
    assert info["reward_crash"] == -100.0
    env.close()


def test_reward_weights_scale_terms() -> None:
    env = RocketLanderEnv(reward_weights=RewardWeights(crash=7.0))
    info, _, _ = run_episode(env, 8, lambda obs: MIN_THROTTLE)
    assert info["reward_crash"] == -7.0
    env.close()


def test_same_seed_and_actions_give_identical_trajectories() -> None:
    def trajectory(env: gym.Env) -> list:
        rng = np.random.default_rng(0)
        observation, _ = env.reset(seed=11)
        out = [observation]
        for _ in range(60):
            observation, reward, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
            out.append(np.append(observation, float(reward)))
            if terminated or truncated:
                observation, _ = env.reset(seed=12)
        return out

    first, second = gym.make("sb3_ppo_ext/RocketLander-v0"), gym.make("sb3_ppo_ext/RocketLander-v0")
    # Interleave the two envs: instances must not share state.
    np.testing.assert_array_equal(np.concatenate(trajectory(first)), np.concatenate(trajectory(second)))
    # A used instance reset with the same seed repeats the trajectory too.
    np.testing.assert_array_equal(np.concatenate(trajectory(first)), np.concatenate(trajectory(second)))
    different = gym.make("sb3_ppo_ext/RocketLander-v0")
    assert not np.array_equal(different.reset(seed=1)[0], different.reset(seed=2)[0])
    for env in (first, second, different):
        env.close()


def test_observation_is_bounded_and_documented_layout() -> None:
    env = RocketLanderEnv()
    observation, _ = env.reset(seed=0)
    assert observation.shape == (23,) and observation.dtype == np.float32
    assert np.all(np.abs(observation) <= 2.0)
    np.testing.assert_allclose(np.linalg.norm(observation[6:9]), 1.0, rtol=1e-5)  # up axis
    np.testing.assert_allclose(np.linalg.norm(observation[9:12]), 1.0, rtol=1e-5)  # x axis
    assert observation[6:9] @ observation[9:12] == pytest.approx(0.0, abs=1e-6)
    assert observation[22] == 1.0  # full tank
    env.close()


@pytest.mark.parametrize("action", [np.zeros(5, dtype=np.float32), np.array([np.nan, 0, 0, 0, 0, 0], dtype=np.float32)])
def test_bad_continuous_action_raises(action) -> None:
    env = RocketLanderEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    env.close()


@pytest.mark.parametrize("action", [7, -1, 1.5, [1, 2], "a", None, True, np.True_, 2.0, [[1]], np.array([1])])
def test_bad_discrete_action_raises(action) -> None:
    env = RocketLanderEnv(continuous=False)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    env.close()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"frame_skip": 0}, "frame_skip"),
        ({"min_throttle": 1.5}, "min_throttle"),
        ({"fuel_mass": -1.0}, "fuel_mass"),
        ({"start_altitude": (50.0, 10.0)}, "start_altitude"),
        ({"render_mode": "ascii"}, "render_mode"),
        ({"gimbal_limit": 1.0}, "gimbal_limit"),
        ({"bounds": (5.0, 100.0)}, "bounds"),
        ({"continuous": "no"}, "continuous"),
        ({"frame_skip": True}, "frame_skip"),
        ({"frame_skip": 2.0}, "frame_skip"),
        ({"physics_time_step": math.nan}, "physics_time_step"),
        ({"physics_time_step": math.inf}, "physics_time_step"),
        ({"thrust_to_weight": math.inf}, "thrust_to_weight"),
        ({"deck_motion": math.inf}, "deck_motion"),
        ({"wind_speed": math.nan}, "wind_speed"),
        ({"start_tilt": -0.1}, "start_tilt"),
        ({"start_tilt": 2.0}, "start_tilt"),  # beyond crash_tilt: every episode would start tipped over
        ({"success_tilt": -0.1}, "success_tilt"),
        ({"crash_tilt": 0.0}, "crash_tilt"),
        ({"crash_tilt": 4.0}, "crash_tilt"),
        ({"touchdown_speed_limit": -1.0}, "touchdown_speed_limit"),
        ({"start_altitude": (math.nan, 10.0)}, "start_altitude"),
        ({"start_altitude": None}, "start_altitude"),
        ({"start_vertical_speed": "ab"}, "start_vertical_speed"),
        ({"bounds": (50.0,)}, "bounds"),
        ({"reward_weights": "x"}, "reward_weights"),
        ({"reward_weights": {"landng": 200.0}}, "reward_weights: unknown term"),
        ({"reward_weights": {"landing": math.nan}}, "reward_weights.landing"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        RocketLanderEnv(**kwargs)


def test_reward_weights_may_be_a_mapping_of_some_terms() -> None:
    env = RocketLanderEnv(reward_weights={"landing": 200.0})
    assert env.weights == RewardWeights(landing=200.0)
    env.close()


def test_step_before_reset_and_after_close_raise() -> None:
    env = RocketLanderEnv(render_mode="rgb_array")
    with pytest.raises(RuntimeError):
        env.step(MIN_THROTTLE)
    env.reset(seed=0)
    env.close()
    env.close()  # closing twice is fine
    for call in (lambda: env.step(MIN_THROTTLE), env.reset, env.render):
        with pytest.raises(RuntimeError, match=r"called on a closed RocketLanderEnv"):
            call()


@pytest.mark.parametrize(
    ("options", "message"),
    [("bad", "options must be None or a dict"), ({"altitude": 10.0}, r"unknown key\(s\) \['altitude'\]")],
)
def test_reset_options_the_task_does_not_take_raise(options, message) -> None:
    env = RocketLanderEnv()
    with pytest.raises(ValueError, match=message):
        env.reset(seed=0, options=options)
    env.reset(seed=0, options={})  # what SB3's VecEnvs pass
    env.close()


def test_non_finite_physics_state_ends_episode_with_flag(monkeypatch) -> None:
    env = RocketLanderEnv()
    _observation, _ = env.reset(seed=0)
    monkeypatch.setattr(env._client, "getBaseVelocity", lambda body: ((math.nan, 0.0, 0.0), (0.0, 0.0, 0.0)))
    new_observation, reward, terminated, _, info = env.step(MIN_THROTTLE)
    assert terminated and info["non_finite_state"] and info["crash_reason"] == "non_finite_state"
    assert np.all(np.isfinite(new_observation)) and math.isfinite(reward)
    env.close()


def test_discrete_variant_controls_engine_and_gimbal() -> None:
    env = gym.make("sb3_ppo_ext/RocketLanderDiscrete-v0")
    assert env.action_space == gym.spaces.Discrete(7)
    env.reset(seed=0)
    rocket = env.unwrapped
    assert isinstance(rocket, RocketLanderEnv)
    env.step(1)
    assert rocket.throttle_command == pytest.approx(rocket.min_throttle + 0.1)
    env.step(3)
    assert rocket.gimbal_x > 0
    env.step(5)
    assert rocket.gimbal_y > 0
    for _ in range(3):
        env.step(2)  # throttle down stops at the minimum
    assert rocket.engine_on and rocket.throttle_command == pytest.approx(rocket.min_throttle)
    env.close()


def test_wind_and_moving_deck_options_run_and_move_things() -> None:
    env = RocketLanderEnv(wind_speed=8.0, deck_motion=2.0)
    observation, _ = env.reset(seed=0)
    start_deck = env.world.deck_position
    for _ in range(20):
        observation, _, _terminated, _, _ = env.step(MIN_THROTTLE)
        assert np.all(np.isfinite(observation))
    assert env.world.deck_position != start_deck
    assert abs(env.vehicle.velocity[0]) + abs(env.vehicle.velocity[1]) > 0.0
    env.close()


def test_rgb_render_shows_rocket_and_plume() -> None:
    env = RocketLanderEnv(render_mode="rgb_array", start_tilt=0.0, start_spin=0.0)
    env.reset(seed=0)
    env.engine_on = False
    env.step(MIN_THROTTLE)
    frame_off = env.render()
    assert frame_off.shape == (240, 320, 3) and frame_off.dtype == np.uint8
    env.engine_on = True
    env.step(FULL_THROTTLE)
    frame_on = env.render()
    orange = (frame_on[..., 0] > 200) & (frame_on[..., 1] > 100) & (frame_on[..., 1] < 180) & (frame_on[..., 2] < 80)
    orange_off = (frame_off[..., 0] > 200) & (frame_off[..., 1] > 100) & (frame_off[..., 1] < 180) & (frame_off[..., 2] < 80)
    assert orange.sum() > 10 and orange_off.sum() == 0
    env.close()
    assert RocketLanderEnv.metadata["render_fps"] == round(1.0 / env.dt)


@pytest.mark.slow
def test_many_make_close_cycles_leak_nothing() -> None:
    env = RocketLanderEnv()
    env.reset(seed=0)
    env.close()
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for index in range(1000):
        env = gym.make("sb3_ppo_ext/RocketLander-v0")
        env.reset(seed=index)
        env.step(env.action_space.sample())
        rocket = env.unwrapped
        assert isinstance(rocket, RocketLanderEnv) and rocket._client is not None
        client_id = rocket._client.client_id
        env.close()
        assert client_id < 4  # ids are reused: nothing stays connected
    # ru_maxrss is in KiB on Linux; 1000 leaked scenes would be far more than 50 MiB.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline < 50_000


def test_human_mode_without_display_fails_fast(monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="display"):
        RocketLanderEnv(render_mode="human")

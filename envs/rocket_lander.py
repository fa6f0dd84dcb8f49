"""RocketLander: a 3D first-stage booster landing on a drone-ship deck, in PyBullet.

The split follows the locomotion tasks (``locomotion.py``): :mod:`.rocket_vehicle` holds the vehicle (body, mass,
main engine, cold-gas thrusters), :mod:`.rocket_world` the world (sea, deck, wind), :mod:`.rocket_rendering` the
plume and the camera, and this module the task: the typed :class:`LandingState`, the reward terms and the
termination (:class:`LandingTask`), and the gymnasium env that puts them together. Every number is documented,
with units, in ``docs/guide/rocket_lander.md``.

Design for speed: one physics client per env, bound pybullet functions cached by
:class:`~sb3_ppo_ext.envs._bullet.BulletClient`, a 1/60 s physics step with a frame skip of 3 (agent at
20 Hz), forces held for the agent step (zero-order hold), scalar maths without numpy in the hot loop, and
two state queries plus one contact query per agent step.

Speed notes (CPU time on the loaded 2-core machine; ``benchmarks/bench_envs.py`` measures the env against the replay
of its own PyBullet calls, its "floor"), each keeping every observation, reward, end and info bit for bit
(``tests/test_envs.py`` replays trajectories recorded before them): a continuous action is read with one ``tolist()``
and a finite sum (:func:`~._bullet.box_action_values`) and clipped value by value, where ``check_action`` and
``np.clip(...).tolist()`` made five NumPy calls: 7.9 to 1.7 us per step; :class:`LandingState` is built from
positional arguments and the ``info`` keys of the reward terms once, not per step: 0.9 us. The rocket's env / floor
went from 0.41-0.47 to 0.49-0.55 (3 runs each of ``bench_envs.py --tables own --steps 3000``, old and new code
alternating).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, cast

import gymnasium as gym
import numpy as np
import pybullet
from gymnasium import spaces

from sb3_ppo_ext.validation import MAX_FRAME_SKIP

from ._bullet import (
    BulletClient,
    box_action_values,
    check_action,
    check_bool,
    check_finite,
    check_gui_available,
    check_integer,
    check_known_keys,
    check_non_negative,
    check_not_closed,
    check_option,
    check_pair,
    check_positive,
    check_reset_options,
    check_that,
)
from .rocket_rendering import HIDDEN_Z, LanderRenderer
from .rocket_vehicle import (
    BODY_LENGTH,
    BODY_RADIUS,
    ENGINE_ARM,
    ENGINE_LENGTH,
    ENGINE_MASS,
    ENGINE_RADIUS,
    LEG_FOOT_DROP,
    LEG_FOOT_RADIUS,
    LEG_MASS,
    LEG_SPAN,
    N_LEGS,
    RCS_ARM,
    REST_HEIGHT,
    STANDARD_GRAVITY,
    RocketVehicle,
    Vector,
    VehicleParameters,
    VehicleReading,
    body_to_world,
    engine_force_and_torque,
    quaternion_axes,
    world_to_body,
)
from .rocket_world import DECK_TOP, DroneShipWorld, WorldParameters

__all__ = [
    "BODY_LENGTH",
    "BODY_RADIUS",
    "DECK_TOP",
    "DISCRETE_ACTIONS",
    "ENGINE_ARM",
    "ENGINE_LENGTH",
    "ENGINE_MASS",
    "ENGINE_RADIUS",
    "HIDDEN_Z",
    "LEG_FOOT_DROP",
    "LEG_FOOT_RADIUS",
    "LEG_MASS",
    "LEG_SPAN",
    "N_LEGS",
    "OBS_DIM",
    "RCS_ARM",
    "REST_HEIGHT",
    "STANDARD_GRAVITY",
    "LandingState",
    "LandingTask",
    "RewardWeights",
    "RocketLanderEnv",
    "body_to_world",
    "engine_force_and_torque",
    "landing_state",
    "potential",
    "quaternion_axes",
    "tilt_angle",
    "world_to_body",
]

OBS_DIM = 23
DISCRETE_ACTIONS = 7


class _InfoKeys(dict):
    """Reward term name -> its ``info`` key, ``reward_<name>``, each built once."""

    def __missing__(self, name: str) -> str:
        self[name] = key = f"reward_{name}"
        return key


_INFO_KEYS = _InfoKeys()


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the named reward terms (see ``docs/guide/rocket_lander.md``).

    :param distance: potential weight per metre of lateral distance plus height above the landing point (the
        two add, so that lateral errors pull as hard as height does even high up).
    :param speed: potential weight per m/s of speed.
    :param tilt: potential weight per radian of tilt from vertical.
    :param spin: potential weight per rad/s of angular speed.
    :param legs: potential weight per leg on the deck.
    :param fuel: cost per kg of propellant burnt.
    :param rcs: cost per second of full cold-gas thruster use (summed over the three axes).
    :param landing: bonus once the landing is held.
    :param crash: penalty on a crash.
    """

    distance: float = 2.0
    speed: float = 4.0
    tilt: float = 10.0
    spin: float = 5.0
    legs: float = 10.0
    fuel: float = 1.0
    rcs: float = 0.3
    landing: float = 100.0
    crash: float = 100.0

    def __post_init__(self) -> None:
        for field in fields(self):
            check_finite(f"reward_weights.{field.name}", getattr(self, field.name))

    @classmethod
    def from_value(cls, value: RewardWeights | Mapping[str, float] | None) -> RewardWeights:
        """The weights given as ``RewardWeights``, as a mapping of some of its fields (what a YAML ``env_kwargs`` can
        hold; the others keep their defaults), or ``None`` for the defaults (``ValueError`` for anything else)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        check_that(isinstance(value, Mapping), "reward_weights", value, "be None, a RewardWeights or a mapping of its fields")
        mapping = cast(Mapping[str, float], value)
        check_known_keys("reward_weights", mapping, [field.name for field in fields(cls)], what="term")
        return cls(**mapping)


# ----------------------------------------------------------------------------------------------------------------
# Pure functions (the per-step maths of the task)
# ----------------------------------------------------------------------------------------------------------------


def tilt_angle(up_z: float) -> float:
    """Angle (rad) between the body up-axis and the world vertical, from the up-axis z component."""
    return math.acos(max(-1.0, min(1.0, up_z)))


def potential(distance: float, speed: float, tilt: float, spin: float, legs: int, weights: RewardWeights) -> dict:
    """The shaping potential, split into its named parts (each part is a potential of its own)."""
    return {
        "distance": -weights.distance * distance,
        "speed": -weights.speed * speed,
        "tilt": -weights.tilt * tilt,
        "spin": -weights.spin * spin,
        "legs": weights.legs * legs,
    }


class LandingState(NamedTuple):
    """The vehicle relative to the landing point (the base position when standing on the deck centre), as the task
    sees it. A state read while the physics was not finite has ``finite=False`` and NaN in its measures."""

    finite: bool
    offset: Vector  # base position minus the landing point (m)
    velocity: Vector  # base velocity minus the deck's (m/s)
    distance: float  # |offset| (m)
    lateral: float  # horizontal part of the offset (m)
    altitude: float  # vertical part of the offset (m)
    speed: float  # |velocity| (m/s)
    up_z: float  # world z component of the body up-axis
    tilt: float  # angle from vertical (rad)
    spin: float  # angular speed (rad/s)
    legs: int  # feet on the deck
    body_contact: bool
    engine_contact: bool
    sea_contact: bool


def landing_state(reading: VehicleReading, deck_position: Vector, deck_velocity: Vector) -> LandingState:
    """The task's view of a vehicle reading, relative to the deck's landing point."""
    position, velocity = reading.position, reading.velocity
    deck_x, deck_y, deck_z = deck_position
    deck_vx, deck_vy, deck_vz = deck_velocity
    dx, dy, dz = position[0] - deck_x, position[1] - deck_y, position[2] - deck_z - REST_HEIGHT
    vx, vy, vz = velocity[0] - deck_vx, velocity[1] - deck_vy, velocity[2] - deck_vz
    wx, wy, wz = reading.angular_velocity
    x_axis, _y_axis, z_axis = reading.axes
    legs = sum(reading.contacts)
    contacts = reading.body_contact, reading.engine_contact, reading.sea_contact
    # A sum is finite only if every term is (inf - inf is nan).
    if not math.isfinite(dx + dy + dz + vx + vy + vz + wx + wy + wz + sum(x_axis) + sum(z_axis)):
        nan = float("nan")
        return LandingState(False, (dx, dy, dz), (vx, vy, vz), nan, nan, nan, nan, nan, nan, nan, legs, *contacts)
    # Positional arguments: a NamedTuple built from keywords costs twice as much, and this runs every step.
    return LandingState(
        True,
        (dx, dy, dz),
        (vx, vy, vz),
        math.sqrt(dx * dx + dy * dy + dz * dz),  # distance
        math.hypot(dx, dy),  # lateral
        dz,  # altitude
        math.sqrt(vx * vx + vy * vy + vz * vz),  # speed
        z_axis[2],  # up_z
        tilt_angle(z_axis[2]),  # tilt
        math.sqrt(wx * wx + wy * wy + wz * wz),  # spin
        legs,
        *contacts,
    )


def state_potential(state: LandingState, legs: int, weights: RewardWeights) -> dict:
    """:func:`potential` of a state, with ``legs`` feet counted (none at the start of an episode)."""
    return potential(state.lateral + abs(state.altitude), state.speed, state.tilt, state.spin, legs, weights)


# ----------------------------------------------------------------------------------------------------------------
# The task
# ----------------------------------------------------------------------------------------------------------------


class LandingTask:
    """Reward terms and termination of the landing: potential shaping, fuel and thruster costs, the landing bonus
    once the landing state has held, the crash penalty and its reason.

    :param weights: the reward weights.
    :param agent_time_step: the duration of one agent step (s).
    :param success_tilt: largest tilt for a landing (rad).
    :param success_speed: largest speed for a landing (m/s).
    :param success_spin: largest angular speed for a landing (rad/s).
    :param success_hold_time: how long the landing state must hold (s).
    :param touchdown_speed_limit: largest speed at first foot contact (m/s); faster is a crash.
    :param crash_tilt: tilt beyond which the vehicle counts as tipped over (rad).
    :param bounds: lateral and vertical distance from the landing point beyond which the episode ends (m).
    """

    def __init__(
        self,
        weights: RewardWeights,
        agent_time_step: float,
        success_tilt: float,
        success_speed: float,
        success_spin: float,
        success_hold_time: float,
        touchdown_speed_limit: float,
        crash_tilt: float,
        bounds: tuple[float, float],
    ) -> None:
        self.weights = weights
        self.dt = agent_time_step
        self.success_tilt = float(success_tilt)
        self.success_speed = float(success_speed)
        self.success_spin = float(success_spin)
        self.success_hold_steps = max(1, round(success_hold_time / agent_time_step))
        self.touchdown_speed_limit = float(touchdown_speed_limit)
        self.crash_cos_tilt = math.cos(crash_tilt)
        self.lateral_bound, self.vertical_bound = float(bounds[0]), float(bounds[1])
        self.hold_steps = 0
        self.touched_down = False
        self.previous_speed = 0.0
        self.last_potential: dict = {}

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called (an episode is under way)."""
        return bool(self.last_potential)

    def start(self, state: LandingState) -> None:
        """Start an episode from its first state."""
        self.hold_steps = 0
        self.touched_down = False
        self.last_potential = state_potential(state, 0, self.weights)
        self.previous_speed = state.speed

    def crash_reason(self, state: LandingState) -> str:
        """Why this (finite) state ends the episode as a crash, or ``""``; notes the first touchdown."""
        if state.body_contact:
            return "body_contact"
        if state.engine_contact:
            return "engine_contact"
        if state.sea_contact:
            return "sea_contact"
        if state.up_z < self.crash_cos_tilt:
            return "tipped_over"
        if state.lateral > self.lateral_bound or state.altitude > self.vertical_bound:
            return "out_of_bounds"
        if state.legs > 0 and not self.touched_down:
            self.touched_down = True
            if self.previous_speed > self.touchdown_speed_limit:
                return "hard_touchdown"
        return ""

    def step(self, state: LandingState, fuel_burnt: float, rcs_use: float) -> tuple[dict, bool, str, bool]:
        """Score one agent step.

        :param state: the state after the step.
        :param fuel_burnt: propellant burnt during the step (kg).
        :param rcs_use: cold-gas thruster use, the sum of the three commands' magnitudes.
        :return: ``(terms, terminated, crash_reason, landed)``; the reward is the sum of the terms.
        """
        weights = self.weights
        terms = {"fuel": -weights.fuel * fuel_burnt, "rcs": -weights.rcs * rcs_use * self.dt}
        if not state.finite:
            terms.update(distance=0.0, speed=0.0, tilt=0.0, spin=0.0, legs=0.0, landing=0.0, crash=0.0)
            return terms, True, "non_finite_state", False
        crash_reason = self.crash_reason(state)
        self.previous_speed = state.speed

        # Shaping: the change of each potential part. A crash step gets none, so that the impact itself (which
        # kills the speed and puts feet down) earns nothing.
        new_potential = state_potential(state, state.legs, weights)
        for name, value in new_potential.items():
            terms[name] = 0.0 if crash_reason else value - self.last_potential[name]
        self.last_potential = new_potential

        landed = False
        if not crash_reason:
            steady = (
                state.legs == N_LEGS
                and state.tilt < self.success_tilt
                and state.speed < self.success_speed
                and state.spin < self.success_spin
            )
            self.hold_steps = self.hold_steps + 1 if steady else 0
            landed = self.hold_steps >= self.success_hold_steps
        terms["landing"] = weights.landing if landed else 0.0
        terms["crash"] = -weights.crash if crash_reason else 0.0
        return terms, bool(crash_reason or landed), crash_reason, landed


# ----------------------------------------------------------------------------------------------------------------
# The env
# ----------------------------------------------------------------------------------------------------------------


def _check_start_and_limits(
    *,
    start_altitude: tuple[float, float],
    start_offset: float,
    start_vertical_speed: tuple[float, float],
    start_lateral_speed: float,
    start_tilt: float,
    start_spin: float,
    success_tilt: float,
    success_speed: float,
    success_spin: float,
    success_hold_time: float,
    touchdown_speed_limit: float,
    crash_tilt: float,
    bounds: tuple[float, float],
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Check the spread of the first state and the landing limits (:class:`RocketLanderEnv`'s parameters of these
    names) with a ``ValueError`` naming the first bad one. They are checked together because they constrain each other:
    a start tilt below the crash tilt, bounds beyond the start ranges.

    :return: ``(start_altitude, start_vertical_speed, bounds)``, each as a pair of floats.
    """
    for name, value in (
        ("success_hold_time", success_hold_time),
        ("success_tilt", success_tilt),
        ("success_speed", success_speed),
        ("success_spin", success_spin),
        ("touchdown_speed_limit", touchdown_speed_limit),
        ("crash_tilt", crash_tilt),
    ):
        check_positive(name, value)
    for name, value in (
        ("start_offset", start_offset),
        ("start_lateral_speed", start_lateral_speed),
        ("start_tilt", start_tilt),
        ("start_spin", start_spin),
    ):
        check_non_negative(name, value)
    check_that(crash_tilt <= math.pi, "crash_tilt", crash_tilt, "be in (0, pi]")
    for name, value in (("success_tilt", success_tilt), ("start_tilt", start_tilt)):
        check_that(value < crash_tilt, name, value, f"be below crash_tilt ({crash_tilt})")
    start_altitude = check_pair("start_altitude", start_altitude)
    check_that(
        0 < start_altitude[0] <= start_altitude[1], "start_altitude", start_altitude, "be (low, high) with 0 < low <= high"
    )
    start_vertical_speed = check_pair("start_vertical_speed", start_vertical_speed)
    check_that(
        start_vertical_speed[0] <= start_vertical_speed[1],
        "start_vertical_speed",
        start_vertical_speed,
        "be (low, high) with low <= high",
    )
    bounds = check_pair("bounds", bounds)
    check_that(
        bounds[0] > start_offset and bounds[1] > start_altitude[1],
        "bounds",
        bounds,
        "be (lateral, vertical) beyond the start ranges",
    )
    return start_altitude, start_vertical_speed, bounds


class RocketLanderEnv(gym.Env):
    """Land a 3D booster on a drone-ship deck.

    Observation (23, float32), relative to the landing point (the base position when standing on the deck
    centre): position / (10, 10, 50) m, velocity / 10 m/s (world axes), body up-axis and body x-axis in world
    coordinates, body-frame angular velocity (rad/s), four foot contacts (0/1), throttle (0 when the engine is
    off), gimbal x / y as a fraction of their limit, fuel fraction.

    The landing burn is under way at the start (engine lit at minimum throttle); the flight computer shuts the
    engine down when a foot senses contact, and it flames out when the propellant runs out.

    Continuous action ``Box(-1, 1, (6,))``: throttle command (``[-1, 1]`` maps to ``[min_throttle, 1]``), gimbal
    x / y set points, cold-gas pitch / yaw / roll thrusters. The throttle and the gimbal follow their commands
    at limited rates. Discrete ``Discrete(7)``: no-op, throttle up, throttle down (by 0.1, within
    ``[min_throttle, 1]``), gimbal +x, -x, +y, -y (each also fires the matching cold-gas thruster; the gimbal
    set point halves back toward centre on every other action); a rate damper works the roll thruster.

    The parts are attributes: ``vehicle`` (:class:`~.rocket_vehicle.RocketVehicle`), ``world``
    (:class:`~.rocket_world.DroneShipWorld`), ``task`` (:class:`LandingTask`) and, with a ``render_mode``,
    ``renderer`` (:class:`~.rocket_rendering.LanderRenderer`). The vehicle's parameters and actuator state are
    also readable on the env (``dry_mass``, ``max_thrust``, ``fuel``, ``engine_on``, ``throttle``, ...).

    :param render_mode: ``None``, ``"rgb_array"`` (headless TinyRenderer) or ``"human"`` (PyBullet GUI).
    :param continuous: continuous (``Box``) or discrete (``Discrete(7)``) actions.
    :param physics_time_step: physics step (s).
    :param frame_skip: physics steps per agent step (1 to :data:`~sb3_ppo_ext.validation.MAX_FRAME_SKIP`).
    :param dry_mass: vehicle mass without propellant (kg), legs and engine included.
    :param fuel_mass: propellant at the start (kg).
    :param thrust_to_weight: full-throttle thrust over the weight at the start (with full propellant).
    :param min_throttle: lowest throttle while the engine is lit (fraction of full thrust).
    :param specific_impulse: main engine specific impulse (s); sets the propellant flow.
    :param gimbal_limit: gimbal deflection limit about each body axis (rad).
    :param gimbal_rate: gimbal slew rate (rad/s).
    :param throttle_rate: throttle slew rate (fraction of full thrust per second).
    :param rcs_force: force of each pitch / yaw cold-gas thruster (N), acting ``RCS_ARM`` above the base.
    :param rcs_roll_torque: roll torque of the cold-gas thrusters (N m).
    :param start_altitude: range of the start altitude of the base above its resting height (m).
    :param start_offset: lateral start offset limit per axis (m).
    :param start_vertical_speed: range of the start vertical velocity (m/s, negative is down).
    :param start_lateral_speed: lateral start speed limit per axis (m/s).
    :param start_tilt: start tilt limit (rad), about a random horizontal axis.
    :param start_spin: start angular velocity limit per body axis (rad/s).
    :param deck_half_size: half the side of the square deck (m).
    :param wind_speed: standard deviation of the gusting lateral wind (m/s); 0 disables wind.
    :param wind_time_constant: correlation time of the gusts (s).
    :param deck_motion: amplitude of the deck's sway (x and y) and heave (m); 0 keeps the deck still.
    :param deck_period: period of the deck motion (s).
    :param reward_weights: weights of the named reward terms: a :class:`RewardWeights`, a mapping of some of its
        fields (``{"landing": 200.0}``, as a YAML ``env_kwargs`` gives it; the others keep their defaults) or ``None``.
    :param success_tilt: largest tilt for a landing (rad).
    :param success_speed: largest speed for a landing (m/s).
    :param success_spin: largest angular speed for a landing (rad/s).
    :param success_hold_time: how long the landing state must hold (s).
    :param touchdown_speed_limit: largest speed at first foot contact (m/s); faster is a crash.
    :param crash_tilt: tilt beyond which the vehicle counts as tipped over (rad).
    :param bounds: lateral and vertical distance from the landing point beyond which the episode ends (m).

    Every argument is checked here, with a ``ValueError`` naming it: switches must be ``bool``, ``frame_skip`` an
    ``int``, every physical quantity a finite number of the right sign (tilts and limits > 0, start spreads and
    disturbances >= 0), ranges ``(low, high)`` pairs. ``reset()`` takes no ``options`` (``None`` or an empty dict);
    ``reset()``, ``step()`` and ``render()`` of a closed env raise ``RuntimeError``.
    """

    # Declared as gymnasium.Env declares it (an instance variable there, so not a ClassVar here).
    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}  # noqa: RUF012

    def __init__(
        self,
        render_mode: str | None = None,
        continuous: bool = True,
        physics_time_step: float = 1.0 / 60.0,
        frame_skip: int = 3,
        dry_mass: float = 1400.0,
        fuel_mass: float = 150.0,
        thrust_to_weight: float = 2.0,
        min_throttle: float = 0.4,
        specific_impulse: float = 282.0,
        gimbal_limit: float = 0.1,
        gimbal_rate: float = 1.0,
        throttle_rate: float = 2.0,
        rcs_force: float = 400.0,
        rcs_roll_torque: float = 200.0,
        start_altitude: tuple[float, float] = (30.0, 50.0),
        start_offset: float = 6.0,
        start_vertical_speed: tuple[float, float] = (-12.0, -6.0),
        start_lateral_speed: float = 2.0,
        start_tilt: float = math.radians(8.0),
        start_spin: float = 0.1,
        deck_half_size: float = 12.5,
        wind_speed: float = 0.0,
        wind_time_constant: float = 2.0,
        deck_motion: float = 0.0,
        deck_period: float = 8.0,
        reward_weights: RewardWeights | Mapping[str, float] | None = None,
        success_tilt: float = math.radians(10.0),
        success_speed: float = 0.5,
        success_spin: float = 0.2,
        success_hold_time: float = 1.0,
        touchdown_speed_limit: float = 4.0,
        crash_tilt: float = math.radians(60.0),
        bounds: tuple[float, float] = (50.0, 100.0),
    ) -> None:
        # Every argument is checked before a physics client exists, in the order of these steps.
        self._set_modes_and_time_steps(render_mode, continuous, physics_time_step, frame_skip)
        vehicle_parameters = VehicleParameters(
            dry_mass=dry_mass,
            fuel_mass=fuel_mass,
            thrust_to_weight=thrust_to_weight,
            min_throttle=min_throttle,
            specific_impulse=specific_impulse,
            gimbal_limit=gimbal_limit,
            gimbal_rate=gimbal_rate,
            throttle_rate=throttle_rate,
            rcs_force=rcs_force,
            rcs_roll_torque=rcs_roll_torque,
        )
        world_parameters = WorldParameters(
            deck_half_size=deck_half_size,
            wind_speed=wind_speed,
            wind_time_constant=wind_time_constant,
            deck_motion=deck_motion,
            deck_period=deck_period,
        )
        start_altitude, start_vertical_speed, bounds = _check_start_and_limits(
            start_altitude=start_altitude,
            start_offset=start_offset,
            start_vertical_speed=start_vertical_speed,
            start_lateral_speed=start_lateral_speed,
            start_tilt=start_tilt,
            start_spin=start_spin,
            success_tilt=success_tilt,
            success_speed=success_speed,
            success_spin=success_spin,
            success_hold_time=success_hold_time,
            touchdown_speed_limit=touchdown_speed_limit,
            crash_tilt=crash_tilt,
            bounds=bounds,
        )
        self.weights = RewardWeights.from_value(reward_weights)

        self._set_start_spread(start_altitude, start_offset, start_vertical_speed, start_lateral_speed, start_tilt, start_spin)
        self.task = LandingTask(
            self.weights,
            self.dt,
            success_tilt=success_tilt,
            success_speed=success_speed,
            success_spin=success_spin,
            success_hold_time=success_hold_time,
            touchdown_speed_limit=touchdown_speed_limit,
            crash_tilt=crash_tilt,
            bounds=bounds,
        )
        self._make_spaces()
        self._build_scene(vehicle_parameters, world_parameters)
        self._clear_episode_state()

    # ------------------------------------------------------------------ the steps of __init__
    def _set_modes_and_time_steps(
        self, render_mode: str | None, continuous: bool, physics_time_step: float, frame_skip: int
    ) -> None:
        """Check and set the render mode, the kind of actions and the time steps: ``frame_skip`` physics steps of
        ``physics_time_step`` seconds make one agent step of ``dt`` seconds."""
        self.render_mode = check_option("render_mode", render_mode, self.metadata["render_modes"])
        self.continuous = check_bool("continuous", continuous)
        self.frame_skip = check_integer("frame_skip", frame_skip, 1, MAX_FRAME_SKIP, "MAX_FRAME_SKIP")
        self.physics_time_step = check_positive("physics_time_step", physics_time_step)
        self.dt = self.physics_time_step * self.frame_skip

    def _set_start_spread(
        self,
        start_altitude: tuple[float, float],
        start_offset: float,
        start_vertical_speed: tuple[float, float],
        start_lateral_speed: float,
        start_tilt: float,
        start_spin: float,
    ) -> None:
        """Keep the checked ranges that :meth:`reset` draws the first state from (see the parameters of the class)."""
        self.start_altitude = start_altitude
        self.start_offset = float(start_offset)
        self.start_vertical_speed = start_vertical_speed
        self.start_lateral_speed = float(start_lateral_speed)
        self.start_tilt = float(start_tilt)
        self.start_spin = float(start_spin)

    def _make_spaces(self) -> None:
        """The observation space and the action space: ``Box(-1, 1, (6,))`` for continuous actions, else
        ``Discrete(7)``."""
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
        if self.continuous:
            self.action_space: spaces.Space = spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
        else:
            self.action_space = spaces.Discrete(DISCRETE_ACTIONS)

    def _build_scene(self, vehicle_parameters: VehicleParameters, world_parameters: WorldParameters) -> None:
        """Open the physics client (a GUI one for ``render_mode="human"``) and build the scene in it: physics settings,
        world, vehicle, plumes, in this order, which fixes the body ids. The client is closed again if a part fails."""
        if self.render_mode == "human":
            check_gui_available()
        self._client: BulletClient | None = BulletClient(self.render_mode)
        client = self._client
        try:
            if client.is_gui:
                client.configureDebugVisualizer(pybullet.COV_ENABLE_GUI, 0)
            client.setGravity(0.0, 0.0, -STANDARD_GRAVITY)
            client.setPhysicsEngineParameter(fixedTimeStep=self.physics_time_step, numSolverIterations=10, numSubSteps=0)
            self.world = DroneShipWorld(client, world_parameters, self.dt)
            self.vehicle = RocketVehicle(client, vehicle_parameters, self.dt)
            self.renderer = LanderRenderer(client) if self.render_mode is not None else None
        except BaseException:
            client.close()
            raise

    def _clear_episode_state(self) -> None:
        """Set the episode clock to 0 and the observation that a non-finite state repeats to zeros."""
        self.time = 0.0
        self._last_observation = np.zeros(OBS_DIM, dtype=np.float32)

    # ------------------------------------------------------------------ the vehicle, read through the env
    dry_mass = property(lambda self: self.vehicle.dry_mass, doc="Vehicle mass without propellant (kg).")
    initial_fuel_mass = property(lambda self: self.vehicle.initial_fuel_mass, doc="Propellant at the start (kg).")
    max_thrust = property(lambda self: self.vehicle.max_thrust, doc="Full-throttle thrust (N).")
    max_mass_flow = property(lambda self: self.vehicle.max_mass_flow, doc="Propellant flow at full thrust (kg/s).")
    min_throttle = property(lambda self: self.vehicle.min_throttle, doc="Lowest throttle while the engine is lit.")
    gimbal_limit = property(lambda self: self.vehicle.gimbal_limit, doc="Gimbal limit about each body axis (rad).")
    rcs_force = property(lambda self: self.vehicle.rcs_force, doc="Force of each pitch / yaw thruster (N).")
    rcs_roll_torque = property(lambda self: self.vehicle.rcs_roll_torque, doc="Roll thruster torque (N m).")
    fuel = property(lambda self: self.vehicle.fuel, doc="Propellant left (kg).")
    total_mass = property(lambda self: self.vehicle.total_mass, doc="Current vehicle mass (kg).")
    throttle = property(lambda self: self.vehicle.throttle, doc="Throttle (fraction of full thrust).")
    throttle_command = property(lambda self: self.vehicle.throttle_command, doc="Throttle set point.")
    gimbal_x = property(lambda self: self.vehicle.gimbal_x, doc="Gimbal angle about body x (rad).")
    gimbal_y = property(lambda self: self.vehicle.gimbal_y, doc="Gimbal angle about body y (rad).")

    @property
    def engine_on(self) -> bool:
        """Whether the main engine is lit (settable: a test may shut it down or relight it)."""
        return self.vehicle.engine_on

    @engine_on.setter
    def engine_on(self, value: bool) -> None:
        self.vehicle.engine_on = value

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode; ``options`` must be ``None`` or empty (this task takes no reset options)."""
        client = check_not_closed(self._client, "reset", self)
        check_reset_options(options)
        super().reset(seed=seed)
        vehicle, world = self.vehicle, self.world
        vehicle.reset_actuators()
        self._clear_episode_state()
        rng = self.np_random
        altitude = rng.uniform(*self.start_altitude)
        x, y = rng.uniform(-self.start_offset, self.start_offset, size=2)
        vx, vy = rng.uniform(-self.start_lateral_speed, self.start_lateral_speed, size=2)
        vz = rng.uniform(*self.start_vertical_speed)
        tilt = rng.uniform(0.0, self.start_tilt)
        tilt_axis = rng.uniform(-math.pi, math.pi)
        roll = rng.uniform(-math.pi, math.pi)
        spin_x, spin_y, spin_z = rng.uniform(-self.start_spin, self.start_spin, size=3)
        # Roll about the body axis, then tilt about a horizontal axis at angle tilt_axis.
        roll_quaternion = pybullet.getQuaternionFromAxisAngle([0.0, 0.0, 1.0], roll)
        tilt_quaternion = pybullet.getQuaternionFromAxisAngle([math.cos(tilt_axis), math.sin(tilt_axis), 0.0], tilt)
        _, orientation = pybullet.multiplyTransforms([0, 0, 0], tilt_quaternion, [0, 0, 0], roll_quaternion)
        world.start(rng)
        deck_x, deck_y, deck_z = world.deck_position
        position = (deck_x + x, deck_y + y, deck_z + REST_HEIGHT + altitude)
        vehicle.place(position, orientation, (vx, vy, vz), (spin_x, spin_y, spin_z))
        vehicle.update_mass()
        # Refresh the contact points: otherwise those of the last episode's final step would be read.
        client.performCollisionDetection()
        state = landing_state(vehicle.read(world.deck_id), world.deck_position, world.deck_velocity)
        vehicle.cut_off_at_touchdown()  # a start with a foot already on the deck
        observation = self._observation(state)
        self.task.start(state)
        if self.render_mode == "human":
            self.render()
        return observation, self._info(state, {}, crash_reason="", landed=False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Apply ``action`` for ``frame_skip`` physics steps; return the observation, the reward (the sum of the
        task's terms, each in ``info`` as ``reward_<term>``), ``terminated``, ``truncated`` (always ``False``: the time
        limit is the registration's ``max_episode_steps``) and ``info`` (``is_success`` once landed)."""
        client = check_not_closed(self._client, "step", self)
        if not self.task.started:
            raise RuntimeError("step() called before reset()")
        vehicle, world = self.vehicle, self.world
        rcs_x, rcs_y, rcs_roll = self._apply_commands(action)
        thrust, fuel_burnt = vehicle.burn()

        # Body-frame force and torque about the base origin.
        fx, fy, fz, tx, ty, tz = vehicle.body_force_and_torque(thrust, rcs_x, rcs_y, rcs_roll)
        force = (fx, fy, fz)
        if world.wind_speed > 0:
            drag_x, drag_y = world.gust(self.np_random, vehicle.velocity)
            force = world_to_body((drag_x, drag_y, 0.0), vehicle.axes, add_to=force)
        # The force goes in the body frame at the base origin, so that it turns with the body and adds no torque
        # as the body moves during the frame skip; the torque is held in world axes for the agent step.
        torque = body_to_world((tx, ty, tz), vehicle.axes)
        step_simulation = client.stepSimulation
        for substep in range(self.frame_skip):
            if world.deck_motion > 0:
                world.move_deck(self.time + (substep + 1) * self.physics_time_step)
            vehicle.apply(force, torque)
            step_simulation()
        self.time += self.dt

        state = landing_state(vehicle.read(world.deck_id), world.deck_position, world.deck_velocity)
        vehicle.cut_off_at_touchdown()
        observation = self._observation(state)
        terms, terminated, crash_reason, landed = self.task.step(state, fuel_burnt, abs(rcs_x) + abs(rcs_y) + abs(rcs_roll))
        reward = sum(terms.values())
        if self.render_mode == "human":
            self.render()
        return observation, reward, terminated, False, self._info(state, terms, crash_reason, landed)

    def _apply_commands(self, action: Any) -> tuple[float, float, float]:
        """Check an action (``ValueError`` naming what is wrong), turn it into actuator commands and return the
        cold-gas thruster commands (each in [-1, 1])."""
        vehicle = self.vehicle
        if self.continuous:
            # Clipped to [-1, 1] value by value, as np.clip does (the action is finite here).
            throttle, gimbal_x, gimbal_y, rcs_x, rcs_y, rcs_roll = [
                -1.0 if value < -1.0 else (1.0 if value > 1.0 else value)
                for value in box_action_values(action, cast(spaces.Box, self.action_space))
            ]
            vehicle.command_continuous(throttle, gimbal_x, gimbal_y)
            return rcs_x, rcs_y, rcs_roll
        # Discrete: throttle steps of 0.1, gimbal steps of half the limit that decay back to centre.
        choice = int(check_action(action, self.action_space))
        rcs_x = rcs_y = 0.0
        if choice == 1:
            vehicle.throttle_command = min(1.0, vehicle.throttle_command + 0.1)
        elif choice == 2:
            vehicle.throttle_command = max(vehicle.min_throttle, vehicle.throttle_command - 0.1)
        vehicle.gimbal_command_x *= 0.5
        vehicle.gimbal_command_y *= 0.5
        if choice in (3, 4):
            sign = 1.0 if choice == 3 else -1.0
            vehicle.gimbal_command_x = sign * vehicle.gimbal_limit
            rcs_x = sign
        elif choice in (5, 6):
            sign = 1.0 if choice == 5 else -1.0
            vehicle.gimbal_command_y = sign * vehicle.gimbal_limit
            rcs_y = sign
        # Roll rate damper on the roll thruster.
        rcs_roll = max(-1.0, min(1.0, -vehicle.body_spin[2] / 0.1))
        return rcs_x, rcs_y, rcs_roll

    def _observation(self, state: LandingState) -> np.ndarray:
        """The observation of a state; a non-finite state repeats the last finite observation."""
        if not state.finite:
            return self._last_observation.copy()
        vehicle = self.vehicle
        dx, dy, dz = state.offset
        vx, vy, vz = state.velocity
        x_axis, _y_axis, z_axis = vehicle.axes
        gimbal_scale = max(vehicle.gimbal_limit, 1e-9)
        observation = np.array(
            (
                dx / 10.0,
                dy / 10.0,
                dz / 50.0,
                vx / 10.0,
                vy / 10.0,
                vz / 10.0,
                *z_axis,
                *x_axis,
                *vehicle.body_spin,
                *vehicle.contacts,
                vehicle.thrust_fraction,
                vehicle.gimbal_x / gimbal_scale,
                vehicle.gimbal_y / gimbal_scale,
                vehicle.fuel / vehicle.initial_fuel_mass,
            ),
            dtype=np.float32,
        )
        self._last_observation = observation
        return observation

    def _info(self, state: LandingState, terms: dict, crash_reason: str, landed: bool) -> dict:
        info = {_INFO_KEYS[name]: value for name, value in terms.items()}
        info.update(
            is_success=landed,
            crash_reason=crash_reason,
            non_finite_state=not state.finite,
            fuel=self.vehicle.fuel,
            legs_down=int(sum(self.vehicle.contacts)),
            distance=state.distance,
            speed=state.speed,
            tilt=state.tilt,
        )
        return info

    # ------------------------------------------------------------------ rendering / cleanup
    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' or 'human'")
            return None
        check_not_closed(self._client, "render", self)
        assert self.renderer is not None  # made in __init__ whenever render_mode is set
        return self.renderer.render(self.render_mode, self.vehicle, self.world.deck_position)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()

"""RocketLander: a 3D first-stage booster landing on a drone-ship deck, in PyBullet.

The vehicle is a slender cylinder with a gimballed main engine (minimum throttle when lit), cold-gas
attitude thrusters and four landing legs whose feet sense contact. Fuel burns at the rate set by the
specific impulse and lightens the vehicle. Bodies are built procedurally (``createMultiBody``); no asset
files are loaded. Every number below is documented, with units, in ``docs/rocket_lander.md``.

Design for speed: one physics client per env, bound pybullet functions cached by
:class:`~sb3_ppo_ext.envs._bullet.BulletClient`, a 1/60 s physics step with a frame skip of 3 (agent at
20 Hz), forces held for the agent step (zero-order hold), scalar maths without numpy in the hot loop, and
two state queries plus one contact query per agent step.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pybullet
from gymnasium import spaces
from sb3_ppo_ext.envs._bullet import (
    BulletClient,
    check_action,
    check_bool,
    check_finite,
    check_integer,
    check_non_negative,
    check_not_closed,
    check_pair,
    check_positive,
    check_reset_options,
    render_camera,
)

STANDARD_GRAVITY = 9.81  # m/s^2, also g0 in the rocket equation

# Geometry (m). The base frame sits at the middle of the body cylinder.
BODY_RADIUS = 0.6
BODY_LENGTH = 12.0
ENGINE_RADIUS = 0.4
ENGINE_LENGTH = 0.8
LEG_FOOT_RADIUS = 0.2  # contact sphere at the end of each leg
LEG_SPAN = 3.0  # horizontal distance from the body axis to each foot centre
LEG_FOOT_DROP = 1.0  # foot centre below the bottom of the body cylinder
# Height of the base frame above the deck when the rocket stands on its four feet.
REST_HEIGHT = BODY_LENGTH / 2 + LEG_FOOT_DROP + LEG_FOOT_RADIUS
ENGINE_ARM = BODY_LENGTH / 2 + ENGINE_LENGTH / 2  # base origin to gimbal point
RCS_ARM = BODY_LENGTH / 2 - 0.5  # base origin to the pitch/yaw cold-gas thrusters near the nose

LEG_MASS = 25.0
ENGINE_MASS = 100.0

DECK_TOP = 1.0  # deck surface height above the sea (m)
HIDDEN_Z = -50.0  # where unused plume bodies are parked, under the sea

N_LEGS = 4
_BASE_ORIGIN = (0.0, 0.0, 0.0)
OBS_DIM = 23
DISCRETE_ACTIONS = 7


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the named reward terms (see ``docs/rocket_lander.md``).

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
        if not isinstance(value, Mapping):
            raise ValueError(f"reward_weights must be None, a RewardWeights or a mapping of its fields, got {value!r}")
        names = [field.name for field in fields(cls)]
        unknown = sorted(str(key) for key in value if key not in names)
        if unknown:
            raise ValueError(f"reward_weights: unknown term(s) {unknown}; the terms are {names}")
        return cls(**value)


def quaternion_axes(qx: float, qy: float, qz: float, qw: float) -> tuple[tuple[float, float, float], ...]:
    """World coordinates of the body x, y and z axes of the unit quaternion ``(qx, qy, qz, qw)``."""
    xx, yy, zz = qx * qx, qy * qy, qz * qz
    xy, xz, yz = qx * qy, qx * qz, qy * qz
    wx, wy, wz = qw * qx, qw * qy, qw * qz
    x_axis = (1.0 - 2.0 * (yy + zz), 2.0 * (xy + wz), 2.0 * (xz - wy))
    y_axis = (2.0 * (xy - wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz + wx))
    z_axis = (2.0 * (xz + wy), 2.0 * (yz - wx), 1.0 - 2.0 * (xx + yy))
    return x_axis, y_axis, z_axis


def tilt_angle(up_z: float) -> float:
    """Angle (rad) between the body up-axis and the world vertical, from the up-axis z component."""
    return math.acos(max(-1.0, min(1.0, up_z)))


def engine_force_and_torque(thrust: float, gimbal_x: float, gimbal_y: float) -> tuple[float, ...]:
    """Body-frame force and torque (about the base origin) of the main engine.

    The gimbal point is ``ENGINE_ARM`` below the base origin; a positive ``gimbal_x`` (``gimbal_y``) gives a
    positive torque about body x (y). The thrust magnitude does not depend on the gimbal angles.

    :return: ``(fx, fy, fz, tx, ty, tz)`` in N and N m.
    """
    sin_x, cos_x = math.sin(gimbal_x), math.cos(gimbal_x)
    sin_y, cos_y = math.sin(gimbal_y), math.cos(gimbal_y)
    fx = -thrust * sin_y * cos_x
    fy = thrust * sin_x
    fz = thrust * cos_x * cos_y
    # r x F with r = (0, 0, -ENGINE_ARM)
    return fx, fy, fz, ENGINE_ARM * fy, -ENGINE_ARM * fx, 0.0


def potential(distance: float, speed: float, tilt: float, spin: float, legs: int, weights: RewardWeights) -> dict:
    """The shaping potential, split into its named parts (each part is a potential of its own)."""
    return {
        "distance": -weights.distance * distance,
        "speed": -weights.speed * speed,
        "tilt": -weights.tilt * tilt,
        "spin": -weights.spin * spin,
        "legs": weights.legs * legs,
    }


def _require(condition: bool, name: str, value: Any, rule: str) -> None:
    if not condition:
        raise ValueError(f"{name}={value!r} is invalid: {rule}")


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

    :param render_mode: ``None``, ``"rgb_array"`` (headless TinyRenderer) or ``"human"`` (PyBullet GUI).
    :param continuous: continuous (``Box``) or discrete (``Discrete(7)``) actions.
    :param physics_time_step: physics step (s).
    :param frame_skip: physics steps per agent step.
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

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}

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
        _require(
            render_mode is None or render_mode in self.metadata["render_modes"],
            "render_mode",
            render_mode,
            f"must be None or one of {self.metadata['render_modes']}",
        )
        continuous = check_bool("continuous", continuous)
        frame_skip = check_integer("frame_skip", frame_skip, 1)
        for name, value in (
            ("physics_time_step", physics_time_step),
            ("dry_mass", dry_mass),
            ("fuel_mass", fuel_mass),
            ("thrust_to_weight", thrust_to_weight),
            ("min_throttle", min_throttle),
            ("specific_impulse", specific_impulse),
            ("gimbal_rate", gimbal_rate),
            ("throttle_rate", throttle_rate),
            ("success_hold_time", success_hold_time),
            ("deck_period", deck_period),
            ("wind_time_constant", wind_time_constant),
            ("deck_half_size", deck_half_size),
            ("success_tilt", success_tilt),
            ("success_speed", success_speed),
            ("success_spin", success_spin),
            ("touchdown_speed_limit", touchdown_speed_limit),
            ("crash_tilt", crash_tilt),
        ):
            check_positive(name, value)
        for name, value in (
            ("gimbal_limit", gimbal_limit),
            ("rcs_force", rcs_force),
            ("rcs_roll_torque", rcs_roll_torque),
            ("start_offset", start_offset),
            ("start_lateral_speed", start_lateral_speed),
            ("start_tilt", start_tilt),
            ("start_spin", start_spin),
            ("wind_speed", wind_speed),
            ("deck_motion", deck_motion),
        ):
            check_non_negative(name, value)
        _require(
            dry_mass > LEG_MASS * N_LEGS + ENGINE_MASS,
            "dry_mass",
            dry_mass,
            f"must exceed the legs and engine ({LEG_MASS * N_LEGS + ENGINE_MASS} kg)",
        )
        _require(min_throttle <= 1.0, "min_throttle", min_throttle, "must be in (0, 1]")
        _require(gimbal_limit < math.pi / 4, "gimbal_limit", gimbal_limit, "must be in [0, pi/4)")
        _require(crash_tilt <= math.pi, "crash_tilt", crash_tilt, "must be in (0, pi]")
        for name, value in (("success_tilt", success_tilt), ("start_tilt", start_tilt)):
            _require(value < crash_tilt, name, value, f"must be below crash_tilt ({crash_tilt})")
        start_altitude = check_pair("start_altitude", start_altitude)
        _require(
            0 < start_altitude[0] <= start_altitude[1],
            "start_altitude",
            start_altitude,
            "must be (low, high) with 0 < low <= high",
        )
        start_vertical_speed = check_pair("start_vertical_speed", start_vertical_speed)
        _require(
            start_vertical_speed[0] <= start_vertical_speed[1],
            "start_vertical_speed",
            start_vertical_speed,
            "must be (low, high) with low <= high",
        )
        bounds = check_pair("bounds", bounds)
        _require(
            bounds[0] > start_offset and bounds[1] > start_altitude[1],
            "bounds",
            bounds,
            "must be (lateral, vertical) beyond the start ranges",
        )
        reward_weights = RewardWeights.from_value(reward_weights)

        self.render_mode = render_mode
        self.continuous = continuous
        self.physics_time_step = float(physics_time_step)
        self.frame_skip = frame_skip
        self.dt = self.physics_time_step * frame_skip
        self.dry_mass = float(dry_mass)
        self.initial_fuel_mass = float(fuel_mass)
        self.max_thrust = thrust_to_weight * (dry_mass + fuel_mass) * STANDARD_GRAVITY
        self.min_throttle = float(min_throttle)
        # Propellant flow at full thrust (kg/s): thrust = mass flow * Isp * g0.
        self.max_mass_flow = self.max_thrust / (specific_impulse * STANDARD_GRAVITY)
        self.gimbal_limit = float(gimbal_limit)
        self.gimbal_step = gimbal_rate * self.dt
        self.throttle_step = throttle_rate * self.dt
        self.rcs_force = float(rcs_force)
        self.rcs_roll_torque = float(rcs_roll_torque)
        self.start_altitude = tuple(start_altitude)
        self.start_offset = float(start_offset)
        self.start_vertical_speed = tuple(start_vertical_speed)
        self.start_lateral_speed = float(start_lateral_speed)
        self.start_tilt = float(start_tilt)
        self.start_spin = float(start_spin)
        self.deck_half_size = float(deck_half_size)
        self.wind_speed = float(wind_speed)
        self.wind_decay = math.exp(-self.dt / wind_time_constant)
        self.deck_motion = float(deck_motion)
        self.deck_angular_frequency = 2.0 * math.pi / deck_period
        self.weights = reward_weights
        self.success_tilt = float(success_tilt)
        self.success_speed = float(success_speed)
        self.success_spin = float(success_spin)
        self.success_hold_steps = max(1, round(success_hold_time / self.dt))
        self.touchdown_speed_limit = float(touchdown_speed_limit)
        self.crash_cos_tilt = math.cos(crash_tilt)
        self.lateral_bound, self.vertical_bound = float(bounds[0]), float(bounds[1])

        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
        if continuous:
            self.action_space: spaces.Space = spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
        else:
            self.action_space = spaces.Discrete(DISCRETE_ACTIONS)

        self._client: BulletClient | None = None
        self._plumes: list[tuple[int, float]] = []
        self._build_world()
        self._reset_state_variables()

    # ------------------------------------------------------------------ scene
    def _build_world(self) -> None:
        if self.render_mode == "human" and sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
            # PyBullet's GUI connect waits forever without an X display; fail fast instead.
            raise RuntimeError("render_mode='human' needs a display (DISPLAY is not set); use 'rgb_array'")
        client = BulletClient(self.render_mode)
        self._client = client
        if client.is_gui:
            client.configureDebugVisualizer(pybullet.COV_ENABLE_GUI, 0)
        client.setGravity(0.0, 0.0, -STANDARD_GRAVITY)
        client.setPhysicsEngineParameter(fixedTimeStep=self.physics_time_step, numSolverIterations=10, numSubSteps=0)
        sea = client.createCollisionShape(pybullet.GEOM_PLANE)
        # A plane has no visual in PyBullet; draw the sea as a wide flat box.
        sea_visual = client.createVisualShape(
            pybullet.GEOM_BOX,
            halfExtents=[200.0, 200.0, 0.01],
            rgbaColor=[0.1, 0.25, 0.5, 1.0],
            visualFramePosition=[0, 0, -0.01],
        )
        self._sea = client.createMultiBody(0.0, sea, sea_visual, [0.0, 0.0, 0.0])
        half = [self.deck_half_size, self.deck_half_size, DECK_TOP / 2]
        deck_shape = client.createCollisionShape(pybullet.GEOM_BOX, halfExtents=half)
        deck_visual = client.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[0.3, 0.3, 0.3, 1.0])
        deck_mass = 1.0e6 if self.deck_motion > 0 else 0.0
        self._deck = client.createMultiBody(deck_mass, deck_shape, deck_visual, [0.0, 0.0, DECK_TOP / 2])
        self._deck_constraint = -1
        if self.deck_motion > 0:
            self._deck_constraint = client.createConstraint(
                self._deck, -1, -1, -1, pybullet.JOINT_FIXED, [0, 0, 0], [0, 0, 0], [0.0, 0.0, DECK_TOP / 2]
            )
        # Landing mark on the deck centre (visual only).
        mark = client.createVisualShape(pybullet.GEOM_CYLINDER, radius=2.0, length=0.02, rgbaColor=[1, 1, 0, 1])
        self._mark = client.createMultiBody(0.0, -1, mark, [0.0, 0.0, DECK_TOP + 0.01])
        for body in (self._sea, self._deck):
            client.changeDynamics(body, -1, lateralFriction=1.0, restitution=0.0)
        self._build_rocket(client)
        if self.render_mode is not None:
            # Plume bodies, visual only; the one matching the throttle is placed under the engine.
            for length in (2.0, 4.0, 6.0, 8.0):
                shape = client.createVisualShape(
                    pybullet.GEOM_CYLINDER, radius=0.5, length=length, rgbaColor=[1.0, 0.55, 0.1, 0.9]
                )
                self._plumes.append((client.createMultiBody(0.0, -1, shape, [0.0, 0.0, HIDDEN_Z]), length))

    def _build_rocket(self, client: BulletClient) -> None:
        body = client.createCollisionShape(pybullet.GEOM_CYLINDER, radius=BODY_RADIUS, height=BODY_LENGTH)
        body_visual = client.createVisualShape(
            pybullet.GEOM_CYLINDER, radius=BODY_RADIUS, length=BODY_LENGTH, rgbaColor=[0.95, 0.95, 0.95, 1.0]
        )
        engine = client.createCollisionShape(pybullet.GEOM_CYLINDER, radius=ENGINE_RADIUS, height=ENGINE_LENGTH)
        engine_visual = client.createVisualShape(
            pybullet.GEOM_CYLINDER, radius=ENGINE_RADIUS, length=ENGINE_LENGTH, rgbaColor=[0.2, 0.2, 0.2, 1.0]
        )
        foot = client.createCollisionShape(pybullet.GEOM_SPHERE, radius=LEG_FOOT_RADIUS)
        # Visual strut from the body's lower section to the foot, drawn as a thin box in the foot's frame.
        strut_rise = 2.5  # strut top above the body bottom
        strut_dx, strut_dz = LEG_SPAN - BODY_RADIUS, LEG_FOOT_DROP + strut_rise
        strut_length = math.hypot(strut_dx, strut_dz)
        strut_angle = math.atan2(strut_dx, strut_dz)
        foot_visual = client.createVisualShape(
            pybullet.GEOM_BOX,
            halfExtents=[0.08, 0.08, strut_length / 2],
            rgbaColor=[0.1, 0.1, 0.1, 1.0],
            visualFramePosition=[-strut_dx / 2, 0.0, strut_dz / 2],
            visualFrameOrientation=pybullet.getQuaternionFromEuler([0.0, -strut_angle, 0.0]),
        )
        link_masses, link_collisions, link_visuals, link_positions, link_orientations = [], [], [], [], []
        foot_z = -BODY_LENGTH / 2 - LEG_FOOT_DROP
        for index in range(N_LEGS):
            yaw = math.pi / 4 + index * math.pi / 2  # legs between the body axes, so gimbal axes are free
            link_masses.append(LEG_MASS)
            link_collisions.append(foot)
            link_visuals.append(foot_visual)
            link_positions.append([LEG_SPAN * math.cos(yaw), LEG_SPAN * math.sin(yaw), foot_z])
            link_orientations.append(pybullet.getQuaternionFromEuler([0.0, 0.0, yaw]))
        link_masses.append(ENGINE_MASS)
        link_collisions.append(engine)
        link_visuals.append(engine_visual)
        link_positions.append([0.0, 0.0, -ENGINE_ARM])
        link_orientations.append([0.0, 0.0, 0.0, 1.0])
        count = len(link_masses)
        self._engine_link = N_LEGS
        self._rocket = client.createMultiBody(
            baseMass=self._base_mass(self.initial_fuel_mass),
            baseCollisionShapeIndex=body,
            baseVisualShapeIndex=body_visual,
            basePosition=[0.0, 0.0, 50.0],
            linkMasses=link_masses,
            linkCollisionShapeIndices=link_collisions,
            linkVisualShapeIndices=link_visuals,
            linkPositions=link_positions,
            linkOrientations=link_orientations,
            linkInertialFramePositions=[[0.0, 0.0, 0.0]] * count,
            linkInertialFrameOrientations=[[0.0, 0.0, 0.0, 1.0]] * count,
            linkParentIndices=[0] * count,
            linkJointTypes=[pybullet.JOINT_FIXED] * count,
            linkJointAxis=[[0.0, 0.0, 1.0]] * count,
        )
        for link in range(-1, count):
            client.changeDynamics(
                self._rocket, link, lateralFriction=1.0, restitution=0.0, linearDamping=0.0, angularDamping=0.0
            )
        self._set_base_mass(self.initial_fuel_mass)

    def _base_mass(self, fuel_mass: float) -> float:
        return self.dry_mass - N_LEGS * LEG_MASS - ENGINE_MASS + fuel_mass

    def _set_base_mass(self, fuel_mass: float) -> None:
        """Set the body cylinder's mass and inertia (solid cylinder; propellant centred at the base origin)."""
        mass = self._base_mass(fuel_mass)
        lateral = mass * (3.0 * BODY_RADIUS**2 + BODY_LENGTH**2) / 12.0
        axial = mass * BODY_RADIUS**2 / 2.0
        self._change_dynamics(self._rocket, -1, mass=mass, localInertiaDiagonal=[lateral, lateral, axial])

    @property
    def total_mass(self) -> float:
        """Current vehicle mass (kg)."""
        return self.dry_mass + self.fuel

    # ------------------------------------------------------------------ gymnasium API
    def _reset_state_variables(self) -> None:
        self.fuel = self.initial_fuel_mass
        # The landing burn is under way at the start: the engine is lit at minimum throttle.
        self.engine_on = True
        self.throttle = self.throttle_command = self.min_throttle
        self.gimbal_x = self.gimbal_y = 0.0
        self.gimbal_command_x = self.gimbal_command_y = 0.0
        self.wind_x = self.wind_y = 0.0
        self.deck_phase = 0.0
        self.time = 0.0
        self.hold_steps = 0
        self.touched_down = False
        self.previous_speed = 0.0
        self._potential: dict = {}
        self._contacts = [0] * N_LEGS
        self._deck_position = (0.0, 0.0, DECK_TOP)
        self._deck_velocity = (0.0, 0.0, 0.0)
        self._last_observation = np.zeros(OBS_DIM, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode; ``options`` must be ``None`` or empty (this task takes no reset options)."""
        client = check_not_closed(self._client, "reset", self)
        check_reset_options(options)
        super().reset(seed=seed)
        self._reset_state_variables()
        rng = self.np_random
        altitude = rng.uniform(*self.start_altitude)
        x, y = rng.uniform(-self.start_offset, self.start_offset, size=2)
        vx, vy = rng.uniform(-self.start_lateral_speed, self.start_lateral_speed, size=2)
        vz = rng.uniform(*self.start_vertical_speed)
        tilt = rng.uniform(0.0, self.start_tilt)
        tilt_axis = rng.uniform(-math.pi, math.pi)
        roll = rng.uniform(-math.pi, math.pi)
        spin = rng.uniform(-self.start_spin, self.start_spin, size=3)
        # Roll about the body axis, then tilt about a horizontal axis at angle tilt_axis.
        roll_quaternion = pybullet.getQuaternionFromAxisAngle([0.0, 0.0, 1.0], roll)
        tilt_quaternion = pybullet.getQuaternionFromAxisAngle([math.cos(tilt_axis), math.sin(tilt_axis), 0.0], tilt)
        _, orientation = pybullet.multiplyTransforms([0, 0, 0], tilt_quaternion, [0, 0, 0], roll_quaternion)
        if self.deck_motion > 0:
            self.deck_phase = rng.uniform(0.0, 2.0 * math.pi)
            self._move_deck(0.0)
        if self.wind_speed > 0:
            self.wind_x, self.wind_y = rng.normal(0.0, self.wind_speed, size=2)
        deck_x, deck_y, deck_z = self._deck_position
        position = [deck_x + x, deck_y + y, deck_z + REST_HEIGHT + altitude]
        client.resetBasePositionAndOrientation(self._rocket, position, orientation)
        x_axis, y_axis, z_axis = quaternion_axes(*orientation)
        # Body-frame spin to world frame.
        angular = [spin[0] * x_axis[i] + spin[1] * y_axis[i] + spin[2] * z_axis[i] for i in range(3)]
        client.resetBaseVelocity(self._rocket, [vx, vy, vz], angular)
        self._set_base_mass(self.fuel)
        # Refresh the contact points: otherwise those of the last episode's final step would be read.
        client.performCollisionDetection()
        observation, state = self._observe()
        self._potential = potential(
            state["lateral"] + abs(state["altitude"]), state["speed"], state["tilt"], state["spin"], 0, self.weights
        )
        self.previous_speed = state["speed"]
        if self.render_mode == "human":
            self.render()
        return observation, self._info(state, {}, crash_reason="", landed=False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        check_not_closed(self._client, "step", self)
        if not self._potential:
            raise RuntimeError("step() called before reset()")
        action = check_action(action, self.action_space)
        rcs_x, rcs_y, rcs_roll = self._apply_commands(action)

        # Actuators: rate-limited throttle and gimbal, propellant flow.
        step = self.throttle_step
        if self.engine_on:
            self.throttle += max(-step, min(step, self.throttle_command - self.throttle))
        step = self.gimbal_step
        self.gimbal_x += max(-step, min(step, self.gimbal_command_x - self.gimbal_x))
        self.gimbal_y += max(-step, min(step, self.gimbal_command_y - self.gimbal_y))
        thrust = 0.0
        fuel_burnt = 0.0
        if self.engine_on:
            fuel_burnt = min(self.fuel, self.max_mass_flow * self.throttle * self.dt)
            # A partial last step delivers the thrust of the propellant that was left.
            thrust = self.max_thrust * self.throttle * fuel_burnt / (self.max_mass_flow * self.throttle * self.dt)
            self.fuel -= fuel_burnt
            if self.fuel <= 0.0:
                self.fuel = 0.0
                self.engine_on = False
                self.throttle = 0.0
            self._set_base_mass(self.fuel)

        # Body-frame force and torque about the base origin.
        fx, fy, fz, tx, ty, tz = engine_force_and_torque(thrust, self.gimbal_x, self.gimbal_y)
        fx += rcs_y * self.rcs_force
        fy -= rcs_x * self.rcs_force
        tx += RCS_ARM * rcs_x * self.rcs_force
        ty += RCS_ARM * rcs_y * self.rcs_force
        tz += rcs_roll * self.rcs_roll_torque
        if self.wind_speed > 0:
            fx, fy, fz = self._add_wind(fx, fy, fz)
        # The force goes in the body frame at the base origin, so that it turns with the body and adds no torque
        # as the body moves during the frame skip; the torque is held in world axes for the agent step.
        x_axis, y_axis, z_axis = self._axes
        force = (fx, fy, fz)
        torque = (
            tx * x_axis[0] + ty * y_axis[0] + tz * z_axis[0],
            tx * x_axis[1] + ty * y_axis[1] + tz * z_axis[1],
            tx * x_axis[2] + ty * y_axis[2] + tz * z_axis[2],
        )
        client = self._client
        apply_force, apply_torque, step_simulation = (
            client.applyExternalForce,
            client.applyExternalTorque,
            client.stepSimulation,
        )
        rocket = self._rocket
        for substep in range(self.frame_skip):
            if self.deck_motion > 0:
                self._move_deck(self.time + (substep + 1) * self.physics_time_step)
            apply_force(rocket, -1, force, _BASE_ORIGIN, pybullet.LINK_FRAME)
            apply_torque(rocket, -1, torque, pybullet.WORLD_FRAME)
            step_simulation()
        self.time += self.dt

        observation, state = self._observe()
        terms, terminated, crash_reason, landed = self._reward_and_termination(
            state, fuel_burnt, abs(rcs_x) + abs(rcs_y) + abs(rcs_roll)
        )
        reward = sum(terms.values())
        if self.render_mode == "human":
            self.render()
        return observation, reward, terminated, False, self._info(state, terms, crash_reason, landed)

    def _apply_commands(self, action: np.ndarray) -> tuple[float, float, float]:
        """Turn an action into actuator commands; return the cold-gas thruster commands (each in [-1, 1])."""
        if self.continuous:
            throttle, gimbal_x, gimbal_y, rcs_x, rcs_y, rcs_roll = np.clip(action, -1.0, 1.0).tolist()
            self.throttle_command = self.min_throttle + (1.0 - self.min_throttle) * 0.5 * (throttle + 1.0)
            self.gimbal_command_x = gimbal_x * self.gimbal_limit
            self.gimbal_command_y = gimbal_y * self.gimbal_limit
            return rcs_x, rcs_y, rcs_roll
        # Discrete: throttle steps of 0.1, gimbal steps of half the limit that decay back to centre.
        choice = int(action)
        rcs_x = rcs_y = 0.0
        if choice == 1:
            self.throttle_command = min(1.0, self.throttle_command + 0.1)
        elif choice == 2:
            self.throttle_command = max(self.min_throttle, self.throttle_command - 0.1)
        self.gimbal_command_x *= 0.5
        self.gimbal_command_y *= 0.5
        if choice in (3, 4):
            sign = 1.0 if choice == 3 else -1.0
            self.gimbal_command_x = sign * self.gimbal_limit
            rcs_x = sign
        elif choice in (5, 6):
            sign = 1.0 if choice == 5 else -1.0
            self.gimbal_command_y = sign * self.gimbal_limit
            rcs_y = sign
        # Roll rate damper on the roll thruster.
        rcs_roll = max(-1.0, min(1.0, -self._body_spin[2] / 0.1))
        return rcs_x, rcs_y, rcs_roll

    def _add_wind(self, fx: float, fy: float, fz: float) -> tuple[float, float, float]:
        """Advance the gust process (Ornstein-Uhlenbeck); add the lateral drag of the relative wind to a body force."""
        rng = self.np_random
        scale = self.wind_speed * math.sqrt(1.0 - self.wind_decay**2)
        self.wind_x = self.wind_x * self.wind_decay + scale * rng.standard_normal()
        self.wind_y = self.wind_y * self.wind_decay + scale * rng.standard_normal()
        relative_x = self.wind_x - self._velocity[0]
        relative_y = self.wind_y - self._velocity[1]
        # 0.5 * air density * drag coefficient * side area, with 1.2 kg/m^3, Cd 1.0, area 2 r L.
        coefficient = 0.5 * 1.2 * 1.0 * 2.0 * BODY_RADIUS * BODY_LENGTH
        magnitude = math.hypot(relative_x, relative_y)
        wind_x, wind_y = coefficient * magnitude * relative_x, coefficient * magnitude * relative_y
        x_axis, y_axis, z_axis = self._axes  # world force to body axes: dot products with the body axes
        return (
            fx + wind_x * x_axis[0] + wind_y * x_axis[1],
            fy + wind_x * y_axis[0] + wind_y * y_axis[1],
            fz + wind_x * z_axis[0] + wind_y * z_axis[1],
        )

    def _move_deck(self, time: float) -> None:
        """Drive the deck along its sway / heave path through its constraint."""
        phase = self.deck_phase + self.deck_angular_frequency * time
        amplitude, omega = self.deck_motion, self.deck_angular_frequency
        target = (
            amplitude * math.sin(phase),
            0.5 * amplitude * math.sin(0.7 * phase + 1.0),
            DECK_TOP / 2 + 0.2 * amplitude * math.sin(1.3 * phase + 2.0),
        )
        self._client.changeConstraint(self._deck_constraint, jointChildPivot=target, maxForce=1.0e9)
        if time == 0.0:
            self._client.resetBasePositionAndOrientation(self._deck, target, [0, 0, 0, 1])
        self._deck_position = (target[0], target[1], target[2] + DECK_TOP / 2)
        self._deck_velocity = (
            amplitude * omega * math.cos(phase),
            0.35 * amplitude * omega * math.cos(0.7 * phase + 1.0),
            0.26 * amplitude * omega * math.cos(1.3 * phase + 2.0),
        )

    def _observe(self) -> tuple[np.ndarray, dict]:
        client = self._client
        position, orientation = client.getBasePositionAndOrientation(self._rocket)
        velocity, angular = client.getBaseVelocity(self._rocket)
        x_axis, y_axis, z_axis = quaternion_axes(*orientation)
        self._axes = (x_axis, y_axis, z_axis)
        self._position, self._velocity = position, velocity
        wx, wy, wz = angular
        spin_x = wx * x_axis[0] + wy * x_axis[1] + wz * x_axis[2]
        spin_y = wx * y_axis[0] + wy * y_axis[1] + wz * y_axis[2]
        spin_z = wx * z_axis[0] + wy * z_axis[1] + wz * z_axis[2]
        self._body_spin = (spin_x, spin_y, spin_z)
        deck_x, deck_y, deck_z = self._deck_position
        deck_vx, deck_vy, deck_vz = self._deck_velocity
        dx, dy, dz = position[0] - deck_x, position[1] - deck_y, position[2] - deck_z - REST_HEIGHT
        vx, vy, vz = velocity[0] - deck_vx, velocity[1] - deck_vy, velocity[2] - deck_vz

        # Contacts: feet on the deck count as leg contacts; anything else touching is recorded too.
        contacts = [0] * N_LEGS
        body_contact = engine_contact = sea_contact = False
        deck, engine_link = self._deck, self._engine_link
        for point in client.getContactPoints(bodyA=self._rocket):
            link, other = point[3], point[2]
            if link == -1:
                body_contact = True
            elif link == engine_link:
                engine_contact = True
            elif other == deck:
                contacts[link] = 1
            else:
                sea_contact = True
        self._contacts = contacts
        if self.engine_on and (contacts[0] or contacts[1] or contacts[2] or contacts[3]):
            # Touchdown cut-off: the flight computer shuts the engine down when a foot senses contact.
            self.engine_on = False
            self.throttle = 0.0

        # A sum is finite only if every term is (inf - inf is nan).
        if not math.isfinite(dx + dy + dz + vx + vy + vz + wx + wy + wz + sum(x_axis) + sum(z_axis)):
            return self._last_observation.copy(), {"finite": False}
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
                spin_x,
                spin_y,
                spin_z,
                *contacts,
                self.throttle if self.engine_on else 0.0,
                self.gimbal_x / max(self.gimbal_limit, 1e-9),
                self.gimbal_y / max(self.gimbal_limit, 1e-9),
                self.fuel / self.initial_fuel_mass,
            ),
            dtype=np.float32,
        )
        self._last_observation = observation
        state = {
            "finite": True,
            "distance": math.sqrt(dx * dx + dy * dy + dz * dz),
            "lateral": math.hypot(dx, dy),
            "altitude": dz,
            "speed": math.sqrt(vx * vx + vy * vy + vz * vz),
            "up_z": z_axis[2],
            "tilt": tilt_angle(z_axis[2]),
            "spin": math.sqrt(wx * wx + wy * wy + wz * wz),
            "legs": sum(contacts),
            "body_contact": body_contact,
            "engine_contact": engine_contact,
            "sea_contact": sea_contact,
        }
        return observation, state

    def _reward_and_termination(self, state: dict, fuel_burnt: float, rcs_use: float) -> tuple[dict, bool, str, bool]:
        weights = self.weights
        terms = {"fuel": -weights.fuel * fuel_burnt, "rcs": -weights.rcs * rcs_use * self.dt}
        if not state["finite"]:
            terms.update(distance=0.0, speed=0.0, tilt=0.0, spin=0.0, legs=0.0, landing=0.0, crash=0.0)
            return terms, True, "non_finite_state", False
        crash_reason = ""
        if state["body_contact"]:
            crash_reason = "body_contact"
        elif state["engine_contact"]:
            crash_reason = "engine_contact"
        elif state["sea_contact"]:
            crash_reason = "sea_contact"
        elif state["up_z"] < self.crash_cos_tilt:
            crash_reason = "tipped_over"
        elif state["lateral"] > self.lateral_bound or state["altitude"] > self.vertical_bound:
            crash_reason = "out_of_bounds"
        elif state["legs"] > 0 and not self.touched_down:
            self.touched_down = True
            if self.previous_speed > self.touchdown_speed_limit:
                crash_reason = "hard_touchdown"
        self.previous_speed = state["speed"]

        # Shaping: the change of each potential part. A crash step gets none, so that the impact itself (which
        # kills the speed and puts feet down) earns nothing.
        new_potential = potential(
            state["lateral"] + abs(state["altitude"]), state["speed"], state["tilt"], state["spin"], state["legs"], weights
        )
        for name, value in new_potential.items():
            terms[name] = 0.0 if crash_reason else value - self._potential[name]
        self._potential = new_potential

        landed = False
        if not crash_reason:
            steady = (
                state["legs"] == N_LEGS
                and state["tilt"] < self.success_tilt
                and state["speed"] < self.success_speed
                and state["spin"] < self.success_spin
            )
            self.hold_steps = self.hold_steps + 1 if steady else 0
            landed = self.hold_steps >= self.success_hold_steps
        terms["landing"] = weights.landing if landed else 0.0
        terms["crash"] = -weights.crash if crash_reason else 0.0
        return terms, bool(crash_reason or landed), crash_reason, landed

    def _info(self, state: dict, terms: dict, crash_reason: str, landed: bool) -> dict:
        info = {f"reward_{name}": value for name, value in terms.items()}
        info.update(
            is_success=landed,
            crash_reason=crash_reason,
            non_finite_state=not state.get("finite", True),
            fuel=self.fuel,
            legs_down=int(sum(self._contacts)),
            distance=state.get("distance", float("nan")),
            speed=state.get("speed", float("nan")),
            tilt=state.get("tilt", float("nan")),
        )
        return info

    # ------------------------------------------------------------------ rendering / cleanup
    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' or 'human'")
            return None
        check_not_closed(self._client, "render", self)
        position = self._position
        self._place_plume()
        deck_x, deck_y, deck_z = self._deck_position
        target = ((position[0] + deck_x) / 2, (position[1] + deck_y) / 2, (position[2] + BODY_LENGTH / 2 + deck_z) / 2)
        span = math.dist(position, (deck_x, deck_y, deck_z))
        distance = max(25.0, 0.9 * span + 20.0)
        if self.render_mode == "human":
            self._client.resetDebugVisualizerCamera(distance, 45.0, -15.0, list(target))
            return None
        return render_camera(
            self._client, target, distance, yaw=45.0, pitch=-15.0, width=320, height=240, far=distance + 200.0
        )

    def _place_plume(self) -> None:
        thrust_fraction = self.throttle if self.engine_on else 0.0
        chosen = -1
        if thrust_fraction > 0:
            chosen = min(len(self._plumes) - 1, int(thrust_fraction * len(self._plumes)))
        _x_axis, _y_axis, z_axis = self._axes
        position = self._position
        _, orientation = self._client.getBasePositionAndOrientation(self._rocket)
        for index, (plume, length) in enumerate(self._plumes):
            if index == chosen:
                offset = ENGINE_ARM + ENGINE_LENGTH / 2 + length / 2
                centre = [position[i] - offset * z_axis[i] for i in range(3)]
                self._client.resetBasePositionAndOrientation(plume, centre, orientation)
            else:
                self._client.resetBasePositionAndOrientation(plume, [0.0, 0.0, HIDDEN_Z - index], [0, 0, 0, 1])

    def _change_dynamics(self, *args: Any, **kwargs: Any) -> None:
        self._client.changeDynamics(*args, **kwargs)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()

"""RocketLander's vehicle: the booster's body, mass, main engine and cold-gas thrusters.

The vehicle is a slender cylinder with a gimballed main engine (minimum throttle when lit), cold-gas attitude
thrusters and four landing legs whose feet sense contact. Fuel burns at the rate set by the specific impulse and
lightens the vehicle. The body is built procedurally (``createMultiBody``); no asset files are loaded.

The per-step maths (body/world rotations, engine and thruster forces, rate limits, the body's inertia) are pure
functions at the top of this module; :class:`RocketVehicle` holds the PyBullet body and the actuator state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import pybullet

from ._bullet import BulletClient, check_non_negative, check_positive, check_that

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
N_LEGS = 4

_BASE_ORIGIN = (0.0, 0.0, 0.0)
#: The additive identity of IEEE floats (``-0.0 + x == x`` for every ``x``, ``x = -0.0`` included).
_NO_OFFSET = (-0.0, -0.0, -0.0)

Vector = tuple[float, float, float]
#: The body x, y and z axes in world coordinates (the columns of the body-to-world rotation).
Axes = tuple[Vector, Vector, Vector]


# ----------------------------------------------------------------------------------------------------------------
# Pure functions (the per-step maths)
# ----------------------------------------------------------------------------------------------------------------


def quaternion_axes(qx: float, qy: float, qz: float, qw: float) -> Axes:
    """World coordinates of the body x, y and z axes of the unit quaternion ``(qx, qy, qz, qw)``."""
    xx, yy, zz = qx * qx, qy * qy, qz * qz
    xy, xz, yz = qx * qy, qx * qz, qy * qz
    wx, wy, wz = qw * qx, qw * qy, qw * qz
    x_axis = (1.0 - 2.0 * (yy + zz), 2.0 * (xy + wz), 2.0 * (xz - wy))
    y_axis = (2.0 * (xy - wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz + wx))
    z_axis = (2.0 * (xz + wy), 2.0 * (yz - wx), 1.0 - 2.0 * (xx + yy))
    return x_axis, y_axis, z_axis


def body_to_world(vector: Vector, axes: Axes) -> Vector:
    """A body-frame vector in world coordinates.

    :param vector: the vector's body x, y and z components.
    :param axes: the body axes in world coordinates (:func:`quaternion_axes`).
    """
    a, b, c = vector
    x_axis, y_axis, z_axis = axes
    return (
        a * x_axis[0] + b * y_axis[0] + c * z_axis[0],
        a * x_axis[1] + b * y_axis[1] + c * z_axis[1],
        a * x_axis[2] + b * y_axis[2] + c * z_axis[2],
    )


def world_to_body(vector: Vector, axes: Axes, add_to: Vector = _NO_OFFSET) -> Vector:
    """A world-frame vector in body coordinates (dot products with the body axes), optionally added to a body vector.

    :param vector: the vector's world x, y and z components.
    :param axes: the body axes in world coordinates (:func:`quaternion_axes`).
    :param add_to: a body-frame vector the result is added to, term by term from the left (default: none).
    """
    a, b, c = vector
    x_axis, y_axis, z_axis = axes
    return (
        add_to[0] + a * x_axis[0] + b * x_axis[1] + c * x_axis[2],
        add_to[1] + a * y_axis[0] + b * y_axis[1] + c * y_axis[2],
        add_to[2] + a * z_axis[0] + b * z_axis[1] + c * z_axis[2],
    )


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


def add_thruster_force_and_torque(
    wrench: tuple[float, ...], rcs_x: float, rcs_y: float, rcs_roll: float, rcs_force: float, rcs_roll_torque: float
) -> tuple[float, ...]:
    """Add the cold-gas thrusters to a body-frame ``(fx, fy, fz, tx, ty, tz)`` about the base origin.

    The pitch / yaw thrusters push sideways ``RCS_ARM`` above the base origin: ``rcs_x`` turns the body about its
    x axis, ``rcs_y`` about its y axis; ``rcs_roll`` turns it about its long axis. Each command is in ``[-1, 1]``.
    """
    fx, fy, fz, tx, ty, tz = wrench
    fx += rcs_y * rcs_force
    fy -= rcs_x * rcs_force
    tx += RCS_ARM * rcs_x * rcs_force
    ty += RCS_ARM * rcs_y * rcs_force
    tz += rcs_roll * rcs_roll_torque
    return fx, fy, fz, tx, ty, tz


def rate_limited(value: float, command: float, max_step: float) -> float:
    """``value`` moved toward ``command`` by at most ``max_step``."""
    return value + max(-max_step, min(max_step, command - value))


def cylinder_inertia(mass: float) -> tuple[float, float, float]:
    """Inertia diagonal (kg m^2) of the body cylinder as a solid cylinder of ``mass`` about its centre."""
    lateral = mass * (3.0 * BODY_RADIUS**2 + BODY_LENGTH**2) / 12.0
    axial = mass * BODY_RADIUS**2 / 2.0
    return lateral, lateral, axial


# ----------------------------------------------------------------------------------------------------------------
# The vehicle
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VehicleParameters:
    """The vehicle's physical parameters, checked on creation (``ValueError`` naming the parameter).

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
    """

    dry_mass: float = 1400.0
    fuel_mass: float = 150.0
    thrust_to_weight: float = 2.0
    min_throttle: float = 0.4
    specific_impulse: float = 282.0
    gimbal_limit: float = 0.1
    gimbal_rate: float = 1.0
    throttle_rate: float = 2.0
    rcs_force: float = 400.0
    rcs_roll_torque: float = 200.0

    def __post_init__(self) -> None:
        for name in (
            "dry_mass",
            "fuel_mass",
            "thrust_to_weight",
            "min_throttle",
            "specific_impulse",
            "gimbal_rate",
            "throttle_rate",
        ):
            check_positive(name, getattr(self, name))
        for name in ("gimbal_limit", "rcs_force", "rcs_roll_torque"):
            check_non_negative(name, getattr(self, name))
        check_that(
            self.dry_mass > LEG_MASS * N_LEGS + ENGINE_MASS,
            "dry_mass",
            self.dry_mass,
            f"exceed the legs and engine ({LEG_MASS * N_LEGS + ENGINE_MASS} kg)",
        )
        check_that(self.min_throttle <= 1.0, "min_throttle", self.min_throttle, "be in (0, 1]")
        check_that(self.gimbal_limit < math.pi / 4, "gimbal_limit", self.gimbal_limit, "be in [0, pi/4)")

    @property
    def max_thrust(self) -> float:
        """Full-throttle thrust (N)."""
        return self.thrust_to_weight * (self.dry_mass + self.fuel_mass) * STANDARD_GRAVITY

    @property
    def max_mass_flow(self) -> float:
        """Propellant flow at full thrust (kg/s): thrust = mass flow * Isp * g0."""
        return self.max_thrust / (self.specific_impulse * STANDARD_GRAVITY)


class VehicleReading(NamedTuple):
    """What one state query of the vehicle returns (world frame, SI units)."""

    position: Vector
    orientation: tuple[float, float, float, float]
    velocity: Vector
    angular_velocity: Vector
    axes: Axes
    body_spin: Vector  # angular velocity in body axes
    contacts: list[int]  # per foot: 1 when it touches the deck
    body_contact: bool
    engine_contact: bool
    sea_contact: bool  # any other contact (the sea, or a foot off the deck)


class RocketVehicle:
    """The booster in one physics client: its body, its mass, and the state of its engine and thrusters.

    :param client: the env's physics client; the body is created in it.
    :param parameters: the physical parameters.
    :param agent_time_step: the duration of one agent step (s); sets the actuator slews and the fuel burnt.
    """

    def __init__(self, client: BulletClient, parameters: VehicleParameters, agent_time_step: float) -> None:
        self.client = client
        self.parameters = parameters
        self.dry_mass = float(parameters.dry_mass)
        self.initial_fuel_mass = float(parameters.fuel_mass)
        self.max_thrust = parameters.max_thrust
        self.min_throttle = float(parameters.min_throttle)
        self.max_mass_flow = parameters.max_mass_flow
        self.gimbal_limit = float(parameters.gimbal_limit)
        self.gimbal_step = parameters.gimbal_rate * agent_time_step
        self.throttle_step = parameters.throttle_rate * agent_time_step
        self.rcs_force = float(parameters.rcs_force)
        self.rcs_roll_torque = float(parameters.rcs_roll_torque)
        self.dt = agent_time_step
        self.engine_link = N_LEGS
        self.body_id = self._build(client)
        self.reset_actuators()

    def _build(self, client: BulletClient) -> int:
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
        body_id = client.createMultiBody(
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
            client.changeDynamics(body_id, link, lateralFriction=1.0, restitution=0.0, linearDamping=0.0, angularDamping=0.0)
        self.body_id = body_id
        self.fuel = self.initial_fuel_mass
        self.update_mass()
        return body_id

    # ------------------------------------------------------------------ mass
    def _base_mass(self, fuel_mass: float) -> float:
        return self.dry_mass - N_LEGS * LEG_MASS - ENGINE_MASS + fuel_mass

    def update_mass(self) -> None:
        """Set the body cylinder's mass and inertia to the propellant left (solid cylinder; propellant centred at
        the base origin)."""
        mass = self._base_mass(self.fuel)
        self.client.changeDynamics(self.body_id, -1, mass=mass, localInertiaDiagonal=list(cylinder_inertia(mass)))

    @property
    def total_mass(self) -> float:
        """Current vehicle mass (kg)."""
        return self.dry_mass + self.fuel

    # ------------------------------------------------------------------ state
    def reset_actuators(self) -> None:
        """Full tank; the landing burn is under way: the engine is lit at minimum throttle, the gimbal centred."""
        self.fuel = self.initial_fuel_mass
        self.engine_on = True
        self.throttle = self.throttle_command = self.min_throttle
        self.gimbal_x = self.gimbal_y = 0.0
        self.gimbal_command_x = self.gimbal_command_y = 0.0
        self.contacts = [0] * N_LEGS

    def place(self, position: Vector, orientation: tuple[float, ...], velocity: Vector, body_spin: Vector) -> None:
        """Put the vehicle at a pose with a velocity and a body-frame angular velocity."""
        client = self.client
        client.resetBasePositionAndOrientation(self.body_id, position, orientation)
        angular = body_to_world(body_spin, quaternion_axes(*orientation))
        client.resetBaseVelocity(self.body_id, velocity, angular)

    def read(self, deck_id: int) -> VehicleReading:
        """Query the base state and the contacts: feet on the deck count as leg contacts; anything else touching
        is recorded too. The reading is also kept (``position``, ``velocity``, ``axes``, ``body_spin``,
        ``contacts``) for the next step's commands, wind and rendering."""
        client = self.client
        position, orientation = client.getBasePositionAndOrientation(self.body_id)
        velocity, angular = client.getBaseVelocity(self.body_id)
        axes = quaternion_axes(*orientation)
        body_spin = world_to_body(angular, axes)
        contacts = [0] * N_LEGS
        body_contact = engine_contact = sea_contact = False
        engine_link = self.engine_link
        for point in client.getContactPoints(bodyA=self.body_id):
            link, other = point[3], point[2]
            if link == -1:
                body_contact = True
            elif link == engine_link:
                engine_contact = True
            elif other == deck_id:
                contacts[link] = 1
            else:
                sea_contact = True
        self.position, self.velocity, self.axes, self.body_spin, self.contacts = (
            position,
            velocity,
            axes,
            body_spin,
            contacts,
        )
        return VehicleReading(
            position, orientation, velocity, angular, axes, body_spin, contacts, body_contact, engine_contact, sea_contact
        )

    # ------------------------------------------------------------------ actuators
    def cut_off_at_touchdown(self) -> None:
        """The flight computer shuts the engine down when a foot senses contact (from the last :meth:`read`)."""
        contacts = self.contacts
        if self.engine_on and (contacts[0] or contacts[1] or contacts[2] or contacts[3]):
            self.engine_on = False
            self.throttle = 0.0

    def command_continuous(self, throttle: float, gimbal_x: float, gimbal_y: float) -> None:
        """Set the throttle and gimbal commands from an action in ``[-1, 1]`` each (the throttle maps to
        ``[min_throttle, 1]``, the gimbal to ``[-gimbal_limit, gimbal_limit]``)."""
        self.throttle_command = self.min_throttle + (1.0 - self.min_throttle) * 0.5 * (throttle + 1.0)
        self.gimbal_command_x = gimbal_x * self.gimbal_limit
        self.gimbal_command_y = gimbal_y * self.gimbal_limit

    @property
    def thrust_fraction(self) -> float:
        """The throttle while the engine is lit, else 0."""
        return self.throttle if self.engine_on else 0.0

    def burn(self) -> tuple[float, float]:
        """Slew the throttle and gimbal toward their commands and burn the propellant of one agent step; the engine
        flames out when the propellant runs out.

        :return: ``(thrust, fuel_burnt)`` in N and kg.
        """
        if self.engine_on:
            self.throttle = rate_limited(self.throttle, self.throttle_command, self.throttle_step)
        self.gimbal_x = rate_limited(self.gimbal_x, self.gimbal_command_x, self.gimbal_step)
        self.gimbal_y = rate_limited(self.gimbal_y, self.gimbal_command_y, self.gimbal_step)
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
            self.update_mass()
        return thrust, fuel_burnt

    def body_force_and_torque(self, thrust: float, rcs_x: float, rcs_y: float, rcs_roll: float) -> tuple[float, ...]:
        """Body-frame ``(fx, fy, fz, tx, ty, tz)`` about the base origin of the engine at ``thrust`` and the
        thrusters at their commands."""
        wrench = engine_force_and_torque(thrust, self.gimbal_x, self.gimbal_y)
        return add_thruster_force_and_torque(wrench, rcs_x, rcs_y, rcs_roll, self.rcs_force, self.rcs_roll_torque)

    def apply(self, force: Vector, torque: Vector) -> None:
        """Apply a body-frame force at the base origin and a world-frame torque for one physics step."""
        self.client.applyExternalForce(self.body_id, -1, force, _BASE_ORIGIN, pybullet.LINK_FRAME)
        self.client.applyExternalTorque(self.body_id, -1, torque, pybullet.WORLD_FRAME)

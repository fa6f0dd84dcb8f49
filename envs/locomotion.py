"""Scene, robot and task base for the bundled PyBullet locomotion tasks (Walker2D, Humanoid and the flag runs).

The split follows pybullet_envs: a :class:`StadiumScene` owns the physics settings and the floor, a
:class:`MJCFRobot` owns one MJCF model (its joints, links, feet, torque gains and the batched state queries), and
:class:`LocomotionEnv` owns the task: target, reward terms, termination, reset, rendering and the
domain-randomisation options. Everything is read from PyBullet with one batched call per kind of quantity
(``getJointStates``, ``getLinkStates``, ``setJointMotorControlArray``, one ``getContactPoints``), which is where
the speed-up over pybullet_envs comes from.

The small maths used every step lives in pure functions at the top of this module so that it can be tested on
hand-picked values.

Speed notes (the per-step Python, measured in CPU time on the loaded 2-core machine; ``benchmarks/bench_envs.py``
measures the env against the replay of its own PyBullet calls, its "floor"), each change keeping every observation,
reward, end and info bit for bit (``tests/test_envs.py`` replays trajectories recorded before them):

* the action is read with one ``tolist()`` and a finite sum (:func:`~._bullet.box_action_values`) and clipped value by
  value, where ``check_action``'s float64 conversion, ``np.isfinite(...).all()`` and ``np.minimum(np.maximum(...))``
  ran four NumPy calls on six to seventeen numbers;
* joint positions and speeds, the scaled joint positions, the body centre, the foot-contact flags and the
  joint-limit count are Python floats and lists instead of NumPy arrays of a few elements (each NumPy call costs about
  as much as twenty scalar operations at these sizes), and the observation is built as one list, converted once and
  clipped in place, with a sum as the finite check (NumPy's check only when the sum is not finite). Together: the
  Python around the Walker2D's state queries and observation went from about 24 to 10 us per step; env / floor went
  from 0.51-0.56 to 0.59-0.62 for the Walker2D and from 0.64-0.66 to 0.64-0.70 for the Humanoid (3 runs each of
  ``bench_envs.py --tables own --steps 3000``, old and new code alternating);
* kept in NumPy on purpose: the electricity and stall-torque sums (NumPy's pairwise sum over eight accumulators and
  BLAS's dot product add in an order a Python loop would not reproduce, so the rewards would change in the last bit).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import pybullet
import pybullet_data
from gymnasium import spaces

from ._bullet import (
    BulletClient,
    box_action_values,
    check_finite,
    check_gui_available,
    check_known_keys,
    check_non_negative,
    check_not_closed,
    check_option,
    check_probability,
    check_range,
    check_reset_options,
    check_that,
    render_camera,
)

#: One env step: one ``stepSimulation()`` of 4 sub-steps of 0.0165 / 4 s (as pybullet_envs / Roboschool).
CONTROL_TIMESTEP = 0.0165

#: pybullet_envs' behaviours, each reproducible on its own (``reference_quirks``): the floor body averaged into the
#: body centre used for progress and the electricity cost of the unclipped action (both fixed by default), and
#: foot-contact flags in the observation that are one step old (each task's default chooses them: ``foot_contacts``).
REFERENCE_QUIRKS: tuple[str, ...] = ("floor_in_centre", "raw_action_electricity", "late_foot_contacts")
#: Which step's foot-contact flags the observation shows (``foot_contacts``): ``"current"``, those of the state the
#: rest of the observation describes, or ``"previous"``, one step old, as pybullet_envs (whose observation rl-zoo3's
#: published numbers were measured on). ``reference_quirks`` with ``"late_foot_contacts"`` means ``"previous"``.
FOOT_CONTACTS: tuple[str, ...] = ("current", "previous")
NUM_SUBSTEPS = 4
NUM_SOLVER_ITERATIONS = 5
GRAVITY = 9.8
DEFAULT_CONTACT_ERP = 0.9
FLOOR_LATERAL_FRICTION = 0.8
FLOOR_RESTITUTION = 0.5
OBSERVATION_CLIP = 5.0
#: Roboschool's stadium half-length and half-width (m); flags are placed in half of it.
STADIUM_HALF_LENGTH = 105 * 0.25
STADIUM_HALF_WIDTH = 50 * 0.25

_MJCF_FLAGS = (
    pybullet.URDF_USE_SELF_COLLISION
    | pybullet.URDF_USE_SELF_COLLISION_EXCLUDE_ALL_PARENTS
    | pybullet.URDF_GOOGLEY_UNDEFINED_COLORS
)


# ----------------------------------------------------------------------------------------------------------------
# Pure functions (the per-step maths)
# ----------------------------------------------------------------------------------------------------------------


def scale_joint_positions(positions: Sequence[float], lower: Sequence[float], upper: Sequence[float]) -> list[float]:
    """Map joint positions linearly from ``[lower, upper]`` to ``[-1, 1]`` (values outside the limits go beyond)."""
    return [2.0 * (position - low) / (high - low) - 1.0 for position, low, high in zip(positions, lower, upper, strict=True)]


def count_joints_at_limit(scaled_positions: Sequence[float], threshold: float = 0.99) -> int:
    """Number of joints whose scaled position has magnitude above ``threshold``."""
    return sum(1 for value in scaled_positions if abs(value) > threshold)


def rotate_to_heading_frame(velocity: Sequence[float], yaw: float) -> tuple[float, float, float]:
    """Rotate a world-frame vector by ``-yaw`` about z, i.e. express it in the robot's heading frame."""
    vx, vy, vz = velocity
    cos_yaw, sin_yaw = math.cos(yaw), math.sin(yaw)
    return cos_yaw * vx + sin_yaw * vy, -sin_yaw * vx + cos_yaw * vy, vz


def target_heading(body_xy: Sequence[float], target_xy: Sequence[float], yaw: float) -> tuple[float, float]:
    """Return ``(angle_to_target, distance)``: the target's bearing relative to ``yaw`` and its planar distance."""
    dx = target_xy[0] - body_xy[0]
    dy = target_xy[1] - body_xy[1]
    return math.atan2(dy, dx) - yaw, math.hypot(dx, dy)


def electricity_costs(action: np.ndarray, scaled_joint_speeds: np.ndarray) -> tuple[float, float]:
    """Unweighted motor costs: ``(mean |a_j * v_j|, mean a_j^2)``.

    :param action: the action as used for the cost (pybullet_envs uses the raw, unclipped one).
    :param scaled_joint_speeds: joint velocities times 0.1, as in the observation.
    """
    count = action.size
    # Sums of squares through numpy's own (pairwise) sum, as pybullet_envs' ``np.square(a).mean()``: not ``a @ a``, whose
    # BLAS kernel, chosen by the CPU, adds in another order and changes the last bits from one machine to the next.
    return float(np.abs(action * scaled_joint_speeds).sum()) / count, float(np.square(action).sum()) / count


def walker_alive_bonus(torso_z: float, pitch: float) -> float:
    """Walker2D: +1 while the torso is above 0.8 m and pitched less than 1 rad, else -1."""
    return 1.0 if torso_z > 0.8 and abs(pitch) < 1.0 else -1.0


def humanoid_alive_bonus(torso_z: float) -> float:
    """Humanoid: +2 while the torso is above 0.78 m, else -1 (17 joints make a lot of electricity cost)."""
    return 2.0 if torso_z > 0.78 else -1.0


def standing_potential_leak(torso_z: float) -> float:
    """FlagrunHarder's height bonus: ``1 + clip(z, 0, 0.8) / 0.8``, from 1 on the ground to 2 standing."""
    return 1.0 + min(max(torso_z, 0.0), 0.8) / 0.8


def camera_ray(mouse_x: float, mouse_y: float, camera: Sequence[Any], far: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """World-space ray ``(from, to)`` through a pixel of the PyBullet GUI.

    :param mouse_x: pixel column, as in a ``getMouseEvents`` event.
    :param mouse_y: pixel row.
    :param camera: the tuple returned by ``getDebugVisualizerCamera()`` (width, height, view, projection, up,
        forward, horizontal, vertical, yaw, pitch, distance, target).
    :param far: length of the ray; the GUI's own far plane is 10000.
    """
    width, height = camera[0], camera[1]
    forward = np.asarray(camera[5], dtype=np.float64)
    horizontal = np.asarray(camera[6], dtype=np.float64)
    vertical = np.asarray(camera[7], dtype=np.float64)
    distance = float(camera[10])
    look_at = np.asarray(camera[11], dtype=np.float64)
    ray_from = look_at - distance * forward
    ray_forward = look_at - ray_from
    ray_forward *= far / np.linalg.norm(ray_forward)
    # The GUI's horizontal / vertical vectors span its far plane (10000 units away); walk across it by pixel.
    ray_to = ray_from + ray_forward - 0.5 * horizontal + 0.5 * vertical
    ray_to += (mouse_x / width) * horizontal - (mouse_y / height) * vertical
    return ray_from, ray_to


#: Keys that move the target, with the unit direction (world x, y) they move it in.
TARGET_KEYS: dict[int, tuple[float, float]] = {
    pybullet.B3G_UP_ARROW: (1.0, 0.0),
    pybullet.B3G_DOWN_ARROW: (-1.0, 0.0),
    pybullet.B3G_LEFT_ARROW: (0.0, 1.0),
    pybullet.B3G_RIGHT_ARROW: (0.0, -1.0),
}


def target_from_user_events(
    current_target: tuple[float, float],
    keyboard_events: dict[int, int],
    mouse_events: Sequence[Sequence[float]],
    pick_floor_point: Callable[[float, float], tuple[float, float] | None],
    key_step: float = 1.0,
) -> tuple[float, float] | None:
    """Map GUI input to a new target, or ``None`` when the input asks for no change.

    A left click sets the target to the floor point under the mouse (``pick_floor_point`` does the ray test); each
    arrow key pressed this frame moves the target by ``key_step`` metres (up/down along world x, left/right along
    world y). The click wins over keys when both happen in one frame.

    :param current_target: the target now, ``(x, y)``.
    :param keyboard_events: ``getKeyboardEvents()``: key code -> state flags.
    :param mouse_events: ``getMouseEvents()``: ``(event_type, x, y, button, state)`` tuples.
    :param pick_floor_point: maps a pixel ``(x, y)`` to the world ``(x, y)`` it hits, or ``None`` on a miss.
    :param key_step: how far one key press moves the target (m).
    """
    for event_type, mouse_x, mouse_y, button, state in mouse_events:
        if event_type == 2 and button == 0 and state & pybullet.KEY_WAS_TRIGGERED:
            point = pick_floor_point(mouse_x, mouse_y)
            if point is not None:
                return float(point[0]), float(point[1])
    dx = dy = 0.0
    for key, state in keyboard_events.items():
        if key in TARGET_KEYS and state & pybullet.KEY_WAS_TRIGGERED:
            dx += TARGET_KEYS[key][0] * key_step
            dy += TARGET_KEYS[key][1] * key_step
    if dx == 0.0 and dy == 0.0:
        return None
    return current_target[0] + dx, current_target[1] + dy


def check_quirks(value: bool | Sequence[str] | frozenset[str]) -> frozenset[str]:
    """``reference_quirks`` as the set of quirk names: ``True`` all of :data:`REFERENCE_QUIRKS`, ``False`` none, or a
    collection of their names (``ValueError`` for anything else)."""
    if isinstance(value, bool):
        return frozenset(REFERENCE_QUIRKS) if value else frozenset()
    check_that(
        not isinstance(value, str) and isinstance(value, (Sequence, set, frozenset)),
        "reference_quirks",
        value,
        f"be True, False or a collection of names from {REFERENCE_QUIRKS}",
    )
    check_known_keys("reference_quirks", value, REFERENCE_QUIRKS, what="quirk name")
    return frozenset(value)


def resolve_foot_contacts(foot_contacts: str | None, quirks: frozenset[str], default: str) -> str:
    """The foot-contact flags a task shows (one of :data:`FOOT_CONTACTS`): ``foot_contacts`` when given, else
    ``"previous"`` when the quirk ``"late_foot_contacts"`` is among ``quirks``, else the task's ``default``.

    :raises ValueError: for a value outside :data:`FOOT_CONTACTS`, or ``"current"`` together with the quirk.
    """
    check_option("foot_contacts", foot_contacts, FOOT_CONTACTS)
    late = "late_foot_contacts" in quirks
    if foot_contacts is None:
        return "previous" if late else default
    check_that(
        not (late and foot_contacts == "current"),
        "foot_contacts",
        foot_contacts,
        "not be 'current' when reference_quirks holds 'late_foot_contacts' (which means 'previous')",
    )
    return foot_contacts


# ----------------------------------------------------------------------------------------------------------------
# Scene and robot
# ----------------------------------------------------------------------------------------------------------------


class StadiumScene:
    """Physics settings and the floor (``plane_stadium.sdf``) of one physics client.

    :param client: the env's own physics client.
    """

    def __init__(self, client: BulletClient) -> None:
        self.client = client
        client.resetSimulation()
        client.setPhysicsEngineParameter(deterministicOverlappingPairs=1)
        client.setGravity(0.0, 0.0, -GRAVITY)
        client.setDefaultContactERP(DEFAULT_CONTACT_ERP)
        client.setPhysicsEngineParameter(
            fixedTimeStep=CONTROL_TIMESTEP, numSolverIterations=NUM_SOLVER_ITERATIONS, numSubSteps=NUM_SUBSTEPS
        )
        (self.floor_id,) = client.loadSDF(os.path.join(pybullet_data.getDataPath(), "plane_stadium.sdf"))
        client.changeDynamics(self.floor_id, -1, lateralFriction=FLOOR_LATERAL_FRICTION, restitution=FLOOR_RESTITUTION)
        if client.is_gui:
            client.changeVisualShape(self.floor_id, -1, rgbaColor=[1, 1, 1, 0.8])
            client.configureDebugVisualizer(pybullet.COV_ENABLE_PLANAR_REFLECTION, self.floor_id)

    def set_floor_friction(self, lateral_friction: float) -> None:
        """Set the floor's lateral friction coefficient."""
        self.client.changeDynamics(self.floor_id, -1, lateralFriction=lateral_friction)


@dataclass
class RobotState:
    """One batched read of the robot (all world frame, Python floats)."""

    joint_positions: list[float]
    joint_velocities: list[float]
    part_xy_sum: tuple[float, float]  # sum of x and y over the torso and every link (pybullet_envs' "parts")
    part_count: int
    torso_position: tuple[float, float, float]
    torso_orientation: tuple[float, float, float, float]
    torso_velocity: tuple[float, float, float]


class MJCFRobot:
    """One MJCF model loaded into a client: its actuated joints, torque gains, feet and batched state queries.

    Joints named ``ignore*`` stay passive (motor off), ``jointfix*`` are fixed, every other joint is
    torque-controlled with ``torque = power * gain * clip(a, -1, 1)``.

    :param client: the physics client.
    :param model_file: file under ``pybullet_data/mjcf``.
    :param torso_name: link (or base) name of the torso.
    :param foot_names: link names of the feet, in observation order.
    :param power: overall torque scale.
    :param joint_gains: per-joint gain by name; joints not named get ``default_gain``.
    :param joint_order: actuated joint names in action order; ``None`` keeps the file's order.
    :param default_gain: gain of joints not in ``joint_gains``.
    """

    def __init__(
        self,
        client: BulletClient,
        model_file: str,
        torso_name: str,
        foot_names: Sequence[str],
        power: float,
        joint_gains: dict[str, float] | None = None,
        joint_order: Sequence[str] | None = None,
        default_gain: float = 100.0,
    ) -> None:
        self.client = client
        (self.body_id,) = client.loadMJCF(os.path.join(pybullet_data.getDataPath(), "mjcf", model_file), flags=_MJCF_FLAGS)
        info = [client.getJointInfo(self.body_id, j) for j in range(client.getNumJoints(self.body_id))]
        link_index = {row[12].decode("utf8"): row[0] for row in info}
        base_name = client.getBodyInfo(self.body_id)[0].decode("utf8")
        if torso_name == base_name:
            self.torso_link = -1
        elif torso_name in link_index:
            self.torso_link = link_index[torso_name]
        else:
            raise ValueError(f"torso_name {torso_name!r} is not a link of {model_file}")
        missing = [name for name in foot_names if name not in link_index]
        if missing:
            raise ValueError(f"foot_names {missing} are not links of {model_file}")
        self.foot_links = np.array([link_index[name] for name in foot_names], dtype=np.int64)

        actuated = {
            row[1].decode("utf8"): row[0]
            for row in info
            if row[2] != pybullet.JOINT_FIXED and not row[1].decode("utf8").startswith(("ignore", "jointfix"))
        }
        names = list(joint_order) if joint_order is not None else list(actuated)
        unknown = [name for name in names if name not in actuated]
        if unknown or len(names) != len(actuated):
            raise ValueError(f"joint_order must list each actuated joint of {model_file} once, got {names}")
        self.joint_names = tuple(names)
        self.joint_indices = [actuated[name] for name in names]
        self.lower_limits = np.array([info[j][8] for j in self.joint_indices])
        self.upper_limits = np.array([info[j][9] for j in self.joint_indices])
        gains = joint_gains or {}
        self.max_torques = power * np.array([gains.get(name, default_gain) for name in names])
        # The same numbers as Python floats and ints, for the per-step maths (see LocomotionEnv's speed notes).
        self._lower_values: list[float] = self.lower_limits.tolist()
        self._upper_values: list[float] = self.upper_limits.tolist()
        self._max_torque_values: list[float] = self.max_torques.tolist()
        self._foot_link_values: tuple[int, ...] = tuple(self.foot_links.tolist())
        self.all_joint_indices = list(range(len(info)))
        # pybullet_envs' "parts": the base (unless a link is the torso) and every link.
        self.part_links = list(range(len(info)))
        self.base_is_part = self.torso_link == -1
        self.part_count = len(self.part_links) + (1 if self.base_is_part else 0)
        self.masses = np.array([client.getDynamicsInfo(self.body_id, link)[0] for link in [-1, *self.part_links]])

        # Switch off the default velocity motors so that the joints are free until we apply torque.
        client.setJointMotorControlArray(
            self.body_id,
            self.all_joint_indices,
            pybullet.POSITION_CONTROL,
            targetPositions=[0.0] * len(info),
            positionGains=[0.1] * len(info),
            velocityGains=[0.1] * len(info),
            forces=[0.0] * len(info),
        )
        self._torque_control = pybullet.TORQUE_CONTROL

    @property
    def action_size(self) -> int:
        """The number of actuated joints (one action value each)."""
        return len(self.joint_indices)

    def apply_torques(self, clipped_action: Sequence[float]) -> None:
        """Set this step's joint torques from an action already clipped to ``[-1, 1]``."""
        forces = [torque * value for torque, value in zip(self._max_torque_values, clipped_action, strict=True)]
        self.client.setJointMotorControlArray(self.body_id, self.joint_indices, self._torque_control, forces=forces)

    def read_state(self) -> RobotState:
        """Everything the observation and reward need, in three to four PyBullet calls."""
        client = self.client
        joint_states = client.getJointStates(self.body_id, self.joint_indices)
        positions = [joint_state[0] for joint_state in joint_states]
        velocities = [joint_state[1] for joint_state in joint_states]
        if self.base_is_part:
            link_states = client.getLinkStates(self.body_id, self.part_links)
            torso_position, torso_orientation = client.getBasePositionAndOrientation(self.body_id)
            torso_velocity = client.getBaseVelocity(self.body_id)[0]
            sum_x, sum_y = torso_position[0], torso_position[1]
        else:
            link_states = client.getLinkStates(self.body_id, self.part_links)
            # Velocities only for the torso: asking getLinkStates for them costs more than this second call.
            torso = client.getLinkState(self.body_id, self.torso_link, computeLinkVelocity=1)
            torso_position, torso_orientation, torso_velocity = torso[0], torso[1], torso[6]
            sum_x = sum_y = 0.0
        # A plain loop: numpy's conversion of a list of tuples costs ten times more at these sizes.
        for link_state in link_states:
            position = link_state[0]
            sum_x += position[0]
            sum_y += position[1]
        return RobotState(
            joint_positions=positions,
            joint_velocities=velocities,
            part_xy_sum=(sum_x, sum_y),
            part_count=self.part_count,
            torso_position=torso_position,
            torso_orientation=torso_orientation,
            torso_velocity=torso_velocity,
        )

    def reset_joints(self, positions: np.ndarray) -> None:
        """Put the actuated joints at ``positions`` with zero velocity."""
        for index, position in zip(self.joint_indices, positions, strict=True):
            self.client.resetJointState(self.body_id, index, float(position), 0.0)

    def feet_contacts(self, floor_id: int) -> list[float]:
        """1.0 for each foot touching the floor, else 0.0 (one ``getContactPoints`` call)."""
        touching = {point[3] for point in self.client.getContactPoints(bodyA=self.body_id, bodyB=floor_id)}
        return [1.0 if link in touching else 0.0 for link in self._foot_link_values]

    def feet_collisions(self, floor_id: int) -> int:
        """Number of feet touching anything but the floor (the other leg, thrown cubes ...)."""
        feet = set(self.foot_links.tolist())
        colliding: set[int] = set()
        for point in self.client.getContactPoints(bodyA=self.body_id):
            body_b, link_a, link_b = point[2], point[3], point[4]
            if body_b == floor_id:
                continue
            if link_a in feet:
                colliding.add(link_a)
            if body_b == self.body_id and link_b in feet:
                colliding.add(link_b)
        return len(colliding)

    def set_mass_scales(self, scales: np.ndarray) -> None:
        """Set every body's mass to its nominal mass times ``scales`` (base first, then links)."""
        for link, mass in zip([-1, *self.part_links], self.masses * scales, strict=True):
            if mass > 0.0:
                self.client.changeDynamics(self.body_id, link, mass=float(mass))


# ----------------------------------------------------------------------------------------------------------------
# Task
# ----------------------------------------------------------------------------------------------------------------


class LocomotionEnv(gymnasium.Env):
    """Walk towards a target on the stadium floor; the base of the Walker2D and Humanoid tasks.

    Observation (``8 + 2J + F`` values, each clipped to ``[-5, 5]``): torso height above its reference height;
    ``sin, cos`` of the bearing to the target relative to the torso yaw; ``0.3 * (vx, vy, vz)`` of the torso in the
    heading frame; torso roll and pitch; per actuated joint its position scaled to ``[-1, 1]`` over its limits and
    ``0.1 *`` its velocity (interleaved); one floor-contact flag per foot.

    Reward: ``alive + progress + electricity + stall_torque + joints_at_limit + feet_collision``, each term
    weighted by a constructor argument and returned in ``info`` as ``reward_<term>``.

    Subclasses give the model (:meth:`_build_robot`), the alive bonus (:meth:`_alive_bonus`) and may override
    the target logic. Arguments shared by every task:

    :param render_mode: ``"rgb_array"`` (TinyRenderer, headless, camera following the robot) or ``"human"`` (the
        PyBullet GUI; a click on the floor or the arrow keys set a new target on tasks that have one).
    :param reference_quirks: ``True`` reproduces pybullet_envs exactly: the floor body is averaged into the body
        centre used for progress, the electricity cost uses the unclipped action, and the foot-contact flags in the
        observation are one step old. ``False`` (default) fixes the first two and leaves the flags to
        ``foot_contacts``; a collection of names from
        :data:`REFERENCE_QUIRKS` (``"floor_in_centre"``, ``"raw_action_electricity"``, ``"late_foot_contacts"``)
        reproduces only those. The attribute holds the set of names.
    :param foot_contacts: which step's foot-contact flags the observation shows: ``"current"`` (this step's) or
        ``"previous"`` (one step old, as pybullet_envs); ``None`` (default): the task's
        :attr:`default_foot_contacts`, or ``"previous"`` when ``reference_quirks`` holds ``"late_foot_contacts"``.
        The dynamics and the reward are the same either way; only what the policy sees differs.
    :param alive_weight: weight of the alive bonus.
    :param progress_weight: weight of progress towards the target (m/s).
    :param electricity_weight: weight of ``mean |a * 0.1 qdot|``.
    :param stall_torque_weight: weight of ``mean a^2``.
    :param joints_at_limit_weight: weight of the number of joints at their limit.
    :param feet_collision_weight: weight of the number of feet touching something other than the floor
        (pybullet_envs computes but never adds it: the default 0 matches; Roboschool's intent was -1).
    :param reset_noise_scale: initial joint positions are drawn from ``U(-s, s)`` rad.
    :param push_probability: probability, each step, of pushing the torso (domain randomisation; 0 = off).
    :param push_force: magnitude (N) of a push, applied horizontally in a random direction for one step.
    :param friction_range: if set, each episode scales the floor's friction by ``U(low, high)``.
    :param mass_scale_range: if set, each episode scales every body's mass by its own ``U(low, high)``.
    """

    # Declared as gymnasium.Env declares it (an instance variable there, so not a ClassVar here).
    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 1.0 / CONTROL_TIMESTEP}  # noqa: RUF012

    #: Height the observation's first entry is measured from; ``None`` = the torso height after reset.
    reference_height: float | None = None
    #: A box of joint torques in [-1, 1] (set in ``__init__``; declared here for type checkers, as ``gymnasium.Env``
    #: declares it a plain ``Space``).
    action_space: spaces.Box
    #: The foot-contact flags shown when ``foot_contacts`` is not given (one of :data:`FOOT_CONTACTS`).
    default_foot_contacts: str = "current"
    reward_terms: tuple[str, ...] = ("alive", "progress", "electricity", "stall_torque", "joints_at_limit", "feet_collision")

    @classmethod
    def recorded_kwargs(cls, env_kwargs: dict[str, Any]) -> dict[str, Any]:
        """``env_kwargs`` with the settings whose default may change between versions written out, as the task
        resolves them: ``foot_contacts`` (:attr:`default_foot_contacts`, or ``"previous"`` with the
        ``late_foot_contacts`` quirk). A run or an agent that records these keeps its task if a default changes.

        :raises ValueError: for a ``reference_quirks`` or ``foot_contacts`` the task does not take.
        """
        quirks = check_quirks(env_kwargs.get("reference_quirks", False))
        foot_contacts = resolve_foot_contacts(env_kwargs.get("foot_contacts"), quirks, cls.default_foot_contacts)
        return {**env_kwargs, "foot_contacts": foot_contacts}

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        reference_quirks: bool | Sequence[str] = False,
        foot_contacts: str | None = None,
        alive_weight: float = 1.0,
        progress_weight: float = 1.0,
        electricity_weight: float = -2.0,
        stall_torque_weight: float = -0.1,
        joints_at_limit_weight: float = -0.1,
        feet_collision_weight: float = 0.0,
        reset_noise_scale: float = 0.1,
        push_probability: float = 0.0,
        push_force: float = 0.0,
        friction_range: tuple[float, float] | None = None,
        mass_scale_range: tuple[float, float] | None = None,
    ) -> None:
        check_option("render_mode", render_mode, self.metadata["render_modes"])
        weights = {
            "alive": alive_weight,
            "progress": progress_weight,
            "electricity": electricity_weight,
            "stall_torque": stall_torque_weight,
            "joints_at_limit": joints_at_limit_weight,
            "feet_collision": feet_collision_weight,
        }
        self.weights = {name: check_finite(f"{name}_weight", weight) for name, weight in weights.items()}
        self.render_mode = render_mode
        self.reference_quirks = check_quirks(reference_quirks)
        self.foot_contacts = resolve_foot_contacts(foot_contacts, self.reference_quirks, self.default_foot_contacts)
        self.reset_noise_scale = check_non_negative("reset_noise_scale", reset_noise_scale)
        self.push_probability = check_probability("push_probability", push_probability)
        self.push_force = check_non_negative("push_force", push_force)
        self.friction_range = check_range("friction_range", friction_range)
        self.mass_scale_range = check_range("mass_scale_range", mass_scale_range, minimum=1e-3)

        if render_mode == "human":
            check_gui_available()
        self._client = BulletClient(render_mode)
        try:
            if self._client.is_gui:
                self._client.configureDebugVisualizer(pybullet.COV_ENABLE_GUI, 0)
                self._client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 0)
            self.scene = StadiumScene(self._client)
            self.robot = self._build_robot(self._client)
            self._build_props(self._client)
            # Every reset restores this snapshot (contacts included), so a seed gives the same episode whatever
            # ran before in this client.
            self._initial_state_id = self._client.saveState()
            if self._client.is_gui:
                self._client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 1)
        except BaseException:
            self._client.close()
            raise

        n_joints, n_feet = self.robot.action_size, len(self.robot.foot_links)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n_joints,), dtype=np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(8 + 2 * n_joints + n_feet,), dtype=np.float32)
        self.target = np.array([1000.0, 0.0])
        self._previous_distance = 0.0
        self._bearing = 0.0
        self._scaled_positions = [0.0] * n_joints
        self._scaled_speeds = [0.0] * n_joints
        self._info_keys = tuple(f"reward_{name}" for name in self.reward_terms)
        self._feet_contact = [0.0] * n_feet
        self._initial_z = 0.0
        self._last_frame_time = 0.0
        self._state: RobotState | None = None
        self._body_position = (0.0, 0.0, 0.0)
        self._rpy = (0.0, 0.0, 0.0)
        self._target_distance = 0.0

    # --- hooks for subclasses --------------------------------------------------------------------------------

    def _build_robot(self, client: BulletClient) -> MJCFRobot:
        raise NotImplementedError

    def _build_props(self, client: BulletClient) -> None:
        """Load extra bodies (flag, cubes) before the initial snapshot is saved."""

    def _alive_bonus(self) -> float:
        raise NotImplementedError

    def _place_robot(self) -> None:
        """Set the base pose after the snapshot is restored (default: the model's own pose)."""

    def _reset_task(self) -> None:
        """Reset task state (target, counters) before the first observation of an episode."""

    def _update_target(self, info: dict[str, Any]) -> bool:
        """Move the target if the task says so (after the reward of this step is measured); return ``True`` if moved."""
        return False

    def _progress_terms(self) -> dict[str, float]:
        """Unweighted task-progress terms of this step; default: ``progress`` = distance gained / dt (m/s)."""
        return {"progress": (self._previous_distance - self._target_distance) / CONTROL_TIMESTEP}

    # --- gymnasium API --------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Restore the initial snapshot, draw initial joint angles (and DR parameters) from ``self.np_random``.

        :param options: ``None`` or an empty dict: these tasks take no reset options.
        """
        client = check_not_closed(self._client, "reset", self)
        check_reset_options(options)
        super().reset(seed=seed)
        client.restoreState(self._initial_state_id)
        noise = self.reset_noise_scale
        self.robot.reset_joints(self.np_random.uniform(low=-noise, high=noise, size=self.robot.action_size))
        self._place_robot()
        if self.friction_range is not None:
            self.scene.set_floor_friction(FLOOR_LATERAL_FRICTION * self.np_random.uniform(*self.friction_range))
        if self.mass_scale_range is not None:
            self.robot.set_mass_scales(self.np_random.uniform(*self.mass_scale_range, size=len(self.robot.masses)))
        self._feet_contact = [0.0] * len(self.robot.foot_links)
        self._reset_task()
        self._read_robot()
        self._initial_z = self._body_position[2] if self.reference_height is None else self.reference_height
        self._previous_distance = self._target_distance
        # No collision pass has run since the snapshot was restored (PyBullet would report stale contacts), so the
        # first observation's contact flags are 0, as in pybullet_envs.
        observation, finite = self._observation()
        info: dict[str, Any] = {"target": self.target.copy(), "x_position": self._body_position[0]}
        if not finite:
            info["physics_blowup"] = True
        if self.render_mode == "human":
            self._update_gui()
        return observation, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply torques, advance 0.0165 s, and return the observation, the weighted reward and its terms."""
        check_not_closed(self._client, "step", self)
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        action = box_action_values(action, self.action_space)
        if self.render_mode == "human":
            self._handle_user_target()  # before the physics step, so that this whole step uses the new target
        # Clipped to [-1, 1] value by value, as np.minimum(np.maximum(...)) did (the action is finite here).
        clipped = [-1.0 if value < -1.0 else (1.0 if value > 1.0 else value) for value in action]
        self.robot.apply_torques(clipped)
        if self.push_probability > 0.0 and self.np_random.random() < self.push_probability:
            self._push_torso()
        self._client.stepSimulation()

        self._read_robot()
        if self.foot_contacts == "current":
            self._feet_contact = self.robot.feet_contacts(self.scene.floor_id)
        info: dict[str, Any] = {}
        raw_terms = {"alive": self._alive_bonus(), **self._progress_terms()}
        self._previous_distance = self._target_distance
        if self._update_target(info):
            self._read_target()
            self._previous_distance = self._target_distance
        observation, finite = self._observation()
        if self.foot_contacts == "previous":
            # pybullet_envs updates the contact flags after building the observation: they show up a step late.
            self._feet_contact = self.robot.feet_contacts(self.scene.floor_id)

        raw_action = "raw_action_electricity" in self.reference_quirks
        electricity, stall = electricity_costs(np.array(action if raw_action else clipped), np.array(self._scaled_speeds))
        raw_terms["electricity"] = electricity
        raw_terms["stall_torque"] = stall
        raw_terms["joints_at_limit"] = float(count_joints_at_limit(self._scaled_positions))
        raw_terms["feet_collision"] = (
            float(self.robot.feet_collisions(self.scene.floor_id)) if self.weights["feet_collision"] else 0.0
        )
        terminated = raw_terms["alive"] < 0.0
        if not finite or not math.isfinite(sum(raw_terms.values())):
            # A physics blow-up: end the episode with a flag; reward and observation stay finite.
            raw_terms = {name: (value if math.isfinite(value) else 0.0) for name, value in raw_terms.items()}
            raw_terms["progress"] = 0.0
            terminated = True
            info["physics_blowup"] = True
        reward = 0.0
        weights = self.weights
        for name, key in zip(self.reward_terms, self._info_keys, strict=True):
            term = weights[name] * raw_terms[name]
            info[key] = term
            reward += term
        info["target"] = self.target.copy()
        info["x_position"] = self._body_position[0]
        if self.render_mode == "human":
            self._update_gui()
        return observation, float(reward), bool(terminated), False, info

    def render(self) -> np.ndarray | None:
        """``rgb_array``: a 320x240 TinyRenderer frame following the torso; ``human``: the GUI is already live."""
        if self.render_mode == "rgb_array":
            check_not_closed(self._client, "render", self)
            position = self._body_position if self._state is not None else (0.0, 0.0, 0.0)
            return render_camera(self._client, (position[0], position[1], 1.0), distance=3.0, yaw=0.0, pitch=-20.0)
        return None

    def close(self) -> None:
        """Disconnect this env's physics client (safe to call twice)."""
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    # --- internals ------------------------------------------------------------------------------------------

    @property
    def dt(self) -> float:
        """Seconds of simulated time per step."""
        return CONTROL_TIMESTEP

    @property
    def physics_client_id(self) -> int:
        """This env's PyBullet client id (``-1`` once closed)."""
        return self._client.client_id

    @property
    def _body_xyz(self) -> np.ndarray:
        """The body centre used for progress (x, y: mean of the parts) and the torso height (z), as an array."""
        return np.array(self._body_position)

    def _read_robot(self) -> None:
        state = self.robot.read_state()
        self._state = state
        # pybullet_envs averages the floor body (at the origin) into the centre: one more part, at zero.
        count = state.part_count + 1 if "floor_in_centre" in self.reference_quirks else state.part_count
        self._body_position = (state.part_xy_sum[0] / count, state.part_xy_sum[1] / count, state.torso_position[2])
        robot = self.robot
        self._scaled_positions = scale_joint_positions(state.joint_positions, robot._lower_values, robot._upper_values)
        self._scaled_speeds = [0.1 * speed for speed in state.joint_velocities]
        self._rpy = self._client.getEulerFromQuaternion(state.torso_orientation)
        self._read_target()

    def _read_target(self) -> None:
        self._bearing, self._target_distance = target_heading(self._body_position, self.target.tolist(), self._rpy[2])

    def _observation(self) -> tuple[np.ndarray, bool]:
        state = self._state
        assert state is not None  # _read_robot runs before every observation
        roll, pitch, yaw = self._rpy
        vx, vy, vz = rotate_to_heading_frame(state.torso_velocity, yaw)
        size = len(self._scaled_positions)
        values = [
            self._body_position[2] - self._initial_z,
            math.sin(self._bearing),
            math.cos(self._bearing),
            0.3 * vx,
            0.3 * vy,
            0.3 * vz,
            roll,
            pitch,
            *([0.0] * (2 * size)),
            *self._feet_contact,
        ]
        values[8 : 8 + 2 * size : 2] = self._scaled_positions
        values[9 : 9 + 2 * size : 2] = self._scaled_speeds
        raw = np.array(values)
        # inf - inf is NaN: a finite sum means every value is finite; otherwise (also when finite values are too
        # large to add) NumPy decides.
        finite = math.isfinite(sum(values)) or bool(np.isfinite(raw).all())
        if not finite:
            raw = np.nan_to_num(raw, nan=0.0, posinf=OBSERVATION_CLIP, neginf=-OBSERVATION_CLIP)
        np.maximum(raw, -OBSERVATION_CLIP, out=raw)
        np.minimum(raw, OBSERVATION_CLIP, out=raw)
        return raw.astype(np.float32), finite

    def _push_torso(self) -> None:
        angle = self.np_random.uniform(-math.pi, math.pi)
        force = [self.push_force * math.cos(angle), self.push_force * math.sin(angle), 0.0]
        position = list(self._state.torso_position) if self._state is not None else [0.0, 0.0, 0.0]
        self._client.applyExternalForce(self.robot.body_id, self.robot.torso_link, force, position, pybullet.WORLD_FRAME)

    def _update_gui(self) -> None:
        """Human mode: follow the robot with the GUI camera and pace to real time."""
        client = self._client
        camera = client.getDebugVisualizerCamera()
        x, y, _ = self._body_position
        client.resetDebugVisualizerCamera(camera[10], camera[8], camera[9], [float(x), float(y), 1.0])
        now = time.perf_counter()
        wait = CONTROL_TIMESTEP - (now - self._last_frame_time)
        if 0.0 < wait < CONTROL_TIMESTEP:
            time.sleep(wait)
        self._last_frame_time = time.perf_counter()

    def _handle_user_target(self) -> None:
        """Tasks with a movable target read the GUI's keyboard and mouse here (default: fixed target)."""

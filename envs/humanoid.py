"""Humanoid, HumanoidFlagrun and HumanoidFlagrunHarder on ``mjcf/humanoid_symmetric.xml``.

``HumanoidEnv`` is equivalent to pybullet_envs' ``HumanoidBulletEnv-v0``. The two flag runs follow the PPO
paper's Roboschool experiments (arXiv:1707.06347, sec. 6.3): the target flag moves every 200 steps or when
reached; in the harder variant cubes are thrown at the robot, and half of the episodes start lying on the ground.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pybullet_data

from ._bullet import BulletClient, check_bool, check_finite, check_integer, check_positive, check_probability
from .locomotion import (
    CONTROL_TIMESTEP,
    STADIUM_HALF_LENGTH,
    STADIUM_HALF_WIDTH,
    LocomotionEnv,
    MJCFRobot,
    camera_ray,
    humanoid_alive_bonus,
    standing_potential_leak,
    target_from_user_events,
)

#: Actuated joints in action order, with their torque gains (times ``HUMANOID_POWER``).
HUMANOID_MOTORS: tuple[tuple[str, float], ...] = (
    ("abdomen_z", 100.0),
    ("abdomen_y", 100.0),
    ("abdomen_x", 100.0),
    ("right_hip_x", 100.0),
    ("right_hip_z", 100.0),
    ("right_hip_y", 300.0),
    ("right_knee", 200.0),
    ("left_hip_x", 100.0),
    ("left_hip_z", 100.0),
    ("left_hip_y", 300.0),
    ("left_knee", 200.0),
    ("right_shoulder1", 75.0),
    ("right_shoulder2", 75.0),
    ("right_elbow", 75.0),
    ("left_shoulder1", 75.0),
    ("left_shoulder2", 75.0),
    ("left_elbow", 75.0),
)
HUMANOID_POWER = 0.41
#: Height the first observation entry is measured from, and the start height of the torso.
HUMANOID_REFERENCE_HEIGHT = 0.8
HUMANOID_START_HEIGHT = 1.4
#: The torso counts as "down" below this height (FlagrunHarder).
STANDING_HEIGHT = 0.8


def random_flag_position(rng: np.random.Generator, compactness: float = 0.5) -> tuple[float, float]:
    """A flag position uniform over ``compactness`` times the stadium (Roboschool: half of it)."""
    x = rng.uniform(-STADIUM_HALF_LENGTH, STADIUM_HALF_LENGTH) * compactness
    y = rng.uniform(-STADIUM_HALF_WIDTH, STADIUM_HALF_WIDTH) * compactness
    return float(x), float(y)


def crawl_filtered_progress(
    raw_progress: float, previous_z: float, z: float, standing_height: float = STANDING_HEIGHT
) -> float:
    """Progress that counts unless the torso was down both before and after the step (no reward for crawling).

    This is what Roboschool's FlagrunHarder potential (frozen while the torso is below 0.8 m) amounts to.
    """
    return raw_progress if previous_z >= standing_height or z >= standing_height else 0.0


def cube_throw(
    rng: np.random.Generator,
    target_xyz: np.ndarray,
    target_velocity: np.ndarray,
    distance: float = 4.0,
    speed_range: tuple[float, float] = (20.0, 30.0),
) -> tuple[np.ndarray, np.ndarray]:
    """Start position and velocity of a cube thrown at a moving robot (Roboschool FlagrunHarder).

    The cube starts ``distance`` m away in a random horizontal direction, 1 m above the aim point, aimed at where
    the robot will be when the cube arrives, with a random speed in ``speed_range`` plus ``U(-1, 1)`` jitter.
    """
    angle = rng.uniform(-math.pi, math.pi)
    speed = rng.uniform(*speed_range)
    aim = np.asarray(target_xyz, dtype=np.float64) + np.asarray(target_velocity, dtype=np.float64) * (distance / speed)
    start = aim + np.array([distance * math.cos(angle), distance * math.sin(angle), 1.0])
    velocity = aim - start
    velocity *= speed / math.sqrt(float(np.square(velocity).sum()))  # not np.linalg.norm: BLAS, CPU-dependent bits
    velocity += rng.uniform(-1.0, 1.0, size=3)
    return start, velocity


class HumanoidEnv(LocomotionEnv):
    """3D humanoid (``mjcf/humanoid_symmetric.xml``) rewarded for running towards a target 1 km down +x.

    Same dynamics, observation (44 values), action scaling (17 torques, ``0.41 * gain * clip(a, -1, 1)``, gains in
    :data:`HUMANOID_MOTORS`) and reward terms as pybullet_envs' ``HumanoidBulletEnv-v0``: electricity weight
    -8.5, stall-torque weight -0.425 (4.25 x Walker2D's: 17 joints of which 4 matter), alive bonus +2 while the
    torso is above 0.78 m, else -1, which also ends the episode. The first observation entry is the torso
    height minus 0.8 m.

    Differences from the reference (reproduced with ``reference_quirks=True``): the body centre excludes the floor
    (the reference's progress reads 1/31, about 3 %, low); the electricity cost uses the clipped action. The
    foot-contact flags are one step old by default, as the reference's (:attr:`default_foot_contacts`).
    Feet-collision cost is a real term (default weight 0 as
    in the reference); a physics blow-up ends the episode with ``info["physics_blowup"]``. In ``human`` render
    mode a click on the floor or the arrow keys move the target.

    See :class:`~sb3_ppo_ext.envs.locomotion.LocomotionEnv` for the shared arguments.

    :param target_key_step: how far one arrow-key press moves the target in ``human`` mode (m).
    """

    reference_height = HUMANOID_REFERENCE_HEIGHT
    #: The previous step's flags, chosen by learning: the Humanoid block without its entropy bonus, on seeds 0-2 at its
    #: 12M budget, ended at 2231, 1855 and 2251 (mean 2112) with them and at 3324, 327 and 1439 (mean 1697) with the
    #: current step's (``benchmarks/grids/humanoid_contacts.yml``; the higher mean wins, the previous step's flags
    #: within 100). With the bonus, the previous step's flags gave 2280, 2779 and 2787.
    default_foot_contacts = "previous"

    def __init__(self, render_mode: str | None = None, *, target_key_step: float = 1.0, **kwargs: Any) -> None:
        kwargs.setdefault("electricity_weight", -8.5)
        kwargs.setdefault("stall_torque_weight", -0.425)
        self.target_key_step = check_positive("target_key_step", target_key_step)
        super().__init__(render_mode, **kwargs)

    def _build_robot(self, client: BulletClient) -> MJCFRobot:
        return MJCFRobot(
            client,
            "humanoid_symmetric.xml",
            torso_name="torso",
            foot_names=("right_foot", "left_foot"),
            power=HUMANOID_POWER,
            joint_gains=dict(HUMANOID_MOTORS),
            joint_order=[name for name, _ in HUMANOID_MOTORS],
        )

    def _alive_bonus(self) -> float:
        return humanoid_alive_bonus(self._body_position[2])

    def set_target(self, x: float, y: float) -> None:
        """Move the target to ``(x, y)`` (used by the GUI input; progress restarts from the new target)."""
        self.target = np.array([check_finite("target x", x), check_finite("target y", y)])
        if self._state is not None:
            self._read_target()
            self._previous_distance = self._target_distance

    def _pick_floor_point(self, mouse_x: float, mouse_y: float) -> tuple[float, float] | None:
        ray_from, ray_to = camera_ray(mouse_x, mouse_y, self._client.getDebugVisualizerCamera())
        hit = self._client.rayTest(ray_from.tolist(), ray_to.tolist())[0]
        if hit[0] < 0:
            return None
        return hit[3][0], hit[3][1]

    def _handle_user_target(self) -> None:
        new_target = target_from_user_events(
            (float(self.target[0]), float(self.target[1])),
            self._client.getKeyboardEvents(),
            self._client.getMouseEvents(),
            self._pick_floor_point,
            key_step=self.target_key_step,
        )
        if new_target is not None:
            self.set_target(*new_target)


class HumanoidFlagrunEnv(HumanoidEnv):
    """Humanoid that runs to a flag which moves every ``flag_timeout_steps`` steps or when reached.

    The flag is drawn uniformly over half of Roboschool's stadium (``|x| < 13.1`` m, ``|y| < 6.25`` m); the robot starts
    standing at 1.4 m facing a random direction. The target is in the observation as ``sin, cos`` of its bearing
    (entries 1 and 2), with the same 44-value layout as HumanoidBulletEnv; ``info["target"]`` holds its position,
    ``info["flags_reached"]`` counts flags reached this episode and ``info["is_success"]`` says whether it reached one
    (what rl-zoo3's periodic evaluation reports as its success rate: the share of episodes with a flag).

    Differences from pybullet_envs' ``HumanoidFlagrunBulletEnv-v0``: the flag moves every 200 steps (the PPO paper;
    the reference's timeout works out to 150); the random start yaw is really applied (the reference sets the flag
    on the wrong object, so its robot always faces +x); progress is measured against the old flag on the step it
    moves and restarts from the new one (the reference stores the reset potential on the robot, where nothing
    reads it, so its reward jumps by +-(distance change)/dt when the flag moves).

    :param flag_timeout_steps: steps after which the flag moves even if not reached.
    :param flag_reach_distance: distance (m) at which the flag counts as reached.
    :param random_yaw: face a random direction at the start.
    """

    #: The current step's flags: the flag-run runs fine-tune a Humanoid checkpoint that learned with them
    #: (``benchmarks/grids/humanoid_flagrun.yml``); the previous step's were not tried on the flag runs.
    default_foot_contacts = "current"

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        flag_timeout_steps: int = 200,
        flag_reach_distance: float = 1.0,
        random_yaw: bool = True,
        **kwargs: Any,
    ) -> None:
        self.flag_timeout_steps = check_integer("flag_timeout_steps", flag_timeout_steps, 1)
        self.flag_reach_distance = check_positive("flag_reach_distance", flag_reach_distance)
        self.random_yaw = check_bool("random_yaw", random_yaw)
        self._steps_since_flag_moved = 0
        self.flags_reached = 0
        super().__init__(render_mode, **kwargs)

    def _build_props(self, client: BulletClient) -> None:
        self._flag_id = client.loadURDF(
            os.path.join(pybullet_data.getDataPath(), "sphere2red_nocol.urdf"), [0.0, 0.0, 0.7], useFixedBase=True
        )

    def _start_pose(self) -> tuple[list[float], list[float]]:
        """Base position and Euler orientation at reset."""
        yaw = self.np_random.uniform(-math.pi, math.pi) if self.random_yaw else 0.0
        return [0.0, 0.0, HUMANOID_START_HEIGHT], [0.0, 0.0, yaw]

    def _place_robot(self) -> None:
        position, euler = self._start_pose()
        quaternion = self._client.getQuaternionFromEuler(euler)
        self._client.resetBasePositionAndOrientation(self.robot.body_id, position, quaternion)

    def _reset_task(self) -> None:
        self.flags_reached = 0
        self._move_flag(*random_flag_position(self.np_random))

    def _move_flag(self, x: float, y: float) -> None:
        self.target = np.array([x, y])
        self._steps_since_flag_moved = 0
        self._client.resetBasePositionAndOrientation(self._flag_id, [x, y, 0.7], [0.0, 0.0, 0.0, 1.0])

    def set_target(self, x: float, y: float) -> None:
        super().set_target(x, y)
        self._move_flag(float(x), float(y))

    def _update_target(self, info: dict[str, Any]) -> bool:
        self._steps_since_flag_moved += 1
        reached = self._target_distance < self.flag_reach_distance
        moved = reached or self._steps_since_flag_moved >= self.flag_timeout_steps
        if reached:
            self.flags_reached += 1
        if moved:
            self._move_flag(*random_flag_position(self.np_random))
        info["flag_moved"] = moved
        info["flags_reached"] = self.flags_reached
        info["is_success"] = self.flags_reached > 0
        return moved


class HumanoidFlagrunHarderEnv(HumanoidFlagrunEnv):
    """Flag run while being pelted with cubes; half of the episodes start lying on the ground.

    Every 30 steps after step 100 (``cube_throw_interval``, ``cube_throw_after_steps``), while the robot is up
    (no net steps below 0.8 m), a 1.2 kg cube is thrown at it from 4 m at 20-30 m/s.
    Reward terms (Roboschool's potential-based shaping, split into named terms):

    * ``alive``: ``1 + clip(z, 0, 0.8) / 0.8`` (1 lying, 2 standing) until the torso has been below 0.8 m for
      ``max_ground_steps`` steps (net of steps up), then -1, which ends the episode;
    * ``progress``: distance gained towards the flag / dt, except while the torso stays below 0.8 m (no crawling);
    * ``standing_up``: ``100 x`` the change of the alive bonus' height part: +100 for getting up, -100 for falling;
    * ``electricity`` (weight -2.125, a quarter of Humanoid's: "just stand up!"), ``stall_torque`` (-0.425),
      ``joints_at_limit``, ``feet_collision``.

    Differences from pybullet_envs' ``HumanoidFlagrunHarderBulletEnv-v0`` besides those of
    :class:`HumanoidFlagrunEnv`: the lying start (``random_lean``) is really applied (the reference never applies
    it); the electricity weight is the intended quarter (the reference overwrites it with -8.5).

    :param lying_start_probability: probability of starting lying on the back or on the front.
    :param max_ground_steps: net steps below 0.8 m after which the episode ends.
    :param standing_up_weight: weight of the ``standing_up`` term.
    :param throw_cubes: throw cubes at the robot.
    :param cube_throw_interval: steps between throws.
    :param cube_throw_after_steps: no throw before this many steps into the episode.
    """

    reward_terms = (*HumanoidFlagrunEnv.reward_terms, "standing_up")

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        lying_start_probability: float = 0.5,
        max_ground_steps: int = 170,
        standing_up_weight: float = 1.0,
        throw_cubes: bool = True,
        cube_throw_interval: int = 30,
        cube_throw_after_steps: int = 100,
        **kwargs: Any,
    ) -> None:
        check_finite("standing_up_weight", standing_up_weight)
        kwargs.setdefault("electricity_weight", -8.5 / 4)
        self.lying_start_probability = check_probability("lying_start_probability", lying_start_probability)
        self.max_ground_steps = check_integer("max_ground_steps", max_ground_steps, 1)
        self.throw_cubes = check_bool("throw_cubes", throw_cubes)
        self.cube_throw_interval = check_integer("cube_throw_interval", cube_throw_interval, 1)
        self.cube_throw_after_steps = check_integer("cube_throw_after_steps", cube_throw_after_steps, 0)
        self.started_lying = False
        self._frame = 0
        self._ground_steps = 0
        self._previous_z = 0.0
        super().__init__(render_mode, **kwargs)
        self.weights["standing_up"] = float(standing_up_weight)

    def _build_props(self, client: BulletClient) -> None:
        super()._build_props(client)
        self._cube_id = client.loadURDF(os.path.join(pybullet_data.getDataPath(), "cube_small.urdf"), [-1.5, 0.0, 0.05])
        client.changeDynamics(self._cube_id, -1, mass=1.2)

    def _start_pose(self) -> tuple[list[float], list[float]]:
        yaw = self.np_random.uniform(-math.pi, math.pi) if self.random_yaw else 0.0
        self.started_lying = bool(self.np_random.random() < self.lying_start_probability)
        if not self.started_lying:
            return [0.0, 0.0, HUMANOID_START_HEIGHT], [0.0, 0.0, yaw]
        if self.np_random.integers(2) == 0:
            return [0.0, 0.0, 0.45], [0.0, math.pi / 2, yaw]  # on the front
        return [0.0, 0.0, 0.25], [0.0, 3 * math.pi / 2, yaw]  # on the back

    def _reset_task(self) -> None:
        super()._reset_task()
        self._frame = 0
        self._ground_steps = 0
        self._previous_z = float(self._client.getBasePositionAndOrientation(self.robot.body_id)[0][2])

    def _alive_bonus(self) -> float:
        z = float(self._body_xyz[2])
        if (
            self.throw_cubes
            and self._frame % self.cube_throw_interval == 0
            and self._frame > self.cube_throw_after_steps
            and self._ground_steps == 0
        ):
            assert self._state is not None  # read by the physics step before this task step
            start, velocity = cube_throw(self.np_random, self._body_xyz, np.asarray(self._state.torso_velocity))
            self._client.resetBasePositionAndOrientation(self._cube_id, start.tolist(), [0.0, 0.0, 0.0, 1.0])
            self._client.resetBaseVelocity(self._cube_id, velocity.tolist(), [0.0, 0.0, 0.0])
        if z < STANDING_HEIGHT:
            self._ground_steps += 1
        elif self._ground_steps > 0:
            self._ground_steps -= 1
        self._frame += 1
        return standing_potential_leak(z) if self._ground_steps < self.max_ground_steps else -1.0

    def _progress_terms(self) -> dict[str, float]:
        z = float(self._body_xyz[2])
        raw = (self._previous_distance - self._target_distance) / CONTROL_TIMESTEP
        terms = {
            "progress": crawl_filtered_progress(raw, self._previous_z, z),
            "standing_up": 100.0 * (standing_potential_leak(z) - standing_potential_leak(self._previous_z)),
        }
        self._previous_z = z
        return terms

"""Walker2D: a planar biped that should run along +x, equivalent to pybullet_envs' ``Walker2DBulletEnv-v0``."""

from __future__ import annotations

from typing import Any

from ._bullet import BulletClient
from .locomotion import LocomotionEnv, MJCFRobot, walker_alive_bonus

#: Actuated joints in action order, as in ``mjcf/walker2d.xml``.
WALKER_JOINTS = ("thigh_joint", "leg_joint", "foot_joint", "thigh_left_joint", "leg_left_joint", "foot_left_joint")
WALKER_POWER = 0.40
WALKER_GAINS = {"foot_joint": 30.0, "foot_left_joint": 30.0}  # 100 elsewhere: 40 N m hips/knees, 12 N m ankles


class Walker2DEnv(LocomotionEnv):
    """Planar biped (``mjcf/walker2d.xml``) rewarded for running towards a target 1 km down the +x axis.

    Same dynamics, observation (22 values), action scaling (6 torques, ``0.4 * gain * clip(a, -1, 1)``) and reward
    terms as pybullet_envs' ``Walker2DBulletEnv-v0``. Alive bonus +1 while the torso is above 0.8 m and pitched
    less than 1 rad, else -1, which also ends the episode.

    Differences from the reference (all reproduced with ``reference_quirks=True``):

    * the body centre used for progress is the mean of the robot's parts; the reference also averages in the floor
      body at the origin, so its progress reads 1/17 (about 6 %) low;
    * the electricity cost uses the clipped action (the one actually applied), not the raw one.

    The foot-contact flags are one step old by default, as the reference's (:attr:`default_foot_contacts`;
    ``foot_contacts="current"`` shows the current step's).

    Also: feet-collision cost is a real, weighted term (default weight 0, as the reference, which never adds it);
    the stall-torque part of the electricity cost is its own term; a non-finite physics state ends the episode
    with ``info["physics_blowup"]`` instead of returning NaN.

    See :class:`~sb3_ppo_ext.envs.locomotion.LocomotionEnv` for every argument.
    """

    #: The previous step's flags, chosen by learning: the Walker block bundled until 2026-12-05 (gSDE, 1280 gradient
    #: steps per update, clip 0.2) on seeds 0-4 at its 2M budget ended at 2490, 2467, 2430, 2244 and 1420 (mean 2210)
    #: with them and at 2504, 2386, 2507, 1439 and 1524 (mean 2072) with the current step's
    #: (``benchmarks/grids/walker_early_step.yml``; the higher mean wins, the previous step's flags within 100).
    default_foot_contacts = "previous"

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("electricity_weight", -2.0)
        kwargs.setdefault("stall_torque_weight", -0.1)
        super().__init__(render_mode, **kwargs)

    def _build_robot(self, client: BulletClient) -> MJCFRobot:
        return MJCFRobot(
            client,
            "walker2d.xml",
            torso_name="torso",
            foot_names=("foot", "foot_left"),
            power=WALKER_POWER,
            joint_gains=WALKER_GAINS,
            joint_order=WALKER_JOINTS,
        )

    def _alive_bonus(self) -> float:
        return walker_alive_bonus(self._body_position[2], self._rpy[1])

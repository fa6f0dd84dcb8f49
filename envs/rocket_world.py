"""RocketLander's world: the sea, the drone-ship deck (still, or swaying and heaving) and the gusting wind.

The per-step maths (the deck's path, the gust process, the wind's drag) are pure functions at the top of this
module; :class:`DroneShipWorld` holds the PyBullet bodies and the deck and wind state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pybullet

from ._bullet import BulletClient, check_non_negative, check_positive
from .rocket_vehicle import BODY_LENGTH, BODY_RADIUS, Vector

DECK_TOP = 1.0  # deck surface height above the sea (m)
#: 0.5 * air density * drag coefficient * side area of the body, with 1.2 kg/m^3, Cd 1.0, area 2 r L.
WIND_DRAG_COEFFICIENT = 0.5 * 1.2 * 1.0 * 2.0 * BODY_RADIUS * BODY_LENGTH


# ----------------------------------------------------------------------------------------------------------------
# Pure functions (the per-step maths)
# ----------------------------------------------------------------------------------------------------------------


def deck_path(amplitude: float, angular_frequency: float, phase: float) -> tuple[Vector, Vector]:
    """The deck's sway (x and y) and heave at ``phase`` (rad).

    :return: ``(centre, velocity)``: the deck box centre (m) and its velocity (m/s).
    """
    omega = angular_frequency
    centre = (
        amplitude * math.sin(phase),
        0.5 * amplitude * math.sin(0.7 * phase + 1.0),
        DECK_TOP / 2 + 0.2 * amplitude * math.sin(1.3 * phase + 2.0),
    )
    velocity = (
        amplitude * omega * math.cos(phase),
        0.35 * amplitude * omega * math.cos(0.7 * phase + 1.0),
        0.26 * amplitude * omega * math.cos(1.3 * phase + 2.0),
    )
    return centre, velocity


def gust_step(wind: float, decay: float, scale: float, noise: float) -> float:
    """One step of the Ornstein-Uhlenbeck gust process: ``wind * decay + scale * noise``."""
    return wind * decay + scale * noise


def wind_drag(wind_x: float, wind_y: float, velocity_x: float, velocity_y: float) -> tuple[float, float]:
    """World-frame lateral drag (N) of the wind on the body moving at ``(velocity_x, velocity_y)`` (quadratic in the
    relative wind)."""
    relative_x = wind_x - velocity_x
    relative_y = wind_y - velocity_y
    coefficient = WIND_DRAG_COEFFICIENT
    magnitude = math.hypot(relative_x, relative_y)
    return coefficient * magnitude * relative_x, coefficient * magnitude * relative_y


# ----------------------------------------------------------------------------------------------------------------
# The world
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldParameters:
    """The deck and the weather, checked on creation (``ValueError`` naming the parameter).

    :param deck_half_size: half the side of the square deck (m).
    :param wind_speed: standard deviation of the gusting lateral wind (m/s); 0 disables wind.
    :param wind_time_constant: correlation time of the gusts (s).
    :param deck_motion: amplitude of the deck's sway (x and y) and heave (m); 0 keeps the deck still.
    :param deck_period: period of the deck motion (s).
    """

    deck_half_size: float = 12.5
    wind_speed: float = 0.0
    wind_time_constant: float = 2.0
    deck_motion: float = 0.0
    deck_period: float = 8.0

    def __post_init__(self) -> None:
        for name in ("deck_period", "wind_time_constant", "deck_half_size"):
            check_positive(name, getattr(self, name))
        for name in ("wind_speed", "deck_motion"):
            check_non_negative(name, getattr(self, name))


class DroneShipWorld:
    """The sea, the deck with its landing mark, and the wind, in one physics client.

    :param client: the env's physics client; the bodies are created in it (before the vehicle).
    :param parameters: the deck and the weather.
    :param agent_time_step: the duration of one agent step (s); sets the gusts' decay per step.
    """

    def __init__(self, client: BulletClient, parameters: WorldParameters, agent_time_step: float) -> None:
        self.client = client
        self.deck_half_size = float(parameters.deck_half_size)
        self.wind_speed = float(parameters.wind_speed)
        self.wind_decay = math.exp(-agent_time_step / parameters.wind_time_constant)
        self.deck_motion = float(parameters.deck_motion)
        self.deck_angular_frequency = 2.0 * math.pi / parameters.deck_period
        self._build(client)
        self.reset_state()

    def _build(self, client: BulletClient) -> None:
        sea = client.createCollisionShape(pybullet.GEOM_PLANE)
        # A plane has no visual in PyBullet; draw the sea as a wide flat box.
        sea_visual = client.createVisualShape(
            pybullet.GEOM_BOX,
            halfExtents=[200.0, 200.0, 0.01],
            rgbaColor=[0.1, 0.25, 0.5, 1.0],
            visualFramePosition=[0, 0, -0.01],
        )
        self.sea_id = client.createMultiBody(0.0, sea, sea_visual, [0.0, 0.0, 0.0])
        half = [self.deck_half_size, self.deck_half_size, DECK_TOP / 2]
        deck_shape = client.createCollisionShape(pybullet.GEOM_BOX, halfExtents=half)
        deck_visual = client.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[0.3, 0.3, 0.3, 1.0])
        deck_mass = 1.0e6 if self.deck_motion > 0 else 0.0
        self.deck_id = client.createMultiBody(deck_mass, deck_shape, deck_visual, [0.0, 0.0, DECK_TOP / 2])
        self.deck_constraint = -1
        if self.deck_motion > 0:
            self.deck_constraint = client.createConstraint(
                self.deck_id, -1, -1, -1, pybullet.JOINT_FIXED, [0, 0, 0], [0, 0, 0], [0.0, 0.0, DECK_TOP / 2]
            )
        # Landing mark on the deck centre (visual only).
        mark = client.createVisualShape(pybullet.GEOM_CYLINDER, radius=2.0, length=0.02, rgbaColor=[1, 1, 0, 1])
        self.mark_id = client.createMultiBody(0.0, -1, mark, [0.0, 0.0, DECK_TOP + 0.01])
        for body in (self.sea_id, self.deck_id):
            client.changeDynamics(body, -1, lateralFriction=1.0, restitution=0.0)

    def reset_state(self) -> None:
        """Calm air and the deck at rest at the origin."""
        self.wind_x = self.wind_y = 0.0
        self.deck_phase = 0.0
        self.deck_position: Vector = (0.0, 0.0, DECK_TOP)  # centre of the deck surface
        self.deck_velocity: Vector = (0.0, 0.0, 0.0)

    def start(self, rng: np.random.Generator) -> None:
        """Start an episode: a random deck phase when the deck moves, a random wind when there is wind."""
        self.reset_state()
        if self.deck_motion > 0:
            self.deck_phase = rng.uniform(0.0, 2.0 * math.pi)
            self.move_deck(0.0)
        if self.wind_speed > 0:
            self.wind_x, self.wind_y = rng.normal(0.0, self.wind_speed, size=2)

    def move_deck(self, time: float) -> None:
        """Drive the deck along its sway / heave path through its constraint, to where it is at ``time`` (s)."""
        centre, velocity = deck_path(
            self.deck_motion, self.deck_angular_frequency, self.deck_phase + self.deck_angular_frequency * time
        )
        self.client.changeConstraint(self.deck_constraint, jointChildPivot=centre, maxForce=1.0e9)
        if time == 0.0:
            self.client.resetBasePositionAndOrientation(self.deck_id, centre, [0, 0, 0, 1])
        self.deck_position = (centre[0], centre[1], centre[2] + DECK_TOP / 2)
        self.deck_velocity = velocity

    def gust(self, rng: np.random.Generator, velocity: Vector) -> tuple[float, float]:
        """Advance the gusts by one agent step and return the world-frame lateral drag (N) on a body moving at
        ``velocity``."""
        scale = self.wind_speed * math.sqrt(1.0 - self.wind_decay**2)
        self.wind_x = gust_step(self.wind_x, self.wind_decay, scale, rng.standard_normal())
        self.wind_y = gust_step(self.wind_y, self.wind_decay, scale, rng.standard_normal())
        return wind_drag(self.wind_x, self.wind_y, velocity[0], velocity[1])

"""RocketLander's rendering: the engine plume and the camera that follows the vehicle and the deck."""

from __future__ import annotations

import math

import numpy as np
import pybullet

from ._bullet import BulletClient, render_camera
from .rocket_vehicle import BODY_LENGTH, ENGINE_ARM, ENGINE_LENGTH, RocketVehicle, Vector

HIDDEN_Z = -50.0  # where unused plume bodies are parked, under the sea
PLUME_LENGTHS = (2.0, 4.0, 6.0, 8.0)  # one visual body per throttle band (m)
CAMERA_YAW = 45.0  # degrees
CAMERA_PITCH = -15.0  # degrees


def plume_index(thrust_fraction: float, count: int) -> int:
    """Which of ``count`` plumes (shortest first) shows ``thrust_fraction`` of full thrust; -1 for none."""
    if thrust_fraction > 0:
        return min(count - 1, int(thrust_fraction * count))
    return -1


def camera_view(vehicle_position: Vector, deck_position: Vector) -> tuple[Vector, float]:
    """The camera target (halfway between the vehicle's top and the deck centre) and its distance (m), far enough
    to keep both in view."""
    deck_x, deck_y, deck_z = deck_position
    target = (
        (vehicle_position[0] + deck_x) / 2,
        (vehicle_position[1] + deck_y) / 2,
        (vehicle_position[2] + BODY_LENGTH / 2 + deck_z) / 2,
    )
    span = math.dist(vehicle_position, (deck_x, deck_y, deck_z))
    return target, max(25.0, 0.9 * span + 20.0)


class LanderRenderer:
    """The plume bodies (visual only; the one matching the throttle is placed under the engine) and the camera.

    :param client: the env's physics client; the plume bodies are created in it (after the vehicle).
    """

    def __init__(self, client: BulletClient) -> None:
        self.client = client
        self.plumes: list[tuple[int, float]] = []
        for length in PLUME_LENGTHS:
            shape = client.createVisualShape(
                pybullet.GEOM_CYLINDER, radius=0.5, length=length, rgbaColor=[1.0, 0.55, 0.1, 0.9]
            )
            self.plumes.append((client.createMultiBody(0.0, -1, shape, [0.0, 0.0, HIDDEN_Z]), length))

    def place_plume(self, vehicle: RocketVehicle) -> None:
        """Show the plume of the vehicle's thrust under its engine; park the others under the sea."""
        chosen = plume_index(vehicle.thrust_fraction, len(self.plumes))
        _x_axis, _y_axis, z_axis = vehicle.axes
        position = vehicle.position
        _, orientation = self.client.getBasePositionAndOrientation(vehicle.body_id)
        for index, (plume, length) in enumerate(self.plumes):
            if index == chosen:
                offset = ENGINE_ARM + ENGINE_LENGTH / 2 + length / 2
                centre = [position[i] - offset * z_axis[i] for i in range(3)]
                self.client.resetBasePositionAndOrientation(plume, centre, orientation)
            else:
                self.client.resetBasePositionAndOrientation(plume, [0.0, 0.0, HIDDEN_Z - index], [0, 0, 0, 1])

    def render(self, render_mode: str, vehicle: RocketVehicle, deck_position: Vector) -> np.ndarray | None:
        """Point the GUI camera (``"human"``, returns ``None``) or draw a 320 x 240 RGB frame (``"rgb_array"``)."""
        self.place_plume(vehicle)
        target, distance = camera_view(vehicle.position, deck_position)
        if render_mode == "human":
            self.client.resetDebugVisualizerCamera(distance, CAMERA_YAW, CAMERA_PITCH, list(target))
            return None
        return render_camera(
            self.client,
            target,
            distance,
            yaw=CAMERA_YAW,
            pitch=CAMERA_PITCH,
            width=320,
            height=240,
            far=distance + 200.0,
        )

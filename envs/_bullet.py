"""Shared PyBullet plumbing for the bundled tasks: one physics client per env, headless camera, input checks.

We do not use ``pybullet_utils.bullet_client.BulletClient``: it builds a new ``functools.partial`` on every
attribute access, which costs microseconds per call in the hot loop; :class:`BulletClient` caches them.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from typing import Any

import numpy as np
import pybullet
from gymnasium import spaces


class BulletClient:
    """A physics client of its own: every pybullet function is bound once to this client's id.

    :param render_mode: ``"human"`` opens the PyBullet GUI, anything else connects headless (``DIRECT``).
    """

    def __init__(self, render_mode: str | None = None) -> None:
        mode = pybullet.GUI if render_mode == "human" else pybullet.DIRECT
        self.client_id: int = pybullet.connect(mode)
        if self.client_id < 0:
            raise RuntimeError("could not connect to a PyBullet physics server")
        self.is_gui = mode == pybullet.GUI

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "client_id" not in self.__dict__:
            raise AttributeError(name)
        attribute = getattr(pybullet, name)
        if callable(attribute):
            attribute = functools.partial(attribute, physicsClientId=self.client_id)
        # Cache on the instance: later look-ups skip __getattr__ entirely.
        self.__dict__[name] = attribute
        return attribute

    @property
    def connected(self) -> bool:
        return self.client_id >= 0

    def close(self) -> None:
        """Disconnect; safe to call more than once."""
        if self.client_id >= 0:
            try:
                pybullet.disconnect(physicsClientId=self.client_id)
            except pybullet.error:
                pass
            self.client_id = -1
            # Drop the bound functions so that nothing keeps calling a closed client by accident.
            for key in [k for k in self.__dict__ if k not in ("client_id", "is_gui")]:
                del self.__dict__[key]

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def render_camera(
    client: BulletClient,
    target: tuple[float, float, float] | np.ndarray,
    distance: float,
    yaw: float,
    pitch: float,
    width: int = 320,
    height: int = 240,
    fov: float = 60.0,
    far: float = 100.0,
) -> np.ndarray:
    """Render an RGB frame (``height x width x 3``, ``uint8``) with TinyRenderer, which works headless.

    :param target: world point the camera looks at.
    :param distance: camera distance from the target (m).
    :param yaw: camera yaw (degrees).
    :param pitch: camera pitch (degrees, negative looks down).
    """
    view = client.computeViewMatrixFromYawPitchRoll(
        cameraTargetPosition=[float(x) for x in target], distance=distance, yaw=yaw, pitch=pitch, roll=0.0, upAxisIndex=2
    )
    projection = client.computeProjectionMatrixFOV(fov=fov, aspect=width / height, nearVal=0.1, farVal=far)
    _, _, rgba, _, _ = client.getCameraImage(
        width=width,
        height=height,
        viewMatrix=view,
        projectionMatrix=projection,
        renderer=pybullet.ER_TINY_RENDERER,
        flags=pybullet.ER_NO_SEGMENTATION_MASK,
    )
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[:, :, :3]
    return np.ascontiguousarray(rgb)


def check_action(action: Any, action_space: spaces.Space) -> np.ndarray:
    """Return ``action`` as an array, or raise ``ValueError`` naming what is wrong with it.

    Box actions must have the space's shape and be finite; Discrete actions must be an integer in range.
    """
    if isinstance(action_space, spaces.Discrete):
        value = np.asarray(action)
        integral = value.dtype.kind in "iub" or (value.dtype.kind == "f" and value.size == 1 and float(value).is_integer())
        if value.size != 1 or not integral:
            raise ValueError(f"action must be a single integer for {action_space}, got {action!r}")
        index = int(value.reshape(()))
        if not action_space.start <= index < action_space.start + action_space.n:
            raise ValueError(f"action {index} is outside {action_space}")
        return np.asarray(index)
    try:
        array = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"action must be numeric with shape {action_space.shape}, got {action!r}") from None
    if array.shape != action_space.shape:
        raise ValueError(f"action must have shape {action_space.shape}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"action must be finite, got {array}")
    return array


def wrap_angle(angle: float) -> float:
    """Wrap an angle to ``[-pi, pi)``."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def check_gui_available() -> None:
    """Raise ``RuntimeError`` if the PyBullet GUI cannot open: on Linux without an X display, pybullet would
    print "cannot connect to X server" and end the whole process instead of raising."""
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        raise RuntimeError(
            "render_mode='human' opens the PyBullet GUI, which needs an X display and DISPLAY is not set; "
            "use render_mode='rgb_array', or run under a virtual display (xvfb-run)"
        )

"""Firing a callback every N environment steps, counted on ``model.num_timesteps`` (so resumed runs keep the beat)."""

from __future__ import annotations

from typing import Any

from sb3_ppo_ext.validation import check_int


def check_frequency(name: str, value: Any) -> int:
    """Check that a frequency counted in environment steps is an integer >= 1."""
    return check_int(name, value, minimum=1)


class StepSchedule:
    """Fires once every ``frequency`` environment steps, counted on the model's ``num_timesteps``.

    ``num_timesteps`` grows by ``n_envs`` per vectorised step and survives save/load, so a resumed run keeps firing
    at the same multiples of ``frequency``.
    """

    def __init__(self, frequency: int) -> None:
        self.frequency = frequency
        self.next_step = frequency

    def start(self, num_timesteps: int) -> None:
        """Set the next firing step to the first multiple of ``frequency`` after ``num_timesteps``."""
        self.next_step = next_multiple(num_timesteps, self.frequency)

    def due(self, num_timesteps: int) -> bool:
        """Whether a multiple of ``frequency`` was reached; if so, schedule the next one."""
        if num_timesteps < self.next_step:
            return False
        self.next_step = next_multiple(num_timesteps, self.frequency)
        return True


def next_multiple(value: int, frequency: int) -> int:
    """The smallest multiple of ``frequency`` strictly greater than ``value``."""
    return (value // frequency + 1) * frequency

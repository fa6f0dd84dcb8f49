"""Freezing the ``VecNormalize`` statistics after a number of steps."""

from __future__ import annotations

from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from sb3_ppo_ext.callbacks._vec_normalize import find_vec_normalize
from sb3_ppo_ext.validation import check_int


class FreezeNormalizationCallback(BaseCallback):
    """Stop updating the ``VecNormalize`` running statistics once ``model.num_timesteps`` reaches ``freeze_after_steps``.

    Sets ``training = False`` on the training env's ``VecNormalize`` (found through all wrappers); normalisation
    itself goes on with the frozen statistics and ``norm_obs`` / ``norm_reward`` stay as they are. The freeze is
    logged once, as ``normalization/frozen_at_step`` and an info message. A run resumed past the step is frozen at
    the start of training. The statistics include the observations of the step on which the count reaches
    ``freeze_after_steps`` (``VecNormalize`` updates them inside ``step``, before callbacks run).

    :param freeze_after_steps: environment steps after which the statistics stop changing (>= 1).
    :param verbose: verbosity level (the message goes through the model's logger, shown when it prints to stdout).
    """

    def __init__(self, freeze_after_steps: int, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.freeze_after_steps = check_int("freeze_after_steps", freeze_after_steps, minimum=1)
        self.vec_normalize: VecNormalize | None = None
        #: ``num_timesteps`` at which the statistics were frozen, ``None`` until then.
        self.frozen_at_step: int | None = None

    def _init_callback(self) -> None:
        self.vec_normalize = find_vec_normalize(self.training_env)
        if self.vec_normalize is None:
            raise ValueError(
                f"FreezeNormalizationCallback needs a training env wrapped in VecNormalize, got {self.training_env!r}"
            )

    def _on_training_start(self) -> None:
        self._freeze_if_due()

    def _on_step(self) -> bool:
        self._freeze_if_due()
        return True

    def _freeze_if_due(self) -> None:
        if self.frozen_at_step is not None or self.vec_normalize is None or self.num_timesteps < self.freeze_after_steps:
            return
        self.vec_normalize.training = False
        self.frozen_at_step = self.num_timesteps
        self.logger.record("normalization/frozen_at_step", self.num_timesteps)
        self.logger.info(
            f"VecNormalize statistics frozen at step {self.num_timesteps} (freeze_after_steps={self.freeze_after_steps})"
        )

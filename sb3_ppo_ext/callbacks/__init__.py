"""Training callbacks for real runs: rotating checkpoints, videos, a live view, learning curves, normalisation
freeze and policy export. Each is a standard SB3 ``BaseCallback`` whose constructor takes plain values, so that it
can also be named in an rl-zoo3 YAML ``callback:`` entry."""

from sb3_ppo_ext.callbacks.checkpoint import (
    Checkpoint,
    RotatingCheckpointCallback,
    checkpoint_defect,
    find_latest_checkpoint,
    list_checkpoints,
    remaining_timesteps,
    resume_from_checkpoint,
)
from sb3_ppo_ext.callbacks.export import ExportPolicyCallback, export_onnx, export_torchscript
from sb3_ppo_ext.callbacks.live_view import LiveViewCallback
from sb3_ppo_ext.callbacks.normalization import FreezeNormalizationCallback, PinObservationStatisticsCallback
from sb3_ppo_ext.callbacks.plot import LearningCurveCallback
from sb3_ppo_ext.callbacks.video import VideoRecorderCallback

__all__ = [
    "Checkpoint",
    "ExportPolicyCallback",
    "FreezeNormalizationCallback",
    "LearningCurveCallback",
    "LiveViewCallback",
    "PinObservationStatisticsCallback",
    "RotatingCheckpointCallback",
    "VideoRecorderCallback",
    "checkpoint_defect",
    "export_onnx",
    "export_torchscript",
    "find_latest_checkpoint",
    "list_checkpoints",
    "remaining_timesteps",
    "resume_from_checkpoint",
]

"""Training: the loop, checkpoints, metrics and baselines, from plain values (a whole run,
which reads configs, is seqforecast/runs)."""

from .baselines import NLinear, drift, fit_baselines, last_value
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .loop import TrainResult, train_model
from .metrics import forecast_metrics, predict

__all__ = [
    "CheckpointError",
    "NLinear",
    "TrainResult",
    "drift",
    "fit_baselines",
    "forecast_metrics",
    "last_value",
    "load_checkpoint",
    "predict",
    "save_checkpoint",
    "train_model",
]

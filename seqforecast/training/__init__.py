"""Training: the loop, checkpoints, metrics, baselines and one whole run."""

from .baselines import NLinear, drift, fit_baselines, last_value
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .loop import TrainResult, train_model
from .metrics import forecast_metrics, predict
from .run import run_training

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
    "run_training",
    "save_checkpoint",
    "train_model",
]

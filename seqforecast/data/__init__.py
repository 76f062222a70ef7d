"""Data: the sigmoid-series generators and test curve, CSV series, splits, windows, scaling."""

from collections.abc import Mapping

import torch

from .csv_data import csv_data
from .csv_series import DataError, read_series
from .scaling import Scaler, fit_scaler
from .splits import EVAL_SPLITS, ForecastData, Split, generator_options, synthetic_data
from .synthetic import GENERATORS, sigmoid, sigmoid_seed, test_curve

DATASETS = (*GENERATORS, "csv")


def build_data(
    data_cfg: Mapping,
    seed: int,
    device: torch.device,
    saved: dict | None = None,
    allow_changed: bool = False,
) -> ForecastData:
    """The data a config names: a synthetic generator (seeded), or a CSV file. `saved` (a
    checkpoint's data_state) makes a CSV run score the same rows with the same scaler again
    (see csv_data); synthetic data is regenerated from its seeds."""
    if data_cfg["name"] == "csv":
        return csv_data(data_cfg, device, saved, allow_changed)
    return synthetic_data(data_cfg, seed, device)


__all__ = [
    "DATASETS",
    "EVAL_SPLITS",
    "GENERATORS",
    "DataError",
    "ForecastData",
    "Scaler",
    "Split",
    "build_data",
    "csv_data",
    "fit_scaler",
    "generator_options",
    "read_series",
    "sigmoid",
    "sigmoid_seed",
    "synthetic_data",
    "test_curve",
]

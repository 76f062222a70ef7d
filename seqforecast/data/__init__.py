"""Data: the sigmoid-series generators and test curve, CSV series, splits, windows, scaling."""

from collections.abc import Mapping

import torch

from .csv_data import csv_data
from .csv_series import DataError, read_series
from .scaling import Scaler, fit_scaler
from .splits import ForecastData, Split, generator_options, synthetic_data
from .synthetic import GENERATORS, sigmoid, sigmoid_seed, test_curve

DATASETS = (*GENERATORS, "csv")


def build_data(data_cfg: Mapping, seed: int, device: torch.device) -> ForecastData:
    """The data a config names: a synthetic generator (seeded), or a CSV file."""
    if data_cfg["name"] == "csv":
        return csv_data(data_cfg, device)
    return synthetic_data(data_cfg, seed, device)


__all__ = [
    "DATASETS",
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

"""Data: the sigmoid-series generators and test curve, CSV series, splits, windows, scaling."""

from collections.abc import Mapping

import torch

from .csv_data import csv_data
from .csv_series import DataError, read_series
from .panel_data import panel_data
from .scaling import Scaler, fit_scaler
from .splits import EVAL_SPLITS, ForecastData, Split, generator_options, synthetic_data
from .synthetic import GENERATORS, sigmoid, sigmoid_pair, test_curve
from .time_features import calendar_features

DATASETS = (*GENERATORS, "csv")
# wide CSV data (data.columns): each column its own series, or the channels of one series
COLUMNS = ("series", "channels")


def is_panel(data_cfg: Mapping) -> bool:
    """Many series in one file: long format (`data.id_column`), or wide format
    (`data.targets`) read as series (`data.columns=series`)."""
    return data_cfg["name"] == "csv" and bool(
        data_cfg["id_column"] or (data_cfg["targets"] and data_cfg["columns"] == "series")
    )


def config_channels(data_cfg: Mapping, dataset: Mapping | None = None) -> tuple[int, int]:
    """(input channels, forecast channels) of a window, as far as the config tells without
    reading the file: what a config's model is built for when the config is checked (the run
    builds it again for the data's own). `dataset`: the dataset entry, whose channel count
    stands for `data.targets=all`."""
    if data_cfg["name"] != "csv":  # synthetic: one channel
        return 1, 1
    features = len(data_cfg["features"])
    if is_panel(data_cfg):  # each window one series: its target and covariates
        return 1 + features, 1
    targets = data_cfg["targets"]
    if isinstance(targets, list):
        n_targets = len(targets)
    elif targets is not None and dataset:  # all: every column but the covariates
        n_targets = max(1, dataset["channels"] - features)
    else:
        n_targets = 1
    return n_targets + features + len(calendar_features(data_cfg)), n_targets


def build_data(
    data_cfg: Mapping,
    seed: int,
    device: torch.device,
    saved: dict | None = None,
    allow_changed: bool = False,
) -> ForecastData:
    """The data a config names: a synthetic generator (seeded), a CSV series, or a CSV panel
    of many series (`is_panel`). `saved` (a checkpoint's data_state) makes a CSV run score the
    same rows with the same scalers again (see csv_data, panel_data); synthetic data is
    regenerated from its seeds."""
    if is_panel(data_cfg):
        return panel_data(data_cfg, device, saved, allow_changed)
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
    "config_channels",
    "is_panel",
    "panel_data",
    "csv_data",
    "fit_scaler",
    "generator_options",
    "read_series",
    "sigmoid",
    "sigmoid_pair",
    "synthetic_data",
    "test_curve",
]

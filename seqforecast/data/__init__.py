"""Data: the registered sources (`data=<name>`: sources.py; sigmoid series, your own CSV file),
the sigmoid-series generators and test curve, CSV series, splits, windows, scaling."""

import importlib
import pkgutil
from collections.abc import Mapping

import torch

from .csv_data import csv_data
from .csv_series import DataError, read_series
from .panel_data import panel_data
from .scaling import Scaler, fit_scaler
from .source_sigmoid import generator_options, synthetic_data
from .sources import (
    DataSource,
    available_sources,
    data_source,
    register_source,
    source_schema,
)
from .splits import EVAL_SPLITS, ForecastData, Split
from .synthetic import GENERATORS, sigmoid, sigmoid_pair, test_curve

# Importing a source's module registers it: every `source_<name>.py` of this folder (a new
# source is its module and its YAML, nothing else), then, at the first lookup, those other
# packages declare under the entry-point group `seqforecast.data` (sources.py).
for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("source_"):
        importlib.import_module(f"{__name__}.{_module.name}")


def config_channels(data_cfg: Mapping, dataset: Mapping | None = None) -> tuple[int, int]:
    """(input channels, forecast channels) of a window of data config `data_cfg`, as far as
    the config tells without reading a file (DataSource.channels)."""
    return data_source(data_cfg).channels(dataset)


def build_data(
    data_cfg: Mapping,
    seed: int,
    device: torch.device,
    saved: dict | None = None,
    allow_changed: bool = False,
) -> ForecastData:
    """The data a config names, from its source: a synthetic generator (seeded), a CSV series
    or a CSV panel of many series. `saved` (a checkpoint's data_state) makes a CSV run score
    the same rows with the same scalers again (see csv_data, panel_data); synthetic data is
    regenerated from its seeds."""
    return data_source(data_cfg).build(seed, device, saved, allow_changed)


__all__ = [
    "EVAL_SPLITS",
    "GENERATORS",
    "DataError",
    "DataSource",
    "ForecastData",
    "Scaler",
    "Split",
    "available_sources",
    "build_data",
    "config_channels",
    "data_source",
    "panel_data",
    "csv_data",
    "fit_scaler",
    "generator_options",
    "read_series",
    "register_source",
    "sigmoid",
    "sigmoid_pair",
    "source_schema",
    "synthetic_data",
    "test_curve",
]

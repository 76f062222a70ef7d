"""A CSV series as training data: read, split by time, scale on the training rows, window."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .csv_series import DataError, read_series
from .scaling import fit_scaler
from .splits import ForecastData, Split
from .windows import SPLITS, make_windows, split_ranges, window_starts


def csv_data(data_cfg: Mapping, device: torch.device) -> ForecastData:
    columns = [data_cfg["target"], *data_cfg["features"]]  # the target first
    series = read_series(data_cfg["path"], columns, data_cfg["time_column"], data_cfg["fill"])
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]
    window = in_len + out_len
    rows = len(series.values)
    if rows < window:
        raise DataError(
            f"{data_cfg['path']}: {rows} rows, fewer than one window (in_len + out_len = {window})"
        )
    ranges = split_ranges(
        rows, data_cfg["split"], data_cfg["val_start"], data_cfg["test_start"], series.times
    )
    for name in SPLITS:
        if len(ranges[name]) < window:
            span = ranges[name]
            raise DataError(
                f"{data_cfg['path']}: the {name} split has {len(span)} rows (lines "
                f"{span.start + 2}-{span.stop + 1}); one window needs in_len + out_len = {window}"
            )
    # Scaling learns from the training rows only; every split is then mapped with it.
    scaler = fit_scaler(
        data_cfg["scale"], series.values[ranges["train"].start : ranges["train"].stop]
    )
    scaled = scaler.transform(series.values)
    splits = {}
    for name in SPLITS:
        starts = window_starts(ranges[name], window, data_cfg["stride"])
        src, target = make_windows(scaled, starts, in_len, out_len, n_targets=1)
        splits[name] = Split(src.to(device), target.to(device))
    test = splits["test"]
    return ForecastData(
        train=splits["train"],
        val=splits["val"],
        test=test,
        n_features=len(columns),
        n_targets=1,
        probe=Split(test.src[-1:], test.target[-1:]),  # the newest test window
        scaler=scaler,
        test_name="test split",
        state={
            "columns": columns,
            "time_column": data_cfg["time_column"],
            "scaler": scaler.state(),
            "rows": {name: [r.start, r.stop] for name, r in ranges.items()},
        },
    )

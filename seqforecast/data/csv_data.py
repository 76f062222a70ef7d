"""A CSV series as training data: read, split by time, scale on the training rows, window.

A trained run keeps what it needs to score the same windows again (`ForecastData.state`, saved
in every checkpoint): the split rows, the scaler, the row count and a hash of each split's
rows. `csv_data(..., saved=state)` reuses those instead of re-fitting them from the file as it
is now, and refuses a file whose rows changed unless `allow_changed=True` (then the saved
split starts and scaler apply to the new file, the test split running to its end).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from .covariates import known_columns, lead
from .csv_series import DataError, Series, check_scaled, read_series, read_table
from .gaps import GapFiller
from .scaling import Scaler, fit_scaler
from .splits import FileTargets, ForecastData, Split, WindowSplit, add_fingerprints
from .time_features import feature_names, time_features
from .windows import (
    SPLITS,
    forecast_starts,
    seasonal_periods,
    split_ranges,
    to_tensors,
    window_rows,
)


def csv_data(
    data_cfg: Mapping, device: torch.device, saved: dict | None = None, allow_changed: bool = False
) -> ForecastData:
    path = data_cfg["path"]
    targets = target_columns(data_cfg)
    futr = list(data_cfg.get("futr", []))
    # the targets first, then the past covariates, then the known-future ones (covariates.py)
    columns = [*targets, *data_cfg["features"], *futr]
    n_targets = len(targets)
    series = read_series(path, columns, data_cfg["time_column"], data_cfg["fill"],
                         data_cfg["duplicate_times"], data_cfg["date_order"],
                         data_cfg.get("missing_times", "keep"))  # runs before the key: kept
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]
    stride, protocol = data_cfg["window_stride"], data_cfg["protocol"]
    rows, notes = len(series.values), []
    if rows < in_len + out_len:
        raise DataError(
            f"{path}: {rows} rows, fewer than one window (in_len + out_len = {in_len + out_len})"
        )
    if saved is None:
        ranges = split_ranges(
            rows, data_cfg["split"], data_cfg["val_start"], data_cfg["test_start"], series.times,
            data_cfg["test_end"],
        )
        train_rows = series.values[ranges["train"].start : ranges["train"].stop]
        for j, name in enumerate(columns):
            if np.isnan(train_rows[:, j]).all():
                raise DataError(f"{path}: column {name!r} has no value in the training rows")
        # Scaling learns from the training rows only; every split is then mapped with it.
        scaler = fit_scaler(data_cfg["scale"], train_rows)
    else:
        ranges, changes = saved_ranges(saved, series, path, allow_changed)
        scaler = Scaler.from_state(saved["scaler"])
        if changes:
            notes.append(
                f"{path} changed since the run was trained ({'; '.join(changes)}): evaluated "
                f"as it is now, with the run's split starts and scaler"
            )

    if futr:  # a value known in advance is given, not filled (a window reads it led)
        check_known(series, futr, len(columns) - len(futr), path)
    # Scaling is affine, so scaling before filling equals filling before scaling.
    scaled = scaler.transform(series.values)
    check_scaled(path, scaled, columns, np.arange(rows) + 2)
    # known-future columns: the horizon's values
    scaled = lead(scaled, known_columns(columns, futr), out_len)
    filler = GapFiller(scaled, data_cfg["fill"], columns, str(path))
    # Calendar features (never scaled, never missing): further input channels after the columns.
    marks, mark_names = None, (feature_names(data_cfg["time_freq"])
                               if data_cfg["time_features"] else [])
    if mark_names:
        marks = time_features(series.times, data_cfg["time_freq"])  # [rows, k]
    # A file without gaps: its windows are index arithmetic over one buffer of its rows (the
    # calendar features as further channels), as the field's loaders read them, instead of
    # copies (in_len + out_len rows each). The same numbers either way: each window's
    # values are those rows, in float32.
    rows_buffer = None
    if not filler.has_gaps:
        buffer = scaled if marks is None else np.concatenate([scaled, marks], axis=1)
        rows_buffer = torch.from_numpy(buffer).float().to(device)  # [rows, C + k]
    splits, info, files = {}, {}, {}
    for name in SPLITS:
        span = ranges[name]
        starts = forecast_starts(span, in_len, out_len, stride, protocol)
        if not starts:
            need = (
                f"in_len + out_len = {in_len + out_len} rows inside the split"
                if protocol == "strict"
                else f"out_len = {out_len} rows in the split, after in_len = {in_len} earlier rows"
            )
            raise DataError(
                f"{path}: the {name} split has {len(span)} rows (lines {span.start + 2}-"
                f"{span.stop + 1}), too few for one window: with data.protocol={protocol} a "
                f"window needs {need}"
            )
        inputs, targets = window_rows(starts, in_len, out_len)
        if rows_buffer is not None:  # every window a slice of the one buffer of rows
            splits[name] = WindowSplit(rows_buffer, torch.tensor(starts, device=device),
                                       in_len, out_len, n_targets, None)
        else:  # a gap is filled window by window (from that window's past only): copies
            src, target = to_tensors(
                filler.inputs(inputs, np.asarray(starts)),
                filler.targets(targets, span, name, n_targets),
                n_targets,
            )
            if marks is not None:  # [N, in_len, C] + [N, in_len, k]
                src = torch.cat([src, torch.from_numpy(marks[inputs]).float()], dim=-1)
            splits[name] = Split(src.to(device), target.to(device))
        files[name] = FileTargets(targets, series.values, n_targets, data_cfg["fill"])
        info[name] = split_info(span, starts, in_len, out_len, stride, protocol, series)
    test = splits["test"]
    data = ForecastData(
        train=splits["train"],
        val=splits["val"],
        test=test,
        n_features=len(columns) + len(mark_names),
        n_targets=n_targets,
        probe=Split(*test.take(slice(len(test) - 1, len(test)))),  # the newest test window
        scaler=scaler,
        state={
            "columns": columns,
            "futr": futr,  # the last columns: known in advance, read led by out_len rows
            "time_column": data_cfg["time_column"],
            "scaler": scaler.state(),
            "rows": {name: [r.start, r.stop] for name, r in ranges.items()},
            "n_rows": rows,
            "closed_end": data_cfg["test_end"] is not None,  # rows after the test unused
            "hashes": {name: rows_hash(series, r) for name, r in ranges.items()},
            "n_targets": n_targets,
            "time_features": mark_names,  # after the columns, in this order
        },
        mase_scale=mase_scale(series.values, ranges["train"], n_targets, data_cfg["season"]),
        scaled_by=None if scaler.kind == "none" else scaler.kind,
        info=info,
        notes=notes,
    )
    info["val"]["role"] = "selection (early stopping, search)"
    info["test"]["role"] = "held out"
    add_fingerprints(data, files)
    return data


def check_known(series: Series, futr: list[str], first: int, path) -> None:
    """A known-future column's empty cell, in one line: data.fill fills a window's inputs
    from its own past, which a led column's horizon values are not."""
    for j, name in enumerate(futr):
        empty = np.flatnonzero(np.isnan(series.values[:, first + j]))
        if len(empty):
            raise DataError(
                f"{path}: column {name!r} (data.futr, known in advance) is empty at line "
                f"{empty[0] + 2}; give every known value (data.fill does not fill them)")


def target_columns(data_cfg: Mapping) -> list[str]:
    """The columns forecast: data.target, or wide-format data.targets (a list, or `all`: every
    column but the time column) read as the joint channels of one series."""
    targets = data_cfg["targets"]
    if not targets:
        return [data_cfg["target"]]
    if targets == "all":
        header, _ = read_table(Path(data_cfg["path"]))
        return [c for c in header if c != data_cfg["time_column"]
                and c not in [*data_cfg["features"], *data_cfg.get("futr", [])]]
    return list(targets)


def mase_scale(values: np.ndarray, train: range, n_targets: int, season) -> torch.Tensor:
    """[1, n_targets]: MASE's denominator, the in-sample seasonal-naive MAE (period: the first
    of data.season, else 1) on the training rows' observed values (0: MASE skips it)."""
    m = (seasonal_periods(season) or [1])[0]
    rows = values[train.start : train.stop, :n_targets]
    if len(rows) <= m:
        return torch.zeros(1, n_targets, dtype=torch.float64)
    scale = np.nanmean(np.abs(rows[m:] - rows[:-m]), axis=0)
    return torch.from_numpy(np.nan_to_num(scale)[None, :]).double()


def split_info(span: range, starts, in_len, out_len, stride, protocol, series: Series) -> dict:
    """What metrics.json and the log say about a split: its rows (0-based over the data rows,
    end exclusive), window count, stride, and the rows its windows read and forecast."""
    info = {
        "rows": [span.start, span.stop],
        "windows": len(starts),
        "stride": stride,
        "protocol": protocol,
        "input_rows_from": starts[0] - in_len,
        "forecast_rows": [starts[0], starts[-1] + out_len],
    }
    if series.times is not None:
        info["times"] = [
            series.times[span.start].isoformat(sep=" "),
            series.times[span.stop - 1].isoformat(sep=" "),
        ]
    return info


def rows_hash(series: Series, span: range) -> str:
    """A hash of the raw cells (empty ones included) and timestamps of some rows."""
    rows = slice(span.start, span.stop)
    digest = hashlib.sha256(np.ascontiguousarray(series.values[rows]).tobytes())
    if series.times is not None:
        digest.update("|".join(t.isoformat() for t in series.times[rows]).encode())
    return digest.hexdigest()[:16]


def saved_ranges(
    saved: dict, series: Series, path, allow_changed: bool
) -> tuple[dict[str, range], list[str]]:
    """The run's own split rows, and what changed in the file since (refused, in one line,
    unless `allow_changed`)."""
    rows = len(series.values)
    ranges = {name: range(*saved["rows"][name]) for name in SPLITS}
    closed = saved.get("closed_end", False)  # data.test_end: rows after the test unused
    changes = []
    if rows != saved["n_rows"] and not (closed and rows >= ranges["test"].stop):
        changes.append(f"{rows} rows instead of {saved['n_rows']}")
    for name, span in ranges.items():
        if span.stop > rows or rows_hash(series, span) != saved["hashes"][name]:
            changes.append(f"the {name} rows (lines {span.start + 2}-{span.stop + 1}) changed")
    if not changes:
        return ranges, changes
    if not allow_changed:
        raise DataError(
            f"{path} changed since the run was trained ({'; '.join(changes)}); the run's "
            f"splits and scaler no longer describe it. Pass allow_changed_data=true to evaluate "
            f"on the file as it is now with the saved split starts and scaler"
        )
    val_start, test_start = ranges["val"].start, ranges["test"].start
    if test_start >= rows:
        raise DataError(
            f"{path}: {rows} rows; the run's test split starts at row {test_start} (line "
            f"{test_start + 2}), after the file's end"
        )
    end = min(ranges["test"].stop, rows) if closed else rows
    ranges = {"train": range(0, val_start), "val": range(val_start, test_start),
              "test": range(test_start, end)}
    return ranges, changes

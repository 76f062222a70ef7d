"""A panel as training data: split each series by time, scale each on its own training rows,
window by index arithmetic, one global model over all series.

Splits: by default fractions of each series' own length (`data.split`, rounded as for one
series: validation starts at row round(0.7 n) of a series of n rows); with `data.val_start`
and `data.test_start` (timestamps, or integer steps when the time column holds integers),
at the same moment in every series. Windows follow `data.protocol` inside each series and
never cross into another series; a series too short for any window of a split is listed
once and left out of that split. A series with no training row cannot be scaled without
looking ahead and is left out of every split.

Scaling (`data.scale`) is fitted per series on its training rows. Metrics are in each
series' own units; MASE divides by each series' in-sample seasonal-naive MAE (period: the
first of `data.season`, else 1) on its training rows.

Memory: the windows are `WindowSplit`s, forecast-start rows into one buffer of all rows;
a batch gathers its rows in one indexing op. A panel of 10,000 series x 500 steps is a
5M-row buffer (20 MB per column), where copying every window would take ~60 times that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np
import torch

from .covariates import known_columns, lead
from .csv_data import mase_scale
from .csv_series import DataError, check_scaled
from .panel_read import Panel, read_long, read_wide, show_time
from .scaling import fit_scaler
from .splits import FileTargets, ForecastData, Split, WindowSplit, add_fingerprints
from .windows import SPLITS, forecast_starts, fraction_starts


def read_panel(data_cfg: Mapping) -> Panel:
    if data_cfg["id_column"]:
        if data_cfg["targets"]:
            raise DataError(
                "data.id_column (long format) and data.targets (wide format) exclude each "
                "other: a long panel forecasts data.target"
            )
        # the target, the past covariates, the known-future and the static ones (covariates.py)
        static = list(data_cfg.get("static", []))
        columns = [data_cfg["target"], *data_cfg["features"], *data_cfg.get("futr", []), *static]
        panel = read_long(
            data_cfg["path"],
            data_cfg["id_column"],
            data_cfg["time_column"],
            columns,
            data_cfg["fill"],
            data_cfg["date_order"],
            data_cfg.get("missing_times", "keep"),  # runs before the key: kept
        )
        check_static(panel, static, data_cfg["path"])
        return panel
    if data_cfg["features"] or data_cfg.get("futr"):
        key = "data.features" if data_cfg["features"] else "data.futr"
        raise DataError(
            f"{key} with data.targets: each column is its own series, which has no "
            f"covariates; read them as channels of one series with data.columns=channels"
        )
    return read_wide(data_cfg["path"], data_cfg["time_column"], data_cfg["targets"],
                     data_cfg["fill"], data_cfg["date_order"],
                     data_cfg.get("missing_times", "keep"))  # runs before the key: kept


def check_static(panel: Panel, static: list[str], path) -> None:
    """A static column holds one value per series: the first that changes, in one line."""
    for j in range(len(panel.columns) - len(static), len(panel.columns)):
        for s in range(len(panel)):
            values = panel.values[panel.rows(s), j]
            changed = np.flatnonzero(values != values[0])
            if len(changed):
                r = panel.rows(s).start + changed[0]
                raise DataError(
                    f"{path}: column {panel.columns[j]!r} is static but changes within series "
                    f"{panel.ids[s]!r} (line {panel.lines[r]}: {values[changed[0]]:g} after "
                    f"{values[0]:g}); give each series one value")


def scale_static(shift: np.ndarray, scale: np.ndarray, panel: Panel, keep: np.ndarray,
                 n_static: int, kind: str) -> None:
    """The static columns' scaler, in place: one across the series (each series' one value,
    the series with training rows), where a series' own would make every value 0."""
    if not n_static:
        return
    values = np.stack([panel.values[panel.rows(s).start, -n_static:]
                       for s in np.flatnonzero(keep)])  # [kept series, n_static]
    fitted = fit_scaler(kind, values)
    shift[:, -n_static:], scale[:, -n_static:] = fitted.shift.numpy(), fitted.scale.numpy()


def panel_data(
    data_cfg: Mapping, device: torch.device, saved: dict | None = None, allow_changed: bool = False
) -> ForecastData:
    panel = read_panel(data_cfg)
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]
    stride, protocol = data_cfg["window_stride"], data_cfg["protocol"]
    notes = list(panel.notes)
    hashes = [series_hash(panel, s) for s in range(len(panel))]
    if saved is None:
        bounds, split_by = split_bounds(panel, data_cfg)
        keep = bounds[:, 0] > 0  # a series needs training rows to be scaled
        shift, scale = fit_per_series(panel, bounds, data_cfg["scale"])
        static = list(data_cfg.get("static", []))
        scale_static(shift, scale, panel, keep, len(static), data_cfg["scale"])
    else:
        bounds, shift, scale, keep = saved_bounds(
            panel, saved, hashes, allow_changed, notes, data_cfg["path"]
        )
        split_by = saved["split_by"]
    left_out_all = [panel.ids[s] for s in np.flatnonzero(~keep)]
    if left_out_all:
        notes.append(
            f"{len(left_out_all)} series have no training row (they start after the "
            f"validation split) and are left out: {_some(left_out_all)}"
        )

    # One buffer of every row, each series in its own scaling. [R, C]
    row_series = np.repeat(np.arange(len(panel)), panel.lengths())
    buffer = (panel.values - shift[row_series]) / scale[row_series]
    check_scaled(data_cfg["path"], buffer, panel.columns, panel.lines)
    futr = list(data_cfg.get("futr", []))
    # the horizon's known values
    buffer = lead(buffer, known_columns(panel.columns, futr), out_len, panel.lengths())
    values = torch.from_numpy(buffer).float().to(device)
    splits, info, files = {}, {}, {}
    for k, name in enumerate(SPLITS):
        starts, series, left_out = split_windows(panel, bounds, keep, k, data_cfg)
        if not len(starts):
            rows = int((bounds[:, k] - (bounds[:, k - 1] if k else 0)).max())
            raise DataError(
                f"{data_cfg['path']}: no series is long enough for a window in the {name} split "
                f"(at most {rows} rows in a series; data.protocol={protocol}, in_len={in_len}, "
                f"out_len={out_len})"
            )
        splits[name] = WindowSplit(
            values,
            torch.from_numpy(starts).to(device),
            in_len,
            out_len,
            panel.n_targets,
            torch.from_numpy(series).to(device),
        )
        files[name] = FileTargets(starts[:, None] + np.arange(out_len), panel.values,
                                  panel.n_targets, data_cfg["fill"])
        info[name] = {
            "panel_series": len(np.unique(series)),
            "windows": len(splits[name]),
            "stride": stride,
            "protocol": protocol,
            "split_by": split_by,
            "left_out": left_out,
        }
    test = splits["test"]
    newest = test.series == test.series[0]  # the first series' newest test window
    last = int(torch.nonzero(newest)[-1])
    probe = Split(*test.take(slice(last, last + 1)), test.series[last : last + 1])
    n_targets = panel.n_targets
    data = ForecastData(
        train=splits["train"],
        val=splits["val"],
        test=test,
        n_features=len(panel.columns),
        n_targets=n_targets,
        probe=probe,
        info=info,
        notes=notes,
        series_ids=panel.ids,
        series_shift=torch.from_numpy(shift[:, :n_targets]),
        series_scale=torch.from_numpy(scale[:, :n_targets]),
        mase_scale=torch.from_numpy(mase_scales(panel, bounds, data_cfg["season"])),
        scaled_by=None if data_cfg["scale"] == "none" else data_cfg["scale"],
        state={
            "kind": "panel",
            "columns": panel.columns,
            "futr": futr,  # known in advance, read led by out_len rows
            "static": list(data_cfg.get("static", [])),  # the last columns, one value a series
            "time_column": data_cfg["time_column"],
            "id_column": data_cfg["id_column"],
            "ids": panel.ids,
            "bounds": torch.from_numpy(bounds),
            "keep": torch.from_numpy(keep),
            "shift": torch.from_numpy(shift),
            "scale": torch.from_numpy(scale),
            "split_by": split_by,
            "closed_end": data_cfg["test_end"] is not None,
            "hashes": hashes,
        },
    )
    info["val"]["role"] = "selection (early stopping, search)"
    info["test"]["role"] = "held out"
    add_fingerprints(data, files)
    return data


def split_windows(
    panel: Panel, bounds: np.ndarray, keep: np.ndarray, k: int, data_cfg: Mapping
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Split k's windows over every kept series: (forecast-start rows in the buffer [N], the
    series of each [N], the ids too short for one window). Starts are found inside each
    series (`forecast_starts` on its own rows), so no window crosses into another series."""
    starts, series, left_out = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], []
    for s in np.flatnonzero(keep):
        span = range(0 if k == 0 else int(bounds[s, k - 1]), int(bounds[s, k]))
        local = forecast_starts(
            span, data_cfg["in_len"], data_cfg["out_len"], data_cfg["window_stride"],
            data_cfg["protocol"],
        ) if len(span) else []
        if not local:
            left_out.append(panel.ids[s])
            continue
        starts.append(np.asarray(local, np.int64) + panel.offsets[s])
        series.append(np.full(len(local), s, np.int64))
    return np.concatenate(starts), np.concatenate(series), left_out


def split_bounds(panel: Panel, data_cfg: Mapping) -> tuple[np.ndarray, str]:
    """[S, 3] per series: (validation start, test start, test end), rows counted in the
    series; and how they were chosen, in words. The test split ends at each series' end, or at
    `data.test_end` (the rows after it unused)."""
    lengths = panel.lengths()
    val_start, test_start = data_cfg["val_start"], data_cfg["test_start"]
    test_end = data_cfg["test_end"]
    if (val_start is None) != (test_start is None):
        raise DataError("data.val_start and data.test_start go together: give both or neither")
    wide = not data_cfg["id_column"]
    end = lengths if test_end is None else _border(panel, test_end, "data.test_end", wide)
    if val_start is None:
        fractions = data_cfg["split"]
        val, test = np.array([fraction_starts(int(n), fractions) for n in end]).T
        how = f"fractions {list(fractions)} of each series' own length"
    else:
        val, test = (
            _border(panel, value, key, wide)
            for value, key in ((val_start, "data.val_start"), (test_start, "data.test_start"))
        )
        if not (val < test).any():
            raise DataError(
                f"data.val_start={val_start} must come before data.test_start={test_start}: "
                f"the validation split would be empty"
            )
        kind = "rows" if _is_row(panel, val_start) else "time"
        how = f"{kind}: validation from {val_start}, test from {test_start}, in every series"
    if test_end is not None:
        if not (test < end).any():
            start = "row " + str(int(test.max())) if test_start is None else test_start
            raise DataError(
                f"data.test_end={test_end} must come after the test split's start ({start}): "
                f"the test split would be empty"
            )
        how += f"; rows from {test_end} on unused"
    return np.stack([val, test, end], axis=1).astype(np.int64), how


def _border(panel: Panel, value, key: str, wide: bool) -> np.ndarray:
    """[S]: where a split border falls in each series, as a row count from its start: the
    first row at or after a moment (an ISO time, or an integer step when the time column holds
    integers), or, in a wide file, at or after a data row of the file (counted from 0)."""
    if _is_row(panel, value):
        if not wide:
            raise DataError(
                f"{key}={value!r}: a long panel's borders are times; give an ISO 8601 time "
                f"(e.g. 2024-01-31 13:00), like the time column"
            )
        rows = int(panel.lines.max()) - 1  # data rows in the file
        if any((np.diff(panel.lines[panel.rows(s)]) < 0).any() for s in range(len(panel))):
            raise DataError(
                f"{key}={value}: a row number of a file whose rows are not in time order; give "
                f"a time, like the time column"
            )
        text = str(value).strip()
        if not 0 <= int(text) <= rows:
            raise DataError(
                f"{key}={value} is outside the file: a row number in [0, {rows}] (the data "
                f"rows, counted from 0; {rows} is the end)"
            )
        where, moment = panel.lines, np.int64(int(text) + 2)  # the row's file line
    else:
        if panel.times is None:
            raise DataError(
                f"{key}={value!r}: without data.time_column a panel's borders are row numbers "
                f"of a wide file"
            )
        where, moment = panel.times, _moment(value, panel.times, key)
        last = panel.times.max()
        if moment > last and key != "data.test_end":
            raise DataError(f"{key}={value!r} is after the file's last time ({show_time(last)})")
    return np.array([np.searchsorted(where[panel.rows(s)], moment) for s in range(len(panel))])


def _is_row(panel: Panel, value) -> bool:
    """A border given as a row number: an integer, where the time column (if any) does not
    hold integer steps."""
    steps = panel.times is not None and panel.times.dtype == np.int64
    return str(value).strip().lstrip("-").isdigit() and not steps


def _moment(value, times: np.ndarray, key: str):
    """A split point in the time column's own kind: an integer step or an ISO 8601 time."""
    text = str(value).strip()
    steps = times.dtype == np.int64
    try:
        return np.int64(int(text)) if steps else np.datetime64(text, "us")
    except ValueError:
        kind = "an integer step" if steps else "an ISO 8601 time (e.g. 2024-01-31 13:00)"
        raise DataError(f"{key}={value!r}: give {kind}, like the time column") from None


def fit_per_series(panel: Panel, bounds: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """shift, scale [S, C]: each series' scaler, fitted on its own training rows only."""
    shift = np.zeros((len(panel), len(panel.columns)))
    scale = np.ones_like(shift)
    for s in range(len(panel)):
        train = panel.values[panel.rows(s)][: bounds[s, 0]]
        if len(train):
            fitted = fit_scaler(kind, train)
            shift[s], scale[s] = fitted.shift.numpy(), fitted.scale.numpy()
    return shift, scale


def mase_scales(panel: Panel, bounds: np.ndarray, season) -> np.ndarray:
    """[S, n_targets]: each series' MASE denominator on its own training rows."""
    return np.concatenate(
        [
            mase_scale(
                panel.values[panel.rows(s)], range(0, int(bounds[s, 0])), panel.n_targets, season
            ).numpy()
            for s in range(len(panel))
        ]
    )


def series_hash(panel: Panel, s: int) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(panel.values[panel.rows(s)]).tobytes())
    if panel.times is not None:
        digest.update(np.ascontiguousarray(panel.times[panel.rows(s)]).tobytes())
    return digest.hexdigest()[:16]


def saved_bounds(
    panel: Panel, saved: dict, hashes: list[str], allow_changed: bool, notes: list, path
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The run's own split rows and scalers, series by series (matched by id); refuses a file
    whose series changed unless `allow_changed` (then the saved split starts and scalers
    apply, each test split running to its series' end; new ids are left out)."""
    index = {series_id: k for k, series_id in enumerate(saved["ids"])}
    changed = [
        i
        for s, i in enumerate(panel.ids)
        if i not in index or saved["hashes"][index[i]] != hashes[s]
    ]
    gone = len(set(saved["ids"]) - set(panel.ids))
    if changed or gone:
        what = f"{len(changed)} series changed or new ({_some(changed)}), {gone} gone"
        if not allow_changed:
            raise DataError(
                f"{path} changed since the run was trained "
                f"({what}); pass allow_changed_data=true to evaluate it as it is now with the "
                f"saved split starts and scalers"
            )
        notes.append(
            f"the file changed since the run was trained ({what}): evaluated with "
            f"the run's split starts and scalers"
        )
    columns = saved["shift"].shape[1]
    bounds = np.zeros((len(panel), 3), np.int64)
    shift, scale = np.zeros((len(panel), columns)), np.ones((len(panel), columns))
    keep = np.zeros(len(panel), bool)
    lengths = panel.lengths()
    for s, series_id in enumerate(panel.ids):
        if series_id not in index:
            continue
        k = index[series_id]
        bounds[s] = saved["bounds"][k].numpy()
        # The test split runs to the series' end, or to data.test_end where the run had one.
        closed = saved.get("closed_end", False)
        bounds[s, 2] = min(bounds[s, 2], lengths[s]) if closed else lengths[s]
        shift[s], scale[s] = saved["shift"][k].numpy(), saved["scale"][k].numpy()
        keep[s] = bool(saved["keep"][k]) and bounds[s, 1] < lengths[s]
    return bounds, shift, scale, keep


def _some(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (
        f" and {len(names) - shown} more" if len(names) > shown else ""
    )

"""Reading a panel of many series from one CSV file, long or wide format, checked.

- **Long** (`data.id_column`): one row per (series, time step), an id column, a time column,
  the target and any covariates. Rows may come in any order: each series' rows are sorted by
  its time column (as neuralforecast and darts sort by id and time); a duplicate (id, time)
  row is refused in one line naming both lines.
- **Wide** (`data.targets=[a, b]` or `all`): a shared time column and one column per series;
  each column becomes one series, named by its header; rows are sorted by the time column.

Each series is one stretch of rows, rows being its steps in time order (a missing time
step is refused, time_grid.py: write the row with an empty value, or read the rows as they are
with `data.missing_times=keep`). Empty cells at a series' start or end are trimmed off (so
series may start and end at different times); one inside it is an error unless
`data.fill=ffill` (carried forward within the series, never from another).

The result is a `Panel`: every series' rows one after another in one [rows, columns]
array, float64, with `offsets` marking where each series starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from .csv_series import LARGEST, MISSING, DataError, read_table, require_columns, too_large
from .dates import FORMS, TimeStyle, parse_times, time_style
from .gaps import FILLS
from .time_grid import check_steps


@dataclass
class Panel:
    ids: list[str]  # S series, in order of first appearance in the file
    offsets: np.ndarray  # [S + 1]: series s is rows offsets[s]:offsets[s + 1]
    values: np.ndarray  # [R, C] float64, targets first, then covariates; no NaN left
    times: np.ndarray | None  # [R] datetime64[us], or int64 steps; None without a time column
    lines: np.ndarray  # [R] the file line of each row (header = line 1)
    columns: list[str]
    n_targets: int
    notes: list[str]
    time_style: TimeStyle | None = None  # how the file writes its times (None: integer steps)

    def __len__(self) -> int:
        return len(self.ids)

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def rows(self, s: int) -> slice:
        return slice(int(self.offsets[s]), int(self.offsets[s + 1]))


def read_long(
    path: str | Path,
    id_column: str,
    time_column: str | None,
    columns: Sequence[str],
    fill: str = "error",
    date_order: str = "auto",
    missing_times: str = "error",
) -> Panel:
    """A long-format panel: `columns` (the target first) per row of each id; a series that
    skips time steps is refused unless `missing_times=keep` (time_grid.py)."""
    path = Path(path)
    if not time_column:
        raise DataError(
            f"data.id_column={id_column!r} needs data.time_column: each series is ordered by "
            f"its own times"
        )
    if id_column in columns:
        raise DataError(
            f"data.id_column={id_column!r} is also named as a target or feature; the id column "
            f"names the series and cannot be forecast"
        )
    header, body = read_table(path)
    require_columns(path, header, [id_column, time_column, *columns])
    ids_text = [row[header.index(id_column)].strip() for row in body]
    empty = next((i for i, t in enumerate(ids_text) if not t), None)
    if empty is not None:
        raise DataError(f"{path}: line {empty + 2}, column {id_column!r}: empty id")
    first_seen: dict[str, int] = {}
    codes = np.fromiter(
        (first_seen.setdefault(t, len(first_seen)) for t in ids_text), np.int64, len(ids_text)
    )
    ids = list(first_seen)
    values = np.stack([_numbers(path, body, header, c, ids_text) for c in columns], axis=1)
    times, style = _times(path, [row[header.index(time_column)] for row in body], time_column,
                          date_order)

    order = np.lexsort((times, codes))  # grouped by series, in time order inside each
    moved = int((order != np.lexsort((np.arange(len(codes)), codes))).sum())
    codes, values, times, lines = codes[order], values[order], times[order], order + 2
    _check_unique_times(path, codes, times, lines, ids, time_column)
    check_steps(path, times, time_column, lines, missing_times, codes[1:] == codes[:-1],
                lambda i: ids[codes[i]])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(ids)))])
    panel = _finish(path, ids, offsets, values, times, lines, list(columns), 1, fill)
    panel.time_style = style
    if moved:
        panel.notes.insert(0, f"{moved} rows were out of time order within their series: sorted")
    return panel


def read_wide(
    path: str | Path,
    time_column: str | None,
    targets: Sequence[str] | str,
    fill: str = "error",
    date_order: str = "auto",
    missing_times: str = "error",
) -> Panel:
    """A wide-format panel: each target column (or every column but the time, `all`) one
    series with the shared time column (refused where it skips time steps, unless
    `missing_times=keep`)."""
    path = Path(path)
    header, body = read_table(path)
    if targets == "all":
        targets = [c for c in header if c != time_column]
    require_columns(path, header, [*targets, *([time_column] if time_column else [])])
    if time_column in targets:
        raise DataError(f"data.targets names the time column {time_column!r}")
    rows = len(body)
    order, moved, style = np.arange(rows), 0, None
    if time_column:
        one, style = _times(path, [row[header.index(time_column)] for row in body], time_column,
                            date_order)
        order = np.argsort(one, kind="stable")  # rows in time order
        moved = int((order != np.arange(rows)).sum())
        one = one[order]
        _check_unique_times(path, np.zeros(rows, np.int64), one, order + 2, None, time_column)
        check_steps(path, one, time_column, order + 2, missing_times)
        times = np.tile(one, len(targets))
    else:
        times = None
    values = np.concatenate([_numbers(path, body, header, c)[order] for c in targets])[:, None]
    lines = np.tile(order + 2, len(targets))
    offsets = np.arange(len(targets) + 1) * rows
    panel = _finish(path, list(targets), offsets, values, times, lines, ["value"], 1, fill)
    panel.time_style = style
    if moved:
        panel.notes.insert(0, f"{moved} rows were out of time order: sorted by {time_column!r}")
    return panel


# -- cells ---------------------------------------------------------------------------------


def _numbers(path, body, header, column: str, ids: list[str] | None = None) -> np.ndarray:
    """One column as float64 (NaN for an empty cell), or one line naming the first cell that
    is not a number (and its series)."""
    j = header.index(column)
    texts = [row[j].strip() for row in body]
    clean = ["nan" if t in MISSING else t for t in texts]
    try:
        values = np.array(clean, dtype=np.float64)
    except ValueError:
        values = None
    if values is not None and not np.isinf(values).any():
        large = np.flatnonzero(np.abs(np.nan_to_num(values)) >= LARGEST)
        if len(large):
            i = int(large[0])
            raise too_large(path, i + 2, column, texts[i], f" (series {ids[i]!r})" if ids else "")
        return values
    for i, text in enumerate(clean):
        try:
            bad = not np.isfinite(float(text)) and text != "nan"
        except ValueError:
            bad = True
        if bad:
            of = f" (series {ids[i]!r})" if ids else ""
            raise DataError(
                f"{path}: line {i + 2}, column {column!r}{of}: {texts[i]!r} is not a finite number"
            )
    raise AssertionError("unreachable: numpy refused a column of numbers")


def _times(path, texts: list[str], column: str, date_order: str
           ) -> tuple[np.ndarray, TimeStyle | None]:
    """Integer steps when every cell is an integer, else times (datetime64[us]; dates.py),
    with how the file writes them (None for steps)."""
    texts = [t.strip() for t in texts]
    if all(t.lstrip("-").isdigit() for t in texts):
        return np.array(texts, dtype=np.int64), None
    times = parse_times(texts, path, column, date_order, forms=f"{FORMS}, or an integer step")
    return times, time_style(texts, _Moments(times), date_order)


class _Moments:
    """datetime64 times read as datetimes one at a time (time_style reads a sample)."""

    def __init__(self, times: np.ndarray):
        self.times = times

    def __getitem__(self, i: int) -> datetime:
        return self.times[i].astype("datetime64[us]").astype(object)


def _check_unique_times(path, codes, times, lines, ids: list[str] | None, column: str) -> None:
    """Within each series (rows grouped and sorted by time), no time repeats. `ids` names
    the series in the message (None: one shared time column, nothing to name)."""
    same = codes[1:] == codes[:-1]
    bad = np.flatnonzero(same & (times[1:] == times[:-1]))
    if not len(bad):
        return
    k = bad[np.argmin(lines[bad + 1])]  # the first offending line in the file
    line, earlier = int(lines[k + 1]), int(lines[k])
    name = "" if ids is None else f"series {ids[codes[k]]!r}: "
    raise DataError(
        f"{path}: line {line}: {name}duplicate time {show_time(times[k + 1])} in column "
        f"{column!r} (also at line {earlier}); each (id, time) must appear once"
    )


def show_time(moment) -> str:
    """An integer step or a datetime64 as the user wrote it (2024-01-02 13:00:00)."""
    value = moment.item()
    return value.isoformat(sep=" ") if hasattr(value, "isoformat") else str(value)


# -- trimming and gaps ---------------------------------------------------------------------


def _finish(path, ids, offsets, values, times, lines, columns, n_targets, fill) -> Panel:
    """Trim each series' leading and trailing empty rows, drop series left empty, and fill
    (or refuse) the gaps inside."""
    if fill not in FILLS:
        raise DataError(f"data.fill={fill!r} is not allowed: choose one of {', '.join(FILLS)}")
    if fill == "interpolate":
        raise DataError(
            "data.fill=interpolate is not available for panels (it fills each window "
            "differently); use data.fill=ffill, which carries values forward within a series"
        )
    complete = ~np.isnan(values).any(axis=1)
    keep = np.zeros(len(values), dtype=bool)
    kept_ids, lengths, empty, trimmed = [], [], [], 0
    for s, series_id in enumerate(ids):
        observed = np.flatnonzero(complete[offsets[s] : offsets[s + 1]])
        if not len(observed):
            empty.append(series_id)
            continue
        first, last = offsets[s] + observed[0], offsets[s] + observed[-1]
        keep[first : last + 1] = True
        kept_ids.append(series_id)
        lengths.append(last + 1 - first)
        trimmed += int(offsets[s + 1] - offsets[s]) - lengths[-1]
    if not kept_ids:
        raise DataError(f"{path}: no series has a row with every column filled")
    notes = []
    if empty:
        notes.append(
            f"{len(empty)} series have no complete row and are left out: "
            f"{', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''}"
        )
    if trimmed:
        notes.append(f"{trimmed} empty row(s) at series' starts or ends trimmed off")
    values, lines = values[keep], lines[keep]
    times = times[keep] if times is not None else None
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    gaps = np.isnan(values)
    if gaps.any():
        if fill == "error":
            r, c = np.argwhere(gaps)[0]
            s = int(np.searchsorted(offsets, r, side="right") - 1)
            raise DataError(
                f"{path}: {int(gaps.sum())} empty or NaN cell(s) inside series, first at line "
                f"{lines[r]}, column {columns[c]!r} (series {kept_ids[s]!r}); set "
                f"data.fill=ffill to carry the last value forward"
            )
        # ffill: every series starts with a complete row, so the carry never crosses series.
        rows = np.arange(len(values))[:, None]
        last_seen = np.maximum.accumulate(np.where(gaps, 0, rows), axis=0)
        values = np.take_along_axis(values, last_seen, axis=0)
        notes.append(f"{int(gaps.sum())} empty cell(s) inside series carried forward (ffill)")
    return Panel(kept_ids, offsets, values, times, lines, columns, n_targets, notes)

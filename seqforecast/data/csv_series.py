"""Reading a user's series from a CSV file, checked row by row.

`read_series` returns the chosen columns as a float64 array [rows, columns] (NaN where a cell
is empty: `gaps.GapFiller` fills them, without looking ahead, when `data.fill` allows) and,
with a time column, the timestamps. Every problem is a `DataError` whose message is one line
naming the file, and where it helps the row and column: a missing file or column, a value that
is not a number, an empty or NaN cell (with the `data.fill` options that repair it), unsorted
or duplicate timestamps, missing time steps (time_grid.py), a time in no form dates.py reads.
Row numbers are the file's line numbers (the header is line 1). A clean file is parsed by
numpy's C reader (`read_clean`), any other cell by cell, which is what names the line and
column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from .dates import TimeStyle, parse_times, time_style
from .errors import DataError
from .time_grid import check_steps

MISSING = {"", "nan", "NaN", "NAN", "na", "NA", "null", "None"}
# The largest magnitude a value may have: the model computes in float32, where an error in the
# data's units is squared (1e18 squared is 1e36, below float32's 3.4e38).
LARGEST = 1e18


def check_scaled(path, scaled, columns, lines) -> None:
    """Values scaled for the model (rows x columns) must stay finite in float32: a column whose
    training rows barely vary can blow its other rows up. One line naming the first cell."""
    bad = np.argwhere(~np.isnan(scaled) & ~(np.abs(scaled) < np.finfo(np.float32).max))
    if len(bad):
        r, c = bad[0]
        raise DataError(
            f"{path}: line {int(lines[r])}, column {columns[c]!r}: overflows float32 once scaled "
            f"on the training rows (their spread is too small); try data.scale=none"
        )


def too_large(path, line: int, column: str, text: str, series: str = "") -> DataError:
    """The one line for a cell the model cannot hold."""
    return DataError(
        f"{path}: line {line}, column {column!r}{series}: {text!r} is too large for the model "
        f"(values must lie within ±{LARGEST:.0e}: errors are squared in float32)"
    )


@dataclass
class Series:
    values: np.ndarray  # [rows, columns], float64, in file order; NaN where a cell is empty
    columns: list[str]
    times: list[datetime] | None  # one per row when there is a time column
    time_style: TimeStyle | None = None  # how the file writes them (dates.py), to write alike


def parse_time(text: str) -> datetime:
    """A time the user typed (a split border): ISO 8601."""
    return datetime.fromisoformat(text.strip())


def read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, body rows) of a CSV file, every row as long as the header."""
    if not path.is_file():
        raise DataError(f"data.path={str(path)!r}: no such file")
    try:
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"{path}: not a readable CSV file ({err})") from None
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise DataError(f"{path}: empty file, expected a header row with column names")
    header = [cell.strip() for cell in rows[0]]
    # A blank line is a row of empty cells (what a one-column file writes for a gap).
    body = [row or [""] * len(header) for row in rows[1:]]
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise DataError(
                f"{path}: line {line} has {len(row)} cells, the header has {len(header)}"
            )
    return header, body


def read_clean(path: Path, columns: Sequence[str], time_column: str | None
               ) -> tuple[np.ndarray, list[str]] | None:
    """A clean file's columns read by numpy's C parser (`np.loadtxt`), or None where this file
    needs the cell-by-cell reader: a missing file or column, quoting, a row of another length
    (the comma count says so), a blank line, an empty, NaN, infinite, too large or unreadable
    cell. That reader then reads it, or names the file, line and column that stop it, so the
    errors are the same either way; this path only makes a clean file fast (a Traffic-shaped
    file, 17,544 rows x 863 columns: scripts/bench_csv.py, docs/data.md#your-own-series-csv).
    Returns (values [rows, columns] float64, the time column's cells or [])."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    first = raw.find(b"\n")
    if first < 0 or b'"' in raw:
        return None
    try:
        header = [c.strip() for c in next(csv.reader([raw[:first].decode().rstrip("\r")]))]
    except (UnicodeDecodeError, StopIteration, csv.Error):
        return None
    wanted = [*columns, *([time_column] if time_column else [])]
    if any(name not in header for name in wanted):
        return None
    body = raw[first + 1:]
    rows = body.count(b"\n") + (bool(body) and not body.endswith(b"\n"))
    if rows == 0 or body.count(b",") != rows * (len(header) - 1):
        return None
    del raw, body

    def load(use: list[int], dtype):
        return np.loadtxt(path, delimiter=",", skiprows=1, usecols=use, dtype=dtype,
                          comments=None, encoding="utf-8", ndmin=2)

    try:
        values = load([header.index(c) for c in columns], np.float64)
        texts = load([header.index(time_column)], str)[:, 0].tolist() if time_column else []
    except ValueError:
        return None
    if len(values) != rows or not (np.abs(values) < LARGEST).all():  # NaN fails it too
        return None
    return values, texts


def require_columns(path: Path, header: list[str], wanted: Sequence[str]) -> None:
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(
            f"{path}: no column {', '.join(map(repr, missing))}; the file has {', '.join(header)}"
        )


def read_series(
    path: str | Path,
    columns: Sequence[str],
    time_column: str | None = None,
    fill: str = "error",
    duplicate_times: str = "error",
    date_order: str = "auto",
    missing_times: str = "error",
) -> Series:
    """`duplicate_times=keep`: a timestamp repeated on consecutive rows is read as it is (the
    published loaders read Weather's one repeated row); `error` refuses it. `date_order`: how
    a date with its year last reads (dates.py: auto | dayfirst | monthfirst).
    `missing_times=error`: a step that skips steps of the file's interval is refused
    (time_grid.py); `keep` reads the rows as they are."""
    path = Path(path)
    wanted = list(columns) + ([time_column] if time_column else [])
    fast = read_clean(path, columns, time_column)
    if fast is not None:
        values, time_texts = fast
    else:  # cell by cell: gaps, and the one line naming what is wrong where
        header, body = read_table(path)
        require_columns(path, header, wanted)
        values = _numbers(path, header, body, columns, fill)
        time_texts = [row[header.index(time_column)] for row in body] if time_column else []

    times, style = None, None
    if time_column:
        stamps = parse_times(time_texts, path, time_column, date_order)
        check_increasing(path, stamps, time_column, duplicate_times)
        check_steps(path, stamps, time_column, np.arange(len(stamps)) + 2, missing_times)
        times = stamps.astype(object).tolist()  # datetime.datetime, one per row
        style = time_style(time_texts, times, date_order)
    return Series(values=values, columns=list(columns), times=times, time_style=style)


def check_increasing(path, stamps: np.ndarray, column: str, duplicate_times: str) -> None:
    """Rows in strictly increasing time (a repeat allowed with duplicate_times=keep), or one
    line naming the first row out of order."""
    step = stamps[1:] - stamps[:-1]
    bad = step < np.timedelta64(0) if duplicate_times == "keep" else step <= np.timedelta64(0)
    if not bad.any():
        return
    i = int(np.argmax(bad)) + 1
    repeated = stamps[i] == stamps[i - 1]
    kind = "duplicate" if repeated else "unsorted"
    raise DataError(
        f"{path}: line {i + 2}, column {column!r}: {kind} timestamp {_show(stamps[i])} (after "
        f"{_show(stamps[i - 1])}); rows must be in strictly increasing time"
        + (" (data.duplicate_times=keep reads a repeated one)" if repeated else "")
    )


def _show(moment: np.datetime64) -> str:
    return moment.astype(object).isoformat(sep=" ")


def _numbers(path: Path, header: list[str], body: list[list[str]], columns: Sequence[str],
             fill: str) -> np.ndarray:
    """The columns' cells as float64 [rows, columns], NaN for an empty cell (DataError for
    one that is not a number, or for any gap when fill=error)."""
    index = {name: header.index(name) for name in columns}
    values = np.empty((len(body), len(columns)))
    gaps: list[tuple[int, str]] = []
    for i, row in enumerate(body):
        for j, name in enumerate(columns):
            text = row[index[name]].strip()
            if text in MISSING:
                values[i, j] = math.nan
                gaps.append((i + 2, name))
                continue
            try:
                values[i, j] = float(text)
            except ValueError:
                raise DataError(
                    f"{path}: line {i + 2}, column {name!r}: {text!r} is not a number"
                ) from None
            if not math.isfinite(values[i, j]):
                raise DataError(f"{path}: line {i + 2}, column {name!r}: {text!r} is not finite")
            if abs(values[i, j]) >= LARGEST:
                raise too_large(path, i + 2, name, text)
    if gaps and fill == "error":
        line, column = gaps[0]
        raise DataError(
            f"{path}: {len(gaps)} empty or NaN cell(s), first at line {line}, column {column!r}; "
            f"set data.fill=ffill or data.fill=interpolate to fill them"
        )
    return values

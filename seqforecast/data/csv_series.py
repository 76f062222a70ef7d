"""Reading a user's series from a CSV file, checked row by row.

`read_series` returns the chosen columns as a float64 array [rows, columns] (NaN where a cell
is empty: `gaps.GapFiller` fills them, without looking ahead, when `data.fill` allows) and,
with a time column, the timestamps. Every problem is a `DataError` whose message is one line
naming the file, and where it helps the row and column: a missing file or column, a value that
is not a number, an empty or NaN cell (with the `data.fill` options that repair it), unsorted
or duplicate timestamps. Row numbers are the file's line numbers (the header is line 1).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

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


class DataError(ValueError):
    """A data file that cannot be used; str(err) is the one line to show."""


@dataclass
class Series:
    values: np.ndarray  # [rows, columns], float64, in file order; NaN where a cell is empty
    columns: list[str]
    times: list[datetime] | None  # one per row when there is a time column


def parse_time(text: str) -> datetime:
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
) -> Series:
    """`duplicate_times=keep`: a timestamp repeated on consecutive rows is read as it is (the
    published loaders read Weather's one repeated row); `error` refuses it."""
    path = Path(path)
    header, body = read_table(path)
    wanted = list(columns) + ([time_column] if time_column else [])
    require_columns(path, header, wanted)
    index = {name: header.index(name) for name in wanted}

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

    times = None
    if time_column:
        times = []
        for i, row in enumerate(body):
            try:
                times.append(parse_time(row[index[time_column]]))
            except ValueError:
                raise DataError(
                    f"{path}: line {i + 2}, column {time_column!r}: {row[index[time_column]]!r} "
                    f"is not an ISO 8601 time (e.g. 2024-01-31 13:00)"
                ) from None
        for i in range(1, len(times)):
            repeated = times[i] == times[i - 1]
            if times[i] < times[i - 1] or (repeated and duplicate_times == "error"):
                kind = "duplicate" if repeated else "unsorted"
                raise DataError(
                    f"{path}: line {i + 2}, column {time_column!r}: {kind} timestamp "
                    f"{times[i].isoformat(sep=' ')} (after {times[i - 1].isoformat(sep=' ')}); "
                    f"rows must be in strictly increasing time"
                    + (" (data.duplicate_times=keep reads a repeated one)" if repeated else "")
                )
    return Series(values=values, columns=list(columns), times=times)

"""Time splits and sliding windows, leak-free.

The rows are cut by time into train | validation | test ranges: fractions of the rows (the
validation split starts at row round(0.7 n), the test split at that + round(0.15 n) for the
default [0.7, 0.15, 0.15]), or explicit start rows/timestamps for validation and test.

Which windows belong to a split (`data.protocol`):

- `standard` (default; TSLib's split borders, neuralforecast's and statsforecast's
  cross-validation): the windows whose forecast steps lie in the split. Their inputs may
  reach back into earlier rows (the past: no leak), never forward. Validation and test
  windows start right at the split point, one every `stride` rows; every row of the split is
  forecast. Training windows start at row in_len (their inputs need in_len rows before).
- `strict`: windows lie entirely inside their split, inputs included, the last one ending at
  the split's last row. A split then needs in_len + out_len rows, and its first in_len rows are
  only ever inputs.

Either way no training window touches a validation or test row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import torch
from torch import Tensor

from .csv_series import DataError, parse_time

SPLITS = ("train", "val", "test")
PROTOCOLS = ("standard", "strict")


def split_ranges(
    n_rows: int,
    fractions: Sequence[float],
    val_start: str | None = None,
    test_start: str | None = None,
    times: list[datetime] | None = None,
    test_end: str | None = None,
) -> dict[str, range]:
    """Row ranges of train, val and test. Explicit starts (row numbers counted from 0 over the
    data rows, or timestamps when there is a time column) win over fractions. `test_end` (a row
    or a timestamp, exclusive) ends the test split there; the rows after it are not used, and
    fractions then cut the rows before it."""
    if (val_start is None) != (test_start is None):
        raise DataError("data.val_start and data.test_start go together: give both or neither")
    end = n_rows if test_end is None else _row(test_end, times, "data.test_end", n_rows)
    if val_start is not None:
        val = _row(val_start, times, "data.val_start", n_rows)
        test = _row(test_start, times, "data.test_start", n_rows)
        if not val < test:
            raise DataError(
                f"data.val_start={val_start} must come before data.test_start={test_start}: "
                f"the validation split would be empty"
            )
    else:
        if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
            raise DataError(
                f"data.split={list(fractions)} is not allowed: three positive fractions "
                f"(train, val, test) summing to 1"
            )
        val, test = fraction_starts(end, fractions)
    if test_end is not None and not test < end:
        start = f"row {test}" if test_start is None else test_start
        raise DataError(
            f"data.test_end={test_end} must come after the test split's start ({start}): "
            f"the test split would be empty"
        )
    if not 0 < val < test < end:
        raise DataError(
            f"splits at rows {val} (val) and {test} (test) of {end} leave an empty split"
        )
    return {"train": range(0, val), "val": range(val, test), "test": range(test, end)}


def fraction_starts(n_rows: int, fractions: Sequence[float]) -> tuple[int, int]:
    """(validation start, test start) of `n_rows` rows cut by (train, val, test) fractions:
    round(f_train n), then that + round(f_val n) (Python's round, halves to even)."""
    val = round(n_rows * fractions[0])
    return val, val + round(n_rows * fractions[1])


def seasonal_periods(season: int | Sequence[int]) -> list[int]:
    """`data.season` as a list of periods: 0 -> [], 48 -> [48], [48, 336] -> [48, 336]."""
    periods = list(season) if isinstance(season, (list, tuple)) else [season]
    return [p for p in periods if p]


def _row(value: str, times: list[datetime] | None, key: str, n_rows: int) -> int:
    """A split border as a row number: the row itself, or the first row at or after a
    timestamp. A border past the file's end is refused (the end itself closes the test
    split)."""
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        row = int(text)
        if not 0 <= row <= n_rows:
            raise DataError(
                f"{key}={value} is outside the file: a row number in [0, {n_rows}] (the data "
                f"rows, counted from 0; {n_rows} is the end)"
            )
        return row
    if times is None:
        raise DataError(f"{key}={value!r}: a row number, or a timestamp with data.time_column")
    try:
        moment = parse_time(text)
    except ValueError:
        raise DataError(f"{key}={value!r} is neither a row number nor an ISO 8601 time") from None
    if times and moment > times[-1] and key != "data.test_end":
        raise DataError(
            f"{key}={value!r} is after the file's last time ({times[-1].isoformat(sep=' ')})"
        )
    return int(np.searchsorted(np.array(times, dtype="datetime64[us]"), np.datetime64(moment)))


def forecast_starts(
    split: range, in_len: int, out_len: int, stride: int, protocol: str = "standard"
) -> list[int]:
    """The row where each of the split's windows starts forecasting; the window reads rows
    [start - in_len, start) and forecasts [start, start + out_len)."""
    last = split.stop - out_len
    if protocol == "standard":
        first = max(split.start, in_len)  # inputs may reach back, but not before row 0
        return list(range(first, last + 1, stride))
    if protocol == "strict":  # the last window ends at the split's end (newest rows covered)
        first = split.start + in_len
        return list(range(last, first - 1, -stride))[::-1] if last >= first else []
    raise DataError(
        f"data.protocol={protocol!r} is not allowed: choose one of {', '.join(PROTOCOLS)}"
    )


def window_rows(starts: Sequence[int], in_len: int, out_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the windows' inputs [N, in_len] and forecast steps [N, out_len]."""
    starts = np.asarray(starts, dtype=np.int64)[:, None]
    return starts + np.arange(-in_len, 0), starts + np.arange(out_len)


def to_tensors(inputs: np.ndarray, targets: np.ndarray, n_targets: int) -> tuple[Tensor, Tensor]:
    """inputs [N, in_len, C] (targets first, then features), targets [N, out_len, >= n_targets]
    -> float32 src [N, in_len, C] and target [N, out_len, n_targets]."""
    src = torch.from_numpy(np.ascontiguousarray(inputs)).float()
    target = torch.from_numpy(np.ascontiguousarray(targets[..., :n_targets])).float()
    return src, target

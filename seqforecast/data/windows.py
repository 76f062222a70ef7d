"""Time splits and sliding windows, leak-free.

The rows are cut by time into train | validation | test ranges (fractions of the rows, or
explicit start rows/timestamps for validation and test). Each split's windows lie entirely
inside its own range: a window of in_len + out_len rows never reaches across a boundary, so
no training window touches a validation or test row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import torch
from torch import Tensor

from .csv_series import DataError, parse_time

SPLITS = ("train", "val", "test")


def split_ranges(
    n_rows: int,
    fractions: Sequence[float],
    val_start: str | None = None,
    test_start: str | None = None,
    times: list[datetime] | None = None,
) -> dict[str, range]:
    """Row ranges of train, val and test. Explicit starts (row numbers counted from 0 over the
    data rows, or timestamps when there is a time column) win over fractions."""
    if (val_start is None) != (test_start is None):
        raise DataError("data.val_start and data.test_start go together: give both or neither")
    if val_start is not None:
        val = _row(val_start, times, "data.val_start")
        test = _row(test_start, times, "data.test_start")
    else:
        if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
            raise DataError(
                f"data.split={list(fractions)} is not allowed: three positive fractions "
                f"(train, val, test) summing to 1"
            )
        val = round(n_rows * fractions[0])
        test = val + round(n_rows * fractions[1])
    if not 0 < val < test < n_rows:
        raise DataError(
            f"splits at rows {val} (val) and {test} (test) of {n_rows} leave an empty split"
        )
    return {"train": range(0, val), "val": range(val, test), "test": range(test, n_rows)}


def _row(value: str, times: list[datetime] | None, key: str) -> int:
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    if times is None:
        raise DataError(f"{key}={value!r}: a row number, or a timestamp with data.time_column")
    try:
        moment = parse_time(text)
    except ValueError:
        raise DataError(f"{key}={value!r} is neither a row number nor an ISO 8601 time") from None
    return int(np.searchsorted(np.array(times, dtype="datetime64[us]"), np.datetime64(moment)))


def window_starts(rows: range, window: int, stride: int) -> list[int]:
    """First rows of the windows inside `rows`: every `stride` rows, the last ending at the
    range's end (so the newest rows are always covered)."""
    last = rows.stop - window
    if last < rows.start:
        return []
    starts = list(range(last, rows.start - 1, -stride))
    return starts[::-1]


def make_windows(
    values: np.ndarray, starts: Sequence[int], in_len: int, out_len: int, n_targets: int
) -> tuple[Tensor, Tensor]:
    """values [rows, C] -> src [N, in_len, C] (targets first, then features) and
    target [N, out_len, n_targets]."""
    offsets = np.asarray(starts)[:, None] + np.arange(in_len + out_len)  # [N, in + out]
    windows = torch.from_numpy(values[offsets]).float()  # [N, in + out, C]
    return windows[:, :in_len].contiguous(), windows[:, in_len:, :n_targets].contiguous()

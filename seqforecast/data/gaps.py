"""Filling empty cells without looking ahead.

A gap is filled differently depending on what the filled value feeds, so that no value at or
after a window's first forecast step reaches that window's inputs, and no row of a later split
reaches an earlier split:

- `ffill` (both roles): the last observed value at or before the row. It only ever looks back,
  so it is leak-free by construction. A column that starts empty cannot be forward-filled.
- `interpolate`, a window's **inputs**: linear in the row number between the observed values
  on either side, when the next observed value lies before the window's forecast start;
  otherwise (the gap runs up to the forecast start) the last observed value is carried
  forward. A leading gap takes the first observed value, if that one lies before the forecast
  start. So the same row can be filled differently in two windows: each sees only its past.
- `interpolate`, **targets** (the values a window is scored on): linear between the observed
  values on either side when both lie in the same split, else the nearest observed value of
  that split. A target never borrows from another split.

`GapFiller` precomputes, per column, the previous and next observed row of every row, so both
roles are one gather over the windows' row indices.
"""

from __future__ import annotations

import numpy as np

from .csv_series import DataError

FILLS = ("error", "ffill", "interpolate")


class GapFiller:
    def __init__(self, values: np.ndarray, fill: str, columns: list[str], source: str):
        """`values` [rows, C] float64 with NaN for empty cells (as read from the file)."""
        if fill not in FILLS:
            raise DataError(f"data.fill={fill!r} is not allowed: choose one of {', '.join(FILLS)}")
        self.values, self.fill, self.columns, self.source = values, fill, columns, source
        known = ~np.isnan(values)
        self.has_gaps = not known.all()
        if not self.has_gaps:
            return
        rows = np.arange(len(values))[:, None]
        # prev[r, c]: the last observed row <= r (-1: none); nxt[r, c]: the first >= r (rows: none)
        self.prev = np.maximum.accumulate(np.where(known, rows, -1), axis=0)
        self.nxt = np.flip(
            np.minimum.accumulate(np.flip(np.where(known, rows, len(values)), 0), axis=0), 0
        )
        for j, name in enumerate(columns):
            if not known[:, j].any():
                raise DataError(f"{source}: column {name!r} has no values at all")
            if fill == "ffill" and not known[0, j]:
                raise DataError(
                    f"{source}: column {name!r} starts empty at line 2; ffill has nothing to "
                    f"carry forward (use data.fill=interpolate)"
                )

    # -- the two roles ---------------------------------------------------------------------

    def inputs(self, rows: np.ndarray, forecast_start: np.ndarray) -> np.ndarray:
        """Input values for windows: rows [N, L] (row indices), forecast_start [N] -> [N, L, C],
        each window filled from observed rows before its forecast start only."""
        if not self.has_gaps:
            return self.values[rows]
        if self.fill == "ffill":
            return self._carried(rows)
        prev, nxt = self.prev[rows], self.nxt[rows]  # [N, L, C]
        before_start = nxt < forecast_start[:, None, None]
        # A leading gap (no observed row before) takes the first observed value when that
        # lies before the forecast start.
        interpolated = np.where(prev >= 0, self._between(rows, prev, nxt), self._at(nxt))
        filled = np.where(before_start, interpolated, self._at(prev))
        unseen = (prev < 0) & ~before_start  # nothing observed before the forecast start
        if unseen.any():
            n, _, c = np.argwhere(unseen)[0]
            raise DataError(
                f"{self.source}: column {self.columns[c]!r} has no value before line "
                f"{int(forecast_start[n]) + 2}, where a window's forecast starts; its inputs "
                f"cannot be filled without looking ahead"
            )
        return filled

    def targets(
        self, rows: np.ndarray, split: range, split_name: str, n_targets: int
    ) -> np.ndarray:
        """Values a window is scored on: rows [N, L] inside `split` -> [N, L, n_targets] (the
        first columns), filled from that split's own observed rows (ffill: from earlier rows,
        as ever)."""
        if not self.has_gaps:
            return self.values[rows][..., :n_targets]
        prev, nxt = self.prev[rows][..., :n_targets], self.nxt[rows][..., :n_targets]
        if self.fill == "ffill":
            return self._at(prev)
        prev_in = prev >= split.start
        next_in = nxt < split.stop
        nearest = np.where(prev_in, self._at(prev), self._at(nxt))
        filled = np.where(prev_in & next_in, self._between(rows, prev, nxt), nearest)
        empty = ~prev_in & ~next_in
        if empty.any():
            c = int(np.argwhere(empty)[0][2])
            raise DataError(
                f"{self.source}: column {self.columns[c]!r} has no value in the {split_name} "
                f"split (lines {split.start + 2}-{split.stop + 1}); there is nothing to fill from"
            )
        return filled

    # -- internals -------------------------------------------------------------------------

    def _at(self, index: np.ndarray) -> np.ndarray:
        """values[index[..., c], c] for every column c (out-of-range index -> NaN)."""
        columns = self.values[:, : index.shape[-1]]
        safe = np.clip(index, 0, len(self.values) - 1)
        picked = np.take_along_axis(columns, safe.reshape(-1, safe.shape[-1]), axis=0)
        picked = picked.reshape(index.shape)
        return np.where((index >= 0) & (index < len(self.values)), picked, np.nan)

    def _carried(self, rows: np.ndarray) -> np.ndarray:
        return self._at(self.prev[rows])

    def _between(self, rows: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """Linear in the row number between prev and nxt (equal where the row is observed)."""
        low, high = self._at(prev), self._at(nxt)
        span = np.maximum(nxt - prev, 1)
        weight = (rows[..., None] - prev) / span
        return np.where(nxt == prev, low, low + weight * (high - low))

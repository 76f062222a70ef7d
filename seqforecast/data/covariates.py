"""Known-future covariates (`data.futr`): columns whose values over the forecast steps are
known when the forecast is made (calendar, a published load forecast, a planned price).

A window reads every column over its input steps [start - in_len, start); a known-future
column is read led by out_len rows, over [start - in_len + out_len, start + out_len), so its
last out_len input steps hold the horizon's own values. Every family then reads them as it
reads any input channel (the encoder-decoder's encoder, iTransformer's variate tokens, TimeXer's
exogenous tokens), and the window's shape stays [in_len, channels]: nothing past the data
layer knows which channel is led. The target and the past covariates are never led, so no
window sees a target or a past covariate at or after its forecast start (tested).

A window's channels: the targets, the past covariates, the known-future ones, the static ones
(a panel's: `data.static`, one value per series, scaled across the series) and the calendar
features; the last two keep their values in the model (no instance norm: a constant channel
would become 0), `DataSource.plain_channels`.
"""

from __future__ import annotations

import numpy as np


def lead(values: np.ndarray, futr: slice, out_len: int, lengths: np.ndarray | None = None
         ) -> np.ndarray:
    """values [rows, C] whose columns `futr` are known in advance -> a copy with those columns
    led by out_len rows within each series (`lengths`: the rows of each series, one after
    another; None: one series). A series' last out_len led rows have no later row to take;
    they hold its last value, which no window reads (a window forecasting up to the series'
    end reads led rows up to end - out_len - 1)."""
    if futr.start == futr.stop:
        return values
    led = values.copy()
    lengths = [len(values)] if lengths is None else lengths
    for end, n in zip(np.cumsum(lengths), lengths, strict=True):
        start, shift = end - n, min(out_len, n)
        block = values[start:end, futr]
        led[start : end - shift, futr] = block[shift:]
        led[end - shift : end, futr] = block[-1]
    return led


def window_with_future(history: np.ndarray, future: np.ndarray | None, futr: slice,
                       in_len: int) -> np.ndarray:
    """The window a forecast after `history` reads: history [rows, C] (model units; its
    columns `futr` known in advance) and `future` [out_len, F] (the known columns over the
    forecast steps) -> [in_len, C]: every column's last in_len rows, the known ones led
    (their last in_len values of history then future)."""
    window = history[-in_len:].copy()
    if futr.start != futr.stop:
        known = np.concatenate([history[:, futr], future])  # [rows + out_len, F]
        window[:, futr] = known[-in_len:]
    return window


def known_columns(columns: list[str], futr: list[str]) -> slice:
    """Where the known-future columns lie among a window's `columns` (they follow the targets
    and past covariates, in data.futr's order)."""
    first = columns.index(futr[0]) if futr else len(columns)
    return slice(first, first + len(futr))

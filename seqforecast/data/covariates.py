"""Known-future covariates (`data.futr`): columns whose values over the forecast steps are
known when the forecast is made (calendar, a published load forecast, a planned price).

A window reads every column over its input steps [start - in_len, start); a known-future
column is read led by out_len rows, over [start - in_len + out_len, start + out_len), so its
last out_len input steps hold the horizon's own values. Every family then reads them as it
reads any input channel (the encoder-decoder's encoder, iTransformer's variate tokens, TimeXer's
exogenous tokens), and the window's shape stays [in_len, channels]: nothing past the data
layer knows which channel is led. The target and the past covariates are never led, so no
window sees a target or a past covariate at or after its forecast start (tested).

The columns come last among the series' columns (targets, past covariates, known-future ones;
then calendar features), so a led column is the same slice in every buffer.
"""

from __future__ import annotations

import numpy as np


def lead(values: np.ndarray, n_futr: int, out_len: int, lengths: np.ndarray | None = None
         ) -> np.ndarray:
    """values [rows, C] whose last `n_futr` columns are known in advance -> a copy with those
    columns led by out_len rows within each series (`lengths`: the rows of each series, one
    after another; None: one series). A series' last out_len led rows have no later row to
    take; they hold its last value, which no window reads (a window forecasting up to the
    series' end reads led rows up to end - out_len - 1)."""
    if not n_futr:
        return values
    led = values.copy()
    ends = np.cumsum(lengths if lengths is not None else [len(values)])
    for end, n in zip(ends, lengths if lengths is not None else [len(values)], strict=True):
        start, shift = end - n, min(out_len, n)
        block = values[start:end, -n_futr:]
        led[start : end - shift, -n_futr:] = block[shift:]
        led[end - shift : end, -n_futr:] = block[-1]
    return led


def window_with_future(history: np.ndarray, future: np.ndarray, n_futr: int, in_len: int
                       ) -> np.ndarray:
    """The window a forecast after `history` reads: history [rows, C] (model units; its last
    n_futr columns known in advance) and `future` [out_len, n_futr] (the known columns over
    the forecast steps) -> [in_len, C]: every column's last in_len rows, the known ones led
    (their last in_len values of history then future)."""
    window = history[-in_len:].copy()
    if n_futr:
        known = np.concatenate([history[:, -n_futr:], future])  # [rows + out_len, n_futr]
        window[:, -n_futr:] = known[-in_len:]
    return window

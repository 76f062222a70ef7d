"""Calendar features of each time step (`data.time_features=true`): the published `timeF`
encoding of Informer, Autoformer and the Time-Series-Library (`utils/timefeatures.py`), which
iTransformer reads as extra tokens. Each feature is scaled to [-0.5, 0.5]; which features a
step gets follows `data.time_freq` (pandas' offset alias of the published `--freq`; the
published scripts leave it at `h` for every file, ETTm and Weather too):

    s:   second, minute, hour, weekday, day of month, day of year
    min: minute, hour, weekday, day of month, day of year
    h:   hour, weekday, day of month, day of year
    d:   weekday, day of month, day of year
    w:   day of month, week of year
    m:   month of year
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

FEATURES: dict[str, Callable[[datetime], float]] = {
    "second": lambda t: t.second / 59.0 - 0.5,
    "minute": lambda t: t.minute / 59.0 - 0.5,
    "hour": lambda t: t.hour / 23.0 - 0.5,
    "weekday": lambda t: t.weekday() / 6.0 - 0.5,  # Monday 0, as pandas' dayofweek
    "day": lambda t: (t.day - 1) / 30.0 - 0.5,
    "yearday": lambda t: (t.timetuple().tm_yday - 1) / 365.0 - 0.5,
    "week": lambda t: (t.isocalendar()[1] - 1) / 52.0 - 0.5,
    "month": lambda t: (t.month - 1) / 11.0 - 0.5,
}
BY_FREQ: dict[str, tuple[str, ...]] = {
    "s": ("second", "minute", "hour", "weekday", "day", "yearday"),
    "min": ("minute", "hour", "weekday", "day", "yearday"),
    "h": ("hour", "weekday", "day", "yearday"),
    "d": ("weekday", "day", "yearday"),
    "w": ("day", "week"),
    "m": ("month",),
}
TIME_FREQS = tuple(BY_FREQ)


def feature_names(freq: str) -> list[str]:
    return [f"time:{name}" for name in BY_FREQ[freq]]


def time_features(times: Sequence[datetime], freq: str) -> np.ndarray:
    """[rows, features] float64, one row per time step."""
    features = [FEATURES[name] for name in BY_FREQ[freq]]
    return np.array([[f(t) for f in features] for t in times], dtype=np.float64)

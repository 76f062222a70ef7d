"""Missing time steps: a time column whose rows skip steps of its own interval.

A window is `in_len` rows, read as `in_len` steps: a file that skips an hour shifts every window
across it by that hour, with nothing to show it. So a step longer than the file's interval is
refused in one line (`data.missing_times=error`, the default), naming the first: its line, its
time, how many steps are missing, and the two fixes, writing the missing rows (empty cells,
which `data.fill` fills without looking ahead) or `data.missing_times=keep`, which reads the
rows as they are (the published loaders do: `dataset=<name>` keeps them).

The interval is the file's most common step (over the steps within each series of a long
panel: one interval for the file, as a panel's series share one frequency). A step is
`round(step / interval)` intervals, so timestamps a little off the grid are no gap, and a
monthly file's 28-31 days (or a yearly one's 365-366) are one step each. A daily file with no
row on a Saturday or a Sunday counts business days: Friday to Monday is one step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..options import choice
from .errors import DataError

MissingTimes = choice("MissingTimes", ("error", "keep"))
DAY = np.timedelta64(1, "D")


def check_steps(path, stamps: np.ndarray, column: str, lines: np.ndarray, policy: str,
                same: np.ndarray | None = None, series: Callable[[int], str] | None = None
                ) -> None:
    """Refuse (`policy` error) the first step of `stamps` (datetime64 or int64 steps, in time
    order; row i at file line lines[i]) that skips one of the interval's steps or more.
    `same` [rows - 1]: whether rows i and i + 1 are steps of one series (a long panel, whose
    steps all count towards one interval; None: all are), `series`: row i's series id (named
    in the message)."""
    if policy == "keep" or len(stamps) < 3:
        return
    steps = stamps[1:] - stamps[:-1]
    counted = steps > steps.dtype.type(0)  # a repeated time (duplicate_times=keep) is no step
    if same is not None:
        counted &= same
    if not counted.any():
        return
    values, counts = np.unique(steps[counted], return_counts=True)
    interval = values[np.argmax(counts)]  # the most common (the shortest of equals)
    if stamps.dtype.kind == "M" and interval == DAY and np.is_busday(
            stamps.astype("datetime64[D]")).all():  # weekdays only: business days
        dates = stamps.astype("datetime64[D]")
        missing = np.busday_count(dates[:-1], dates[1:]) - 1
        unit = "1 business day"
    else:
        missing = np.rint(steps / interval).astype(np.int64) - 1
        unit = None
    gaps = np.flatnonzero((missing >= 1) & counted)
    if not len(gaps):
        return
    i = int(gaps[0]) + 1  # the row after the gap
    n = int(missing[i - 1])
    where = f" (series {series(i)!r})" if series is not None else ""
    raise DataError(
        f"{path}: line {int(lines[i])}, column {column!r}{where}: {n} time step"
        f"{'s' if n > 1 else ''} missing before {_show(stamps[i])} (after "
        f"{_show(stamps[i - 1])}, the file's interval being {unit or _span(interval)})"
        f"{_daylight_saving(stamps[i], interval, n)}: windows across it would be shifted; write "
        f"the missing rows (empty cells, filled by data.fill) or set data.missing_times=keep "
        f"to read the rows as they are")


def _span(interval) -> str:
    """An interval in words: 1 h, 15 min, 1 day, 7 days, 3 steps."""
    if not isinstance(interval, np.timedelta64):
        return f"{int(interval)} step{'s' if interval != 1 else ''}"
    seconds = interval / np.timedelta64(1, "s")
    for size, name in ((86400, "day"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {name}{'s' if name == 'day' and count > 1 else ''}"
    return f"{seconds:g} s"


def _show(moment) -> str:
    if isinstance(moment, np.datetime64):
        return moment.astype("datetime64[us]").astype(object).isoformat(sep=" ")
    return str(int(moment))


def _daylight_saving(after, interval, missing: int) -> str:
    """A hint where one hour is missing early on a spring Sunday: a file in local time skips
    it when the clocks go forward."""
    if not isinstance(interval, np.timedelta64) or interval * missing != np.timedelta64(1, "h"):
        return ""
    moment = after.astype("datetime64[us]").astype(object)
    if moment.month in (3, 4) and moment.weekday() == 6 and moment.hour <= 4:
        return (" (local time skips this hour when the clocks go forward: write it, or the "
                "times in UTC)")
    return ""

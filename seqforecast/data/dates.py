"""A time column as datetime64[us], in the forms real files write.

ISO 8601 (`2016-07-01 00:00:00`, `2016-07-01T00:00`) is read by numpy's own parser. Other
files write a date with slashes, dots or dashes and the clock after a space: the benchmark
archive's Exchange and the EPF markets `2013/1/1 0:00` (year first: year, month, day), a
spreadsheet or a market's export `31/01/2013 13:00` or `01/31/2013 1:00:00 PM`. A date whose
year comes last is day-first or month-first, and the file decides which (`order=auto`): a first
field above 12 can only be a day, a second above 12 only a month. A file where every row fits
both is ambiguous, and where some rows fit only one and others only the other it is
inconsistent: both are refused in one line, which names `data.date_order` for the first. So is
a column of two forms (`2013/1/21 18:00` and `2013-01-21 18:00`, or `21/1/2013` and
`21.1.2013`, or a 12-hour and a 24-hour clock), naming the first row of the second form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..options import choice
from .errors import DataError

DateOrder = choice("DateOrder", ("auto", "dayfirst", "monthfirst"))

# a date (three numbers; the year has 4 digits, first or last), then an optional clock
_DATE = re.compile(
    r"(\d{1,4})([/.-])(\d{1,2})\2(\d{1,4})"
    r"(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?\s*([AaPp][Mm])?)?")
FORMS = "ISO 8601 (2024-01-31 13:00) or a date such as 2024/1/31 13:00, 31/1/2024 or 1/31/2024"


def parse_times(texts: Sequence[str], path, column: str, order: str = "auto",
                lines: Sequence[int] | None = None, forms: str = FORMS) -> np.ndarray:
    """The column's cells (`lines`: each cell's line in the file; default: 2, 3, ...) as
    datetime64[us], or DataError naming the file, the line and the column (`forms`: what the
    column may hold, in its message)."""
    texts = [t.strip() for t in texts]
    try:
        return np.array(texts, dtype="datetime64[us]")
    except ValueError:
        pass  # not all ISO: the forms below (which cover ISO dates too)
    lines = list(lines) if lines is not None else list(range(2, len(texts) + 2))
    where = f"column {column!r}"
    fields = []
    for text, line in zip(texts, lines, strict=True):
        found = _DATE.fullmatch(text)
        if found is None:
            raise DataError(f"{path}: line {line}, {where}: {text!r} is not a time: expected "
                            f"{forms}")
        fields.append(found.groups())
    _one_form(fields, texts, lines, f"{path}: line {{}}, {where}: ")
    if len(fields[0][0]) == 4:  # the year first
        ymd = [(f[0], f[2], f[3]) for f in fields]
    else:
        dayfirst = _day_first(fields, texts, lines, path, where, str(order))
        ymd = [(f[3], f[2], f[0]) if dayfirst else (f[3], f[0], f[2]) for f in fields]
    iso = []
    for (year, month, day), f, text, line in zip(ymd, fields, texts, lines, strict=True):
        if len(year) != 4:
            raise DataError(f"{path}: line {line}, {where}: {text!r} has no four-digit year; "
                            f"expected {FORMS}")
        hour = int(f[4] or 0)
        if f[8]:  # 12-hour clock: 12 AM is 0, 1 PM is 13
            if not 1 <= hour <= 12:
                raise DataError(f"{path}: line {line}, {where}: {text!r} has hour {hour} on a "
                                f"12-hour clock")
            hour = hour % 12 + (12 if f[8].lower() == "pm" else 0)
        iso.append(f"{year}-{int(month):02d}-{int(day):02d}T{hour:02d}:{f[5] or '00'}:"
                   f"{f[6] or '00'}.{(f[7] or '').ljust(6, '0')}")
    try:
        return np.array(iso, dtype="datetime64[us]")
    except ValueError:
        for text, line, moment in zip(texts, lines, iso, strict=True):
            try:
                np.datetime64(moment, "us")
            except ValueError:
                raise DataError(f"{path}: line {line}, {where}: {text!r} is no such time "
                                f"(read as {moment[:16].replace('T', ' ')})") from None
        raise


def _one_form(fields, texts, lines, at: str) -> None:
    """Every row in the first row's form: the year at the same end, the same character between
    the date's fields, the same clock (12-hour or 24-hour, among the rows with a clock). A
    file of two forms was put together from two sources; one line names the first row of the
    other (`at`: the message's start, with {} for the line)."""
    def differs(i: int, j: int) -> str | None:
        a, b = fields[i], fields[j]
        if (len(a[0]) == 4) != (len(b[0]) == 4):
            return (f"puts the year {'first' if len(a[0]) == 4 else 'last'}, line {lines[j]} "
                    f"{'first' if len(b[0]) == 4 else 'last'}")
        if a[1] != b[1]:
            return f"writes its date with {a[1]!r}, line {lines[j]} ({texts[j]!r}) with {b[1]!r}"
        if a[4] and b[4] and bool(a[8]) != bool(b[8]):
            return (f"has a {'12' if a[8] else '24'}-hour clock, line {lines[j]} ({texts[j]!r}) "
                    f"a {'12' if b[8] else '24'}-hour one")
        return None

    clocked = next((i for i, f in enumerate(fields) if f[4]), 0)  # the first row with a clock
    for i in range(1, len(fields)):
        why = differs(i, 0) or (differs(i, clocked) if fields[i][4] else None)
        if why:
            raise DataError(f"{at.format(lines[i])}{texts[i]!r} {why}: one form per column")


def _day_first(fields, texts, lines, path, where: str, order: str) -> bool:
    """Whether dates with the year last put the day first: `order`, or what the file shows."""
    over_first = next((i for i, f in enumerate(fields) if int(f[0]) > 12), None)
    over_second = next((i for i, f in enumerate(fields) if int(f[2]) > 12), None)
    if order != "auto":
        return order == "dayfirst"
    if over_first is not None and over_second is not None:
        raise DataError(
            f"{path}: {where} reads neither day-first nor month-first: line "
            f"{lines[over_first]} has {texts[over_first]!r} (day first), line "
            f"{lines[over_second]} {texts[over_second]!r} (month first)")
    if over_first is None and over_second is None:
        raise DataError(
            f"{path}: {where}: dates like {texts[0]!r} are ambiguous (no day above 12 shows "
            f"whether the day or the month comes first); set data.date_order=dayfirst or "
            f"data.date_order=monthfirst")
    return over_first is not None


@dataclass(frozen=True)
class TimeStyle:
    """How a file writes its times (`time_style` learns it), to write new ones alike: the
    fields' order and separator, which fields are zero-padded, the clock's separator, seconds,
    fraction digits and 12-hour marker. `format` writes a moment that way, adding the clock,
    seconds or fraction where the moment needs them and the file had none."""

    order: str = "ymd"  # ymd | dmy | mdy
    sep: str = "-"
    pad_month: bool = True
    pad_day: bool = True
    clock: str | None = " "  # between the date and the clock; None: dates only
    pad_hour: bool = True
    seconds: bool = False
    fraction: int = 0  # digits after the seconds
    meridiem: str | None = None  # the 12-hour marker as written before it: " PM", "pm", ...

    def format(self, moment: datetime) -> str:
        fields = {"y": f"{moment.year:04d}", "m": _pad(moment.month, self.pad_month),
                  "d": _pad(moment.day, self.pad_day)}
        text = self.sep.join(fields[k] for k in self.order)
        timed = (moment.hour, moment.minute, moment.second, moment.microsecond) != (0, 0, 0, 0)
        if self.clock is None and not timed:
            return text
        hour = moment.hour
        if self.meridiem:
            hour = hour % 12 or 12
        text += f"{self.clock or ' '}{_pad(hour, self.pad_hour)}:{moment.minute:02d}"
        digits = self.fraction or (6 if moment.microsecond else 0)
        if self.seconds or digits or moment.second:
            text += f":{moment.second:02d}"
        if digits:
            text += "." + f"{moment.microsecond:06d}"[:digits]
        if self.meridiem:
            marker = "PM" if moment.hour >= 12 else "AM"
            spacing = self.meridiem[: len(self.meridiem) - 2]
            text += spacing + (marker if self.meridiem[-2:].isupper() else marker.lower())
        return text


def time_style(texts: Sequence[str], moments: Sequence[datetime], order: str = "auto",
               sample: int = 1000) -> TimeStyle | None:
    """The style of a time column (its cells `texts`, read as `moments`), from its first and
    last `sample` rows; None where a cell is in no form `_DATE` reads (numpy's other ISO
    forms, e.g. `2016-07-01T00`)."""
    rows = list(range(len(texts)))
    if len(rows) > 2 * sample:
        rows = rows[:sample] + rows[-sample:]
    found = [(_DATE.fullmatch(texts[i].strip()), moments[i]) for i in rows]
    if not found or any(m is None for m, _ in found):
        return None
    first = found[0][0]
    if len(first.group(1)) == 4:
        order_found = "ymd"
    else:
        telling = next(((m, t) for m, t in found if int(m.group(1)) != int(m.group(3))), None)
        if telling is not None:
            order_found = "dmy" if int(telling[0].group(1)) == telling[1].day else "mdy"
        else:
            order_found = "mdy" if order == "monthfirst" else "dmy"
    # each field's text: where it stands in the match, by the order
    where = {"ymd": {"m": 3, "d": 4}, "dmy": {"d": 1, "m": 3}, "mdy": {"m": 1, "d": 3}}
    matches = [m for m, _ in found]
    month = _padded([m.group(where[order_found]["m"]) for m in matches])
    day = _padded([m.group(where[order_found]["d"]) for m in matches])
    clocked = [m for m in matches if m.group(5)]
    hour = _padded([m.group(5) for m in clocked])
    marked = next((m for m in clocked if m.group(9)), None)
    meridiem = None
    if marked is not None:  # what follows the clock: its spacing and marker, e.g. " PM"
        meridiem = marked.string[max(marked.end(g) for g in (6, 7, 8)):]
    return TimeStyle(
        order=order_found, sep=first.group(2),
        pad_month=month if month is not None else (day if day is not None else True),
        pad_day=day if day is not None else (month if month is not None else True),
        clock=clocked[0].string[clocked[0].start(5) - 1] if clocked else None,
        pad_hour=hour if hour is not None else True,
        seconds=any(m.group(7) for m in clocked),
        fraction=max((len(m.group(8) or "") for m in clocked), default=0),
        meridiem=meridiem,
    )


def _padded(fields: list[str]) -> bool | None:
    """Whether the values below 10 of a field are written with a leading zero (None: no value
    below 10 shows it)."""
    small = [f for f in fields if int(f) < 10]
    if not small:
        return None
    return sum(len(f) == 2 for f in small) >= sum(len(f) == 1 for f in small)


def _pad(value: int, padded: bool) -> str:
    return f"{value:02d}" if padded else str(value)

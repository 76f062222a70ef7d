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

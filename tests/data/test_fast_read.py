"""A clean file read by numpy's parser is the cell-by-cell reader's result, and every file that
parser cannot vouch for goes to the cell-by-cell reader (csv_series.read_clean)."""

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from seqforecast.data import DataError, csv_series, read_series
from seqforecast.data.csv_series import read_clean, read_table


def _slow(path, columns, time_column, monkeypatch):
    monkeypatch.setattr(csv_series, "read_clean", lambda *args: None)
    try:
        return read_series(path, columns, time_column, duplicate_times="keep",
                           missing_times="keep")
    finally:
        monkeypatch.undo()


def _same(path, columns, time_column, monkeypatch):
    assert read_clean(Path(path), columns, time_column) is not None, "read fast"
    fast = read_series(path, columns, time_column, duplicate_times="keep", missing_times="keep")
    slow = _slow(path, columns, time_column, monkeypatch)
    np.testing.assert_array_equal(fast.values, slow.values)  # to the bit
    assert fast.times == slow.times


def test_a_clean_file_reads_the_same_either_way(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(300, 4)) * 10.0 ** rng.integers(-8, 8, size=(300, 4))
    lines = ["date, a ,b,c,d"] + [
        f"2013/1/{1 + i // 24} {i % 24}:00," + ",".join(repr(float(v)) for v in row)
        for i, row in enumerate(values)]
    path = tmp_path / "clean.csv"
    path.write_text("\r\n".join(lines) + "\r\n")  # CRLF, as weather.csv
    _same(path, ["d", "a"], "date", monkeypatch)
    _same(path, ["b"], None, monkeypatch)


def _ett(rng, rows):
    """ETTh1's layout: ISO hours, LF, seven columns of float32 values written as float64."""
    header = "date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT"
    start = datetime(2016, 7, 1)
    values = rng.normal(5, 10, size=(rows, 7)).astype(np.float32)
    lines = [f"{start + timedelta(hours=i):%Y-%m-%d %H:%M:%S},"
             + ",".join(repr(float(v)) for v in row) for i, row in enumerate(values)]
    return "\n".join([header, *lines]) + "\n"


def _weather(rng, rows):
    """weather.csv's layout: CRLF, 21 columns whose names hold spaces, brackets, '%', '**' and
    non-ASCII characters, 10-minute ISO times across a new year with one time repeated (the
    file's own quirk), values of two decimals, negative and zero ones among them."""
    names = ["p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)",
             "VPact (mbar)", "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)", "rho (g/m**3)",
             "wv (m/s)", "max. wv (m/s)", "wd (deg)", "rain (mm)", "raining (s)",
             "SWDR (W/m\ufffd)", "PAR (\ufffdmol/m\ufffd/s)", "max. PAR (\ufffdmol/m\ufffd/s)",
             "Tlog (degC)", "OT"]
    start = datetime(2020, 12, 31, 23, 50) - timedelta(minutes=10 * (rows // 2))
    times = [start + timedelta(minutes=10 * i) for i in range(rows)]
    times[rows // 3] = times[rows // 3 - 1]  # one repeated time
    values = np.round(rng.normal(0, 300, size=(rows, len(names))), 2)
    values[:, 14:16] = 0.0
    lines = [f"{t:%Y-%m-%d %H:%M:%S}," + ",".join(str(v) for v in row)
             for t, row in zip(times, values, strict=True)]
    return "\r\n".join([",".join(["date", *names]), *lines]) + "\r\n"


def _np_market(rng, rows):
    """EPF's NP.csv layout: header cells after a space, unpadded year-first dates
    (2013/1/1 0:00) across a month's end, integer loads and decimal prices."""
    start = datetime(2013, 1, 31)
    lines = [f"{t.year}/{t.month}/{t.day} {t.hour}:{t.minute:02d},{load},{wind},{price}"
             for t, load, wind, price in zip(
                 (start + timedelta(hours=i) for i in range(rows)),
                 rng.integers(30000, 60000, rows), rng.integers(0, 5000, rows),
                 np.round(rng.uniform(-5, 200, rows), 2), strict=True)]
    header = "date, Grid load forecast, Wind power forecast,OT"
    return "\n".join([header, *lines]) + "\n"


@pytest.mark.parametrize("layout", [_ett, _weather, _np_market],
                         ids=["ETTh1", "weather", "EPF-NP"])
def test_the_benchmark_layouts_read_the_same_either_way(layout, tmp_path, monkeypatch):
    """Files written in the benchmark files' layouts (their header, line ends, time forms and
    number forms), small: numpy's reader takes them, and reads what the cell-by-cell one
    does."""
    path = tmp_path / "layout.csv"
    path.write_bytes(layout(np.random.default_rng(0), 400).encode())
    header, _ = read_table(path)
    _same(path, header[1:], "date", monkeypatch)


@pytest.mark.parametrize("body,why", [
    ("1,2\n,3\n", "an empty cell"),
    ("1,2\nnan,3\n", "a NaN cell"),
    ("1,2\ninf,3\n", "an infinite cell"),
    ("1,2\n1e30,3\n", "a value too large"),
    ("1,2\nx,3\n", "text"),
    ("1,2\n\n3,4\n", "a blank line (a row of gaps to the cell-by-cell reader)"),
    ("1,2\n3,4,5\n", "a row longer than the header"),
    ('1,2\n"3",4\n', "quoting"),
])
def test_what_numpy_cannot_vouch_for_goes_cell_by_cell(tmp_path, body, why):
    path = tmp_path / "f.csv"
    path.write_text("a,b\n" + body)
    assert read_clean(path, ["a", "b"], None) is None, why


def test_errors_are_the_cell_by_cell_readers(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("a,b\n1,2\n3,oops\n")
    with pytest.raises(DataError, match=r"line 3, column 'b': 'oops' is not a number"):
        read_series(path, ["a", "b"])

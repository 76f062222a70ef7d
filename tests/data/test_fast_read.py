"""A clean file read by numpy's parser is the cell-by-cell reader's result, and every file that
parser cannot vouch for goes to the cell-by-cell reader (csv_series.read_clean)."""

from pathlib import Path

import numpy as np
import pytest

from seqforecast.data import DataError, csv_series, read_series
from seqforecast.data.csv_series import read_clean, read_table

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


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


@pytest.mark.parametrize("name", ["ETTh1.csv", "weather.csv", "EPF/NP.csv"])
def test_the_benchmark_files_read_the_same_either_way(name, monkeypatch):
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} is not here")
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

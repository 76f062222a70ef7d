"""The time column in the forms real files write (seqforecast/data/dates.py)."""

from datetime import datetime

import numpy as np
import pytest

from seqforecast.data import DataError
from seqforecast.data.dates import parse_times, time_style


def _iso(*moments):
    return np.array(moments, dtype="datetime64[us]")


@pytest.mark.parametrize("texts,expected", [
    (["2016-07-01 00:00:00", "2016-07-01T01:00"], ["2016-07-01T00:00", "2016-07-01T01:00"]),
    # the benchmark archive's Exchange and the EPF markets: year first
    (["1990/1/1 0:00", "1990/1/2 0:00"], ["1990-01-01", "1990-01-02"]),
    (["2013/12/31 23:00", "2014/1/1 0:00"], ["2013-12-31T23:00", "2014-01-01"]),
    # day-first, shown by a day above 12 anywhere in the column
    (["1/2/2013", "13/2/2013"], ["2013-02-01", "2013-02-13"]),
    # month-first, shown by a second field above 12; a 12-hour clock
    (["2/1/2013 12:30 AM", "2/13/2013 1:05:09 PM"], ["2013-02-01T00:30", "2013-02-13T13:05:09"]),
    (["31.01.2013 13:00:00.25"], ["2013-01-31T13:00:00.25"]),
])
def test_the_forms_real_files_write(texts, expected):
    np.testing.assert_array_equal(parse_times(texts, "f.csv", "date"), _iso(*expected))


def test_an_order_given_reads_every_row_that_way():
    texts = ["1/2/2013", "3/4/2013"]
    np.testing.assert_array_equal(parse_times(texts, "f", "d", "dayfirst"),
                                  _iso("2013-02-01", "2013-04-03"))
    np.testing.assert_array_equal(parse_times(texts, "f", "d", "monthfirst"),
                                  _iso("2013-01-02", "2013-03-04"))


@pytest.mark.parametrize("texts,order,message", [
    (["1/2/2013", "3/4/2013"], "auto", "f.csv: column 'date': dates like '1/2/2013' are ambiguous "
     "(no day above 12 shows whether the day or the month comes first); set "
     "data.date_order=dayfirst or data.date_order=monthfirst"),
    # a 12 is a day or a month: it shows neither order (first field, then second)
    pytest.param(["12/1/2013", "3/4/2013"], "auto", "f.csv: column 'date': dates like "
                 "'12/1/2013' are ambiguous (no day above 12 shows whether the day or the "
                 "month comes first)", id="a-12-first-is-ambiguous"),
    pytest.param(["1/12/2013", "3/4/2013"], "auto", "f.csv: column 'date': dates like "
                 "'1/12/2013' are ambiguous (no day above 12 shows whether the day or the "
                 "month comes first)", id="a-12-second-is-ambiguous"),
    (["13/1/2013", "1/14/2013"], "auto", "f.csv: column 'date' reads neither day-first nor "
     "month-first: line 2 has '13/1/2013' (day first), line 3 '1/14/2013' (month first)"),
    (["13/1/2013"], "monthfirst", "f.csv: line 2, column 'date': '13/1/2013' is no such time"),
    (["2013/1/1", "1/2/2013"], "auto", "line 3, column 'date': '1/2/2013' puts the year last, "
     "line 2 first: one form per column"),
    # ISO rows among an export's: refused as the day-first ones are, naming the first of them
    (["2013/1/21 17:00", "2013/1/21 18:00", "2013-01-21 19:00", "2013/1/21 20:00"], "auto",
     "f.csv: line 4, column 'date': '2013-01-21 19:00' writes its date with '-', line 2 "
     "('2013/1/21 17:00') with '/': one form per column"),
    (["21/1/2013", "22/1/2013", "23.1.2013"], "auto", "line 4, column 'date': '23.1.2013' "
     "writes its date with '.', line 2 ('21/1/2013') with '/': one form per column"),
    (["1/31/2013", "1/31/2013 1:00 PM", "2/1/2013 14:00"], "auto", "line 4, column 'date': "
     "'2/1/2013 14:00' has a 24-hour clock, line 3 ('1/31/2013 1:00 PM') a 12-hour one: one "
     "form per column"),
    (["1/2/13"], "dayfirst", "line 2, column 'date': '1/2/13' has no four-digit year"),
    (["2013/1/1 13:00 PM"], "auto", "'2013/1/1 13:00 PM' has hour 13 on a 12-hour clock"),
    (["2013-01-01", "yesterday"], "auto", "f.csv: line 3, column 'date': 'yesterday' is not a "
     "time: expected ISO 8601 (2024-01-31 13:00) or a date such as 2024/1/31 13:00, 31/1/2024 "
     "or 1/31/2024"),
])
def test_what_cannot_be_read_is_one_line_naming_the_row(texts, order, message):
    with pytest.raises(DataError) as err:
        parse_times(texts, "f.csv", "date", order)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("texts,order,later", [
    # (the column, data.date_order, what the moment 2013-02-03 04:05 is written as)
    (["2013/1/1 0:00", "2013/1/1 1:00"], "auto", "2013/2/3 4:05"),  # EPF, Exchange
    (["2016-07-01 00:00:00", "2016-07-01 01:00:00"], "auto", "2013-02-03 04:05:00"),  # ETT
    (["2016-07-01T00:00", "2016-07-01T01:00"], "auto", "2013-02-03T04:05"),
    (["31/01/2013 13:00", "01/02/2013 09:00"], "auto", "03/02/2013 04:05"),
    (["1/31/2013 1:00 PM", "2/1/2013 2:30 PM"], "auto", "2/3/2013 4:05 AM"),
    (["13.1.2013 7:05:09.25", "14.1.2013 7:05:09.50"], "auto", "3.2.2013 4:05:00.00"),
    (["1/2/2013", "3/4/2013"], "dayfirst", "3/2/2013 04:05"),  # dates only: a clock added
    (["2024-01-01", "2024-01-02"], "auto", "2013-02-03 04:05"),
])
def test_new_times_are_written_as_the_column_writes_its_own(texts, order, later):
    """predict's forecast times: the fields' order and separator, the padding, the clock."""
    moments = parse_times(texts, "f.csv", "date", order).astype(object).tolist()
    style = time_style(texts, moments, order)
    assert [style.format(m) for m in moments] == texts  # its own times, as written
    assert style.format(datetime(2013, 2, 3, 4, 5)) == later


def test_a_form_numpy_alone_reads_has_no_style():
    texts = ["2016-07-01T00", "2016-07-01T01"]  # ISO 8601 to the hour
    moments = parse_times(texts, "f.csv", "date").astype(object).tolist()
    assert time_style(texts, moments) is None  # predict writes ISO 8601 then

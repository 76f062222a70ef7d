"""Missing time steps (seqforecast/data/time_grid.py): a step longer than the file's interval is
refused in one line naming the first, unless data.missing_times=keep; calendars whose steps vary
(months, years, business days) and timestamps a little off the grid are no gap."""

import numpy as np
import pytest
import torch

from seqforecast.config import compose_config
from seqforecast.data import DataError, csv_data, read_series
from seqforecast.data.panel_read import read_long, read_wide

from .helpers import csv_config


def _file(path, times, header="time,y"):
    path.write_text("\n".join([header, *(f"{t},{k % 7}" for k, t in enumerate(times))]) + "\n")
    return path


def _hours(start: str, n: int, skip: tuple[int, ...] = ()) -> list[str]:
    moments = np.datetime64(start, "h") + np.arange(n)
    return [str(m).replace("T", " ") + ":00" for k, m in enumerate(moments) if k not in skip]


def test_an_hourly_file_missing_an_hour_is_refused_naming_it(tmp_path):
    path = _file(tmp_path / "prices.csv", _hours("2024-01-01T00", 48, skip=(30,)))
    with pytest.raises(DataError) as err:
        read_series(path, ["y"], "time")
    assert str(err.value) == (
        f"{path}: line 32, column 'time': 1 time step missing before 2024-01-02 07:00:00 (after "
        f"2024-01-02 05:00:00, the file's interval being 1 h): windows across it would be "
        f"shifted; write the missing rows (empty cells, filled by data.fill) or set "
        f"data.missing_times=keep to read the rows as they are")
    kept = read_series(path, ["y"], "time", missing_times="keep")
    assert len(kept.values) == 47


def test_a_run_refuses_it_before_training_and_keep_reads_it(tmp_path):
    path = _file(tmp_path / "prices.csv", _hours("2024-01-01T00", 200, skip=(120, 121, 122)))
    cfg = csv_config(path=str(path), target="y", time_column="time", in_len=24, out_len=12)
    with pytest.raises(DataError, match=r"line 122, column 'time': 3 time steps missing before "
                                        r"2024-01-06 03:00:00"):
        csv_data(cfg, torch.device("cpu"))
    assert len(csv_data({**cfg, "missing_times": "keep"}, torch.device("cpu")).test) > 0


@pytest.mark.parametrize("times", [
    [f"{y}-{m:02d}-01" for y in (2020, 2021) for m in range(1, 13)],  # months: 28-31 days
    [f"{y}-01-01" for y in range(1996, 2010)],  # years: 365 and 366 days
    [str(d) for d in np.arange(np.datetime64("2024-01-01"), np.datetime64("2024-03-01"))
     if np.is_busday(d)],  # business days: Friday to Monday is one step
    ["2024-01-01 00:00:00", "2024-01-01 00:10:02", "2024-01-01 00:19:58", "2024-01-01 00:30:00",
     "2024-01-01 00:40:01"],  # a logger's clock a few seconds off
])
def test_steps_of_a_calendar_or_a_little_off_the_grid_are_no_gap(tmp_path, times):
    assert len(read_series(_file(tmp_path / "f.csv", times), ["y"], "time").values) == len(times)


def test_a_weekday_missing_from_business_days_is_one(tmp_path):
    days = [str(d) for d in np.arange(np.datetime64("2024-01-01"), np.datetime64("2024-02-01"))
            if np.is_busday(d) and str(d) != "2024-01-17"]
    with pytest.raises(DataError, match=r"line 14, column 'time': 1 time step missing before "
                                        r"2024-01-18 00:00:00 \(after 2024-01-16 00:00:00, the "
                                        r"file's interval being 1 business day\)"):
        read_series(_file(tmp_path / "f.csv", days), ["y"], "time")


def test_local_times_skipping_the_hour_the_clocks_go_forward_say_so(tmp_path):
    """2024-03-31: Europe's clocks go from 02:00 to 03:00, and a file in local time skips 02:00."""
    path = _file(tmp_path / "f.csv", _hours("2024-03-30T00", 48, skip=(26,)))
    with pytest.raises(DataError, match=r"missing before 2024-03-31 03:00:00 \(after 2024-03-31 "
                                        r"01:00:00, the file's interval being 1 h\) \(local time "
                                        r"skips this hour when the clocks go forward: write it, or "
                                        r"the times in UTC\): windows"):
        read_series(path, ["y"], "time")


def test_a_repeated_time_kept_is_no_step(tmp_path):
    times = _hours("2024-01-01T00", 24)
    times.insert(5, times[4])
    assert len(read_series(_file(tmp_path / "f.csv", times), ["y"], "time",
                           duplicate_times="keep").values) == 25


def test_panels_refuse_a_series_that_skips_a_step(tmp_path):
    days = [str(d) for d in np.datetime64("2024-01-01") + np.arange(10)]
    rows = [f"{d},{s},{k}" for s in ("a", "b") for k, d in enumerate(days)
            if not (s == "b" and k == 6)]
    path = tmp_path / "long.csv"
    path.write_text("\n".join(["day,id,y", *rows]) + "\n")
    with pytest.raises(DataError, match=r"line 18, column 'day' \(series 'b'\): 1 time step "
                                        r"missing before 2024-01-08 00:00:00 \(after 2024-01-06 "
                                        r"00:00:00, the file's interval being 1 day\)"):
        read_long(path, "id", "day", ["y"])
    assert len(read_long(path, "id", "day", ["y"], missing_times="keep").values) == 19
    wide = tmp_path / "wide.csv"
    wide.write_text("\n".join(["day,a,b", *(f"{d},1,2" for d in days if d != days[3])]) + "\n")
    with pytest.raises(DataError, match=r"line 5, column 'day': 1 time step missing before "
                                        r"2024-01-05"):
        read_wide(wide, "day", "all")
    steps = tmp_path / "steps.csv"  # integer steps: the same
    steps.write_text("step,a\n" + "\n".join(f"{k},1" for k in (0, 1, 2, 4, 5, 6)) + "\n")
    with pytest.raises(DataError, match=r"1 time step missing before 4 \(after 2, the file's "
                                        r"interval being 1 step\)"):
        read_wide(steps, "step", "all")


def test_the_benchmark_files_by_name_are_read_as_published():
    """dataset=<name> keeps its rows as the published loaders read them (weather skips 10
    steps on 2020-05-29): their borders are rows."""
    for name in ("etth1", "weather", "np"):
        assert compose_config([f"dataset={name}"]).data.missing_times == "keep"
    assert compose_config(["data=csv"]).data.missing_times == "error"

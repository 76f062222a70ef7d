"""Gap filling never looks ahead: not past a window's forecast start, not into a later split."""

import numpy as np
import pytest
import torch

from seqforecast.data import DataError, csv_data
from seqforecast.data.gaps import GapFiller
from seqforecast.data.windows import forecast_starts

from .helpers import csv_config

IN_LEN, OUT_LEN = 6, 3


def write_csv(path, values):
    """One column y; NaN cells are written empty."""
    lines = ["y", *("" if np.isnan(v) else repr(float(v)) for v in values)]
    path.write_text("\n".join(lines) + "\n")
    return path


def cfg(path, fill, protocol="standard"):
    return csv_config(path=str(path), target="y", in_len=IN_LEN, out_len=OUT_LEN,
                      protocol=protocol, split=[0.6, 0.2, 0.2], scale="none", fill=fill)


def windows_by_start(data, protocol="standard"):
    """{forecast start row: (inputs [in_len], targets [out_len])} over every split."""
    found = {}
    ranges = {"train": range(0, 60), "val": range(60, 80), "test": range(80, 100)}
    for name, span in ranges.items():
        split = getattr(data, name)
        starts = forecast_starts(span, IN_LEN, OUT_LEN, 1, protocol)
        assert len(starts) == len(split)
        for k, start in enumerate(starts):
            found[start] = (split.src[k, :, 0].clone(), split.target[k, :, 0].clone())
    return found


# -- the leaks as they were found ------------------------------------------------------------


def test_an_empty_last_input_row_is_not_filled_from_the_first_target(tmp_path):
    """Interpolation used to fill it halfway towards the first forecast value."""
    values = np.arange(100, dtype=float) ** 2  # far from linear: halfway is not the past
    values[89] = np.nan  # the last input row of the test window forecasting from row 90
    data = csv_data(cfg(write_csv(tmp_path / "a.csv", values), "interpolate"), "cpu")
    inputs, targets = windows_by_start(data)[90]
    assert inputs[-1].item() == 88**2  # carried forward from the last observed input
    assert inputs[-1].item() != (88**2 + 90**2) / 2
    assert targets[0].item() == 90**2
    # A window whose inputs hold row 89 with an observed value after it, before its forecast
    # start, interpolates as before.
    inputs, _ = windows_by_start(data)[92]
    assert inputs[-3].item() == pytest.approx((88**2 + 90**2) / 2)


def test_an_empty_last_training_row_is_not_filled_from_a_validation_row(tmp_path):
    values = np.arange(100, dtype=float) ** 2
    values[59] = np.nan  # the last training row; row 60 is the first validation row
    data = csv_data(cfg(write_csv(tmp_path / "b.csv", values), "interpolate"), "cpu")
    _, targets = windows_by_start(data)[57]  # the last training window forecasts rows 57-59
    assert targets[-1].item() == 58**2  # from the training split's own rows only
    assert targets[-1].item() != (58**2 + 60**2) / 2


# -- the property: perturb the future, the past does not move --------------------------------


@pytest.mark.parametrize("fill", ["ffill", "interpolate"])
@pytest.mark.parametrize("protocol", ["standard", "strict"])
def test_no_value_at_or_after_a_forecast_start_reaches_that_windows_inputs(
    tmp_path, fill, protocol
):
    rng = np.random.default_rng(0)
    values = rng.normal(size=100).cumsum()
    values[rng.random(100) < 0.25] = np.nan
    values[0] = 1.0  # ffill needs a first value
    base = windows_by_start(csv_data(cfg(write_csv(tmp_path / "a.csv", values), fill,
                                         protocol), "cpu"), protocol)
    for cut in (20, 59, 60, 61, 75, 80, 81, 95):
        future = values.copy()
        tail = future[cut:]
        future[cut:] = np.where(np.isnan(tail), np.nan, tail + rng.normal(5, 3, size=len(tail)))
        path = write_csv(tmp_path / f"cut{cut}.csv", future)
        moved = windows_by_start(csv_data(cfg(path, fill, protocol), "cpu"), protocol)
        for start, (inputs, _) in base.items():
            if start <= cut:
                assert torch.equal(moved[start][0], inputs), (cut, start)


@pytest.mark.parametrize("fill", ["ffill", "interpolate"])
def test_no_row_of_a_later_split_reaches_an_earlier_split(tmp_path, fill):
    rng = np.random.default_rng(1)
    values = rng.normal(size=100).cumsum()
    values[rng.random(100) < 0.25] = np.nan
    values[[0, 59, 79]] = [1.0, np.nan, np.nan]  # gaps right before each split point
    base = windows_by_start(csv_data(cfg(write_csv(tmp_path / "a.csv", values), fill), "cpu"))
    for later, earlier in ((60, range(0, 60)), (80, range(0, 80))):
        changed = values.copy()
        changed[later:] = rng.normal(size=100 - later) * 100
        moved = windows_by_start(
            csv_data(cfg(write_csv(tmp_path / f"x{later}.csv", changed), fill), "cpu")
        )
        for start, (inputs, targets) in base.items():
            if start + OUT_LEN <= earlier.stop:  # a window of the earlier split(s)
                assert torch.equal(moved[start][0], inputs)
                assert torch.equal(moved[start][1], targets)


# -- the filler itself -------------------------------------------------------------------------


def test_inputs_interpolate_between_past_values_and_carry_the_last_one_forward():
    values = np.array([[0.0], [np.nan], [4.0], [np.nan], [np.nan], [10.0]])
    filler = GapFiller(values, "interpolate", ["y"], "f.csv")
    rows = np.array([[0, 1, 2, 3, 4]])
    inside = filler.inputs(rows, np.array([5]))[0, :, 0]  # row 5 (10.0) is the forecast start
    assert inside.tolist() == [0.0, 2.0, 4.0, 4.0, 4.0]
    later = filler.inputs(rows, np.array([6]))[0, :, 0]  # row 5 is now an input: interpolate
    assert later.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    ffilled = GapFiller(values, "ffill", ["y"], "f.csv").inputs(rows, np.array([6]))[0, :, 0]
    assert ffilled.tolist() == [0.0, 0.0, 4.0, 4.0, 4.0]


def test_targets_fill_from_their_own_split_only():
    values = np.array([[1.0], [np.nan], [3.0], [np.nan], [7.0], [np.nan]])
    filler = GapFiller(values, "interpolate", ["y"], "f.csv")
    first = filler.targets(np.array([[0, 1, 2, 3]]), range(0, 4), "train", 1)[0, :, 0]
    assert first.tolist() == [1.0, 2.0, 3.0, 3.0]  # row 3 does not borrow row 4
    second = filler.targets(np.array([[4, 5]]), range(4, 6), "test", 1)[0, :, 0]
    assert second.tolist() == [7.0, 7.0]
    with pytest.raises(DataError, match="no value in the val split"):
        filler.targets(np.array([[3]]), range(3, 4), "val", 1)


def test_fill_refusals_are_one_line():
    leading = np.array([[np.nan], [2.0]])
    with pytest.raises(DataError, match="starts empty at line 2; ffill has nothing"):
        GapFiller(leading, "ffill", ["y"], "f.csv")
    with pytest.raises(DataError, match="column 'y' has no values at all"):
        GapFiller(np.array([[np.nan], [np.nan]]), "interpolate", ["y"], "f.csv")
    filler = GapFiller(np.array([[np.nan], [np.nan], [5.0]]), "interpolate", ["y"], "f.csv")
    with pytest.raises(DataError, match="no value before line 4"):
        filler.inputs(np.array([[0, 1]]), np.array([2]))

"""CSV series in-process: leak-free splits and scaling, fills, windows, seasonal naive."""

import math

import numpy as np
import pytest
import torch

from seqforecast.data import DataError, csv_data, fit_scaler, read_series
from seqforecast.data.windows import split_ranges, window_starts
from seqforecast.model.normalization import RevIN
from seqforecast.training.baselines import fit_baselines, seasonal_naive


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


def csv_cfg(path, **overrides):
    cfg = dict(
        name="csv", path=str(path), target="y", features=["x"], time_column=None,
        in_len=6, out_len=3, stride=1, split=[0.6, 0.2, 0.2], val_start=None,
        test_start=None, scale="standard", fill="error", season=0,
    )  # fmt: skip
    cfg.update(overrides)
    return cfg


@pytest.fixture
def row_index_csv(tmp_path):
    """y = the row index, x = 2 * the row index: every value says which row it came from."""
    return write_csv(tmp_path / "rows.csv", ["y", "x"], [(i, 2 * i) for i in range(100)])


def _raw_rows(data, split):
    """The row indices a split's windows read, recovered from their raw values."""
    src = split.src.double() * data.scaler.scale + data.scaler.shift  # all channels, raw
    target = data.to_raw(split.target.double())
    return torch.cat([src[..., 0].flatten(), target.flatten()]).round().long()


@pytest.mark.parametrize("stride", [1, 4])
def test_no_window_touches_a_later_split_and_the_scaler_saw_training_rows_only(
    row_index_csv, stride
):
    data = csv_data(csv_cfg(row_index_csv, stride=stride), torch.device("cpu"))
    val_start, test_start = 60, 80
    assert _raw_rows(data, data.train).max() < val_start
    val_rows = _raw_rows(data, data.val)
    assert val_rows.min() >= val_start and val_rows.max() < test_start
    assert _raw_rows(data, data.test).min() >= test_start
    # Windows end at each split's last row: the newest rows are always covered.
    assert _raw_rows(data, data.test).max() == 99
    # The scaler's statistics are the training rows' alone.
    train = np.stack([np.arange(60), 2 * np.arange(60)], axis=1).astype(float)
    assert torch.allclose(data.scaler.shift, torch.from_numpy(train.mean(0)))
    assert torch.allclose(data.scaler.scale, torch.from_numpy(train.std(0)))
    assert data.state["rows"] == {"train": [0, 60], "val": [60, 80], "test": [80, 100]}


def test_extreme_later_rows_do_not_move_the_scaler(tmp_path):
    rows = [(i % 7, i % 5) for i in range(100)]
    calm = csv_data(csv_cfg(write_csv(tmp_path / "a.csv", ["y", "x"], rows)), "cpu")
    rows[70:] = [(1e6, -1e6)] * 30  # only validation and test rows change
    wild = csv_data(csv_cfg(write_csv(tmp_path / "b.csv", ["y", "x"], rows)), "cpu")
    assert torch.equal(calm.scaler.shift, wild.scaler.shift)
    assert torch.equal(calm.scaler.scale, wild.scaler.scale)
    assert torch.equal(calm.train.src, wild.train.src)


def test_window_counts_and_strides():
    assert window_starts(range(0, 20), 9, 1) == list(range(0, 12))
    assert window_starts(range(0, 20), 9, 5) == [1, 6, 11]  # the last ends at row 19
    assert window_starts(range(10, 15), 9, 1) == []


def test_explicit_boundaries_by_row_or_timestamp(tmp_path):
    times = [f"2024-01-01 {h:02d}:00" for h in range(24)]
    assert split_ranges(24, [0.6, 0.2, 0.2], "10", "17") == {
        "train": range(0, 10), "val": range(10, 17), "test": range(17, 24)
    }  # fmt: skip
    from seqforecast.data.csv_series import parse_time

    parsed = [parse_time(t) for t in times]
    ranges = split_ranges(24, [0.6, 0.2, 0.2], "2024-01-01 12:00", "2024-01-01 18:00", parsed)
    assert ranges["val"] == range(12, 18) and ranges["test"] == range(18, 24)
    with pytest.raises(DataError, match="go together"):
        split_ranges(24, [0.6, 0.2, 0.2], "10", None)


def test_fills_repair_gaps_where_asked(tmp_path):
    path = write_csv(tmp_path / "gaps.csv", ["y", "x"], [(1, 1), ("", 2), ("nan", 3), (4, "")])
    with pytest.raises(DataError, match=r"3 empty or NaN cell\(s\), first at line 3, column 'y'"):
        read_series(path, ["y", "x"])
    ffilled = read_series(path, ["y", "x"], fill="ffill").values
    assert ffilled[:, 0].tolist() == [1, 1, 1, 4] and ffilled[:, 1].tolist() == [1, 2, 3, 3]
    interpolated = read_series(path, ["y", "x"], fill="interpolate").values
    assert interpolated[:, 0].tolist() == [1, 2, 3, 4] and interpolated[:, 1].tolist() == [
        1,
        2,
        3,
        3,
    ]
    leading = write_csv(tmp_path / "lead.csv", ["y"], [("",), (2,)])
    with pytest.raises(DataError, match="starts empty at line 2"):
        read_series(leading, ["y"], fill="ffill")


@pytest.mark.parametrize("kind", ["none", "standard", "minmax"])
def test_scalers_invert_exactly_and_survive_constant_columns(kind):
    values = np.array([[1.0, 5.0], [3.0, 5.0], [8.0, 5.0]])
    scaler = fit_scaler(kind, values)
    scaled = scaler.transform(values)
    assert np.isfinite(scaled).all()
    back = scaler.inverse(torch.from_numpy(scaled))
    assert torch.allclose(back, torch.from_numpy(values))
    if kind == "minmax":
        assert scaled[:, 0].min() == 0 and scaled[:, 0].max() == 1


def test_revin_round_trips_targets():
    norm = RevIN(3)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, -0.5, 1.5]))
        norm.bias.copy_(torch.tensor([0.3, 0.1, -1.0]))
    src = torch.randn(4, 10, 3) * 5 + 3
    normalized, stats = norm.normalize(src)
    assert normalized[..., 0].mean(dim=1).sub(0.3).abs().max() < 1e-5
    target = torch.randn(4, 6, 2)
    again = norm.denormalize_targets(norm.normalize_targets(target, stats), stats)
    torch.testing.assert_close(again, target, atol=1e-5, rtol=1e-5)


def test_seasonal_naive_repeats_the_last_season():
    src = torch.arange(10.0)[None, :, None]  # values 0..9
    assert seasonal_naive(src, 7, season=4)[0, :, 0].tolist() == [6, 7, 8, 9, 6, 7, 8]
    baselines = fit_baselines(torch.randn(20, 10, 2), torch.randn(20, 3, 1), season=4)
    assert set(baselines) == {"last_value", "drift", "nlinear", "seasonal_naive"}
    assert baselines["seasonal_naive"](src.expand(1, 10, 1))[0, :, 0].tolist() == [6, 7, 8]
    assert math.isclose(baselines["last_value"](torch.randn(2, 10, 2)).shape[-1], 1)

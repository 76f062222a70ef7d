"""CSV series in-process: leak-free splits and scaling, window protocols, seasonal naive."""

import math

import numpy as np
import pytest
import torch

from seqforecast.data import DataError, Split, csv_data, fit_scaler, read_series
from seqforecast.data.windows import forecast_starts, split_ranges
from seqforecast.model.normalization import RevIN
from seqforecast.training.baselines import fit_baselines, seasonal_naive

from .helpers import csv_config, write_price_file


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


def csv_cfg(path, **overrides):
    return csv_config(**{"path": str(path), "target": "y", "features": ["x"], "in_len": 6,
                         "out_len": 3, "split": [0.6, 0.2, 0.2], **overrides})


@pytest.fixture
def row_index_csv(tmp_path):
    """y = the row index, x = 2 * the row index: every value says which row it came from."""
    return write_csv(tmp_path / "rows.csv", ["y", "x"], [(i, 2 * i) for i in range(100)])


def _input_rows(data, split):
    """Row index of every input value of a split's windows [N, in_len], from its raw value."""
    src = split.src.double() * data.scaler.scale + data.scaler.shift  # all channels, raw
    return src[..., 0].round().long()


def _target_rows(data, split):
    return data.to_raw(split.target.double())[..., 0].round().long()  # [N, out_len]


@pytest.mark.parametrize("stride", [1, 4])
def test_windows_forecast_their_split_and_read_only_the_past(row_index_csv, stride):
    """The standard protocol: a split's windows forecast its rows; inputs may reach back."""
    data = csv_data(csv_cfg(row_index_csv, window_stride=stride), torch.device("cpu"))
    ranges = {"train": (0, 60), "val": (60, 80), "test": (80, 100)}
    for name, (start, stop) in ranges.items():
        split = getattr(data, name)
        inputs, targets = _input_rows(data, split), _target_rows(data, split)
        assert targets.min() >= start and targets.max() < stop, name
        # Inputs: the in_len rows right before the forecast, never at or after it.
        assert torch.equal(inputs[:, -1] + 1, targets[:, 0])
        assert (inputs.diff(dim=1) == 1).all() and (targets.diff(dim=1) == 1).all()
        if name != "train":  # validation and test windows start right at the split point
            assert targets[0, 0] == start and inputs[0, 0] == start - 6
        assert torch.equal(targets[:, 0].diff(), torch.full((len(split) - 1,), stride))
        assert data.info[name]["windows"] == len(split)
        assert data.info[name]["rows"] == [start, stop]
    assert _input_rows(data, data.train).min() == 0
    if stride == 1:  # every validation and test row is forecast by some window
        for name in ("val", "test"):
            rows = set(_target_rows(data, getattr(data, name)).flatten().tolist())
            assert rows == set(range(*ranges[name]))


@pytest.mark.parametrize("stride", [1, 4])
def test_strict_windows_stay_inside_their_split_and_the_scaler_saw_training_rows_only(
    row_index_csv, stride
):
    data = csv_data(csv_cfg(row_index_csv, window_stride=stride, protocol="strict"), "cpu")
    val_start, test_start = 60, 80

    def rows(split):
        return torch.cat([_input_rows(data, split).flatten(), _target_rows(data, split).flatten()])

    assert rows(data.train).max() < val_start
    val_rows = rows(data.val)
    assert val_rows.min() >= val_start and val_rows.max() < test_start
    assert rows(data.test).min() >= test_start
    # Windows end at each split's last row: the newest rows are always covered.
    assert rows(data.test).max() == 99
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


def test_targets_all_forecasts_every_column_but_the_time_and_the_exogenous_ones(tmp_path):
    """data.targets=all with data.features: the exogenous columns are read as inputs after the
    targets, never forecast. Each column's value says its row: a = i, x = 2i, b = 3i."""
    path = write_csv(tmp_path / "wide.csv", ["date", "a", "x", "b"],
                     [(f"2024-01-{1 + i // 24:02d} {i % 24:02d}:00", i, 2 * i, 3 * i)
                      for i in range(100)])
    data = csv_data(csv_cfg(path, target=None, targets="all", features=["x"],
                            columns="channels", time_column="date"), torch.device("cpu"))
    assert data.state["columns"] == ["a", "b", "x"], data.state["columns"]
    assert (data.n_targets, data.n_features) == (2, 3)
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        target = data.to_raw(split.target.double()).round().long()  # [N, out_len, 2]: a, b
        assert target.shape[-1] == 2, name
        assert torch.equal(target[..., 1], 3 * target[..., 0]), f"{name}: targets are a and b"
        src = (split.src.double() * data.scaler.scale + data.scaler.shift).round().long()
        assert torch.equal(src[..., 2], 2 * src[..., 0]), f"{name}: x is the third input"


def test_window_counts_and_strides():
    # standard: forecasts start at the split point (training: after in_len rows of inputs)
    assert forecast_starts(range(0, 20), 6, 3, 1) == list(range(6, 18))
    assert forecast_starts(range(20, 30), 6, 3, 1) == list(range(20, 28))
    assert forecast_starts(range(20, 30), 6, 3, 5) == [20, 25]
    assert forecast_starts(range(3, 10), 6, 3, 1) == [6, 7]  # inputs never before row 0
    # strict: whole windows inside the split, the last one ending at its last row
    assert forecast_starts(range(0, 20), 6, 3, 1, "strict") == list(range(6, 18))
    assert forecast_starts(range(0, 20), 6, 3, 5, "strict") == [7, 12, 17]
    assert forecast_starts(range(10, 15), 6, 3, 1, "strict") == []


def test_a_short_monthly_series_fits_the_standard_protocol_only(tmp_path):
    """144 monthly rows, 24 in / 12 out: strict windows do not fit a 22-row split."""
    path = write_csv(tmp_path / "monthly.csv", ["y", "x"], [(i % 12, i) for i in range(144)])
    split = [0.7, 0.15, 0.15]  # val from round(100.8) = 101, test from 101 + round(21.6) = 123
    data = csv_data(csv_cfg(path, in_len=24, out_len=12, split=split), "cpu")
    assert (len(data.train), len(data.val), len(data.test)) == (66, 11, 10)
    assert data.info["val"]["rows"] == [101, 123] and data.info["test"]["rows"] == [123, 144]
    with pytest.raises(DataError, match="the val split has 22 rows .* data.protocol=strict"):
        csv_data(csv_cfg(path, in_len=24, out_len=12, split=split, protocol="strict"), "cpu")


def test_explicit_boundaries_by_row_or_timestamp(tmp_path):
    times = [f"2024-01-01 {h:02d}:00" for h in range(24)]
    assert split_ranges(24, [0.6, 0.2, 0.2], "10", "17") == {
        "train": range(0, 10), "val": range(10, 17), "test": range(17, 24)
    }
    from seqforecast.data.csv_series import parse_time

    parsed = [parse_time(t) for t in times]
    ranges = split_ranges(24, [0.6, 0.2, 0.2], "2024-01-01 12:00", "2024-01-01 18:00", parsed)
    assert ranges["val"] == range(12, 18) and ranges["test"] == range(18, 24)
    with pytest.raises(DataError, match="go together"):
        split_ranges(24, [0.6, 0.2, 0.2], "10", None)


def test_gaps_are_refused_unless_a_fill_is_asked_for(tmp_path):
    path = write_csv(tmp_path / "gaps.csv", ["y", "x"], [(1, 1), ("", 2), ("nan", 3), (4, "")])
    with pytest.raises(DataError, match=r"3 empty or NaN cell\(s\), first at line 3, column 'y'"):
        read_series(path, ["y", "x"])
    raw = read_series(path, ["y", "x"], fill="interpolate").values  # filled per window later
    assert np.isnan(raw[1:3, 0]).all() and np.isnan(raw[3, 1]) and raw[0].tolist() == [1, 1]


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
    baselines = fit_baselines(Split(torch.randn(20, 10, 2), torch.randn(20, 3, 1)), season=4)
    assert set(baselines) == {"last_value", "drift", "nlinear", "seasonal_naive"}
    assert baselines["seasonal_naive"](src.expand(1, 10, 1))[0, :, 0].tolist() == [6, 7, 8]
    assert math.isclose(baselines["last_value"](torch.randn(2, 10, 2)).shape[-1], 1)


def test_the_scaler_ignores_empty_cells_instead_of_filled_values(tmp_path):
    rows = [(float(i), 1.0) for i in range(100)]
    rows[10] = ("", 1.0)
    data = csv_data(csv_cfg(write_csv(tmp_path / "g.csv", ["y", "x"], rows), fill="interpolate"),
                    "cpu")
    observed = np.delete(np.arange(60.0), 10)
    assert data.scaler.shift[0].item() == pytest.approx(observed.mean())
    assert data.scaler.scale[0].item() == pytest.approx(observed.std())


@pytest.mark.parametrize(
    "cell,message",
    [
        ("1e300", "line 152, column 'y': '1e300' is too large for the model (values must lie "
                  "within ±1e+18: errors are squared in float32)"),
        ("inf", "line 152, column 'y': 'inf' is not finite"),
        ("1e400", "line 152, column 'y': '1e400' is not finite"),
    ],
)
def test_a_value_the_model_cannot_hold_is_one_line_naming_its_cell(tmp_path, cell, message):
    rows = [(i, math.sin(i / 5), 0) for i in range(300)]
    rows[150] = (150, cell, 0)
    path = write_csv(tmp_path / "big.csv", ["t", "y", "x"], rows)
    with pytest.raises(DataError) as err:
        csv_data(csv_cfg(path), torch.device("cpu"))
    assert str(err.value) == f"{path}: {message}"


def test_a_column_that_overflows_once_scaled_is_one_line(tmp_path):
    """Training rows that barely vary (a spread of 1e-150) scale a later 5.0 past float32."""
    rows = [(i, 1e-150 * (i % 2), 0) for i in range(250)] + [(i, 5.0, 0) for i in range(250, 300)]
    path = write_csv(tmp_path / "flat.csv", ["t", "y", "x"], rows)
    with pytest.raises(DataError, match=r"line \d+, column 'y': overflows float32 once scaled"):
        csv_data(csv_cfg(path, split=[0.7, 0.15, 0.15]), torch.device("cpu"))


def test_the_test_windows_fingerprint_ignores_the_columns_read_beside_the_target(tmp_path):
    """A run with an exogenous column and one without score the same windows of the same file:
    equal fingerprints (compare refused them when the fingerprint hashed scaled targets, which
    the two scalers put 3.6e-14 apart); other windows or other fills still differ."""
    path = write_price_file(tmp_path / "prices.csv")

    def data(file=path, **overrides):
        values = {"target": "price", "features": [], "time_column": "time", "in_len": 24,
                  "out_len": 12, "split": [0.7, 0.15, 0.15], **overrides}
        return csv_data(csv_cfg(file, **values), torch.device("cpu"))

    alone, beside = data(), data(features=["load"])
    assert alone.scaler.shift[0] != beside.scaler.shift[0]  # the case: 1e-15 apart
    for split in ("val", "test"):
        assert alone.info[split]["fingerprint"] == beside.info[split]["fingerprint"]
        # the former fingerprint, kept to compare with runs that have only it, differs
        assert alone.info[split]["fingerprint_v1"] != beside.info[split]["fingerprint_v1"]
    test_print = alone.info["test"]["fingerprint"]
    assert data(val_start="130", test_start="160").info["test"]["fingerprint"] != test_print
    assert data(out_len=6).info["test"]["fingerprint"] != test_print
    gappy = write_price_file(tmp_path / "gappy.csv", gap_at=185)  # a test row, filled by data.fill
    fills = {data(gappy, fill=fill).info["test"]["fingerprint"] for fill in ("ffill",
                                                                            "interpolate")}
    assert len(fills) == 2 and test_print not in fills


def test_a_file_without_gaps_holds_its_rows_once_and_each_window_is_those_rows(tmp_path):
    """A file without gaps: every split's windows are index arithmetic over one buffer of the
    scaled rows (calendar features beside them), never copied window by window (Electricity's
    windows, copied, took 20 GB here), and each window is exactly the rows it names: the
    copies a gap makes (data.fill) hold the same numbers where nothing was missing."""
    from seqforecast.data.splits import WindowSplit, fingerprint
    from seqforecast.data.windows import forecast_starts, window_rows

    path = write_price_file(tmp_path / "prices.csv")
    values = {"target": "price", "features": ["load"], "time_column": "time", "in_len": 24,
              "out_len": 12, "split": [0.7, 0.15, 0.15], "time_features": True,
              "time_freq": "h"}
    data = csv_data(csv_cfg(path, **values), torch.device("cpu"))
    splits = [data.train, data.val, data.test]
    assert all(isinstance(s, WindowSplit) for s in splits)
    assert splits[0].values is splits[1].values is splits[2].values  # one buffer of the rows
    assert splits[0].values.shape[0] == 200 and data.n_features == splits[0].values.shape[1]
    series = read_series(str(path), ["price", "load"], "time")
    scaled = data.scaler.transform(series.values)
    for name, split in zip(("train", "val", "test"), splits, strict=True):
        start, stop = data.info[name]["rows"]
        starts = forecast_starts(range(start, stop), 24, 12, 1)
        inputs, targets = window_rows(starts, 24, 12)
        torch.testing.assert_close(split.src[..., :2], torch.from_numpy(scaled[inputs]).float(),
                                   rtol=0, atol=0)
        torch.testing.assert_close(split.target, torch.from_numpy(scaled[targets][..., :1])
                                   .float(), rtol=0, atol=0)
        # the fingerprint hashed in chunks is the whole's
        assert fingerprint(split, data, chunk=7) == fingerprint(
            Split(split.src, split.target), data, chunk=len(split))
    # a gap elsewhere (the last row) makes copies: the windows that do not reach it are equal
    gappy = write_price_file(tmp_path / "gappy.csv", gap_at=199)
    copied = csv_data(csv_cfg(gappy, **values, fill="ffill"), torch.device("cpu"))
    assert not isinstance(copied.train, WindowSplit)
    assert torch.equal(copied.train.src, data.train.src)
    assert torch.equal(copied.val.target, data.val.target)
    assert torch.equal(data.probe.src, data.test.src[-1:])  # the newest test window

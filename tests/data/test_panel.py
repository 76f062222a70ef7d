"""Panels of many series: windows inside one series and one split, per-series scaling from
training rows only, metrics that are the mean over every test window, and bad input."""

# ruff: noqa: E501  (the bad-panel table keeps each expected message on its line)
import csv
from collections import defaultdict

import numpy as np
import pytest
import torch

from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.data import DataError, build_data, panel_data
from seqforecast.data.panel_read import read_long, read_wide
from seqforecast.model import build_model
from seqforecast.predict import future_times
from seqforecast.training.evaluation import Evaluator
from seqforecast.training.metrics import MetricSums

IN, OUT = 8, 3
CPU = torch.device("cpu")


def write_panel(path, lengths=(40, 31, 55, 9), gaps=()):
    """Rows interleaved by day (a database export): series k starts on day 3k, has its own
    level (10^k) and a weekly wave; `gaps` holds (series, step) cells left empty."""
    rows = []
    for k, n in enumerate(lengths):
        for t in range(n):
            value = 10**k * (2 + np.sin(2 * np.pi * t / 7) + 0.05 * t)
            cell = "" if (k, t) in gaps else f"{value:.6f}"
            rows.append((3 * k + t, f"s{k}", cell, t % 3))
    rows.sort()
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["day", "id", "y", "promo"])
        for day, series, cell, promo in rows:
            writer.writerow([np_day(day), series, cell, promo])
    return path


def np_day(day: int) -> str:
    return str(np.datetime64("2024-01-01") + np.timedelta64(day, "D"))


def raw_series(path) -> dict[str, list[tuple[str, float]]]:
    """The file's rows per id, in file order: (day, value or nan)."""
    found = defaultdict(list)
    with path.open() as f:
        for row in csv.DictReader(f):
            found[row["id"]].append((row["day"], float(row["y"]) if row["y"] else np.nan))
    return found


def config(path, *extra):
    overrides = [
        "data=csv", f"data.path={path}", "data.id_column=id", "data.time_column=day",
        "data.target=y", f"in_len={IN}", f"out_len={OUT}", "model.label_len=2",
        "model.d_model=16", "model.n_heads=2", "model.encoder_layers=1",
        "model.decoder_layers=1", *extra,
    ]
    cfg = compose_config(overrides)
    validate_config(cfg)
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


@pytest.fixture
def panel_file(tmp_path):
    return write_panel(tmp_path / "panel.csv")


def test_every_window_lies_inside_one_series_and_one_split(panel_file):
    data = panel_data(config(panel_file)["data"], CPU)
    raw = raw_series(panel_file)
    ids = data.series_ids
    assert ids == ["s0", "s1", "s2", "s3"]  # order of first appearance
    for k, name in enumerate(("train", "val", "test")):
        split = getattr(data, name)
        src, target = split.take(slice(None))
        for i in range(len(split)):
            series = ids[int(split.series[i])]
            values = np.array([v for _, v in raw[series]])
            n = len(values)
            val, test = round(n * 0.7), round(n * 0.7) + round(n * 0.15)
            lo, hi = [0, val, test][k], [val, test, n][k]
            # Which series row this window forecasts from: match its raw target values.
            shift, scale = (
                data.series_shift[int(split.series[i]), 0],
                data.series_scale[int(split.series[i]), 0],
            )
            want = (target[i, :, 0].double() * scale + shift).numpy()
            starts = [
                s
                for s in range(IN, n - OUT + 1)
                if np.allclose(values[s : s + OUT], want, atol=1e-3)
            ]
            assert len(starts) == 1, (name, series, i)
            start = starts[0]
            assert lo <= start and start + OUT <= hi, "the forecast lies in its own split"
            inputs = (src[i, :, 0].double() * scale + shift).numpy()
            np.testing.assert_allclose(inputs, values[start - IN : start], atol=1e-3)
            if name == "train":
                assert start + OUT <= val, "no training window touches a later split"
    # s3 (9 rows) is too short for any window and is listed, not an error.
    assert data.info["train"]["left_out"] == ["s3"]
    assert data.info["test"]["panel_series"] == 3


def test_each_series_is_scaled_on_its_own_training_rows_only(panel_file, tmp_path):
    data = panel_data(config(panel_file)["data"], CPU)
    raw = raw_series(panel_file)
    for s, series in enumerate(data.series_ids[:3]):
        values = np.array([v for _, v in raw[series]])
        train = values[: round(len(values) * 0.7)]
        assert data.series_shift[s, 0].item() == pytest.approx(train.mean())
        assert data.series_scale[s, 0].item() == pytest.approx(train.std())
    # Changing every validation and test row of s2 moves neither its scaler nor any
    # training window.
    changed = tmp_path / "changed.csv"
    lines = panel_file.read_text().splitlines()
    n2 = len(raw["s2"])
    cut = raw["s2"][round(n2 * 0.7)][0]
    out = [lines[0]]
    for line in lines[1:]:
        day, series, y, promo = line.split(",")
        if series == "s2" and day >= cut:
            y = str(float(y) * 5 + 100)
        out.append(",".join([day, series, y, promo]))
    changed.write_text("\n".join(out) + "\n")
    other = panel_data(config(changed)["data"], CPU)
    torch.testing.assert_close(other.series_shift, data.series_shift)
    torch.testing.assert_close(other.series_scale, data.series_scale)
    torch.testing.assert_close(other.train.src, data.train.src)
    torch.testing.assert_close(other.train.target, data.train.target)
    assert not torch.equal(other.test.target, data.test.target)


def test_aggregated_metrics_are_the_mean_over_every_test_window(panel_file):
    cfg = config(panel_file, "data.season=7")
    data = panel_data(cfg["data"], CPU)
    model = build_model(cfg, data.n_features, data.n_targets).eval()
    evaluator = Evaluator.for_run(data, cfg)
    results = evaluator.evaluate(model)["test"]
    src, target = data.test.take(slice(None))
    with torch.no_grad():
        raw_pred = data.to_raw(model(src), data.test.series).double()
    raw_true = data.to_raw(target, data.test.series).double()
    per_window_mse = (raw_pred - raw_true).square().mean(dim=(1, 2))
    assert results["model"]["mse"] == pytest.approx(per_window_mse.mean().item(), rel=1e-9)
    # MASE: each error over its series' in-sample seasonal-naive MAE on its training rows.
    raw = raw_series(panel_file)
    scales = []
    for series in data.series_ids:
        values = np.array([v for _, v in raw[series]])
        train = values[: round(len(values) * 0.7)]
        scales.append(np.abs(train[7:] - train[:-7]).mean() if len(train) > 7 else 0.0)
    scale = torch.tensor(scales)[data.test.series][:, None, None]
    mase = ((raw_pred - raw_true).abs() / scale).mean().item()
    assert results["model"]["mase"] == pytest.approx(mase, rel=1e-9)
    # Per series: window-weighted means of the per-series rows give the aggregate back.
    per = evaluator.per_series()["model"]
    windows = np.array(per["windows"])
    used = windows > 0
    weighted = np.sum(np.array(per["mse"])[used] * windows[used]) / windows.sum()
    assert weighted == pytest.approx(results["model"]["mse"], rel=1e-9)
    assert windows.sum() == len(data.test)
    # The last-value baseline, recomputed from the raw rows, on the same windows.
    last = raw_true * 0 + data.to_raw(src[:, -1:, :1], data.test.series).double()
    assert results["last_value"]["mse"] == pytest.approx((last - raw_true).square().mean().item())


def test_smape_and_mase_by_their_formulas():
    prediction = torch.tensor([[[1.0], [2.0]], [[0.0], [4.0]]])
    target = torch.tensor([[[2.0], [2.0]], [[0.0], [2.0]]])
    sums = MetricSums(2)
    sums.add(prediction, target, torch.tensor([0, 1]), torch.tensor([[0.5], [2.0]]))
    total = sums.totals()
    # sMAPE: 200|e|/(|y|+|ŷ|), 0 where both are 0, mean over the 4 values.
    assert total["smape"] == pytest.approx((200 / 3 + 0 + 0 + 200 * 2 / 6) / 4)
    assert total["mase"] == pytest.approx((1 / 0.5 + 0 + 0 + 2 / 2.0) / 4)
    per = sums.per_series()
    assert per["mse"] == pytest.approx([0.5, 2.0]) and per["windows"] == [1, 1]


def test_split_by_timestamps_and_a_series_with_no_training_row(tmp_path):
    path = write_panel(tmp_path / "p.csv", lengths=(60, 60, 60, 20))
    # s3 runs from day 9 to day 28, all before validation starts (day 30).
    data = panel_data(
        config(path, "data.val_start=2024-01-31", "data.test_start=2024-02-15")["data"], CPU
    )
    raw = raw_series(path)
    for name, (lo, hi) in {
        "val": ("2024-01-31", "2024-02-15"),
        "test": ("2024-02-15", "9999"),
    }.items():
        split = getattr(data, name)
        _, target = split.take(slice(None))
        assert len(split) > 0
        for i in range(len(split)):
            s = int(split.series[i])
            days = [d for d, _ in raw[data.series_ids[s]]]
            values = np.array([v for _, v in raw[data.series_ids[s]]])
            want = (
                target[i, :, 0].double() * data.series_scale[s, 0] + data.series_shift[s, 0]
            ).numpy()
            start = next(
                t for t in range(len(values)) if np.allclose(values[t : t + OUT], want, atol=1e-3)
            )
            assert lo <= days[start] and days[start + OUT - 1] < hi
    assert "time: validation from 2024-01-31" in data.info["test"]["split_by"]
    assert data.info["test"]["left_out"] == ["s3"] and data.info["train"]["left_out"] == []


def test_gaps_are_carried_forward_within_a_series_only(tmp_path):
    path = write_panel(tmp_path / "p.csv", gaps={(1, 5), (2, 0)})
    with pytest.raises(
        DataError, match=r"line \d+, column 'y' \(series 's1'\); set data.fill=ffill"
    ):
        panel_data(config(path)["data"], CPU)
    data = panel_data(config(path, "data.fill=ffill")["data"], CPU)
    assert any("carried forward" in n for n in data.notes)
    assert any("trimmed" in n for n in data.notes)  # s2's leading empty cell
    panel = read_long(path, "id", "day", ["y"], "ffill")
    s1 = panel.values[panel.rows(1), 0]
    assert s1[5] == s1[4]  # the gap took the row before it, in its own series


def test_wide_format_as_series_or_as_channels(tmp_path):
    path = tmp_path / "wide.csv"
    t = np.arange(80)
    with path.open("w") as f:
        f.write("day,a,b\n")
        for k in t:
            b = "" if k < 10 else f"{1000 + 50 * np.cos(k / 3):.4f}"  # b starts later
            f.write(f"{np_day(int(k))},{np.sin(k / 4):.4f},{b}\n")
    base = ["data.id_column=null", "data.target=null", "data.features=[]"]
    cfg = config(path, *base, "data.targets=all")
    data = build_data(cfg["data"], 0, CPU)
    assert data.series_ids == ["a", "b"] and data.n_targets == 1
    assert data.series_shift[1, 0] > 900  # b has its own scaler
    mixed = config(path, *base, "data.targets=[a,b]", "data.columns=channels", "data.fill=ffill")
    with pytest.raises(DataError, match="starts empty"):  # one series: b's gap has no past
        build_data(mixed["data"], 0, CPU)
    later = tmp_path / "later.csv"
    later.write_text(
        "\n".join(path.read_text().splitlines()[:1] + path.read_text().splitlines()[11:]) + "\n"
    )
    data = build_data({**mixed["data"], "path": str(later)}, 0, CPU)
    assert data.series_ids is None and data.n_targets == 2 and data.n_features == 2


BAD = {
    "missing id column": ("day,y\n2024-01-01,1\n", [], "no column 'id'"),
    "duplicate (id, time)": (
        "day,id,y,promo\n2024-01-01,a,1,0\n2024-01-02,a,2,0\n2024-01-01,b,1,0\n2024-01-02,a,3,0\n",
        [],
        "line 5: series 'a': duplicate time 2024-01-02 00:00:00 in column 'day' (also at line 3)",
    ),
    "not a number": (
        "day,id,y,promo\n2024-01-01,a,1,0\n2024-01-01,b,x1,0\n",
        [],
        "line 3, column 'y' (series 'b'): 'x1' is not a finite number",
    ),
    "a value too large": (
        "day,id,y,promo\n2024-01-01,a,1,0\n2024-01-01,b,1e300,0\n",
        [],
        "line 3, column 'y' (series 'b'): '1e300' is too large for the model (values must lie "
        "within ±1e+18",
    ),
    "bad time": (
        "day,id,y,promo\nmonday,a,1,0\n",
        [],
        "line 2, column 'day': 'monday' is not a time: expected ISO 8601 (2024-01-31 13:00) or a date such as 2024/1/31 13:00, 31/1/2024 or 1/31/2024, or an integer step",
    ),
    "too short everywhere": (
        "day,id,y,promo\n2024-01-01,a,1,0\n2024-01-02,a,2,0\n",
        [],
        "no series is long enough for a window in the train split",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_panels_get_one_line(tmp_path, name):
    text, extra, message = BAD[name]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        panel_data(config(path, *extra)["data"], CPU)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["data.id_column=y"], "data.id_column=y conflicts with data.target/features"),
        (["data.time_column=null"], "data.time_column=None is not allowed: a long panel"),
        (["data.fill=interpolate"], "data.fill=interpolate conflicts with data.id_column"),
        (["data.columns=channels"], "data.columns=channels conflicts with data.id_column"),
        (["data.target=null", "data.targets=[y]"], "data.id_column=id conflicts with data.targets"),
        (["data.target=null"], "data.target is required"),
    ],
)
def test_bad_panel_configs_get_one_line(panel_file, extra, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        config(panel_file, *extra)


def test_a_saved_panel_scores_the_same_windows_and_refuses_a_changed_file(panel_file, tmp_path):
    cfg = config(panel_file)["data"]
    data = panel_data(cfg, CPU)
    again = panel_data(cfg, CPU, saved=data.state)
    torch.testing.assert_close(again.test.target, data.test.target)
    assert again.info["test"]["fingerprint"] == data.info["test"]["fingerprint"]
    # Append two rows to s0: refused, unless allowed (then s0's test split runs on).
    lines = panel_file.read_text().splitlines()
    changed = tmp_path / "more.csv"
    extra = [f"{np_day(40 + k)},s0,{3 + k},0" for k in range(2)]
    changed.write_text("\n".join([*lines, *extra]) + "\n")
    with pytest.raises(
        DataError,
        match=r"changed since the run was trained \(1 series changed or new \(s0\), 0 gone\)",
    ):
        panel_data({**cfg, "path": str(changed)}, CPU, saved=data.state)
    allowed = panel_data({**cfg, "path": str(changed)}, CPU, saved=data.state, allow_changed=True)
    assert len(allowed.test) == len(data.test) + 2
    torch.testing.assert_close(allowed.series_scale, data.series_scale)
    torch.testing.assert_close(allowed.val.target, data.val.target)


def test_rows_out_of_time_order_are_sorted_within_each_series(tmp_path):
    """Long format: the time column says the order (as neuralforecast and darts read it): a
    file whose rows are shuffled gives the panel its sorted twin gives, and says so."""
    path = write_panel(tmp_path / "p.csv")
    lines = path.read_text().splitlines()
    body = lines[1:]
    rng = np.random.default_rng(0)
    shuffled = tmp_path / "shuffled.csv"
    shuffled.write_text("\n".join([lines[0], *rng.permutation(body)]) + "\n")
    ordered = panel_data(config(path)["data"], CPU)
    mixed = panel_data(config(shuffled)["data"], CPU)
    assert sorted(ordered.series_ids) == sorted(mixed.series_ids)  # ids: first seen first
    for name in ("train", "val", "test"):
        for series_id in ordered.series_ids:
            a, b = (
                getattr(d, name).take(getattr(d, name).series == d.series_ids.index(series_id))
                for d in (ordered, mixed)
            )
            torch.testing.assert_close(a, b)
    assert any("out of time order" in note and "sorted" in note for note in mixed.notes)
    assert not any("out of time order" in note for note in ordered.notes)


def test_a_wide_file_out_of_time_order_is_sorted(tmp_path):
    rows = [(f"2024-01-{d:02d}", d, 10 * d) for d in range(1, 29)]
    header = "day,north,south"
    ordered, shuffled = tmp_path / "o.csv", tmp_path / "s.csv"
    ordered.write_text("\n".join([header, *(f"{t},{a},{b}" for t, a, b in rows)]) + "\n")
    swapped = [rows[1], rows[0], *rows[2:]]
    shuffled.write_text("\n".join([header, *(f"{t},{a},{b}" for t, a, b in swapped)]) + "\n")
    wide = ["data=csv", "data.targets=all", "data.time_column=day", "in_len=4", "out_len=2",
            "model.label_len=2"]
    a = build_data(compose_config([*wide, f"data.path={ordered}"]).data, 0, CPU)
    b = build_data(compose_config([*wide, f"data.path={shuffled}"]).data, 0, CPU)
    torch.testing.assert_close(a.test.take(slice(None)), b.test.take(slice(None)))
    assert any("2 rows were out of time order" in note for note in b.notes)


def test_row_borders_need_rows_in_time_order(tmp_path):
    rows = [(f"2024-01-{d:02d}", d, 10 * d) for d in range(1, 29)]
    swapped = [rows[1], rows[0], *rows[2:]]
    path = tmp_path / "s.csv"
    path.write_text("\n".join(["day,north,south", *(f"{t},{a},{b}" for t, a, b in swapped)]) + "\n")
    cfg = compose_config(["data=csv", f"data.path={path}", "data.targets=all",
                          "data.time_column=day", "in_len=4", "out_len=2", "model.label_len=2",
                          "data.val_start=14", "data.test_start=20"])
    with pytest.raises(DataError, match=r"data.val_start=14: a row number of a file whose rows"):
        build_data(cfg.data, 0, CPU)


def test_a_panels_forecast_times_are_written_as_its_file_writes_them(tmp_path):
    """predict continues each series' grid in the file's own form (`2024/1/9`, not
    `2024-01-09`), wide or long."""
    wide = tmp_path / "wide.csv"
    wide.write_text("day,a,b\n" + "".join(f"2024/1/{d},{d},1\n" for d in range(1, 9)))
    panel = read_wide(wide, "day", "all")
    assert future_times(panel.times[panel.rows(1)], 8, 3, wide, panel.time_style) == [
        "2024/1/9", "2024/1/10", "2024/1/11"]
    long = tmp_path / "long.csv"
    long.write_text("day,id,y\n" + "".join(f"{d:02d}.01.2024 0:00,{s},1\n" for d in range(20, 29)
                                            for s in ("a", "b")))
    panel = read_long(long, "id", "day", ["y"])
    assert future_times(panel.times[panel.rows(0)], 9, 2, long, panel.time_style) == [
        "29.01.2024 0:00", "30.01.2024 0:00"]

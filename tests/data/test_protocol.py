"""The long-horizon protocol of the published tables (ETT, Weather, ...): borders by row or
time, a test end with the rows after it unused, every channel scaled on its training rows,
metrics in those scaled units beside the data's, and one line for each wrong border."""

import csv

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.data import DataError, build_data
from seqforecast.data.windows import split_ranges
from seqforecast.model import build_model
from seqforecast.training.evaluation import Evaluator

IN, OUT = 24, 8
ROWS, VAL, TEST, END = 200, 100, 140, 180
CPU = torch.device("cpu")
LEVELS = (5.0, 300.0, 0.02)  # channels of very different scales, as ETT's


def write_ett(path, rows=ROWS):
    """An hourly file in ETT's layout: a date column and three channels."""
    t = np.arange(rows)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["date", "a", "b", "c"])
        for i in t:
            moment = np.datetime64("2016-07-01T00:00") + np.timedelta64(int(i), "h")
            values = [
                level * (1 + 0.3 * np.sin(2 * np.pi * i / 24 + k) + 0.002 * i)
                for k, level in enumerate(LEVELS)
            ]
            writer.writerow([str(moment).replace("T", " ")] + [f"{v:.6f}" for v in values])
    return path


def time_of(row: int) -> str:
    return str(np.datetime64("2016-07-01T00:00") + np.timedelta64(row, "h")).replace("T", " ")


def cfg_for(path, *extra, borders=None):
    borders = borders or [f"data.val_start={VAL}", f"data.test_start={TEST}",
                          f"data.test_end={END}"]
    cfg = compose_config([
        "data=csv", f"data.path={path}", "data.targets=all", "data.time_column=date",
        f"in_len={IN}", f"out_len={OUT}", "d_model=8", "n_heads=2", "model.label_len=8",
        *borders, *extra,
    ])
    validate_config(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def raw_values(path) -> np.ndarray:
    with path.open() as f:
        return np.array([[float(r[c]) for c in "abc"] for r in csv.DictReader(f)])


@pytest.fixture
def ett(tmp_path):
    return write_ett(tmp_path / "ett.csv")


@pytest.mark.parametrize("columns", ["series", "channels"])
def test_test_end_leaves_the_rows_after_it_unused(tmp_path, columns):
    path = write_ett(tmp_path / "ett.csv")
    data = build_data(cfg_for(path, f"data.columns={columns}")["data"], 0, CPU)
    # Every window forecasting a test row, and no more: rows [TEST, END) in each channel.
    per_channel = END - TEST - OUT + 1
    assert len(data.test) == per_channel * (3 if columns == "series" else 1)
    # Changing every row from END on changes nothing the run reads.
    values = raw_values(path)
    values[END:] *= -7.0
    edited = tmp_path / "edited.csv"
    lines = path.read_text().splitlines()
    edited.write_text(
        "\n".join(
            [lines[0]]
            + [
                ",".join([line.split(",")[0], *(f"{v:.6f}" for v in values[i])])
                for i, line in enumerate(lines[1:])
            ]
        )
        + "\n"
    )
    again = build_data(cfg_for(edited, f"data.columns={columns}")["data"], 0, CPU)
    for name in ("train", "val", "test"):
        torch.testing.assert_close(getattr(again, name).src, getattr(data, name).src)
        torch.testing.assert_close(getattr(again, name).target, getattr(data, name).target)
    assert again.info["test"]["fingerprint"] == data.info["test"]["fingerprint"]


def test_borders_by_row_and_by_time_are_the_same_split(ett):
    by_row = build_data(cfg_for(ett)["data"], 0, CPU)
    by_time = build_data(
        cfg_for(ett, borders=[f"data.val_start='{time_of(VAL)}'",
                              f"data.test_start='{time_of(TEST)}'",
                              f"data.test_end='{time_of(END)}'"])["data"], 0, CPU,
    )
    for name in ("val", "test"):
        assert by_row.info[name]["fingerprint"] == by_time.info[name]["fingerprint"]
        assert len(getattr(by_row, name)) == len(getattr(by_time, name))
    assert "rows: validation from 100" in by_row.info["test"]["split_by"]
    assert "time: validation from 2016-07-05" in by_time.info["test"]["split_by"]
    # One series: the same borders give the same row ranges.
    assert split_ranges(ROWS, [0.7, 0.15, 0.15], str(VAL), str(TEST), None, str(END)) == {
        "train": range(0, VAL), "val": range(VAL, TEST), "test": range(TEST, END),
    }


@pytest.mark.parametrize("columns", ["series", "channels"])
def test_metrics_in_scaled_units_are_the_papers_z_units(ett, columns):
    """Each channel z-scored with its training rows' mean and std; MSE and MAE averaged over
    channels, windows and steps in those units, beside the data's own units."""
    cfg = cfg_for(ett, f"data.columns={columns}")
    data = build_data(cfg["data"], 0, CPU)
    values = raw_values(ett)
    mean, std = values[:VAL].mean(axis=0), values[:VAL].std(axis=0)  # population std
    z = (values - mean) / std
    model = build_model(cfg, data.n_features, data.n_targets).eval()
    evaluator = Evaluator.for_run(data, cfg)
    results = evaluator.evaluate(model)["test"]
    # The test windows from the raw rows, every channel, in z units: [windows, OUT, 3]
    starts = np.arange(TEST, END - OUT + 1)
    inputs = np.stack([z[s - IN : s] for s in starts])
    truth = np.stack([z[s : s + OUT] for s in starts])
    src = torch.from_numpy(inputs).float()
    with torch.no_grad():
        if columns == "channels":
            predicted = model(src).double().numpy()
        else:  # each channel its own series: the model reads one channel at a time
            predicted = np.concatenate(
                [model(src[..., k : k + 1]).double().numpy() for k in range(3)], axis=2
            )
    error = predicted - truth
    assert results["model"]["mse_scaled"] == pytest.approx(np.mean(error**2), rel=1e-5)
    assert results["model"]["mae_scaled"] == pytest.approx(np.mean(np.abs(error)), rel=1e-5)
    # The data's units weigh each channel by its std²: a different number.
    assert results["model"]["mse"] == pytest.approx(np.mean((error * std) ** 2), rel=1e-5)
    last = np.repeat(inputs[:, -1:], OUT, axis=1)
    assert results["last_value"]["mse_scaled"] == pytest.approx(np.mean((last - truth) ** 2))
    assert "z-scores" in data.info["test"]["scaled_units"]


def test_unscaled_data_has_no_scaled_metrics(ett):
    cfg = cfg_for(ett, "data.scale=none")
    data = build_data(cfg["data"], 0, CPU)
    results = Evaluator.for_run(data, cfg).evaluate(build_model(cfg).eval())["test"]
    assert "mse_scaled" not in results["model"] and "scaled_units" not in data.info["test"]


@pytest.mark.parametrize(
    "borders,message",
    [
        ([f"data.val_start={VAL}", f"data.test_start={TEST}", "data.test_end=120"],
         "data.test_end=120 must come after the test split's start (140): the test split"),
        ([f"data.val_start={VAL}", f"data.test_start={TEST}", "data.test_end=500"],
         "data.test_end=500 is outside the file: a row number in [0, 200]"),
        ([f"data.val_start={VAL}", "data.test_start='2030-01-01'", f"data.test_end={END}"],
         "data.test_start='2030-01-01' is after the file's last time (2016-07-09 07:00:00)"),
        ([f"data.val_start={TEST}", f"data.test_start={VAL}"],
         f"data.val_start={TEST} must come before data.test_start={VAL}: the validation"),
    ],
)
@pytest.mark.parametrize("columns", ["series", "channels"])
def test_a_wrong_border_is_one_line(ett, borders, message, columns):
    with pytest.raises(DataError) as err:
        build_data(cfg_for(ett, f"data.columns={columns}", borders=borders)["data"], 0, CPU)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("columns", ["series", "channels"])
def test_a_horizon_the_test_rows_cannot_hold_is_one_line(ett, columns):
    # the validation and test splits hold 40 rows each
    cfg = cfg_for(ett, "out_len=60", f"data.columns={columns}")
    with pytest.raises(DataError, match=r"(too few for one window|no series is long enough)"
                       r".*out_len ?= ?60") as err:
        build_data(cfg["data"], 0, CPU)
    assert "40 rows" in str(err.value) and "\n" not in str(err.value)


def test_a_missing_column_is_one_line(ett):
    cfg = cfg_for(ett)
    cfg["data"]["targets"] = ["a", "OT"]
    with pytest.raises(DataError, match=r"no column 'OT'; the file has date, a, b, c$"):
        build_data(cfg["data"], 0, CPU)


def test_selecting_on_scaled_units_needs_scaled_csv_data():
    with pytest.raises(ConfigError, match="trainer.select_on=mse_scaled conflicts with"):
        validate_config(compose_config(["trainer.select_on=mse_scaled"]))

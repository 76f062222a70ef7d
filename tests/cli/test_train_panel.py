"""A panel end to end, as a user runs it: the example panel, train, per_series.csv,
evaluate, predict in long format, and bad panels refused in one line."""

import csv
import json
from collections import defaultdict
from datetime import date, timedelta

import numpy as np
import pytest
import torch

from ..cli_helpers import REPO, run_cli, run_script

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

EXAMPLE = REPO / "data" / "panel_example.csv"
SMALL = ["epochs=1", "in_len=24", "out_len=6", "model.label_len=6", "model.d_model=16",
         "model.n_heads=2", "model.encoder_layers=1", "model.decoder_layers=1",
         "data.season=[7]", "trainer.batch_size=256", "log.figures=false"]


def test_the_example_panel_is_what_the_script_writes(tmp_path):
    out = tmp_path / "panel.csv"
    run_script("make_example_panel.py", "--out", str(out), cwd=tmp_path)
    assert out.read_bytes() == EXAMPLE.read_bytes()


@pytest.fixture(scope="module")
def panel_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("panel")
    path = base / "panel.csv"
    run_script("make_example_panel.py", "--series", "12", "--min-length", "60",
               "--max-length", "120", "--out", str(path), cwd=base)
    run_dir = base / "run"
    # a Gaussian model: panels with a distribution's own quantiles (the point path is shared);
    # adaptive bands: each series adapts on its own test windows
    proc = run_cli(["experiment=panel_example", *SMALL, "loss=gaussian", "intervals=adaptive",
                    f"data.path={path}", f"hydra.run.dir={run_dir}"], base)
    return path, run_dir, proc


def read_rows(path):
    with path.open() as f:
        return list(csv.DictReader(f))


def test_a_panel_run_writes_metrics_per_series(panel_run):
    path, run_dir, proc = panel_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    test = metrics["test"]
    assert set(test) == {"model", "last_value", "drift", "nlinear", "seasonal_naive"}
    point = {"mse", "mae", "rmse", "smape", "mase", "mse_scaled", "mae_scaled"}
    for row in test.values():
        assert point <= set(row) and all(np.isfinite(row[k]) and row[k] >= 0 for k in point)
        # conformal intervals, MSIS over each series' seasonal-naive scale (intervals.md)
        assert {"crps", "coverage_80", "width_95", "msis_80", "msis_95"} <= set(row)
        assert 0 <= row["coverage_80"] <= row["coverage_95"] <= 1
    info = metrics["splits"]["test"]
    rows = read_rows(run_dir / "per_series.csv")
    by_forecaster = defaultdict(list)
    for row in rows:
        by_forecaster[row["forecaster"]].append(row)
    assert set(by_forecaster) == set(test)
    model_rows = by_forecaster["model"]
    assert len(model_rows) == info["panel_series"]
    windows = np.array([int(r["windows"]) for r in model_rows])
    assert windows.sum() == info["windows"]
    for metric in ("mse", "mae", "smape", "mase"):
        weighted = np.sum(np.array([float(r[metric]) for r in model_rows]) * windows)
        assert weighted / windows.sum() == pytest.approx(test["model"][metric], rel=1e-6)
    # each series' own band scores: window-weighted, they are the run's (equal-length windows);
    # the model's own quantiles too (own_*), left empty for the baselines
    for name, found in by_forecaster.items():
        for metric in ("crps", "coverage_80", "width_95", "own_crps", "own_coverage_80"):
            if metric.startswith("own_") and name != "model":
                assert all(r[metric] == "" for r in found)
                continue
            weighted = np.sum(np.array([float(r[metric]) for r in found]) * windows)
            assert weighted / windows.sum() == pytest.approx(test[name][metric], rel=1e-6)
    assert "test split: " in (run_dir / "train.log").read_text()
    assert f"{info['panel_series']} series, {info['windows']} windows" in proc.stdout + proc.stderr


def test_evaluate_reproduces_a_panel_run_and_refuses_a_changed_file(panel_run, tmp_path):
    path, run_dir, _ = panel_run
    run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate")
    trained = json.loads((run_dir / "metrics.json").read_text())
    again = json.loads((run_dir / "evaluate" / "best" / "metrics.json").read_text())
    assert again["test"] == trained["test"]
    assert (run_dir / "evaluate" / "best" / "per_series.csv").read_text() == (
        run_dir / "per_series.csv"
    ).read_text()

    changed = tmp_path / "changed.csv"
    lines = path.read_text().splitlines()
    store, day, value, promo = lines[5].split(",")
    lines[5] = ",".join([store, day, str(float(value or 1) + 7), promo])
    changed.write_text("\n".join(lines) + "\n")
    hydra_config = run_dir / ".hydra" / "config.yaml"
    original = hydra_config.read_text()
    try:
        hydra_config.write_text(original.replace(str(path), str(changed)))
        proc = run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate",
                       check=False)
    finally:
        hydra_config.write_text(original)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{changed} changed since the run was trained (1 series changed or new ({store})" in (
        proc.stderr
    )


def test_predict_writes_every_series_in_long_format_on_its_own_grid(panel_run, tmp_path):
    path, run_dir, _ = panel_run
    out = tmp_path / "forecast.csv"
    proc = run_cli([f"run_dir={run_dir}", f"input={path}", f"output={out}"], tmp_path,
                   module="seqforecast.predict")
    rows = read_rows(out)
    bands = ["sales_lo80", "sales_hi80", "sales_lo95", "sales_hi95"]  # conformal, per series
    levels = ["2.5", "5", "10", "20", "30", "40", "50", "60", "70", "80", "90", "95", "97.5"]
    own = [f"sales_q{q}" for q in levels]  # the Gaussian's own, at the run's 13 levels
    assert list(rows[0]) == ["store", "date", "sales", *bands, *own]
    assert "adaptive conformal interval" in proc.stdout
    half_widths = {}
    for row in rows:  # nested bands in each series' own units, symmetric (adaptive)
        lo95, lo80, hi80, hi95 = (float(row[k]) for k in (bands[2], bands[0], bands[1], bands[3]))
        assert lo95 <= lo80 <= hi80 <= hi95
        assert hi80 - float(row["sales"]) == pytest.approx(float(row["sales"]) - lo80, rel=1e-6)
        half_widths.setdefault(row["store"], []).append(hi80 - lo80)
        quantiles = [float(row[k]) for k in own]
        assert quantiles == sorted(quantiles)
        assert float(row["sales_q50"]) == pytest.approx(float(row["sales"]), rel=1e-6)
    last_day = {}
    for row in read_rows(path):
        last_day[row["store"]] = max(last_day.get(row["store"], ""), row["date"])
    forecast = defaultdict(list)
    for row in rows:
        forecast[row["store"]].append(row)
    assert set(forecast) <= set(last_day) and len(forecast) >= 10
    for store, steps in forecast.items():
        first = date.fromisoformat(last_day[store]) + timedelta(days=1)
        assert [r["date"] for r in steps] == [str(first + timedelta(days=k)) for k in range(6)]
        assert all(np.isfinite(float(r["sales"])) for r in steps)
    assert f"6 steps of {len(forecast)} series" in proc.stdout
    # each series' own half-widths, as bands.json holds them in its scaled units (the run's
    # series order), times its scale: the ratio is one number per series
    saved = json.loads((run_dir / "bands.json").read_text())["adaptive"]["radius"]["80"]
    ids = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=True)["data_state"]["ids"]
    for store, widths in half_widths.items():
        radius = [step[0] for step in saved[ids.index(store)]]
        ratios = [w / (2 * r) for w, r in zip(widths, radius, strict=True)]
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-6)

    picked = tmp_path / "two.csv"
    ids = sorted(forecast)[:2]
    run_cli([f"run_dir={run_dir}", f"input={path}", f"output={picked}", f"ids={','.join(ids)}"],
            tmp_path, module="seqforecast.predict")
    two = read_rows(picked)
    assert sorted({r["store"] for r in two}) == ids
    proc = run_cli([f"run_dir={run_dir}", f"input={path}", f"output={tmp_path / 'x.csv'}",
                    "ids=nope"], tmp_path, module="seqforecast.predict", check=False)
    assert proc.returncode == 2 and "ids= names series the file does not have: 'nope'" in (
        proc.stderr
    )
    # The same series forecast alone or with the others: the same numbers.
    assert [r["sales"] for r in two if r["store"] == ids[0]] == [
        r["sales"] for r in forecast[ids[0]]
    ]


def test_a_bad_panel_gets_one_line_and_exit_2(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("store,date,sales,promo\na,2024-01-01,1,0\na,2024-01-01,2,0\n")
    proc = run_cli(["experiment=panel_example", f"data.path={path}",
                    f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert "line 3: series 'a': duplicate time" in proc.stderr


def test_wide_format_as_series_or_as_channels_of_one_series(tmp_path):
    path = tmp_path / "wide.csv"
    days = [date(2024, 1, 1) + timedelta(days=k) for k in range(90)]
    lines = ["date,north,south"] + [
        f"{d},{300 + 20 * np.sin(k / 3):.3f},{5 + np.cos(k / 5):.4f}" for k, d in enumerate(days)
    ]
    path.write_text("\n".join(lines) + "\n")
    common = ["data=csv", f"data.path={path}", "data.time_column=date", "data.targets=all",
              *SMALL[:-2], "data.season=0"]
    independent = tmp_path / "independent"
    run_cli([*common, f"hydra.run.dir={independent}"], tmp_path)
    per_series = read_rows(independent / "per_series.csv")
    assert {r["id"] for r in per_series} == {"north", "south"}
    out = tmp_path / "independent.csv"
    run_cli([f"run_dir={independent}", f"input={path}", f"output={out}"], tmp_path,
            module="seqforecast.predict")
    rows = read_rows(out)
    assert list(rows[0])[:3] == ["id", "date", "value"] and len(rows) == 12
    assert {r["date"] for r in rows if r["id"] == "north"} == {
        str(days[-1] + timedelta(days=k)) for k in range(1, 7)
    }

    mixed = tmp_path / "mixed"
    run_cli([*common, "data.columns=channels", f"hydra.run.dir={mixed}"], tmp_path)
    assert not (mixed / "per_series.csv").exists()  # one series with two channels
    out = tmp_path / "mixed.csv"
    run_cli([f"run_dir={mixed}", f"input={path}", f"output={out}"], tmp_path,
            module="seqforecast.predict")
    rows = read_rows(out)
    assert list(rows[0]) == ["date", "north", "south", "north_lo80", "south_lo80", "north_hi80",
                             "south_hi80", "north_lo95", "south_lo95", "north_hi95",
                             "south_hi95"] and len(rows) == 6
    for row in rows:  # each channel's band in its own units
        for channel in ("north", "south"):
            assert float(row[f"{channel}_lo95"]) <= float(row[f"{channel}_lo80"]) \
                <= float(row[f"{channel}_hi80"]) <= float(row[f"{channel}_hi95"])
    assert 250 < float(rows[0]["north"]) < 350 and 2 < float(rows[0]["south"]) < 8

"""Probabilistic training end to end (`loss=quantile|gaussian`): a run trains on its own loss,
scores its own quantiles beside the conformal ones, predict writes them; bad settings are one
line and exit 2."""

import csv
import json
import math
import re

import pytest
import torch

from ..cli_helpers import REPO, TINY, run_cli

EXAMPLE = REPO / "data" / "example.csv"
CSV = ["experiment=csv_example", f"data.path={EXAMPLE}", "epochs=2", "in_len=24", "out_len=12",
       "model.label_len=12", "data.window_stride=4", "log.figures=false"]


def _own(row: dict) -> dict:
    return {k.removeprefix("own_"): v for k, v in row.items() if k.startswith("own_")}


@pytest.mark.slow
def test_a_gaussian_run_scores_its_own_quantiles_beside_the_conformal_ones(tmp_path, cwd):
    run_dir = tmp_path / "run"
    proc = run_cli([*TINY, "loss=gaussian", "data.val_size=100", "data.test_size=300",
                    "trainer.select_on=loss", f"hydra.run.dir={run_dir}"], cwd)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # selected on its validation NLL, logged each epoch: the kept epoch is the lowest's
    log = (run_dir / "train.log").read_text()
    losses = [float(v) for v in re.findall(r"epoch \d+/\d+ .* val_loss (\S+)", log)]
    assert len(losses) == metrics["run"]["epochs_run"] >= 2
    assert metrics["run"]["best_epoch"] == 1 + losses.index(min(losses))
    model = metrics["test"]["model"]
    own = _own(model)
    # the gaussian's quantiles at the run's 13 interval quantiles
    assert len([k for k in own if k.startswith("pinball_")]) == 13
    for level in ("80", "95"):
        assert 0.0 <= own[f"coverage_{level}"] <= 1.0
        assert math.isfinite(own[f"width_{level}"]) and own[f"width_{level}"] > 0
        assert f"coverage_{level}" in model  # the conformal band around its point too
    assert own["width_95"] > own["width_80"]
    assert math.isfinite(own["crps"]) and math.isfinite(model["mse"])
    assert all(not _own(row) for name, row in metrics["test"].items() if name != "model")
    out = proc.stdout + proc.stderr
    assert "model (own quantiles)" in out


@pytest.mark.slow
def test_a_quantile_run_with_adaptive_bands_scores_and_predicts_its_own_quantiles(tmp_path,
                                                                                    cwd):
    run_dir = tmp_path / "run"
    proc = run_cli([*CSV, "loss=quantile", "loss.quantiles=[0.1,0.5,0.9]", "intervals=adaptive",
                    "intervals.levels=[0.8]", f"hydra.run.dir={run_dir}"], cwd)
    assert "adaptive conformal intervals on the test windows" in proc.stdout + proc.stderr
    model = json.loads((run_dir / "metrics.json").read_text())["test"]["model"]
    assert 0.0 < model["coverage_80"] < 1.0 and model["width_80"] > 0  # the adaptive band
    own = _own(model)  # scored at the loss's own three levels
    assert set(own) == {"pinball_10", "pinball_50", "pinball_90", "crps", "coverage_80",
                        "width_80", "msis_80"}
    assert own["crps"] == pytest.approx(2 * (own["pinball_10"] + own["pinball_50"]
                                             + own["pinball_90"]) / 3)
    lines = EXAMPLE.read_text().splitlines()
    recent = tmp_path / "recent.csv"
    recent.write_text("\n".join([lines[0], *lines[-50:]]) + "\n")
    output = tmp_path / "forecast.csv"
    out = run_cli([f"run_dir={run_dir}", f"input={recent}", f"output={output}"], tmp_path,
                  module="seqforecast.predict").stdout
    assert "quantiles: _q10 ... _q90 the model's own (loss=quantile), not calibrated" in out
    assert "_lo80/_hi80 the central 80% adaptive conformal interval" in out
    rows = list(csv.DictReader(output.open()))
    # the band the adaptive intervals reached by the end of the test windows: symmetric around
    # the point, its half-width bands.json's (times the scaler's scale, one for every step)
    bands = json.loads((run_dir / "bands.json").read_text())
    radius = [step[0] for step in bands["adaptive"]["radius"]["80"][0]]  # [out_len], one target
    point = [float(r["load"]) for r in rows]
    lower, upper = ([float(r[f"load_{side}80"]) for r in rows] for side in ("lo", "hi"))
    for p, lo, hi in zip(point, lower, upper, strict=True):
        assert hi - p == pytest.approx(p - lo, rel=1e-6)
    scales = [(hi - lo) / (2 * r) for lo, hi, r in zip(lower, upper, radius, strict=True)]
    assert max(scales) == pytest.approx(min(scales), rel=1e-6)
    assert list(rows[0]) == ["time", "load", "load_lo80", "load_hi80", "load_q10", "load_q50",
                             "load_q90"]
    assert len(rows) == 12
    for row in rows:
        q10, q50, q90 = (float(row[f"load_q{q}"]) for q in (10, 50, 90))
        assert q10 <= q50 <= q90
        assert q50 == pytest.approx(float(row["load"]), rel=1e-7)  # the point is the median


def test_a_bad_quantile_loss_is_one_line_and_exit_2(tmp_path, cwd):
    """(Every bad level: tests/config/test_validate.py.)"""
    run_dir = tmp_path / "run"
    proc = run_cli([*TINY, "loss=quantile", "loss.quantiles=[0.2,0.5,0.8]",
                    f"hydra.run.dir={run_dir}"], cwd, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "loss.quantiles: interval level 0.8 needs the quantiles 0.1 and 0.9" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (run_dir / "metrics.json").exists()


@pytest.mark.slow
def test_a_poisson_run_forecasts_counts_and_refuses_data_that_are_not(tmp_path, cwd):
    gen = torch.Generator().manual_seed(0)
    hours = torch.arange(600)
    rate = 6.0 + 4.0 * torch.sin(2 * math.pi * hours / 24)  # a daily cycle of counts
    counts = torch.poisson(rate, generator=gen).long().tolist()
    path = tmp_path / "counts.csv"
    path.write_text("hour,arrivals\n" + "".join(f"{h},{c}\n" for h, c in enumerate(counts)))
    run_dir = tmp_path / "run"
    common = ["data=csv", f"data.path={path}", "data.target=arrivals", "in_len=48",
              "out_len=12", "model.label_len=12", "epochs=2", "data.window_stride=4"]
    run_cli([*common, "data.scale=none", "loss=poisson", f"hydra.run.dir={run_dir}"], cwd)
    model = json.loads((run_dir / "metrics.json").read_text())["test"]["model"]
    assert math.isfinite(model["own_crps"]) and 0.0 < model["own_coverage_80"] <= 1.0
    assert math.isfinite(model["loss"])  # its NLL, the loss it trained on
    recent = tmp_path / "recent.csv"
    recent.write_text("\n".join(path.read_text().splitlines()[:1] + path.read_text()
                                .splitlines()[-60:]) + "\n")
    output = tmp_path / "forecast.csv"
    run_cli([f"run_dir={run_dir}", f"input={recent}", f"output={output}"], tmp_path,
            module="seqforecast.predict")
    for row in csv.DictReader(output.open()):
        quantiles = [float(v) for k, v in row.items() if k.startswith("arrivals_q")]
        assert quantiles == sorted(quantiles) and all(q == int(q) >= 0 for q in quantiles)
        assert float(row["arrivals"]) > 0  # the rate
    # scaled, or not counts: one line, exit 2, nothing written
    lines = path.read_text().splitlines()
    halves = tmp_path / "halves.csv"
    halves.write_text("\n".join([lines[0], "0,0.5", *lines[2:]]) + "\n")
    for extra, message in (
        (["data.scale=standard"], "the data is scaled (data.scale=standard): set data.scale=none"),
        (["data.scale=none", f"data.path={halves}"],
         "loss=poisson describes counts (whole numbers >= 0); the train targets hold 0.5"),
    ):
        bad_dir = tmp_path / "bad"
        proc = run_cli([*common, "loss=poisson", *extra, f"hydra.run.dir={bad_dir}"], cwd,
                       check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert message in proc.stderr
        assert not (bad_dir / "metrics.json").exists()

"""Conformal intervals in a run, end to end: every forecaster's bands scored in metrics.json."""

import json
import math

import pytest
import torch

from ..cli_helpers import TINY, TINY_WITH_FIGURES, run_cli

POINT = {"mse", "mae", "rmse", "smape"}
FORECASTERS = {"model", "last_value", "drift", "nlinear"}


@pytest.mark.slow
def test_every_forecaster_gets_calibrated_intervals_on_the_test_windows(tmp_path, cwd):
    run_dir = tmp_path / "run"
    # validation and test series come from the same generator: exchangeable windows, so the
    # split-conformal coverage must hold (within sampling) for every forecaster
    proc = run_cli([*TINY_WITH_FIGURES, "data.val_size=200", "data.test_size=600",
                    f"hydra.run.dir={run_dir}"], cwd)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["test"]) == FORECASTERS
    for name, row in metrics["test"].items():
        assert POINT <= set(row)
        for level in ("80", "95"):
            coverage, width = row[f"coverage_{level}"], row[f"width_{level}"]
            assert abs(coverage - int(level) / 100) < 0.06, (name, level, coverage)
            assert math.isfinite(width) and width > 0
        assert row["width_95"] > row["width_80"]
        pinballs = [v for k, v in row.items() if k.startswith("pinball_")]
        assert len(pinballs) == 13 and all(math.isfinite(v) and v >= 0 for v in pinballs)
        assert row["crps"] == pytest.approx(2 * sum(pinballs) / len(pinballs))
    for split in ("val", "test_curve"):  # points only where nothing was held out to calibrate
        assert all(set(row) == _points(name) for name, row in metrics[split].items())
    assert "conformal intervals on the test windows" in proc.stdout + proc.stderr
    # the kept model's offsets, for predict and the final forecast figure
    bands = json.loads((run_dir / "bands.json").read_text())
    assert bands["levels"] == [0.8, 0.95] and bands["calibration_windows"] == 200
    for level in ("80", "95"):
        lower, upper = (torch.tensor(bands["bounds"][level][k]) for k in ("lower", "upper"))
        assert lower.shape == (6, 1) and (lower < upper).all()  # [out_len, targets]
    assert (torch.tensor(bands["bounds"]["95"]["upper"]) >= torch.tensor(
        bands["bounds"]["80"]["upper"])).all()
    assert (run_dir / "figures" / "final" / "forecast.png").stat().st_size > 1000


@pytest.mark.slow
def test_intervals_none_reports_points_only(tmp_path, cwd):
    run_dir = tmp_path / "run"
    run_cli([*TINY, "intervals=none", f"hydra.run.dir={run_dir}"], cwd)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert all(set(row) == _points(name) for name, row in metrics["test"].items())


def _points(forecaster: str) -> set[str]:
    """A point forecaster's scores: the model's also its training loss (its squared error in
    model units)."""
    return POINT | {"loss"} if forecaster == "model" else POINT


@pytest.mark.parametrize("override, message", [
    ("intervals.levels=[0.5]", "intervals.levels: interval level 0.5 needs the quantiles 0.25 "
                               "and 0.75"),
    ("intervals.quantiles=[0.1,0.5,0.5,0.9]", "intervals.quantiles: 0.5 is given twice"),
    ("intervals.quantiles=[0,0.5]", "intervals.quantiles: 0.0 is outside (0, 1)"),
    ("intervals.method=bootstrap", "intervals.method='bootstrap' is not allowed"),
])
def test_bad_interval_settings_are_one_line_and_exit_2(tmp_path, cwd, override, message):
    run_dir = tmp_path / "run"
    proc = run_cli([*TINY, override, f"hydra.run.dir={run_dir}"], cwd, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not run_dir.exists() or not (run_dir / "metrics.json").exists()

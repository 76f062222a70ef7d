"""The long-horizon protocol from the command line: the preset on an ETT-shaped file, metrics
in z units read back by evaluate and compare, a wrong border refused, and the benchmark script
in its smoke mode."""

import csv
import json
from pathlib import Path

import pytest

from ..cli_helpers import run_cli, run_script

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

BORDERS = ["data.val_start=400", "data.test_start=530", "data.test_end=660"]
SMALL = ["experiment=longhorizon", "in_len=96", "out_len=24", "d_model=8", "n_heads=2",
         "ffn.d_ff=16", "model.encoder_layers=1", "epochs=2", "trainer.num_threads=1",
         "log.figures=false", *BORDERS]


@pytest.fixture(scope="module")
def sweep(ett_file, tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("lh") / "sweep"
    # Job dirs by number: named by their overrides, they would hold the file's path.
    run_cli(["--multirun", *SMALL, f"data.path={ett_file}", "attention=vanilla,diff",
             "seed=0,1", f"hydra.sweep.dir={sweep_dir}", "hydra.sweep.subdir=${hydra.job.num}"],
            sweep_dir.parent)
    return sweep_dir


def test_the_preset_reports_z_units_that_evaluate_and_compare_read_back(sweep, tmp_path):
    runs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").exists())
    assert len(runs) == 4
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    test = metrics["test"]
    # Three channels, each its own series: every window forecasting rows [530, 660).
    assert metrics["splits"]["test"]["windows"] == 3 * (660 - 530 - 24 + 1)
    assert "z-scores" in metrics["splits"]["test"]["scaled_units"]
    for name in ("model", "nlinear", "last_value"):
        assert 0 < test[name]["mse_scaled"] < 10 and test[name]["mae_scaled"] > 0
    # The preset starts from NLinear exactly (its path, fixed): epoch 0 scores NLinear's error.
    log = (runs[0] / "train.log").read_text()
    assert "epoch 0 (before training)" in log and "val_mse_scaled" in log
    if metrics["run"]["best_epoch"] == 0:
        assert test["model"]["mse_scaled"] == pytest.approx(test["nlinear"]["mse_scaled"])
    # evaluate rescores the same numbers.
    run_cli([f"run_dir={runs[0]}"], tmp_path, module="seqforecast.evaluate")
    again = json.loads((runs[0] / "evaluate" / "best" / "metrics.json").read_text())
    assert again["test"]["model"]["mse_scaled"] == pytest.approx(test["model"]["mse_scaled"])
    # compare: the scaled MSE over seeds, paired against the reference group.
    out = tmp_path / "compare"
    proc = run_cli([str(sweep), f"out={out}"], tmp_path, module="seqforecast.compare")
    assert "MSE (scaled)" in proc.stdout and "in z-scores" in proc.stdout
    with open(out / "compare.csv") as f:
        rows = {(r["group"], r["metric"]): r for r in csv.DictReader(f)}
    diff_runs = [p for p in runs if "attention=diff" in (p / ".hydra/overrides.yaml").read_text()]
    assert len(diff_runs) == 2
    values = [json.loads((p / "metrics.json").read_text())["test"]["model"]["mse_scaled"]
              for p in diff_runs]
    row = rows["attention=diff", "MSE (scaled)"]
    assert float(row["mean"]) == pytest.approx(sum(values) / 2)
    assert row["paired_seeds"] == "2" and row["verdict"]


def test_a_wrong_border_is_one_line_and_exit_2(ett_file, tmp_path):
    proc = run_cli([*SMALL, f"data.path={ett_file}", "data.test_end=500",
                    f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == (
        "error: data.test_end=500 must come after the test split's start (530): the test split "
        "would be empty"
    )


def test_bench_longhorizon_smoke_writes_its_tables(tmp_path):
    out = tmp_path / "longhorizon.json"
    # the test set scored every epoch: what a shorter patience's epoch scores is kept too
    stdout = run_script("bench_longhorizon.py", "--smoke", "--runs-dir", str(tmp_path / "runs"),
                        "--out", str(out), "--set", "log.test_every=1", cwd=tmp_path)
    report = json.loads(out.read_text())
    entry = report["files"]["ETTsmoke"]
    assert entry["borders"] == ["400", "530", "660"] and set(entry["horizons"]) == {"24", "48"}
    for horizon, h in entry["horizons"].items():
        (run,) = h["runs"]
        assert run["status"] == "ok" and run["test_windows"] == 3 * (130 - int(horizon) + 1)
        # The published code's count: whole batches of 32 per channel, the newest dropped.
        per_channel = (130 - int(horizon) + 1) // 32 * 32
        assert run["paper_count"]["windows_per_channel"] == per_channel
        assert h["summary"]["preset"]["vs_nlinear"]["n"] == 1
        # epochs 0 and 1 scored on test; the kept one's is the run's test MSE (data units)
        curve = dict(map(tuple, run["test_curve"]))
        assert sorted(curve) == [0, 1]
        final = json.loads((Path(run["run_dir"]) / "metrics.json").read_text())
        assert curve[run["best_epoch"]] == pytest.approx(final["test"]["model"]["mse"], rel=1e-5)
        # Plain early stopping over 2 epochs keeps the lower validation epoch at any of these
        # patiences; the run keeps its own (a trained epoch must beat the best by 1%), so the
        # ratio is 1 where the two agree and the test curve's ratio where they do not.
        val = dict(map(tuple, run["val_curve"]))
        plain = min(val, key=val.get)
        expected = curve[plain] / curve[run["best_epoch"]]
        assert h["summary"]["preset"]["test_with_patience"] == pytest.approx(
            {"3": expected, "5": expected, "10": expected}, rel=1e-12
        )
    assert "| 24 | seqforecast preset (n=1) |" in stdout
    assert (tmp_path / "longhorizon.md").read_text().startswith("### ETTsmoke")
    # another seed into the same report: merged into it, the first seed's runs kept
    run_script("bench_longhorizon.py", "--smoke", "--seeds", "1", "--runs-dir",
               str(tmp_path / "runs"), "--out", str(out), cwd=tmp_path)
    grown = json.loads(out.read_text())
    for horizon, h in grown["files"]["ETTsmoke"]["horizons"].items():
        assert [r["seed"] for r in h["runs"]] == [0, 1]
        assert h["runs"][0] == {**entry["horizons"][horizon]["runs"][0],
                                "report": {k: report[k] for k in ("command", "machine")}}
        assert h["summary"]["preset"]["n"] == 2
    assert grown["repeats"] == [] and grown["variants"] == ["preset"]
    assert [s["file"] for s in grown["merged_from"]] == [str(out), None]
    assert "| 24 | seqforecast preset (n=2) |" in (tmp_path / "longhorizon.md").read_text()

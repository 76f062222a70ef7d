"""The long-horizon protocol from the command line: the preset on an ETT-shaped file, metrics
in z units read back by evaluate and compare, a wrong border refused, and what the benchmark
script adds to the study (studies/longhorizon.yaml): what a shorter patience keeps, an official
checkpoint scored."""

import csv
import json
from pathlib import Path

import pytest
import torch

from ..cli_helpers import load_script, run_cli, run_script

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


def test_bench_longhorizon_reads_what_a_shorter_patience_keeps(ett_file, tmp_path):
    # the test set scored every epoch: what a shorter patience's epoch scores can be read off
    run_dir = tmp_path / "run"
    run_cli([*SMALL, f"data.path={ett_file}", "epochs=4", "model.linear_path=none",
             "model.linear_init=zero", "trainer.validate_initial=false",
             "trainer.min_improvement=0", "trainer.selection_blocks=0", "trainer.patience=4",
             "log.test_every=1", f"hydra.run.dir={run_dir}"], tmp_path)
    out = tmp_path / "patience.json"
    stdout = run_script("bench_longhorizon.py", "--patience", str(run_dir), "--paper-batch",
                        "32", "--out", str(out), cwd=tmp_path)
    (entry,) = json.loads(out.read_text())["entries"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert entry["patience"] == 4 and entry["best_epoch"] == metrics["run"]["best_epoch"]
    val, test = dict(map(tuple, entry["val_curve"])), dict(map(tuple, entry["test_curve"]))
    assert sorted(val) == sorted(test) == [1, 2, 3, 4]
    # the kept epoch's test MSE (data units) is the run's; plain selection keeps the lowest
    assert test[entry["best_epoch"]] == pytest.approx(metrics["test"]["model"]["mse"], rel=1e-5)
    assert entry["best_epoch"] == min(val, key=val.get)
    for patience, kept in entry["kept"].items():
        # the first epoch no lower one follows within `patience` epochs
        expected = next(e for e in sorted(val) if all(
            val[later] >= val[e] for later in sorted(val) if e < later <= e + int(patience)))
        assert kept["epoch"] == expected
        assert kept["test_ratio"] == pytest.approx(test[expected] / test[entry["best_epoch"]])
    # named by the run dir's last three folders (a study run's model/cell/value-seed)
    name = "/".join(run_dir.parts[-3:])
    assert entry["name"] == name and f"| {name} | 4: {entry['best_epoch']} of 4 (" in stdout
    assert (tmp_path / "patience.md").read_text() == stdout.rstrip("\n") + "\n"
    # the same run read again replaces its entry
    run_script("bench_longhorizon.py", "--patience", str(run_dir), "--paper-batch", "32",
               "--out", str(out), cwd=tmp_path)
    (again,) = json.loads(out.read_text())["entries"]
    assert again["val_curve"] == entry["val_curve"]


@pytest.mark.parametrize("patience, kept", [(3, 1), (4, 5), (10, 5), (1, 1)])
def test_a_shorter_patience_keeps_the_best_epoch_before_it_stops(patience, kept):
    # the error rises for three epochs after epoch 1, then falls below it at epoch 5
    curve = [[1, 0.5], [2, 0.6], [3, 0.7], [4, 0.8], [5, 0.4]]
    assert load_script("bench_longhorizon.py").kept_with_patience(curve, patience) == kept


def test_bench_longhorizon_scores_an_official_checkpoint_beside_the_study(ett_file, tmp_path):
    from ..model.official_reference import official_state_dict

    weights = tmp_path / "checkpoint.pth"
    torch.save(official_state_dict(3, 96, 24, 16, 8, 16, 4, 128, 3), weights)
    out = tmp_path / "official.json"
    # the study's report at this cell: its patchtst vanilla row and NLinear, both counts
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"cells": [
        {"model": "patchtst", "cell": "etth1-24", "linear": {"nlinear": {"mse": 0.61}},
         "linear_paper": {"nlinear": {"mse": 0.52}},
         "rows": [{"value": "vanilla", "seeds": [0, 1], "mse": 0.7, "paper_mse": 0.6}]}]}))
    cell = ["--dataset", "etth1", "--horizon", "24", "--in-len", "96", "--paper-batch", "32",
            "--set", f"data.path={ett_file}", *BORDERS, "--runs-dir", str(tmp_path / "runs"),
            "--out", str(out), "--study", str(tmp_path / "no-study.json")]
    stdout = run_script("bench_longhorizon.py", "--official", str(weights), *cell, cwd=tmp_path)
    (entry,) = json.loads(out.read_text())["entries"]
    metrics = json.loads((Path(entry["run_dir"]) / "metrics.json").read_text())
    assert metrics["run"]["epochs_run"] == 0 and entry["cell"] == "etth1-24"
    assert entry["mse"] == metrics["test"]["model"]["mse_scaled"]
    # PatchTST's windows are of time: 107 test windows, the loader's 3 whole batches of 32
    assert metrics["splits"]["test"]["windows"] == 130 - 24 + 1
    assert entry["windows_per_channel"] == 96 and entry["paper_mse"] != entry["mse"]
    assert f"| etth1-24 | not in the study | {entry['mse']:.4f} / {entry['paper_mse']:.4f} |" \
        in stdout
    # beside the study's row: the ratio in both counts, NLinear in both
    stdout = run_script("bench_longhorizon.py", "--table", "--out", str(out), "--study",
                        str(study), cwd=tmp_path)
    ratio = f"{0.7 / entry['mse']:.3f} / {0.6 / entry['paper_mse']:.3f}"
    assert f"| etth1-24 | 0.7000 / 0.6000 (n=2) | {entry['mse']:.4f} / " \
        f"{entry['paper_mse']:.4f} | {ratio} | 0.6100 / 0.5200 |" in stdout
    # nothing to score: one line, exit 2, the report kept
    proc = run_script("bench_longhorizon.py", "--official", str(tmp_path / "none.pth"), *cell,
                      cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("none.pth: no such file")
    assert len(json.loads(out.read_text())["entries"]) == 1

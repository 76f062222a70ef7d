"""Real series end to end: a preset with patches, a linear path and two seasons through the
CLI, epoch 0 competing for "best", and the real-data benchmark in its smoke mode."""

import json

import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.data import synthetic_data
from seqforecast.training import load_checkpoint, train_model

from ..cli_helpers import REPO, run_cli, run_script

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

SUNSPOTS = REPO / "data" / "real" / "sunspots.csv"


def test_a_preset_trains_with_patches_and_two_seasons_and_evaluate_reproduces_it(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_cli(
        ["experiment=sunspots", f"data.path={SUNSPOTS}", "data.season=[11,22]", "epochs=1",
         "trainer.num_threads=1", "log.attention_every=1", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
    )
    metrics = json.loads((run_dir / "metrics.json").read_text())
    test = metrics["test"]
    assert {"model", "nlinear", "seasonal_naive_11", "seasonal_naive_22"} <= set(test)
    # 309 rows: test rows from 216 + 46 = 262, 47 rows, every window of 11 forecast steps.
    assert metrics["splits"]["test"]["rows"] == [262, 309]
    assert metrics["splits"]["test"]["windows"] == 47 - 11 + 1
    assert "epoch 0 (before training)" in proc.stderr + proc.stdout
    assert (run_dir / "figures" / "final" / "encoder_layer1.png").exists()
    again = run_cli(["run_dir=" + str(run_dir)], cwd=tmp_path, module="seqforecast.evaluate")
    assert again.returncode == 0
    # evaluate writes its own file: the best checkpoint rescored, the run's numbers again
    rescored = json.loads((run_dir / "evaluate" / "best" / "metrics.json").read_text())
    assert rescored["run"]["checkpoint"] == "best"
    assert rescored["test"]["model"] == test["model"]


def test_the_starting_weights_stay_the_result_when_no_epoch_beats_them(tmp_path):
    cfg = compose_config(
        ["experiment=quick", "data.train_size=64", "batch_size=16", "model.linear_path=nlinear"]
    )
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    model = build_model(cfg)
    model.fit_linear_path(data.train.src, data.train.target)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    # A learning rate that can only make things worse.
    trainer = dict(cfg.trainer, epochs=2, patience=0, lr=3.0, grad_clip=0, validate_initial=True)
    result = train_model(model, data, trainer, tmp_path, seed=0, config_yaml="x")
    assert result.best_epoch == 0
    history = load_checkpoint(tmp_path / "last.pt")["loop"]["history"]  # what resume reads
    assert history[0]["epoch"] == 0
    assert all(r["val_mse"] > result.best_val_mse for r in history[1:])
    assert all(torch.equal(v, start[k]) for k, v in model.state_dict().items())


def test_bench_realdata_smoke_checks_window_alignment_and_writes_its_table(tmp_path):
    out = tmp_path / "realdata.json"
    stdout = run_script(
        "bench_realdata.py", "--smoke", "--datasets", "sunspots", "--variants", "preset",
        "default_csv", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), cwd=tmp_path,
    )
    report = json.loads(out.read_text())["sunspots"]
    assert report["alignment_problems"] == []
    assert [r["status"] for r in report["runs"]] == ["ok", "ok"]
    names = {r["forecaster"] for r in report["table"]}
    assert {"seqforecast preset", "seqforecast default_csv", "nlinear", "seasonal_naive"} <= names
    assert "sunspots:" in stdout and "test MSE" in stdout
    # another seed into the same report: merged into it, the first run's kept
    run_script("bench_realdata.py", "--smoke", "--datasets", "sunspots", "--variants", "preset",
               "--seeds", "1", "--runs-dir", str(tmp_path / "runs"), "--out", str(out),
               cwd=tmp_path)
    grown = json.loads(out.read_text())
    assert [(r["variant"], r["seed"]) for r in grown["sunspots"]["runs"]] == [
        ("preset", 0), ("preset", 1), ("default_csv", 0)]
    assert grown["sunspots"]["summary"]["preset"]["n"] == 2 and grown["repeats"] == []
    assert [s["file"] for s in grown["merged_from"]] == [str(out), None]
    assert "| seqforecast preset | " in out.with_suffix(".md").read_text()

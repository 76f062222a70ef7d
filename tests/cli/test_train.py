"""The training CLI end to end (cli_helpers.run_cli), with its files read back."""

import json
import math
import re
from pathlib import Path

import pytest

from seqforecast.training import load_checkpoint

from ..cli_helpers import TINY, run_cli


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow
def test_train_writes_metrics_checkpoints_and_config(tmp_path, cwd):
    run_dir = tmp_path / "run"
    proc = run_cli([*TINY, "data.test_size=500", f"hydra.run.dir={run_dir}"], cwd)
    assert list(cwd.iterdir()) == [], "nothing is written to the current directory"

    metrics = read_metrics(run_dir)
    point = {"mse", "mae", "rmse", "smape"}
    for split in ("test", "test_curve", "val"):
        assert set(metrics[split]) == {"model", "last_value", "drift", "nlinear"}
        for name, row in metrics[split].items():
            # the model's also its training loss (here its squared error); the test rows also
            # hold the conformal interval scores (test_intervals_cli.py)
            scores = point | {"loss"} if name == "model" else point
            assert set(row) == scores if split != "test" else scores < set(row)
            assert all(math.isfinite(row[k]) and row[k] >= 0 for k in point)
        ratios = metrics["model_over_baseline_mse"][split]
        assert set(ratios) == {"last_value", "drift", "nlinear"}
        for name, ratio in ratios.items():
            assert ratio == metrics[split]["model"]["mse"] / metrics[split][name]["mse"]
    # What each split is: the held-out set, the test curve, the selection set.
    splits = metrics["splits"]
    assert splits["test"]["series"] == 500 and splits["test"]["seed"] == 2000003
    assert splits["test_curve"]["series"] == 1 and splits["val"]["series"] == 16
    assert "selection" in splits["val"]["role"] and splits["train"]["seed"] == 0
    assert metrics["run"]["epochs_run"] == 2
    # The closing line names exactly the baselines the held-out test MSE beats.
    beaten = sorted(n for n, r in metrics["model_over_baseline_mse"]["test"].items() if r < 1)
    line = re.search(r"held-out test set: model MSE below (\d) of 3 baselines \((.*)\)",
                     proc.stdout + proc.stderr)
    assert line, proc.stdout
    assert int(line.group(1)) == len(beaten)
    assert sorted(line.group(2).split(", ")) == (beaten or ["none"])

    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    last = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert last["epoch"] == 2 and best["epoch"] == metrics["run"]["best_epoch"]
    assert "attention:" in best["config"]
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    assert "epoch 2/2" in (run_dir / "train.log").read_text()


@pytest.mark.slow
def test_same_seed_gives_identical_metrics(tmp_path, cwd):
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        run_cli([*TINY, f"seed={seed}", "attention=diff", f"hydra.run.dir={tmp_path / name}"], cwd)
        metrics = read_metrics(tmp_path / name)
        runs[name] = {k: metrics[k] for k in ("test", "test_curve", "val")}
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


@pytest.mark.slow
def test_multirun_writes_one_run_dir_per_job_under_outputs(cwd):
    run_cli(["--multirun", *TINY, "attention=vanilla,diff", "block_size=4"], cwd)
    assert [p.name for p in cwd.iterdir()] == ["outputs"]
    sweeps = list((cwd / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 1
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}", "/".join(sweeps[0].parts[-2:]))
    jobs = sorted(p.name for p in sweeps[0].iterdir() if p.is_dir())
    assert len(jobs) == 2  # named <job number>_<its overrides>
    assert jobs[0].startswith("0_attention=vanilla,") and jobs[1].startswith("1_attention=diff,")
    for job in jobs:
        assert read_metrics(sweeps[0] / job)["test"]["model"]["mse"] >= 0


@pytest.mark.slow
def test_single_run_goes_to_outputs_date_time(cwd):
    run_cli([*TINY, "epochs=1"], cwd)
    runs = list((cwd / "outputs").glob("*/*"))
    assert len(runs) == 1
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}", "/".join(runs[0].parts[-2:]))
    assert (runs[0] / "metrics.json").is_file()


def test_help_lists_groups_and_options(cwd):
    out = run_cli(["--help"], cwd).stdout
    assert ("attention: autocorrelation, destationary, diff, einsum, flow, fourier, "
            "learned_mixing, no_mixing, normlin, probsparse, sigmoid, uniform, vanilla, "
            "zero") in out
    assert "pos_encoding: learned, none, relative, rope, sinusoidal" in out
    assert "ffn: geglu, gelu, glu, relu, swiglu" in out
    assert "python -m seqforecast.train --multirun" in out


def test_cfg_job_prints_the_composed_config(cwd):
    out = run_cli(["--cfg", "job", "attention=diff", "block_size=16"], cwd).stdout
    assert "name: diff" in out
    assert "block_size: 16" in out
    assert list(cwd.iterdir()) == []


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_an_absent_device_is_one_line(tmp_path, cwd):
    proc = run_cli([*TINY, "device=cuda", f"hydra.run.dir={tmp_path / 'run'}"], cwd, check=False)
    assert proc.returncode == 2
    assert "error: trainer.device='cuda': CUDA is not available here" in proc.stderr
    assert "Traceback" not in proc.stderr

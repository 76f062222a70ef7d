"""python -m seqforecast.compare end to end: a real sweep, its files read back, bad input."""

import csv
import json
import math
import re
import shutil

import pytest

from seqforecast.compare import main as compare_main

from ..cli_helpers import run_cli
from ..data.helpers import write_price_file

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

# 48 validation windows: enough to calibrate conformal intervals up to the 0.975 quantile
TINY = ["experiment=quick", "data.train_size=64", "data.val_size=48", "data.test_size=256",
        "log.figures=false"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    sweep_dir = base / "sweep"
    run_cli(["--multirun", *TINY, "attention=vanilla,diff", "seed=0,1,2",
             f"hydra.sweep.dir={sweep_dir}"], base)
    return sweep_dir


def compare(args, cwd, check=True):
    return run_cli(args, cwd, module="seqforecast.compare", check=check)


def job_metrics(sweep_dir, attention):
    """{seed: metrics.json} of the sweep's jobs for one attention backend."""
    found = {}
    for path in sweep_dir.glob(f"*_attention={attention},*"):
        seed = int(path.name.split("seed=")[1])
        found[seed] = json.loads((path / "metrics.json").read_text())
    return found


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_groups_over_seeds_with_a_paired_ratio_against_the_reference(sweep, tmp_path):
    out = tmp_path / "out"
    proc = compare([str(sweep), f"out={out}"], tmp_path)
    assert "## Summary" in proc.stdout and "### test MSE" in proc.stdout
    for name in ("compare.md", "compare.csv", "compare_runs.csv", "compare.png"):
        assert (out / name).stat().st_size > 100
    rows = {(r["group"], r["metric"]): r for r in read_csv(out / "compare.csv")}
    assert {g for g, _ in rows} == {"attention=vanilla", "attention=diff"}
    metrics = {"attention=vanilla": job_metrics(sweep, "vanilla"),
               "attention=diff": job_metrics(sweep, "diff")}
    for group, runs in metrics.items():
        mses = [m["test"]["model"]["mse"] for m in runs.values()]
        mean = sum(mses) / 3
        std = math.sqrt(sum((v - mean) ** 2 for v in mses) / 2)
        row = rows[group, "MSE"]
        assert int(row["n"]) == 3
        assert float(row["mean"]) == pytest.approx(mean, rel=1e-9)
        assert float(row["std"]) == pytest.approx(std, rel=1e-9)
        ratios = [m["model_over_baseline_mse"]["test"]["nlinear"] for m in runs.values()]
        assert float(rows[group, "MSE ÷ nlinear"]["mean"]) == pytest.approx(sum(ratios) / 3)
    # The paired ratio: geometric mean over seeds of diff's MSE over vanilla's on that seed.
    diff, vanilla = metrics["attention=diff"], metrics["attention=vanilla"]
    per_seed = [diff[s]["test"]["model"]["mse"] / vanilla[s]["test"]["model"]["mse"] for s in diff]
    paired = rows["attention=diff", "MSE"]
    assert float(paired["paired_ratio"]) == pytest.approx(math.prod(per_seed) ** (1 / 3))
    low, high = float(paired["ci_low"]), float(paired["ci_high"])
    assert low < float(paired["paired_ratio"]) < high and int(paired["paired_seeds"]) == 3
    expected = "within noise" if low <= 1 <= high else ("lower" if high < 1 else "higher")
    assert paired["verdict"].startswith(expected)
    assert rows["attention=vanilla", "MSE"]["verdict"] == "reference"
    # The conformal intervals' scores, CRPS compared seed by seed like MSE.
    crps = [diff[s]["test"]["model"]["crps"] / vanilla[s]["test"]["model"]["crps"] for s in diff]
    assert float(rows["attention=diff", "CRPS"]["paired_ratio"]) == pytest.approx(
        math.prod(crps) ** (1 / 3))
    coverage = [m["test"]["model"]["coverage_80"] for m in vanilla.values()]
    assert float(rows["attention=vanilla", "coverage 80%"]["mean"]) == pytest.approx(
        sum(coverage) / 3)
    markdown = (out / "compare.md").read_text()
    assert "python -m seqforecast.compare" in markdown and "held out" in markdown
    assert "| `attention=diff` | 3 |" in markdown
    # The default output dir is the folder holding the runs: the sweep dir.
    compare([str(sweep)], tmp_path)
    assert (sweep / "compare.md").read_text().split("\n", 3)[3] == markdown.split("\n", 3)[3]


def test_a_chosen_reference_and_globs(sweep, tmp_path):
    proc = compare([str(sweep), "reference=diff", f"out={tmp_path}"], tmp_path)
    assert "reference `attention=diff`" in proc.stdout
    rows = {(r["group"], r["metric"]): r for r in read_csv(tmp_path / "compare.csv")}
    assert rows["attention=vanilla", "MSE"]["paired_ratio"] != ""
    assert rows["attention=diff", "MSE"]["verdict"] == "reference"
    # Two single runs picked by globs: groups of one, no interval.
    compare([str(sweep / "0_*"), str(sweep / "3_*"), f"out={tmp_path / 'g'}"], tmp_path)
    rows = read_csv(tmp_path / "g" / "compare.csv")
    assert {r["n"] for r in rows} == {"1"}
    assert any(r["verdict"].startswith("no interval") for r in rows)


def test_failed_and_incomplete_runs_are_listed_not_averaged(sweep, tmp_path):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    jobs = sorted(p for p in copy.iterdir() if p.is_dir())
    failed = copy / "6_attention=diff,seed=3"
    shutil.copytree(jobs[3], failed)
    (failed / "status.json").write_text(json.dumps({"status": "failed", "reason": "boom"}))
    killed = copy / "7_attention=diff,seed=4"
    shutil.copytree(jobs[3], killed)
    (killed / "status.json").unlink()
    proc = compare([str(copy)], tmp_path)
    assert "## Not counted" in proc.stdout
    assert f"`{failed}`: failed: boom" in proc.stdout
    assert f"`{killed}`: incomplete: no status.json" in proc.stdout
    rows = {(r["group"], r["metric"]): r for r in read_csv(copy / "compare.csv")}
    assert rows["attention=diff", "MSE"]["n"] == "3"
    listed = {r["run_dir"]: r["status"] for r in read_csv(copy / "compare_runs.csv")}
    assert listed[str(failed)] == "failed: boom"


def test_bad_input_is_one_line_and_exit_2(sweep, tmp_path, capsys):
    """Through compare's own entry point (main, as run_cli runs it): each bad input prints one
    line on stderr and returns 2."""
    empty = tmp_path / "empty"
    empty.mkdir()
    other_horizon = tmp_path / "h"
    run_cli([*TINY, "out_len=4", f"hydra.run.dir={other_horizon}"], tmp_path)
    other_test_set = tmp_path / "t"
    run_cli([*TINY, "data.test_size=128", f"hydra.run.dir={other_test_set}"], tmp_path)
    other_data = tmp_path / "d"
    shutil.copytree(next(sweep.glob("0_*")), other_data)
    config = other_data / ".hydra" / "config.yaml"
    config.write_text(re.sub(r"config_version: \d+\n", "",  # as a run before versions
                             config.read_text().replace("name: sigmoid\n", "name: sigmoid_seed\n")))
    cases = [
        ([str(empty)], f"error: no run dirs under {empty}"),
        ([str(tmp_path / "nope")], "nope: no such file or directory"),
        ([str(sweep), str(other_horizon)],
         "error: mixed horizons: data.out_len=6 (6 runs), data.out_len=4 (1 runs)"),
        ([str(sweep), str(other_data)], "error: mixed datasets: data.name=sigmoid (6 runs), "
                                        "data.name=sigmoid_pair (1 runs)"),  # read as renamed
        ([str(sweep), str(other_test_set)],
         "error: the runs were scored on different test windows (they differ in data.test_size)"),
        ([str(sweep), "reference=einsum"], "error: reference='einsum' matches no group; the "
                                           "groups are: attention=vanilla; attention=diff"),
        ([str(sweep), "split=train"], "split='train' is not allowed"),
        ([], "give at least one run or sweep dir"),
    ]
    for args, message in cases:
        code = compare_main([*args, f"out={tmp_path / 'out'}"])
        stderr = capsys.readouterr().err
        assert code == 2, (args, stderr)
        assert message in stderr and stderr.count("\n") == 1, stderr
    assert not (tmp_path / "out").exists()


def test_runs_with_and_without_exogenous_columns_compare_on_their_shared_windows(tmp_path):
    """A user's price file, trained with and without its load column: the same test windows
    (the target's scaler fits 1e-15 apart beside the load, which compare once took for other
    windows); a run on other test windows is still refused."""
    path = write_price_file(tmp_path / "prices.csv")
    small = ["data=csv", f"data.path={path}", "data.target=price", "data.time_column=time",
             "in_len=24", "out_len=12", "model.label_len=12", "epochs=1", "d_model=16",
             "n_heads=2", "model.encoder_layers=1", "model.decoder_layers=1",
             "data.window_stride=4", "log.figures=false"]
    runs = tmp_path / "runs"
    for name, extra in (("alone", []), ("load", ["data.features=[load]"]),
                        ("other", ["data.split=[0.6,0.2,0.2]"])):
        run_cli([*small, *extra, f"hydra.run.dir={runs / name}"], tmp_path)
    proc = compare([str(runs / "alone"), str(runs / "load"), f"out={tmp_path / 'out'}"],
                   tmp_path)
    rows = {r["group"] for r in read_csv(tmp_path / "out" / "compare.csv")}
    assert rows == {"all runs", "data.features=[load]"}
    assert "2 runs counted in 2 group(s)" in proc.stdout
    refused = compare([str(runs / "alone"), str(runs / "other"), f"out={tmp_path / 'o2'}"],
                      tmp_path, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("error: the runs were scored on different test windows "
                                      "(they differ in data.split); compare runs scored on the "
                                      "same test set")

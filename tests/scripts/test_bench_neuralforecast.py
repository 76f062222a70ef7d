"""scripts/bench_neuralforecast.py: ours trained through the Forecaster on the benchmark's
frame, scored on every test window, neuralforecast's side beside it where the peers extra is
installed (its rows say so where not), each case kept in the report as it ends and not run
again, reports joined by --merge."""

import importlib.util
import json
import math

import numpy as np
import pytest

from ..cli_helpers import load_script, run_script

pytestmark = pytest.mark.slow  # trains in subprocesses: make test-fast skips it
HAS_NF = importlib.util.find_spec("neuralforecast") is not None


def test_the_smoke_cell_runs_both_sides_on_the_same_windows_and_a_rerun_trains_nothing(
        tmp_path):
    out = tmp_path / "nf.json"
    args = ["--smoke", "--in-process", "--models", "itransformer", "--seeds", "0",
            "--runs", str(tmp_path / "runs"), "--out", str(out)]
    table = run_script("bench_neuralforecast.py", *args, cwd=tmp_path)
    report = json.loads(out.read_text())
    cases = {(c["side"], c["seed"]): c for c in report["cases"]}
    assert set(cases) == {(side, seed) for side in ("seqforecast", "neuralforecast")
                          for seed in (0,)}
    # the smoke file's test rows 400-500, out_len 12: every origin, 89 windows
    for seed in (0,):
        ours = cases["seqforecast", seed]
        assert ours["status"] == "ok" and ours["test_windows"] == 89
        run = json.loads((tmp_path / "runs" / "smoke" / "itransformer" /
                          f"seqforecast-seed{seed}" / "metrics.json").read_text())
        assert ours["mse"] == run["test"]["model"]["mse_scaled"]  # the run's own score
        assert ours["peak_mib"] == run["run"]["peak_rss_mib"] > 0
        theirs = cases["neuralforecast", seed]
        if HAS_NF:
            assert theirs["status"] == "ok" and theirs["test_windows"] == 89
            assert math.isfinite(theirs["mse"]) and theirs["steps_run"] > 0
        else:
            assert theirs["status"] == "not run: neuralforecast is not installed (make peers)"
    (row,) = report["summary"]
    assert row["seqforecast"]["n"] == 1 and row["mse_ratio"]["n"] == (1 if HAS_NF else 0)
    page = out.with_suffix(".md").read_text()
    assert "| smoke | itransformer | seqforecast | 1 |" in page
    assert table.endswith(page[page.index("| cell |"):] + "\n")  # the page's tables printed

    before = out.read_text()
    run_script("bench_neuralforecast.py", *args, cwd=tmp_path)
    again = json.loads(out.read_text())
    assert again["cases"] == json.loads(before)["cases"]  # every case was there: none ran
    joined = tmp_path / "joined.json"  # --merge: another report's cases, nothing run
    run_script("bench_neuralforecast.py", "--merge", str(out), "--out", str(joined), cwd=tmp_path)
    assert json.loads(joined.read_text())["cases"] == again["cases"]


def _case(seed, side, mse):
    return {"cell": "c", "model": "m", "side": side, "seed": seed, "status": "ok",
            "mse": mse, "mae": mse, "train_seconds": 1.0, "seconds_per_epoch": 1.0,
            "epochs_run": 1, "peak_mib": 1.0, "test_windows": 5, "threads": 1}


def test_a_rerun_replaces_its_case_and_keeps_the_earlier_measurement(tmp_path):
    bench = load_script("bench_neuralforecast.py")
    out, stamp = tmp_path / "r.json", {"command": "python x", "machine": {"cpu": "a"}}
    first = bench.merged(out, stamp, [_case(s, side, 1.0 + s) for s in (0, 1, 2)
                                      for side in ("seqforecast", "neuralforecast")])
    out.write_text(json.dumps(first))
    later = {"command": "python y", "machine": {"cpu": "b"}}
    second = bench.merged(out, later, [_case(0, "neuralforecast", 0.5)])
    kept = {(c["side"], c["seed"]): c for c in second["cases"]}
    assert kept["neuralforecast", 0]["mse"] == 0.5
    assert kept["neuralforecast", 0]["report"]["command"] == "python y"
    assert [r["mse"] for r in second["repeats"]] == [1.0]
    assert second["merged_from"] == [stamp, later] or second["merged_from"] == [later, stamp]
    (row,) = second["summary"]
    ratio = row["mse_ratio"]  # neuralforecast / ours: 0.5, 1, 1 on seeds 0, 1, 2
    assert ratio["n"] == 3 and ratio["ratio"] == pytest.approx(0.5 ** (1 / 3))
    out.write_text(json.dumps(second))  # a run without the peers: its row leaves theirs
    not_run = {**_case(1, "neuralforecast", 0.0), "status": "not run: neuralforecast is not "
               "installed (make peers)"}
    third = bench.merged(out, later, [not_run])
    assert third["cases"] == second["cases"] and third["repeats"] == second["repeats"]


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="needs pandas")
def test_a_peers_windows_are_checked_against_the_cells():
    import pandas as pd

    bench = load_script("bench_neuralforecast.py")
    cell = {"out_len": 2, "borders": (4, 6, 10)}
    scaled = pd.DataFrame({"a": np.arange(10.0)})
    origins = np.arange(6, 9)  # every origin whose forecast lies in rows 6-9
    rows = [{"unique_id": "a", "cutoff": o - 1, "ds": o + k, "y": float(o + k), "M": 0.0}
            for o in origins for k in range(2)]
    forecast, truth = bench.by_window(pd.DataFrame(rows), "M", cell, scaled, ["a"])
    assert forecast.shape == truth.shape == (1, 3, 2)
    assert truth[0, :, 0].tolist() == [6.0, 7.0, 8.0]
    with pytest.raises(RuntimeError, match="2 forecast origins, the cell has 3"):
        bench.by_window(pd.DataFrame(rows[2:]), "M", cell, scaled, ["a"])
    shifted = [{**r, "y": r["y"] + 1} for r in rows]
    with pytest.raises(RuntimeError, match="truth differs"):
        bench.by_window(pd.DataFrame(shifted), "M", cell, scaled, ["a"])

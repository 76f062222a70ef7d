"""A study's protocol as dimensions (studies/grid.py: datasets x horizons, a searched lookback)
and its verdict across cells (studies/verdict.py: fev-bench's win rate and skill score with
paired bootstrap intervals), read back from reports of known numbers."""

import json
import math

import pytest

from seqforecast.studies.grid import StudyError, load_study
from seqforecast.studies.report import build_report, markdown
from seqforecast.studies.verdict import compare, skill_score, win_rate

PROTOCOL = """
title: protocol
sweep: {group: attention}
seeds: [0, 1, 2]
lookback: {fixed: 96, search: [96, 192, 336], cells: [etth1-96]}
models:
  itransformer:
    overrides: [experiment=itransformer]
    published: itransformer
    axis: variates
    values: [vanilla, uniform]
    datasets: [etth1, ettm1]
    horizons: published
  patchtst:
    overrides: [experiment=patchtst, model.res_attention=false]
    values: [vanilla, no_mixing]
    datasets: [etth2]
    horizons: [96, 336]
"""


def _grid(tmp_path, text=PROTOCOL, name="grid"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_study(str(path))


def test_datasets_times_horizons_make_a_cell_each_at_the_fixed_lookback(tmp_path):
    grid = _grid(tmp_path)
    fixed = [c.label for c in grid.fixed_cells()]
    assert fixed == [f"itransformer/{d}-{h}" for d in ("etth1", "ettm1")
                     for h in (96, 192, 336, 720)] + ["patchtst/etth2-96", "patchtst/etth2-336"]
    cell = next(c for c in grid.cells if c.label == "patchtst/etth2-336")
    assert cell.overrides == ("experiment=patchtst", "model.res_attention=false",
                              "dataset=etth2", "out_len=336", "in_len=96")
    published = next(c for c in grid.cells if c.label == "itransformer/ettm1-720")
    assert "out_len=720" in published.overrides and published.overrides[-1] == "in_len=96"
    assert grid.axis("itransformer") == "variates" and grid.axis("patchtst") == "time"


def test_a_searched_lookback_adds_a_cell_per_other_candidate(tmp_path):
    grid = _grid(tmp_path)
    base = next(c for c in grid.cells if c.label == "itransformer/etth1-96")
    found = grid.candidates(base)
    assert [(c.name, c.lookback) for c in found] == [
        ("etth1-96", 96), ("etth1-96-L192", 192), ("etth1-96-L336", 336)]
    assert found[2].overrides[-1] == "in_len=336" and found[2].searches == "etth1-96"
    # a cell that does not search has no candidates; naming a cell takes its candidates along
    assert grid.candidates(next(c for c in grid.cells if c.name == "etth1-192")) == [
        next(c for c in grid.cells if c.label == "itransformer/etth1-192")]
    assert [c.name for c in grid.select(None, ["etth1-96"])] == [c.name for c in found]


@pytest.mark.parametrize("change, words", [
    (("fixed: 96, search: [96", "fixed: 48, search: [96"),
     "lookback.search=[96, 192, 336] must hold lookback.fixed=48"),
    (("cells: [etth1-96]", "cells: [etth1-48]"), "lookback.cells names etth1-48"),
    (("search: [96, 192, 336]", "search: [96, -1]"), "lookback.search=[96, -1] is not allowed"),
    (("horizons: [96, 336]", "horizons: 96"), "models.patchtst.horizons=96 is not allowed"),
    (("axis: variates", "axis: channels"), "models.itransformer.axis='channels' is not allowed"),
    (("    datasets: [etth2]\n", ""), "models.patchtst: give datasets and horizons together"),
])
def test_a_bad_protocol_is_one_line(tmp_path, change, words):
    with pytest.raises(StudyError, match=words.replace("[", r"\[").replace("]", r"\]")) as err:
        _grid(tmp_path, PROTOCOL.replace(*change))
    assert "\n" not in str(err.value)


def test_win_rate_and_skill_score_as_fev_bench_defines_them():
    assert win_rate([0.9, 1.1, 1.0, 0.8]) == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert skill_score([0.5, 2.0]) == pytest.approx(0.0)
    assert skill_score([0.81, 1.0]) == pytest.approx(1 - 0.9)
    assert skill_score([1e-5, 1.0]) == pytest.approx(1 - math.sqrt(0.01))  # clipped at 0.01
    worse = {f"c{i}": [1.1 + 0.01 * i, 1.12, 1.08] for i in range(6)}
    result = compare(worse)
    assert result["win_rate"] == 0 and result["skill"] < 0
    assert result["skill_ci"][0] <= result["skill"] <= result["skill_ci"][1] < 0
    assert result["sign_test"]["above"] == 18 and result["sign_test"]["below"] == 0
    assert compare(worse) == result  # a fixed seed: the same report every time
    mixed = compare({"a": [0.9, 0.95], "b": [1.1, 1.05], "c": [0.97, 1.04]})
    assert mixed["skill_ci"][0] < 0 < mixed["skill_ci"][1]


KEPT = {"best_epoch": 1, "epochs_run": 1, "train_seconds": 1.0, "peak_rss_mib": None,
        "rss_at_start_mib": None}


def _cell(model, cell, overrides, runs):
    """A report's cell holding runs {value: [(test mse, val mse) per seed]}."""
    rows = [{"value": value,
             "runs": {str(seed): {"mse": t, "mae": t, "val_mse": v, "run_dir": f"{cell}/{value}-"
                                  f"{seed}", **KEPT} for seed, (t, v) in enumerate(pairs)}}
            for value, pairs in runs.items()]
    return {"model": model, "cell": cell, "overrides": list(overrides), "rows": rows,
            "test_windows": 100, "test_fingerprint": "f", "extra_overrides": []}


SMALL = """
title: small
sweep: {group: attention}
seeds: [0, 1, 2]
lookback: {fixed: 4, search: [4, 8], cells: [h2]}
models:
  tiny:
    overrides: [out_len=2]
    axis: time
    values: [vanilla, uniform]
    cells:
      h2: [out_len=2]
      h3: [out_len=3]
      h5: [out_len=5]
"""


def test_the_report_picks_each_runs_lookback_on_validation_and_gives_the_verdict(tmp_path):
    grid = _grid(tmp_path, SMALL, "small")
    cells = {c.name: c for c in grid.cells}
    # uniform worse than vanilla in every fixed cell; at h2 the 8-step lookback validates better
    # for vanilla on seeds 0 and 1, for uniform on seed 2 only
    def scored(*test):  # test MSEs of a cell without a search: every validation MSE 1
        return [(t, 1.0) for t in test]

    runs = {
        "h2": {"vanilla": [(1.0, 0.5), (1.1, 0.5), (1.2, 0.4)],
               "uniform": [(1.5, 0.6), (1.6, 0.6), (1.7, 0.9)]},
        "h2-L8": {"vanilla": [(0.8, 0.4), (0.9, 0.45), (1.3, 0.5)],
                  "uniform": [(1.4, 0.7), (1.5, 0.7), (1.1, 0.8)]},
        "h3": {"vanilla": scored(2.0, 2.1, 2.2), "uniform": scored(2.4, 2.6, 2.5)},
        "h5": {"vanilla": scored(3.0, 3.1, 3.2), "uniform": scored(3.3, 3.9, 3.6)},
    }
    entries = [_cell("tiny", name, cells[name].overrides, values)
               for name, values in runs.items()]
    (tmp_path / "earlier.json").write_text(json.dumps(
        {"group": "attention", "failed": [], "cells": entries}))
    report = build_report(grid, tmp_path / "none", [tmp_path / "earlier.json"], "made here")
    searched = report["searched"]
    assert [e["cell"] for e in searched] == ["h2"] and searched[0]["candidates"] == [4, 8]
    assert searched[0]["lookbacks"] == {"vanilla": {0: 8, 1: 8, 2: 4},
                                        "uniform": {0: 4, 1: 4, 2: 8}}
    rows = {r["value"]: r for r in searched[0]["rows"]}
    assert rows["vanilla"]["runs"][0]["mse"] == 0.8 and rows["vanilla"]["runs"][2]["mse"] == 1.2
    assert rows["uniform"]["runs"][2]["mse"] == 1.1
    # the verdict over the fixed track's three cells (the candidate cell h2-L8 is not one)
    (verdict,) = report["verdicts"]
    assert (verdict["model"], verdict["axis"], verdict["value"], verdict["cells"]) == (
        "tiny", "time", "uniform", 3)
    assert verdict["win_rate"] == 0 and verdict["skill"] < 0
    assert verdict["verdict"] == "vanilla better", verdict
    assert verdict["sign_test"]["above"] == 9
    page = markdown(report)
    assert "| tiny | time | uniform | 3 | 0.00 [0.00, 0.00] |" in page, page
    assert "## Searched lookback" in page and "| tiny | h2 | 4, 8 | vanilla | 3 |" in page
    assert "| 8, 8, 4 |" in page

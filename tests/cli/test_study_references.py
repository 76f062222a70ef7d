"""A study with reference rows (seqforecast/studies/references.py), end to end: a tiny
leaderboard on a small CSV, each row beside the cell's least-squares linear fits (checked
against numpy's own least squares), its MSE on the windows a published loader of a batch
scores (checked against the run's forecasts), the published rows of a table, and the report
rebuilt from itself alone keeping all of it."""

import json
import math

import numpy as np
import pytest
import torch

from seqforecast.published.results import TABLES, published_table
from seqforecast.runs.loading import load_run
from seqforecast.studies.grid import StudyError, load_study
from seqforecast.studies.references import SCORES_FILE
from seqforecast.training.metrics import evaluation

from ..cli_helpers import run_cli, sweeps_in_process, write_ett_file

BATCH = 16
GRID = """
title: A tiny leaderboard
sweep: {{group: experiment}}
seeds: [0, 1]
references: {{linear: true, paper_batch: {{itransformer: {batch}}}}}
models:
  itransformer:
    overrides: [data.path={path}, data.val_start=400, data.test_start=530, data.test_end=660,
                epochs=1, d_model=16, ffn.d_ff=16, n_heads=2, model.encoder_layers=1,
                in_len=48, log.figures=false]
    values: [itransformer]
    cells:
      h24: [out_len=24]
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    base = tmp_path_factory.mktemp("leaderboard")
    path = write_ett_file(base / "ETTsmoke.csv")
    (base / "tiny.yaml").write_text(GRID.format(batch=BATCH, path=path))
    with sweeps_in_process():  # the study's own process is tests/cli/test_study.py's to test
        run_cli(["tiny.yaml", "trainer.num_threads=1"], base, module="seqforecast.study",
                children=True)
    return base


@pytest.mark.slow
def test_each_row_is_scored_beside_the_cells_linear_fits_and_its_papers_windows(ran):
    out = ran / "outputs" / "study" / "tiny"
    (cell,) = json.loads((out / "study.json").read_text())["cells"]
    run_dir = out / "itransformer" / "h24" / "itransformer-seed0"
    # NLinear: the run's own baseline
    nlinear = json.loads((run_dir / "metrics.json").read_text())["test"]["nlinear"]
    assert cell["linear"]["nlinear"]["mse"] == nlinear["mse_scaled"]
    # DLinear's class: every linear map of a channel's window, as numpy's least squares fits it
    data = load_run(run_dir, "best", "cpu").data
    steps = data.train.src.shape[1]
    x = data.train.src[..., :data.n_targets].transpose(1, 2).reshape(-1, steps).double()
    y = data.train.target.transpose(1, 2).reshape(-1, data.train.target.shape[1]).double()
    design = np.hstack([x.numpy(), np.ones((len(x), 1))])
    coef = np.linalg.lstsq(design, y.numpy(), rcond=None)[0]
    src = data.test.src[..., :data.n_targets].transpose(1, 2).double().numpy()
    forecast = src @ coef[:-1] + coef[-1]  # [N, channels, out_len]
    error = forecast - data.test.target.transpose(1, 2).double().numpy()
    assert cell["linear"]["dlinear"]["mse"] == pytest.approx(float((error ** 2).mean()),
                                                             rel=1e-5)
    assert "linear_all_inputs" not in cell["linear"]  # no exogenous series in this file
    best = min(cell["linear"], key=lambda n: cell["linear"][n]["mse"])
    assert cell["best_linear"] == best
    (row,) = cell["rows"]
    ratios = [r["mse"] / cell["linear"][best]["mse"] for r in row["runs"].values()]
    geometric = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert row["vs_linear"]["ratio"] == pytest.approx(geometric) and row["vs_linear"]["n"] == 2
    # the windows a test loader of BATCH scores: the first whole batches, the newest dropped
    run = load_run(run_dir, "best", "cpu")
    kept = len(run.data.test) // BATCH * BATCH
    assert 0 < kept < len(run.data.test)
    src, target = run.data.test.take(slice(0, kept))
    with evaluation(run.model), torch.no_grad():
        paper = float((run.model(src) - target).double().square().mean())
    assert row["runs"]["0"]["paper_mse"] == pytest.approx(paper, rel=1e-6)
    assert row["runs"]["0"]["paper_mse"] != row["runs"]["0"]["mse"]
    # the linear fits on those windows too: DLinear's above, and NLinear (the window less its
    # last value through one least-squares map, the last value added back) fitted here alike
    assert cell["linear_paper"]["dlinear"]["mse"] == pytest.approx(
        float((error[:kept] ** 2).mean()), rel=1e-5)
    last = x[:, -1:].numpy()
    design = np.hstack([x.numpy() - last, np.ones((len(x), 1))])
    coef = np.linalg.lstsq(design, y.numpy() - last, rcond=None)[0]
    windows = data.test.src[..., :data.n_targets].transpose(1, 2).double().numpy()
    ends = windows[..., -1:]
    nl_error = (windows - ends) @ coef[:-1] + coef[-1] + ends - \
        data.test.target.transpose(1, 2).double().numpy()
    assert cell["linear"]["nlinear"]["mse"] == pytest.approx(float((nl_error ** 2).mean()),
                                                             rel=1e-4)
    assert cell["linear_paper"]["nlinear"]["mse"] == pytest.approx(
        float((nl_error[:kept] ** 2).mean()), rel=1e-4)
    assert (run_dir / SCORES_FILE).is_file()  # read from the run once, kept beside it
    page = (out / "study.md").read_text()
    assert "## Beside the reference rows" in page
    assert f"| h24 | {best} (least squares) (best linear) |" in page


@pytest.mark.slow
def test_the_report_rebuilt_from_itself_keeps_its_reference_rows(ran, tmp_path):
    out = ran / "outputs" / "study" / "tiny"
    first = json.loads((out / "study.json").read_text())
    copy = tmp_path / "kept.json"
    copy.write_text((out / "study.json").read_text())
    run_cli(["tiny.yaml", "report", f"from={copy}", f"dir={tmp_path / 'again'}"], ran,
            module="seqforecast.study")
    again = json.loads((tmp_path / "again" / "study.json").read_text())
    for key in ("linear", "best_linear"):
        assert again["cells"][0][key] == first["cells"][0][key]
    for key in ("vs_linear", "paper_mse", "runs"):
        assert again["cells"][0]["rows"][0][key] == first["cells"][0]["rows"][0][key]


def test_the_leaderboard_studies_name_their_published_tables_and_refuse_unknown_references(
        tmp_path):
    leaderboard = load_study("leaderboard")
    assert leaderboard.references.published == "itransformer_table10"
    assert leaderboard.references.paper_batch == {"patchtst": 128}
    # the protocol's input after each published setting: PatchTST's published 336 set to 96
    cell = leaderboard.select(["patchtst"], ["etth1-96"])[0]
    assert cell.overrides[-1] == "in_len=96" and "dataset=etth1" in cell.overrides
    table = published_table("itransformer_table10")
    assert table.rows["etth1-96"]["itransformer"] == (0.386, 0.405)
    assert published_table("timexer_epf").rows["np-24"]["timexer"][0] == 0.236
    assert set(TABLES) == {"itransformer_table10", "timexer_epf", "patchtst_table3"}
    assert published_table("patchtst_table3").rows["etth2-720"]["dlinear"] == (0.605, 0.551)
    text = (tmp_path / "bad.yaml")
    for references, message in (
            ("{linear: true, baseline: x}", "references.baseline is not known"),
            ("{published: nope}", "no published table 'nope'"),
            ("{paper_batch: {other: 8}}", "references.paper_batch.other=8 is not allowed")):
        text.write_text(GRID.format(batch=8, path="x.csv").replace(
            "references: {linear: true, paper_batch: {itransformer: 8}}",
            f"references: {references}"))
        with pytest.raises(StudyError, match=message):
            load_study(str(text))


@pytest.mark.slow
def test_a_report_made_before_the_reference_rows_is_read_without_its_run_dirs(ran, tmp_path):
    """An earlier report keeps no fits and no paper count, and names run dirs that may be gone:
    its rows are read back without them (no linear rows, no ratio), not a failure."""
    out = ran / "outputs" / "study" / "tiny"
    report = json.loads((out / "study.json").read_text())
    for cell in report["cells"]:
        cell.pop("linear"), cell.pop("best_linear")
        for row in cell["rows"]:
            for run in row["runs"].values():
                run.pop("paper_mse"), run.pop("paper_mae")
                run["run_dir"] = str(tmp_path / "gone" / run["run_dir"].rsplit("/", 1)[-1])
    older = tmp_path / "older.json"
    older.write_text(json.dumps(report))
    run_cli(["tiny.yaml", "report", f"from={older}", f"dir={tmp_path / 'again'}"], ran,
            module="seqforecast.study")
    (cell,) = json.loads((tmp_path / "again" / "study.json").read_text())["cells"]
    (row,) = cell["rows"]
    assert "linear" not in cell and "vs_linear" not in row and row["paper_mse"] is None
    assert row["mse"] == report["cells"][0]["rows"][0]["mse"]


def test_published_rows_no_study_row_stands_beside_are_shown_on_their_own():
    """A cell's published rows: beside the study row of the model's name, beside the DLinear
    fit, and the rest (PatchTST/64, /42 beside an encoder) each a row of its own; the fits'
    MSE on the paper's windows in that column."""
    from seqforecast.studies.report import _reference_lines

    rows = published_table("patchtst_table3").rows["etth1-96"]
    fits = {"nlinear": {"mse": 0.37, "mae": 0.39}, "dlinear": {"mse": 0.371, "mae": 0.392}}
    # a model scored on every window first: its entry has the fits but not on the paper's count
    every = {"cell": "etth1-96", "model": "other", "linear": fits, "best_linear": "nlinear",
             "rows": [{"value": "x", "seeds": [0], "mse": 0.38, "mse_std": float("nan"),
                       "mae": 0.4, "paper_mse": 0.38}]}
    report = {"references": {"published": "patchtst_table3", "paper_batch": {"encoder": 128}},
              "cells": [every, {"cell": "etth1-96", "model": "encoder", "linear": fits,
                         "best_linear": "nlinear",
                         "linear_paper": {"nlinear": {"mse": 0.366}, "dlinear": {"mse": 0.367}},
                         "published": {k: list(v) for k, v in rows.items()},
                         "rows": [{"value": "preset", "seeds": [0, 1], "mse": 0.37,
                                   "mse_std": 0.0, "mae": 0.39, "paper_mse": 0.366}]}]}
    lines = _reference_lines(report)
    assert "| etth1-96 | nlinear (least squares) (best linear) | 0.3700 | 0.3900 | 0.3660 | " \
           "| |  |" in lines
    assert "| etth1-96 | dlinear (least squares) | 0.3710 | 0.3920 | 0.3670 | | | 0.375 |" in lines
    assert "| etth1-96 | PatchTST/64 (published) | | | | | | 0.370 |" in lines
    assert "| etth1-96 | PatchTST/42 (published) | | | | | | 0.375 |" in lines
    assert not any("dlinear (published)" in line for line in lines)
    assert sum("(least squares)" in line for line in lines) == 2  # the fits once a cell

"""python -m seqforecast.study end to end: a small grid run through Hydra, its report read back
against the runs' own metrics, a rerun that trains nothing, merged partial studies, a refused
job listed, and bad input in one line."""

import contextlib
import json
import math
import shutil
import sys

import pytest
from omegaconf import OmegaConf

from seqforecast.stats import paired_ratio
from seqforecast.studies.grid import STUDIES, StudyError, load_study
from seqforecast.studies.launch import multirun_command, sweeps
from seqforecast.studies.report import build_report, markdown

from ..cli_helpers import TINY, run_cli, sweeps_in_process
from ..model.helpers import composed  # once a process: the grids share cells and references

SHIPPED = sorted(p.stem for p in STUDIES.glob("*.yaml"))  # the grids the package ships
ATTENTION_GRIDS = [n for n in SHIPPED if load_study(n).group == "attention"]


# Two cells, three values (the Poisson loss refused when the run reads the data: the sigmoid
# series are not counts), two seeds.
GRID = f"""
title: A tiny study
sweep: {{group: loss}}
seeds: [0, 1]
models:
  tiny:
    overrides: [{", ".join(TINY)}, epochs=1, model.decoding=autoregressive]
    values: [mse, gaussian, poisson]
    cells:
      h4: [out_len=4]
      h6: [out_len=6]
"""


def study(args, cwd, check=True, sweeps_here=True):
    """The study CLI, in this process; its multiruns too (sweeps_in_process) unless not
    `sweeps_here`: then processes of their own, as a user's, writing to its streams, which the
    tests read (taken at the file descriptors: run_cli's `children`)."""
    with sweeps_in_process() if sweeps_here else contextlib.nullcontext():
        return run_cli(args, cwd, module="seqforecast.study", check=check, children=True)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    base = tmp_path_factory.mktemp("study")
    (base / "tiny.yaml").write_text(GRID)
    # its sweep a process of its own, as a user's: the other studies' sweeps run in this one
    proc = study(["tiny.yaml", "cells=h4", "trainer.num_threads=1"], base, check=False,
                 sweeps_here=False)
    return base, proc


def metrics(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def test_the_shipped_study_loads_and_sweeps_seeds_before_values(tmp_path):
    attention = load_study("attention")
    assert attention.reference("patchtst") == "vanilla" == attention.reference("itransformer")
    # Auto-Correlation and Fourier need a time axis: not in the model whose tokens are variates
    assert {"autocorrelation", "fourier"} <= set(attention.values["patchtst"])
    assert not {"autocorrelation", "fourier"} & set(attention.values["itransformer"])
    cell = attention.select(["patchtst"], ["etth1-96"])[0]
    command = multirun_command(attention, cell, tmp_path, ["hydra/launcher=joblib"])
    seeds = command.index("seed=0,1,2")
    assert command[seeds + 1].startswith("attention=vanilla,probsparse")  # values vary fastest
    assert command[-1] == "hydra/launcher=joblib"  # the user's overrides win
    assert "experiment=patchtst" in command and "dataset=etth1" in command
    with pytest.raises(StudyError, match="choose from patchtst/etth1-96"):
        attention.select(None, ["etth9-96"])


def test_jobs_held_elsewhere_are_left_out_of_the_sweeps_seed_by_seed(tmp_path):
    attention = load_study("attention")
    cell = attention.select(["timexer"], ["etth1-96"])[0]
    values = attention.values["timexer"]
    assert sweeps(attention, cell, set()) == [((0, 1, 2), values)]  # one multirun, as before
    held = {("timexer", "etth1-96", v, 0) for v in values}  # seed 0's whole row
    held |= {("timexer", "etth1-96", v, s) for v in values[:2] for s in (1, 2)}
    held |= {("patchtst", "etth1-96", v, 2) for v in values}  # another model's: not this cell's
    assert sweeps(attention, cell, held) == [((1, 2), values[2:])]
    held.discard(("timexer", "etth1-96", values[0], 2))
    assert sweeps(attention, cell, held) == [((1,), values[2:]), ((2,), (values[0], *values[2:]))]
    command = multirun_command(attention, cell, tmp_path, [], (1,), values[2:])
    assert "seed=1" in command and f"attention={','.join(values[2:])}" in command
    everything = {("timexer", "etth1-96", v, s) for v in values for s in (0, 1, 2)}
    assert sweeps(attention, cell, everything) == []


@pytest.mark.parametrize("name", ATTENTION_GRIDS)
def test_timexers_reference_job_is_the_published_model_and_every_value_keeps_its_dropout(name):
    """The variate position's backend has the published dropout (attention_dropout's, which
    the along-time grids also name), so the reference job (vanilla at both positions) is
    experiment=timexer itself and every value is compared inside that model."""
    grid = load_study(name)
    cell = grid.select(["timexer"], ["etth1-96"])[0]
    published = composed(("experiment=timexer", "dataset=etth1", "out_len=96"))
    for value in grid.values["timexer"]:
        cfg = composed((*cell.overrides, f"{grid.group}={value}"))
        assert cfg.model.dropout == published.model.dropout > 0
        for node in (cfg.attention, cfg.variate_attention):
            if "dropout" in node:
                assert node.dropout == published.attention.dropout, (value, node)
        if value == grid.reference("timexer"):  # vanilla at both: the published model
            assert OmegaConf.to_container(cfg.variate_attention, resolve=True) == \
                OmegaConf.to_container(published.attention, resolve=True)
            assert OmegaConf.to_container(cfg.attention, resolve=True) == \
                OmegaConf.to_container(published.attention, resolve=True)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_cells_overrides_compose_without_the_swept_group(name):
    """Hydra composes a multirun's own config from its overrides less the sweep (the launcher
    composes each job later): a cell's overrides must compose alone, so none may name a key
    under the swept group's package (variate_attention.dropout failed so, variate_attention
    being null until a job chose it)."""
    grid = load_study(name)
    for cell in grid.select(None, None):
        composed((*cell.overrides, "data_dir=no/such/dir"))  # composing reads no file


def test_published_cells_take_the_published_settings_of_their_dataset_and_horizon(tmp_path):
    attention = load_study("attention")
    weather = attention.select(["itransformer"], ["weather-96"])[0]
    assert weather.overrides[-5:] == (  # published sizes, then the cell's own overrides
        "d_model=512", "ffn.d_ff=512", "model.encoder_layers=3", "dataset=weather", "out_len=96")
    etth1 = attention.select(["itransformer"], ["etth1-96"])[0]
    assert not any(o.startswith("d_model=") for o in etth1.overrides)  # the preset's setting
    # A cell may change a published setting: its override comes later, and the later one wins.
    (tmp_path / "own.yaml").write_text("""
sweep: {group: attention}
seeds: [0]
models:
  itransformer:
    overrides: [experiment=itransformer]
    published: itransformer
    values: [vanilla]
    cells:
      ettm1-336: [dataset=ettm1, out_len=336, d_model=64]
""")
    cell = load_study(str(tmp_path / "own.yaml")).cells[0]
    assert cell.overrides == ("experiment=itransformer", "d_model=128", "ffn.d_ff=128",
                              "dataset=ettm1", "out_len=336", "d_model=64")
    for bad, message in (("[dataset=ettm1, out_len=24]", "no setting for out_len=24"),
                         ("[dataset=illness, out_len=24]", "no setting for dataset=illness"),
                         ("[out_len=96]", "needs dataset= and out_len=")):
        text = (tmp_path / "own.yaml").read_text().rsplit("ettm1-336:", 1)[0]
        (tmp_path / "bad.yaml").write_text(f"{text}x: {bad}\n")
        with pytest.raises(StudyError, match=message):
            load_study(str(tmp_path / "bad.yaml"))


@pytest.mark.slow
def test_a_study_runs_its_grid_and_reports_what_the_runs_measured(ran):
    base, proc = ran
    out = base / "outputs" / "study" / "tiny"
    assert proc.returncode == 1, proc.stderr  # poisson refused: its jobs failed
    assert "cells with failed jobs: tiny/h4" in proc.stderr
    # after the cell, the jobs asked for (cells=h4: 3 values x 2 seeds) done and failed
    assert "[study] progress: 4 of 6 jobs done, 2 failed\n" in proc.stderr
    report = json.loads((out / "study.json").read_text())
    (h4, h6) = report["cells"]
    assert [row["value"] for row in h4["rows"]] == ["mse", "gaussian"]
    # each row is the runs' own metrics: the test MSE and the paired ratio over seeds
    mse = {v: {s: metrics(out / "tiny" / "h4" / f"{v}-seed{s}")["test"]["model"]["mse"]
               for s in (0, 1)} for v in ("mse", "gaussian")}
    point, gaussian = h4["rows"]
    assert point["mse"] == pytest.approx(sum(mse["mse"].values()) / 2)
    expected = paired_ratio(mse["gaussian"], mse["mse"])
    assert gaussian["ratio"]["ratio"] == pytest.approx(expected.ratio)
    assert gaussian["ratio"]["n"] == 2
    for row in h4["rows"]:
        assert row["seconds_per_epoch"] > 0 and row["epochs_run"] == [1, 1]
        assert row["peak_mib"] is not None and row["peak_mib"] > 0
    scope = metrics(out / "tiny" / "h4" / "gaussian-seed0")["run"]["peak_scope"]
    assert scope == ("run" if sys.platform == "linux" else "process")
    # the refused jobs are said, not averaged; the cell not asked for (cells=h4) is no cell
    # "not run", but one not asked for
    refused = [f for f in report["failed"] if f["value"] == "poisson"]
    assert len(refused) == 2 and "loss=poisson describes counts" in refused[0]["reason"]
    assert h6["rows"] == [] and len(h6["missing"]) == 6
    page = (out / "study.md").read_text()
    assert "| tiny | h4 | gaussian | 2 |" in page and "not run" not in page
    assert "- not asked for (`cells=h4`): tiny/h6" in page
    assert (h4["asked"], h6["asked"]) == (True, False) and report["selection"] == "cells=h4"
    # what the command line gave every job beyond the cell's overrides is named
    assert h4["extra_overrides"] == ["trainer.num_threads=1"] and h4["differing_overrides"] == []
    assert "Every job also ran with: `trainer.num_threads=1`." in page
    sign = {s["value"]: s for s in report["sign_tests"]}
    assert sign["gaussian"]["pairs"] == 2 and sign["poisson"]["pairs"] == 0


@pytest.mark.slow
def test_the_same_command_again_trains_only_what_is_missing(ran):
    base, _ = ran
    out = base / "outputs" / "study" / "tiny"
    done = out / "tiny" / "h4" / "mse-seed0" / "metrics.json"
    before = done.stat().st_mtime_ns
    proc = study(["tiny.yaml", "cells=h4", "trainer.num_threads=1"], base, check=False)
    assert done.stat().st_mtime_ns == before  # not trained again
    assert (proc.stdout + proc.stderr).count("skipped (skip_completed=true)") == 4  # 4 done
    # another override is another job: it is refused there (training would overwrite the
    # completed one), one line, and nothing in the dir changes, its saved config included
    kept = {p: p.read_bytes() for p in done.parent.rglob("*") if p.is_file()}
    proc = run_cli([*TINY, "epochs=1", "model.decoding=autoregressive", "out_len=4",
                    "loss=mse", "seed=0", "skip_completed=true", "epochs=2",
                    f"hydra.run.dir={done.parent}"], base, check=False)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line == (f"error: {done.parent} holds a completed run made with other overrides "
                    "(only there: log.figures=False trainer.num_threads=1; only here: epochs=2 "
                    "log.figures=false); skip_completed=true reuses a run made with "
                    "the same ones: choose another run dir (hydra.run.dir, hydra.sweep.dir), or "
                    "remove that one to train there again")
    assert {p: p.read_bytes() for p in done.parent.rglob("*") if p.is_file()
            and p.name != "train.log"} == {p: b for p, b in kept.items() if p.name != "train.log"}


@pytest.mark.slow
def test_partial_studies_merge_and_a_job_run_twice_counts_once(ran, tmp_path):
    base, _ = ran
    out = base / "outputs" / "study" / "tiny"
    other = tmp_path / "elsewhere"
    job = out / "tiny" / "h4" / "gaussian-seed1"
    shutil.copytree(job, other / "tiny" / "h4" / "gaussian-seed1")
    shutil.copytree(job, other / "tiny" / "h6" / "gaussian-seed1")
    # a job that failed elsewhere but completed here has run: it is not listed as failed
    failed_copy = other / "tiny" / "h4" / "mse-seed0"
    shutil.copytree(out / "tiny" / "h4" / "mse-seed0", failed_copy)
    (failed_copy / "status.json").write_text('{"status": "failed", "reason": "elsewhere"}')
    study(["tiny.yaml", "report", f"from={other}"], base)
    report = json.loads((out / "study.json").read_text())
    assert report["duplicates_set_aside"] == 1
    assert {f["value"] for f in report["failed"]} == {"poisson"}
    # the copy filed under h6 is h6's (its dir says so), the only run there
    (h6_row,) = report["cells"][1]["rows"]
    assert h6_row["value"] == "gaussian" and h6_row["seeds"] == [1]
    assert math.isnan(h6_row["ratio"]["ratio"]) or h6_row["ratio"]["n"] == 0


@pytest.mark.slow
def test_a_cell_whose_jobs_ran_with_different_command_lines_says_so(ran, tmp_path):
    """A gated grid's jobs (`attention.gate=headwise` given to every job) are named as such;
    a cell holding jobs made with and without an override says which override only some had."""
    base, _ = ran
    out = base / "outputs" / "study" / "tiny"
    other = tmp_path / "elsewhere"
    for seed, extra in ((0, ["attention.gate=headwise"]), (1, [])):
        copy = other / "tiny" / "h6" / f"gaussian-seed{seed}"
        shutil.copytree(out / "tiny" / "h4" / f"gaussian-seed{seed}", copy)
        made = copy / ".hydra" / "overrides.yaml"
        made.write_text(OmegaConf.to_yaml([*OmegaConf.load(made), *extra]))
    study(["tiny.yaml", "report", f"dir={tmp_path / 'report'}", f"from={out},{other}"], base)
    h4, h6 = json.loads((tmp_path / "report" / "study.json").read_text())["cells"]
    assert h4["extra_overrides"] == ["trainer.num_threads=1"] and h4["differing_overrides"] == []
    assert h6["extra_overrides"] == ["trainer.num_threads=1"]
    assert h6["differing_overrides"] == ["attention.gate=headwise"]
    page = (tmp_path / "report" / "study.md").read_text()
    assert ("tiny/h6: its jobs were made with different command lines; only some had "
            "`attention.gate=headwise`.") in page
    # one cell whose every job was gated: the cells' lines differ, each is named
    shutil.rmtree(other / "tiny" / "h6" / "gaussian-seed1")
    study(["tiny.yaml", "report", f"dir={tmp_path / 'report'}", f"from={out},{other}"], base)
    page = (tmp_path / "report" / "study.md").read_text()
    assert "- tiny/h6: `attention.gate=headwise trainer.num_threads=1`" in page
    assert "- tiny/h4: `trainer.num_threads=1`" in page and "different command" not in page


@pytest.mark.slow
def test_a_report_read_beside_the_dir_it_was_made_from_sets_nothing_aside(ran, tmp_path):
    """`from=` its own report with the dir it was made from: each run once (not "set aside"),
    each failure listed once, the same rows."""
    base, _ = ran
    out = base / "outputs" / "study" / "tiny"
    study(["tiny.yaml", "report"], base)
    saved = tmp_path / "study.json"
    shutil.copy(out / "study.json", saved)
    kept = json.loads(saved.read_text())
    study(["tiny.yaml", "report", f"from={saved}"], base)
    again = json.loads((out / "study.json").read_text())
    assert again["duplicates_set_aside"] == 0
    assert again["failed"] == kept["failed"]
    assert len(again["failed"]) == len({(f["value"], f["seed"]) for f in again["failed"]}) > 0
    assert again["cells"] == kept["cells"]
    page = (out / "study.md").read_text()
    assert "set aside" not in page
    # without cells=, every cell is asked for: the one without runs is not run
    assert "- tiny/h6: not run (6 jobs)" in page and "not asked for" not in page


@pytest.mark.slow
def test_a_study_grows_from_its_report_after_its_run_dirs_are_gone(ran, tmp_path):
    base, _ = ran
    out = base / "outputs" / "study" / "tiny"
    saved = tmp_path / "study.json"
    shutil.copy(out / "study.json", saved)
    kept = json.loads(saved.read_text())
    # a study dir of its own holding one job, and the report: the rest come from the report
    fresh = tmp_path / "fresh"
    shutil.copytree(out / "tiny" / "h4" / "gaussian-seed1",
                    fresh / "tiny" / "h4" / "gaussian-seed1")
    study(["tiny.yaml", "report", f"dir={fresh}", f"from={saved}"], base)
    grown = json.loads((fresh / "study.json").read_text())
    for before, after in zip(kept["cells"][0]["rows"], grown["cells"][0]["rows"], strict=True):
        for key in ("value", "seeds", "mse", "mse_std", "mae", "ratio", "seconds_per_epoch",
                    "epochs_run", "peak_mib"):
            assert after[key] == pytest.approx(before[key]), key
    assert grown["duplicates_set_aside"] == 1  # the job in the dir counts, not its record
    assert grown["sign_tests"] == kept["sign_tests"]
    assert {f["value"] for f in grown["failed"]} == {"poisson"}  # as the report listed
    assert grown["cells"][0]["test_fingerprint"] is not None
    # the report's runs keep the overrides it recorded their jobs shared
    assert grown["cells"][0]["extra_overrides"] == ["trainer.num_threads=1"]
    assert grown["cells"][0]["differing_overrides"] == []
    # a report whose windows are not the run dir's: the cell says so instead of mixing them
    other = json.loads(saved.read_text())
    other["cells"][0]["test_fingerprint"] = "another file"
    (tmp_path / "other.json").write_text(json.dumps(other))
    study(["tiny.yaml", "report", f"dir={fresh}", f"from={tmp_path / 'other.json'}"], base)
    problem = json.loads((fresh / "study.json").read_text())["cells"][0]["problem"]
    assert "scored on different test windows" in problem
    # a report of the same cell made with other overrides is not this study's: one line
    other["cells"][0]["overrides"] = ["out_len=5"]
    (tmp_path / "other.json").write_text(json.dumps(other))
    proc = study(["tiny.yaml", "report", f"dir={fresh}", f"from={tmp_path / 'other.json'}"],
                 base, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "tiny/h4 was made with out_len=5" in proc.stderr and "not the same jobs" in proc.stderr


@pytest.mark.slow
def test_a_study_run_from_its_report_trains_only_the_jobs_the_report_lacks(ran, tmp_path):
    base, _ = ran
    report = json.loads((base / "outputs" / "study" / "tiny" / "study.json").read_text())
    gaussian = report["cells"][0]["rows"][1]
    assert gaussian["value"] == "gaussian"
    # as if that job had not run where the report was made: a row half held (seed 0 from the
    # report, seed 1 trained here, merged into one row)
    del gaussian["runs"]["1"]
    (tmp_path / "partial.json").write_text(json.dumps(report))
    fresh = tmp_path / "fresh"
    proc = study(["tiny.yaml", "cells=h4", f"dir={fresh}", f"from={tmp_path / 'partial.json'}",
                  "trainer.num_threads=1"], base, check=False)
    assert "tiny/h4: 3 jobs" in proc.stderr and "(3 held by from=)" in proc.stderr
    # trained: the job the report lacks, and the refused ones it lists as failed; not the rest
    ran_here = sorted(p.name for p in (fresh / "tiny" / "h4").iterdir() if p.is_dir())
    assert ran_here == ["gaussian-seed1", "poisson-seed0", "poisson-seed1"]
    grown = json.loads((fresh / "study.json").read_text())
    rows = {row["value"]: row for row in grown["cells"][0]["rows"]}
    assert rows["gaussian"]["seeds"] == [0, 1] and rows["mse"]["seeds"] == [0, 1]
    assert rows["gaussian"]["ratio"]["n"] == 2
    # the refused jobs failed again here: listed once each, as their run dirs here say
    assert sorted((f["value"], f["seed"]) for f in grown["failed"]) == [("poisson", 0),
                                                                       ("poisson", 1)]
    assert all(f["run_dir"].startswith(str(fresh)) for f in grown["failed"])


@pytest.mark.slow
def test_a_launcher_that_submits_no_job_stops_the_study_in_one_line(ran, tmp_path, monkeypatch):
    """hydra/launcher=slurm where SLURM is not (no srun on PATH): the first cell's sweep
    submits nothing and says why in one line (seqforecast.train exits 4); the study stops
    there, exit 2, its later cells not launched, every run and the report as they were. (A
    controller that does not answer: tests/cli/test_slurm_cluster.py, against a real one.)"""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    base, _ = ran
    copy = tmp_path / "study"
    shutil.copytree(base, copy)
    out = copy / "outputs" / "study" / "tiny"
    kept = {p: p.read_bytes() for p in out.rglob("*")
            if p.is_file() and p.name in ("metrics.json", "status.json")}
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no srun, no sbatch
    proc = study(["tiny.yaml", "hydra/launcher=slurm", "trainer.num_threads=1"], copy,
                 check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: SLURM is not installed here (no srun on PATH)"), line
    assert "no job of this sweep was submitted and no run dir changed" in line
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "[study] stopped at tiny/h4: its launcher submitted no job")
    assert "tiny/h6" not in proc.stderr  # the next cell was not launched
    assert {p: p.read_bytes() for p in kept} == kept
    report = json.loads((out / "study.json").read_text())
    assert [row["value"] for row in report["cells"][0]["rows"]] == ["mse", "gaussian"]


KNOWN_GRID = """
sweep: {group: attention}
seeds: [0, 1, 2]
models:
  tiny:
    overrides: [out_len=4]
    values: [vanilla, einsum, diff]
    cells:
      h4: []
"""


def test_a_report_says_lower_and_higher_as_the_runs_mses_are(tmp_path):
    """Runs of known test MSEs (an earlier report's, as a study that outlived its run dirs):
    each value's ratio is its MSE over the reference's, below 1 where its MSE is lower, and the
    verdicts, the sign test and the page say lower and higher as the MSEs are."""
    (tmp_path / "grid.yaml").write_text(KNOWN_GRID)
    grid = load_study(str(tmp_path / "grid.yaml"))
    # einsum's MSE below vanilla's on every seed, diff's above
    mse = {"vanilla": [1.0, 2.0, 4.0], "einsum": [0.5, 1.2, 2.2], "diff": [1.4, 3.2, 6.0]}
    kept = {"best_epoch": 1, "epochs_run": 1, "train_seconds": 1.0, "peak_rss_mib": None,
            "rss_at_start_mib": None}
    rows = [{"value": value,
             "runs": {str(seed): {"mse": m, "mae": m, "run_dir": f"{value}-{seed}", **kept}
                      for seed, m in enumerate(values)}}
            for value, values in mse.items()]
    cell = {"model": "tiny", "cell": "h4", "overrides": ["out_len=4"], "rows": rows,
            "test_windows": 100, "test_fingerprint": "f", "extra_overrides": []}
    earlier = {"group": "attention", "failed": [], "cells": [cell]}
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    report = build_report(grid, tmp_path / "none", [tmp_path / "earlier.json"], "made here")
    found = {row["value"]: row for row in report["cells"][0]["rows"]}
    signs = {s["value"]: s for s in report["sign_tests"]}
    page = markdown(report)
    for value in ("einsum", "diff"):
        ratios = [m / r for m, r in zip(mse[value], mse["vanilla"], strict=True)]
        lower = all(m < r for m, r in zip(mse[value], mse["vanilla"], strict=True))
        row = found[value]
        assert row["pair_ratios"] == pytest.approx(dict(enumerate(ratios))), (
            f"{value}'s pair ratios must be its MSE over vanilla's: {row['pair_ratios']}")
        assert row["ratio"]["ratio"] == pytest.approx(math.prod(ratios) ** (1 / 3)), (
            f"{value}'s ratio must be the geometric mean of its pairs': {row['ratio']}")
        assert (row["ratio"]["ratio"] < 1) == lower, (value, row["ratio"])
        word = "lower" if lower else "higher"
        assert row["ratio"]["verdict"] == f"{word} (beyond noise)", (value, row["ratio"])
        below, above = (3, 0) if lower else (0, 3)
        assert (signs[value]["below"], signs[value]["above"]) == (below, above), signs[value]
        # the page's columns: lower error, higher error
        assert f"| {value} | 3 | {below} | {above} | 0 |" in page, page
        assert f"| tiny | h4 | {value} | 3 |" in page and f"| {word} (beyond noise) |" in page


def test_bad_study_arguments_are_one_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("models: 3\n")
    for args, message in (
        (["nope"], "study 'nope' is not known: choose from attention"),
        (["attention", "models=arima"], "models='arima' is not in study 'attention'"),
        (["attention", "report", "epochs=3"], "report reads runs, it trains none"),
        (["attention", "seeds=a"], "seeds='a': give integers"),
        (["broken.yaml"], "broken.yaml: not a study file"),
        (["epochs=3"], "name a study first"),
        (["attention", "report", "from=broken.yaml"], "from=broken.yaml: not a study report"),
        (["attention", "report", "from=gone.json"], "from=gone.json: no such directory or report"),
    ):
        proc = study(args, tmp_path, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


# TimeXer on the synthetic series (the series its own exogenous token), the variate-axis
# position swept apart from the time axis.
VARIATE_GRID = """
title: A tiny study of the variate-axis position
sweep: {group: attention@variate_attention}
seeds: [0]
models:
  timexer:
    overrides: [model=timexer, embedding=patch, embedding.patch_len=4, embedding.stride=4,
                attention=flow, epochs=1, d_model=8, n_heads=2, in_len=12, out_len=6,
                data.train_size=64, data.val_size=16, data.test_size=256, log.figures=false]
    values: [vanilla, einsum]
    cells:
      h6: [out_len=6]
"""


@pytest.mark.slow
def test_a_study_sweeps_the_variate_position_apart_from_the_time_axis(tmp_path):
    (tmp_path / "variate.yaml").write_text(VARIATE_GRID)
    study(["variate.yaml", "trainer.num_threads=1"], tmp_path)
    out = tmp_path / "outputs" / "study" / "variate"
    report = json.loads((out / "study.json").read_text())
    assert report["group"] == "attention@variate_attention"
    assert [row["value"] for row in report["cells"][0]["rows"]] == ["vanilla", "einsum"]
    for value in ("vanilla", "einsum"):
        saved = (out / "timexer" / "h6" / f"{value}-seed0" / ".hydra" / "config.yaml")
        text = saved.read_text()
        assert f"variate_attention:\n  name: {value}" in text  # the swept position
        assert "attention:\n  name: flow" in text  # the time axis as the grid fixed it


# Values that are named sets of overrides (a variant is several options at once), one cell.
SETS = f"""
title: Named sets of overrides
sweep: {{group: variant}}
seeds: [0]
models:
  tiny:
    overrides: [{", ".join(TINY)}, epochs=1, model.decoding=autoregressive]
    values:
      plain: []
      wide: [d_model=24, ffn.d_ff=48]
    cells:
      h4: [out_len=4]
"""


@pytest.mark.slow
def test_a_studys_values_may_be_named_sets_of_overrides(tmp_path):
    (tmp_path / "sets.yaml").write_text(SETS)
    grid = load_study(str(tmp_path / "sets.yaml"))
    assert grid.value_overrides("tiny", "wide") == ["d_model=24", "ffn.d_ff=48"]
    study(["sets.yaml", "trainer.num_threads=1"], tmp_path)
    out = tmp_path / "outputs" / "study" / "sets"
    for value, width in (("plain", 16), ("wide", 24)):  # each run dir named as a sweep's
        saved = OmegaConf.load(out / "tiny" / "h4" / f"{value}-seed0" / ".hydra" / "config.yaml")
        assert saved.d_model == width
    report = json.loads((out / "study.json").read_text())
    (cell,) = report["cells"]
    assert [row["value"] for row in cell["rows"]] == ["plain", "wide"] and not cell["missing"]
    assert cell["extra_overrides"] == ["trainer.num_threads=1"]  # the sets' keys are swept
    assert "| tiny | h4 | wide | 1 |" in (out / "study.md").read_text()
    (tmp_path / "bad.yaml").write_text(SETS.replace("plain: []", "plain: [d_model]"))
    with pytest.raises(StudyError, match=r"values.plain=\['d_model'\] is not allowed"):
        load_study(str(tmp_path / "bad.yaml"))

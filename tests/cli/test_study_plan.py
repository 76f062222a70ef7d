"""python -m seqforecast.study <study> plan, and a launch's checks: every job's configuration
built before anything runs (a value its position cannot take, a lookback shorter than a patch
or longer than the training rows: one line, exit 2), the jobs done and left, each
configuration probed for its seconds an epoch and peak memory, and budget_hours= refusing a
launch whose jobs need more."""

import json
import shutil

from ..cli_helpers import REPO, TINY, run_cli

GRID = f"""
title: A tiny plan
sweep: {{group: attention}}
seeds: [0, 1]
lookback: {{fixed: 8, search: [8, 12]}}
models:
  tiny:
    overrides: [{", ".join(TINY)}, epochs=3]
    values: [vanilla, uniform]
    cells:
      h4: [out_len=4]
"""


def study(args, cwd):
    return run_cli(args, cwd, module="seqforecast.study", check=False, fresh=False)


def test_a_plan_counts_the_jobs_and_probes_each_configuration(tmp_path):
    (tmp_path / "tiny.yaml").write_text(GRID)
    proc = study(["tiny.yaml", "plan", "dir=out"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    # a cell h4 at lookback 8 and its candidate h4-L12, two values, two seeds
    assert (plan["jobs"], plan["done"], plan["left"]) == (8, 0, 8)
    configs = {(c["cell"], c["value"]): c for c in plan["configurations"]}
    assert set(configs) == {(cell, value) for cell in ("tiny/h4", "tiny/h4-L12")
                            for value in ("vanilla", "uniform")}
    for c in configs.values():
        assert c["epochs"] == 3 and c["seeds_left"] == [0, 1]
        assert c["epoch_seconds"] > 0 and c["peak_mib"] is not None
        assert c["job_core_hours_at_most"] == c["epoch_seconds"] * 3 / 3600
    assert plan["core_hours_at_most"] == sum(2 * c["job_core_hours_at_most"]
                                             for c in configs.values())
    page = (tmp_path / "out" / "plan.md").read_text()
    assert "8 jobs: 0 done, 8 left" in page and "| tiny/h4-L12 | uniform | 0, 1 | 3 |" in page
    assert not list((tmp_path / "out").glob("tiny")), "a plan trains nothing"


def test_a_budget_too_small_refuses_the_launch_in_one_line(tmp_path):
    (tmp_path / "tiny.yaml").write_text(GRID)
    proc = study(["tiny.yaml", "budget_hours=0.0000001", "dir=out"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: budget_hours=1e-07 is too small for even one job: the "
                           "smallest left needs up to "), line
    assert not list((tmp_path / "out").glob("tiny")), "nothing launched"
    proc = study(["tiny.yaml", "budget_hours=0", "dir=out"], tmp_path)
    assert proc.returncode == 2 and "budget_hours='0' is not allowed: core-hours > 0" in \
        proc.stderr


def test_a_configuration_that_cannot_be_built_is_refused_before_anything_runs(tmp_path):
    cases = {
        # no_mixing at the transformer's cross-attention position
        "position": (GRID.replace("[vanilla, uniform]", "[vanilla, no_mixing]"),
                     "tiny/h4 attention=no_mixing: attention=no_mixing conflicts with "
                     "model=transformer"),
        # a lookback candidate shorter than a patch
        "patch": (GRID.replace("epochs=3]", "epochs=3, model=encoder, embedding=patch]")
                  .replace("search: [8, 12]", "search: [8, 12, 32]"),
                  "tiny/h4 attention=vanilla: "),
    }
    for name, (grid, words) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(grid)
        proc = study([f"{name}.yaml", "dir=out"], tmp_path)
        assert proc.returncode == 2, (name, proc.stderr)
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / "out").exists(), "nothing launched, nothing written"


def test_a_lookback_longer_than_the_training_rows_is_refused_by_the_plan(tmp_path):
    shutil.copy(REPO / "data" / "example.csv", tmp_path / "load.csv")
    rows = sum(1 for _ in open(tmp_path / "load.csv")) - 1
    long = int(rows * 0.7) + 1  # longer than the training split's rows, shorter than the file
    grid = GRID.replace(f"{', '.join(TINY)}, epochs=3",
                        "data=csv, data.path=load.csv, data.target=load, epochs=3, "
                        "log.figures=false").replace("search: [8, 12]", f"search: [8, {long}]")
    (tmp_path / "csv.yaml").write_text(grid)
    proc = study(["csv.yaml", "plan", "dir=out"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    error = [line for line in proc.stderr.splitlines() if not line.startswith("[plan]")]
    assert len(error) == 1 and error[0].startswith(
        f"error: tiny/h4-L{long} attention=vanilla: "), proc.stderr

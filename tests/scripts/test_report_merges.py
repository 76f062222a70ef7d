"""One report per table: the benchmark scripts merge the reports of a table's runs (a seed a
session, the official code's run, a rerun) into one, keeping every measurement and where it
came from. Reports made up here; nothing trains."""

import json

from ..cli_helpers import load_script, run_script

MACHINE_A = {"platform": "Linux-a", "cpus": 2, "python": "3.11.7"}
MACHINE_B = {"platform": "Linux-b", "cpus": 2, "python": "3.11.7"}


def _write(path, report):
    path.write_text(json.dumps(report))
    return path


# ---------------------------------------------------------------- bench_leaderboard.py


def _lb_speed(steps_ratio, rounds):
    return {"model": "timexer", "variant": "", "set": [], "dataset": "etth1", "horizon": 96,
            "threads": 1, "batch": 4, "steps": 2113, "rounds": rounds,
            "best": {"official": {"train_seconds": 100.0 * steps_ratio, "epoch_seconds": 130.0},
                     "seqforecast": {"train_seconds": 100.0, "epoch_seconds": 110.0}},
            "speedup_train": steps_ratio, "speedup_epoch": 130.0 / 110.0}


def _lb_report(command, machine, official=None, speed=()):
    return {"command": command, "machine": machine, "official": official or {},
            "speed": list(speed)}


def _official(mse, seed="2023"):
    return {"etth1-96": {"itransformer": {seed: {"mse": mse, "mae": 0.40, "epochs": 10}}}}


def _study_report(path, mse):
    """A leaderboard study's report holding one row (what the official table reads)."""
    rows = [{"value": "itransformer", "seeds": [0, 1, 2], "mse": mse, "mse_std": 0.0016}]
    path.write_text(json.dumps({"cells": [
        {"model": "itransformer", "cell": "etth1-96", "rows": rows,
         "published": {"itransformer": [0.386, 0.405]}}]}))
    return path


def test_the_official_runs_merge_keeping_every_run_and_where_each_came_from(tmp_path):
    study = _study_report(tmp_path / "leaderboard.json", 0.3875)
    first = _write(tmp_path / "official.json", _lb_report(
        "python scripts/bench_leaderboard.py --official it", MACHINE_A,
        official=_official(0.3870), speed=[_lb_speed(1.44, [{"a": 1}, {"a": 2}])]))
    # a later session: the official run again with other numbers, another seed, the epoch again
    second = _write(tmp_path / "later.json", _lb_report(
        "python scripts/bench_leaderboard.py --official it --official-seeds 2023 1", MACHINE_B,
        official={"etth1-96": {"itransformer": {**_official(0.3880)["etth1-96"]["itransformer"],
                                                **_official(0.3850, "1")["etth1-96"][
                                                    "itransformer"]}}},
        speed=[_lb_speed(1.42, [{"a": 3}])]))
    out = tmp_path / "leaderboard_official.json"
    run_script("bench_leaderboard.py", "--merge", str(first), str(second), "--out", str(out),
               "--study", str(study), cwd=tmp_path)
    report = json.loads(out.read_text())
    runs = report["official"]["etth1-96"]["itransformer"]
    assert {s: r["mse"] for s, r in runs.items()} == {"2023": 0.3880, "1": 0.3850}
    assert runs["2023"]["report"] == {
        "command": "python scripts/bench_leaderboard.py --official it --official-seeds 2023 1",
        "machine": MACHINE_B}
    # the earlier measurements the table does not show are kept, with where they came from
    (again,) = [r for r in report["repeats"] if r["kind"] == "official"]
    assert (again["seed"], again["mse"], again["report"]["machine"]) == ("2023", 0.3870,
                                                                        MACHINE_A)
    (speed,) = report["speed"]
    (earlier,) = [r for r in report["repeats"] if r["kind"] == "speed"]
    assert speed["speedup_train"] == 1.42 and earlier["speedup_train"] == 1.44
    assert [s["file"] for s in report["merged_from"]] == [str(first), str(second)]
    text = out.with_suffix(".md").read_text()
    # the official runs' mean beside the study's row and the published one
    assert ("| etth1-96 | iTransformer | 0.3865 ± 0.0021 (seeds 1, 2023) | 0.3875 ± 0.0016 "
            "(3 seeds) | 1.003 | 0.386 |") in text
    assert "kept in the report beside the table's (test MSE): etth1-96 official iTransformer " \
           "seed 2023: 0.3870." in text
    assert "training steps / whole epoch): 1.44x / 1.18x (best of 2 rounds)." in text

    # merged again with its own parts: the same table, nothing added twice
    twice = tmp_path / "twice.json"
    run_script("bench_leaderboard.py", "--merge", str(out), str(first), str(second), "--out",
               str(twice), "--study", str(study), cwd=tmp_path)
    merged = json.loads(twice.read_text())
    assert merged["official"] == report["official"] and merged["speed"] == report["speed"]
    assert sorted(map(json.dumps, merged["repeats"])) == sorted(
        map(json.dumps, report["repeats"]))
    assert merged["merged_from"][0]["merged_from"] == report["merged_from"]
    # a study that has not run the cell: the row says so
    (tmp_path / "empty.json").write_text(json.dumps({"cells": []}))
    run_script("bench_leaderboard.py", "--table", "--out", str(out), "--study",
               str(tmp_path / "empty.json"), cwd=tmp_path)
    assert "| not in the study reports |" in out.with_suffix(".md").read_text()


def test_the_leaderboard_orders_its_cells_and_speed_tables_whatever_the_merge_order():
    leaderboard = load_script("bench_leaderboard.py")
    official = {key: {"timexer": {"2021": {"mse": 0.1}}}
                for key in ("be-24", "weather-96", "etth1-96", "np-24")}
    text = leaderboard.markdown({"official": official, "speed": []}, {})
    assert [line.split(" | ")[0][2:] for line in text.splitlines()[2:6]] == [
        "etth1-96", "weather-96", "np-24", "be-24"]
    itransformer = {**_lb_speed(0.96, [{}]), "model": "itransformer"}
    bf16 = {**itransformer, "variant": "bf16", "set": ["trainer.precision=bf16"]}
    merged = leaderboard.merge_reports([
        (None, _lb_report("a", MACHINE_A, speed=[_lb_speed(1.4, [{}])])),
        (None, _lb_report("b", MACHINE_A, speed=[bf16, itransformer]))])
    assert [(s["model"], s["variant"]) for s in merged["speed"]] == [
        ("itransformer", ""), ("itransformer", "bf16"), ("timexer", "")]


# ---------------------------------------------------------------- bench_realdata.py


def _rd_run(variant, seed, mse):
    row = {"mse": mse, "mae": mse / 2, "coverage_80": 0.8, "width_80": 1.0, "crps": 0.3}
    return {"variant": variant, "seed": seed, "status": "ok",
            "test": {"model": row, "nlinear": {**row, "mse": 0.5649},
                     "last_value": {"mse": 10.86, "mae": 2.66}},
            "val_mse": 0.1, "best_epoch": 0, "epochs_run": 9, "train_seconds": 10.0 + mse,
            "wall_seconds": 12.0, "reused": False, "test_windows": 291, "test_rows": 342,
            "run_dir": "x", "val_curve": [0.2, 0.1]}


def _rd_report(command, runs, peers=()):
    entry = {"about": "Mauna Loa CO2", "in_len": 104, "out_len": 52, "seasons": [52],
             "rows": 2284, "test_windows": 291,
             "table": [*peers, {"forecaster": "nlinear", "mse": 0.5649, "mae": 0.5657}],
             "intervals": [], "summary": {}, "runs": runs, "alignment_problems": []}
    return {"command": command, "machine": MACHINE_A, "protocol": {"split": [0.7, 0.15, 0.15]},
            "co2": entry}


def test_the_real_data_merge_shows_a_rerun_and_keeps_the_run_it_replaced(tmp_path):
    mstl = {"forecaster": "statsforecast MSTL", "mse": 0.5513, "mae": 0.5603,
            "fit_seconds": 24.5}
    full = _write(tmp_path / "full.json", _rd_report(
        "full", [_rd_run("preset", 0, 0.5533), _rd_run("ablate_point", 0, 0.5532)], [mstl]))
    rerun = _write(tmp_path / "rerun.json", _rd_report("rerun", [_rd_run("preset", 0, 0.5415)]))
    out = tmp_path / "realdata.json"
    run_script("bench_realdata.py", "--merge", str(full), str(rerun), "--out", str(out),
               cwd=tmp_path)
    co2 = json.loads(out.read_text())["co2"]
    rows = {r["forecaster"]: r for r in co2["table"]}
    assert rows["seqforecast preset"]["mse"] == 0.5415  # the rerun's
    assert rows["seqforecast ablate_point"]["mse"] == 0.5532  # the full run's, not rerun
    assert rows["statsforecast MSTL"]["report"]["command"] == "full"
    assert rows["nlinear"]["mse"] == 0.5649
    assert [r["report"]["command"] for r in co2["runs"]] == ["rerun", "full"]
    (again,) = json.loads(out.read_text())["repeats"]
    assert (again["dataset"], again["variant"], again["test"]["model"]["mse"]) == (
        "co2", "preset", 0.5533)
    assert "beside the table's (test MSE): seqforecast preset 0.5533 ± 0 (n=1)." in \
        out.with_suffix(".md").read_text()


# ---------------------------------------------------------------- reports of entries


def test_a_report_of_entries_adds_each_run_and_takes_in_a_single_runs_report(tmp_path):
    common = load_script("bench_common.py")
    out = _write(tmp_path / "profile_step_default.json",
                 {"command": "python scripts/profile_step.py", "machine": MACHINE_A,
                  "found": {"step_ms": 37.7}})
    entry = common.add_entry(out, "scripts/profile_step.py", ["--name", "x"], "x",
                             found={"step_ms": 33.5})
    entries = json.loads(out.read_text())["entries"]
    assert entries == [{"name": "profile_step_default", "command": "python scripts/profile_step.py",
                        "machine": MACHINE_A, "found": {"step_ms": 37.7}}, entry]
    assert entry["command"] == "python scripts/profile_step.py --name x" and entry["machine"]
    single = _write(tmp_path / "profile_step_timexer.json",
                    {"command": "python scripts/profile_step.py experiment=timexer",
                     "machine": MACHINE_B, "found": {"step_ms": 33.5}})
    merged = common.merge_entries([out, single, out], prefix="profile_step_")
    assert merged["entries"] == [*entries, {"name": "timexer", **json.loads(single.read_text())}]

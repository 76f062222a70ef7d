"""The benchmark scripts run and write their tables (tiny settings; no timing is asserted)."""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from ..cli_helpers import REPO, load_script, run_script

pytestmark = pytest.mark.slow  # trains in subprocesses: make test-fast skips it


def test_bench_attention_runs_each_case_and_writes_json(tmp_path):
    out = tmp_path / "attention.json"
    table = run_script(
        "bench_attention.py", "--lengths", "64", "--cases", "sdpa_causal", "vanilla",
        "diff_block16", "--repeats", "1", "--steps", "1", "--min-seconds", "0", "--out", str(out),
        "--in-process", cwd=tmp_path,
    )
    report = json.loads(out.read_text())
    assert [r["case"] for r in report["results"]] == ["sdpa_causal", "vanilla", "diff_block16"]
    for r in report["results"]:
        assert r["status"] == "ok" and r["tokens_per_s"] > 0 and r["peak_mib"] >= 0
    assert "| diff_block16 |" in table


def test_bench_attention_runs_the_literature_at_a_models_shape(tmp_path):
    """`--cases literature --shape patchtst`: every mechanism beside vanilla's two paths, at
    the published PatchTST's batch and width, and the sub-quadratic targets asked at 4096."""
    out = tmp_path / "literature.json"
    table = run_script(
        "bench_attention.py", "--lengths", "16", "--cases", "literature", "--shape", "patchtst",
        "--repeats", "1", "--steps", "1", "--min-seconds", "0", "--out", str(out), "--in-process",
        cwd=tmp_path,
    )
    report = json.loads(out.read_text())
    assert report["config"]["d_model"] == 16 and report["config"]["batch"] == 128 * 7
    cases = [r["case"] for r in report["results"]]
    assert {"vanilla_explicit", "probsparse", "autocorrelation", "fourier", "flow",
            "destationary"} <= set(cases)
    assert all(r["status"] == "ok" for r in report["results"])
    assert "probsparse tokens/s >= 1x vanilla's explicit path at L=4096: n/a" in table


def test_bench_train_runs_the_reference_and_a_backend_through_the_loop(tmp_path):
    out = tmp_path / "train.json"
    # the matmul rate at 256^2: at its 2048^2 it took 5 s of the test's 8 on one core
    table = run_script(
        "bench_train.py", "--sizes", "default", "--cases", "reference", "vanilla",
        "--steps", "2", "--warmup", "1", "--repeats", "1", "--matmul-size", "256",
        "--out", str(out), "--in-process", cwd=tmp_path,
    )
    report = json.loads(out.read_text())
    assert report["matmul_gflops"] > 0
    rows = {r["case"]: r for r in report["results"] if r.get("size") == "default"}
    assert set(rows) == {"reference", "vanilla"}
    for r in rows.values():
        assert r["status"] == "ok" and r["timed_steps"] == 2
        assert r["flops_per_token"] > 0 and 0 < r["data_fraction_of_step"] < 1
    # The same dimensions: the reference and ours count the same matmul FLOPs per token.
    assert rows["vanilla"]["flops_per_token"] == rows["reference"]["flops_per_token"]
    assert "| default | vanilla |" in table


def test_bench_attention_times_the_gpu_kernels_and_says_why_one_cannot_run(tmp_path):
    """The band kernels' rows (FlexAttention's layer refused where there is no GPU, in its
    row), the two-call FlexAttention reference refused on the CPU in its row, and the device and
    dtype in the report. The Triton kernel's row (under its interpreter here) is the GPU visit's
    below: its attention part runs bench_attention.py's diff_block16_triton at L = 32 in fp32
    on the CPU (under the interpreter, most of this test's 12 s: once, not in both tests)."""
    out = tmp_path / "attention.json"
    run_script(
        "bench_attention.py", "--lengths", "32", "--cases", "diff_block16_flex",
        "flex_diff_block16", "--repeats", "1", "--steps", "1", "--min-seconds", "0",
        "--device", "cpu", "--dtype", "fp32", "--out", str(out), "--in-process", cwd=tmp_path,
    )
    report = json.loads(out.read_text())
    assert report["config"]["device"] == "cpu" and report["config"]["dtype"] == "fp32"
    rows = {r["case"]: r for r in report["results"]}
    if not torch.cuda.is_available():
        assert "backward on CPU" in rows["flex_diff_block16"]["status"]
        assert ("attention.kernel=flex cannot serve diff attention here: on the CPU "
                "FlexAttention") in rows["diff_block16_flex"]["status"]  # (cut short there)
    else:
        assert rows["diff_block16_flex"]["status"] == "ok"


def test_bench_attention_has_the_banded_reference(tmp_path):
    # its case in a worker process of its own, as a benchmark runs every case (the other
    # tests run theirs --in-process)
    out = tmp_path / "attention.json"
    run_script(
        "bench_attention.py", "--lengths", "64", "--cases", "sdpa_band16", "--repeats", "1",
        "--steps", "1", "--min-seconds", "0", "--out", str(out), cwd=tmp_path,
    )
    (row,) = json.loads(out.read_text())["results"]
    assert row["status"] == "ok" and row["tokens_per_s"] > 0


def test_bench_panel_times_the_loader_from_the_loops_clock(tmp_path):
    out = tmp_path / "panel.json"
    table = run_script(
        "bench_panel.py", "--series", "30", "--length", "150", "--steps", "3", "--warmup", "1",
        "--rounds", "3", "--out", str(out), cwd=tmp_path,
    )
    result = json.loads(out.read_text())["result"]
    assert result["series"] == 30 and result["timed_steps"] == 3
    assert 0 < result["loader_fraction_of_step"] < 1
    assert result["held_bytes"] < result["copied_windows_bytes"]
    assert "loader share of a step" in table


def test_bench_compose_times_hydra_beside_the_speed_ups_and_puts_hydra_back(tmp_path):
    """Each case composed three ways (Hydra alone, the first of its choices, its choices kept),
    checked the same config, timed; afterwards the speed-ups are in place again (the suite's
    compositions go on using them: installed() reads them)."""
    from seqforecast.config.speed import REPLACED, installed

    out = tmp_path / "compose.json"
    table = run_script("bench_compose.py", "--rounds", "1", "--repeats", "1", "--out", str(out),
                       cwd=tmp_path)
    report = json.loads(out.read_text())
    assert report["speed_ups"] == ["store", "yaml", "interpolation", "choices"] == installed()
    cases = {row["case"] for row in report["results"]}
    assert all(row["hydra_ms"] > 0 and row["first_ms"] > 0 and row["kept_ms"] > 0
               for row in report["results"])
    assert cases == {"default", "attention=diff", "experiment=itransformer",
                     "data=csv (a recipe)"}
    assert "| attention=diff |" in table
    assert all(vars(owner)[name] is not original for (owner, name), original in REPLACED.items())


def test_bench_intervals_summarises_coverage_and_pairs_crps_over_seeds(tmp_path):
    """On finished runs it reuses (no training here): coverage over seeds, each model's CRPS
    over each baseline's paired by seed, and the probabilistic point's MSE over the mse one."""
    runs, out = tmp_path / "runs", tmp_path / "intervals.json"
    model_crps = {"mse": [1.0, 2.0, 3.0], "quantile": [0.5, 1.2, 1.2]}
    for loss, values in model_crps.items():
        for seed, crps in enumerate(values):
            model = {"mse": 2.0 + seed, "crps": crps, "coverage_80": 0.79, "coverage_95": 0.95}
            if loss == "quantile":
                model.update(own_crps=crps / 2, own_coverage_80=0.7, own_coverage_95=0.9,
                             mse=(2.0 + seed) * 1.1)
            metrics = {"test": {"model": model, "nlinear": {"mse": 3.0, "crps": 2.0,
                                                             "coverage_80": 0.81 + seed / 100,
                                                             "coverage_95": 0.96}},
                       "splits": {"test": {"series": 8192}},
                       "run": {"best_epoch": 1, "epochs_run": 1}}
            run_dir = runs / loss / f"seed{seed}"
            run_dir.mkdir(parents=True)
            (run_dir / "metrics.json").write_text(json.dumps(metrics))
    table = run_script("bench_intervals.py", "--losses", "mse", "quantile", "--runs-dir",
                       str(runs), "--out", str(out), cwd=tmp_path)
    split = json.loads(out.read_text())["methods"]["split"]
    assert split["test_windows"] == 8192
    assert split["coverage"]["quantile: model (own)"]["80"]["mean"] == pytest.approx(0.7)
    assert split["coverage"]["mse: nlinear"]["80"]["mean"] == pytest.approx(0.82)
    pair = split["crps_over_baseline"]["quantile: model (own) / nlinear"]
    assert pair["ratio"] == pytest.approx((0.125 * 0.3 * 0.3) ** (1 / 3)) and pair["seeds"] == 3
    assert pair["verdict"] == "lower (beyond noise)"
    assert split["mse_over_mse_model"]["quantile / mse"]["ratio"] == pytest.approx(1.1)
    assert "| quantile: model (own) / nlinear |" in table


def test_bench_cpu_kernels_times_each_kernel_beside_its_torch_path(tmp_path):
    from seqforecast.native import build

    if build.unavailable() is not None:
        pytest.skip(f"no C kernels here: {build.unavailable()}")
    out = tmp_path / "kernels.json"
    table = run_script("bench_cpu_kernels.py", "--rounds", "1", "--steps", "1", "--out",
                       str(out), cwd=tmp_path)
    seconds = json.loads(out.read_text())["seconds"]
    assert list(seconds) == ["attention w=4", "attention w=8", "attention w=12",
                             "dropout [37632, 128]", "training step"]
    for case, timings in seconds.items():
        assert list(timings)[0].startswith("C kernel")
        assert len(timings) >= 2 and all(t > 0 for t in timings.values())
        assert f"| {case} |" in table


def test_profile_step_splits_the_loops_step_into_products_and_the_rest(tmp_path):
    out = tmp_path / "profile.json"
    # the machine's matmul rate at 256^2: at its 2048^2 it took 3 s of the test's 5
    table = run_script("profile_step.py", "--steps", "3", "--warmup", "1", "--top", "40",
                       "--matmul-size", "256", "--out", str(out), "d_model=32", cwd=tmp_path)
    (report,) = json.loads(out.read_text())["entries"]  # the report's first profile
    found = report["found"]
    assert report["name"] == "d_model=32"
    assert report["overrides"] == ["d_model=32", "trainer.num_threads=1"]
    machine = report["machine"]  # which CPU: sessions' machines differ (AVX2, AVX512)
    assert machine["cpu"] and machine["torch"] == torch.__version__
    assert machine["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert 0 < found["products_ms"] < found["profiled_step_ms"] and found["step_ms"] > 0
    assert found["products_gflop"] > 0 and report["matmul_gflop_per_s"] > 0
    ops = {e["op"]: e for e in found["top"]}
    assert len(found["top"]) == 40 and ops["aten::addmm"]["product"] and ops["aten::mm"]["product"]
    assert not any(e["product"] for e in found["top"] if "adam" in e["op"].lower())
    assert sum(e["ms_per_step"] for e in found["top"]) <= found["profiled_step_ms"] + 1e-9
    assert "| aten::addmm |" in table and "GFLOP/s" in table
    with pytest.raises(SystemExit, match="the epoch has 32 steps; .* need 2021: lower them"):
        load_script("profile_step.py").main(["--steps", "1000", "--out", str(out)])


def test_an_official_runs_epochs_count_once_across_a_stop():
    leaderboard = load_script("bench_leaderboard.py")
    # the NP run's log: stopped after epoch 10's line, before its state was saved
    log = "\n".join([*(f"Epoch: {e} cost time: {e}.5" for e in (1, 2, 3)),
                     "[resumed after epoch 2 from x.resume.pt: those epochs replayed]",
                     "Epoch: 3 cost time: 30.5", "Epoch: 4 cost time: 40.5"])
    assert leaderboard.epoch_costs(log) == [1.5, 2.5, 30.5, 40.5]


def test_bench_leaderboard_refuses_a_cell_without_a_published_setting(tmp_path, capsys):
    leaderboard = load_script("bench_leaderboard.py")
    for argv, message in ((["--datasets", "illness"], "no setting for dataset=illness"),
                          (["--horizons", "48"], "no setting for out_len=48"),
                          ([], "the leaderboard's own runs are a study")):
        with pytest.raises(SystemExit) as exit_:
            leaderboard.main([*(["--official", str(tmp_path)] if argv else []), *argv,
                              "--runs-dir", str(tmp_path), "--out", str(tmp_path / "lb.json")])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "lb.json").exists()  # nothing ran


def test_bench_leaderboard_gives_each_official_run_py_its_published_arguments(tmp_path):
    """iTransformer's run.py as before (it knows no --task_name or --patch_len); TimeXer's with
    them, and an EPF market as its script: features MS, one output, input 168, patches of 24."""
    leaderboard = load_script("bench_leaderboard.py")
    args = argparse.Namespace(data_dir=str(tmp_path))

    def given(model, dataset, horizon):
        found = leaderboard.official_args(model, dataset, horizon, None, tmp_path, args)
        return dict(zip(found[::2], found[1::2], strict=True))

    itransformer = given("itransformer", "etth1", 96)
    assert "--task_name" not in itransformer and "--patch_len" not in itransformer
    assert (itransformer["--model"], itransformer["--features"], itransformer["--d_ff"]) == (
        "iTransformer", "M", "256")
    np_market = given("timexer", "np", 24)
    assert np_market["--data_path"] == "NP.csv" and np_market["--root_path"].endswith("/EPF/")
    assert (np_market["--features"], np_market["--c_out"], np_market["--seq_len"],
            np_market["--patch_len"], np_market["--e_layers"], np_market["--d_model"]) == (
        "MS", "1", "168", "24", "3", "512")
    assert given("timexer", "etth1", 96)["--patch_len"] == "16"


def test_gpu_visit_runs_every_part_in_its_tiny_mode_and_says_what_it_did_not_run(
        tmp_path, monkeypatch):
    """scripts/gpu_visit.py's chain on the CPU at tiny sizes: each part's rows in one JSON and
    one markdown table, the parts it cannot run here saying why in their rows; the runs'
    temporary folder goes with the visit; --out relative to the caller's folder, though the
    parts run in the repository's."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "visit"
    table = run_script("gpu_visit.py", "--tiny", "--device", "cpu", "--budget", "900",
                       "--out", "visit", cwd=tmp_path)
    report = json.loads((out / "visit.json").read_text())
    attention = report["parts"]["attention"]["fp32"]
    cases = {r["case"]: r for r in attention["results"]}
    assert attention["status"] == "ok" and cases["sdpa_causal"]["status"] == "ok"
    if importlib.util.find_spec("triton") is not None:  # under its interpreter here
        assert cases["diff_block16_triton"]["status"] == "ok"
    train = report["parts"]["train"]["fp32"]
    assert train["status"] == "ok" and train["matmul_gflops"] > 0
    assert any(r.get("case") == "vanilla" and r["status"] == "ok" for r in train["results"])
    (mission,) = report["parts"]["mission"]["runs"]
    assert mission["status"] == "ok" and mission["test_mse"] > 0
    assert all(p["status"].startswith("not run") for p in report["parts"]["official"].values())
    stacked = report["parts"]["stacked"]
    assert stacked["status"] == "ok" and stacked["speedup"] > 0
    assert stacked["test_mse_ratio"]["n"] == 2
    # the visit's stacked part is bench_stacked.py --smoke: its own report, read back here
    # (rather than a second smoke run of the same script)
    (bench,) = json.loads((out / "stacked.json").read_text())["entries"]
    for side in ("one_after_another", "stacked"):
        found = bench["best"][side]
        assert found["wall_s"] > 0 and sorted(found["runs"]) == ["0", "1"]
        assert all(run["test_mse"] > 0 for run in found["runs"].values())
    assert {run["kernels"] for run in bench["best"]["stacked"]["runs"].values()} == {"torch"}
    assert bench["test_mse_ratio"]["n"] == 2 and bench["speedup"] > 0
    assert (out / "visit.md").read_text().strip() in table
    assert "| stacked | 2 runs |" in table
    assert "| mission | seed 0 |" in table
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("gpu_visit_")]


def test_gpu_visit_tables_a_stacked_part_that_left_no_report():
    """A part that failed or ran over its budget is a row saying so, not the visit's end (the
    table is written after every part has run: a crash there would lose the visit's summary)."""
    visit = load_script("gpu_visit.py")
    stacked = {"status": "over budget (60 s)", "seconds": 60.0, "speedup": None,
               "test_mse_ratio": None, "best": None}
    report = {"device": "cuda", "device_name": "a GPU", "total_seconds": 60.0,
              "parts": {"attention": {}, "train": {}, "mission": {"runs": []}, "official": {},
                        "stacked": stacked}}
    assert "| stacked | 0 runs | over budget (60 s) |" in visit.table(report)


def test_gpu_visit_refuses_cuda_where_there_is_none(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    # its main in this process (argv in, exit code and stderr out): the refusal comes before
    # any part runs, so a fresh interpreter (4 s) would only add torch's import
    proc = run_script("gpu_visit.py", "--out", str(tmp_path), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "--device cuda needs a CUDA device" in proc.stderr
    # as the visit starts it on a lent machine: a script of its own, from another folder,
    # nothing on PYTHONPATH (its --help ends before torch is imported)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    usage = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_visit.py"), "--help"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert usage.returncode == 0 and "--tiny" in usage.stdout, usage.stderr


def test_bench_large_files_times_each_model_at_a_files_shape_by_its_name(tmp_path):
    """Each file of the given shape is written under its catalog name and run by name with its
    published settings; each case's step, epoch and peak memory come back as a row; a case
    that runs out of memory is a row saying so, not the benchmark's end."""
    out = tmp_path / "large.json"
    table = run_script(
        "bench_large_files.py", "--shape", "electricity=1200x5", "traffic=1200x7",
        "--models", "itransformer", "timexer", "--horizons", "96", "--steps", "1",
        "--in-process", "--data-dir", str(tmp_path / "data"), "--out", str(out),
        "--set", "d_model=16", "ffn.d_ff=16", "model.encoder_layers=1", "batch_size=8",
        cwd=tmp_path)
    report = json.loads(out.read_text())
    assert report["shapes"] == {"electricity": [1200, 5], "traffic": [1200, 7]}
    header = (tmp_path / "data" / "traffic.csv").read_text().splitlines()[0]
    assert header == "date,0,1,2,3,4,5,OT"
    cases = {(c["file"], c["model"]): c for c in report["cases"]}
    assert set(cases) == {(f, m) for f in ("electricity", "traffic")
                          for m in ("itransformer", "timexer")}
    for case in cases.values():
        assert case["status"] == "ok" and case["step_seconds"] > 0 and case["peak_mib"] > 0
        # the catalog's borders at this shape: 70% train, 20% test, the windows of each
        assert case["test_windows"] == 240 - 96 + 1 and case["val_windows"] == 120 - 96 + 1
        # batches of 8 windows, the last incomplete one dropped where the recipe drops it
        assert case["train_windows"] // 8 <= case["steps_per_epoch"] <= math.ceil(
            case["train_windows"] / 8)
        assert case["epoch_seconds"] >= case["steps_per_epoch"] * case["step_seconds"]
    assert "| traffic | timexer | 96 |" in table
    assert table.endswith(out.with_suffix(".md").read_text() + "\n")  # the table printed last
    assert "calibration_seconds" not in cases["traffic", "timexer"]  # not asked for
    # --calibration: the end of a run's conformal calibration timed beside, its peak measured
    calibrated = tmp_path / "calibrated.json"
    run_script("bench_large_files.py", "--shape", "electricity=1200x5", "--files", "electricity",
               "--models", "itransformer", "--horizons", "96", "--steps", "1", "--in-process",
               "--calibration", "--data-dir", str(tmp_path / "data"), "--out", str(calibrated),
               "--set", "d_model=16", "ffn.d_ff=16", "model.encoder_layers=1", "batch_size=8",
               cwd=tmp_path)
    (case,) = json.loads(calibrated.read_text())["cases"]
    assert case["calibration_method"] == "split" and case["calibration_seconds"] > 0
    assert case["calibration_peak_mib"] >= 0
    text = calibrated.with_suffix(".md").read_text()
    assert "| electricity | itransformer | 96 | split |" in text
    bench = load_script("bench_large_files.py")

    def no_memory(spec):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")

    bench.measure = no_memory
    spec = {"file": "traffic", "model": "patchtst", "horizon": 96, "memory_gib": 20,
            "capped": False}
    row = bench.worker(spec)
    assert row["status"] == "out of memory: needs more than 20 GiB of address space"
    assert "out of memory" in bench.markdown({**report, "cases": [row]})

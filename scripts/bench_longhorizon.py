r"""The long-horizon benchmark as the papers run it: ETT-style CSV files at horizons 96, 192, 336
and 720 with 336 input steps, over seeds, beside the project's baselines and the published rows.

    python scripts/bench_longhorizon.py ../shared/data/ETTh1.csv ../shared/data/ETTh2.csv
    python scripts/bench_longhorizon.py my.csv --split 0.7 0.1 0.2 --horizons 96 336
    python scripts/bench_longhorizon.py ETTh2.csv --variants preset alone diff --seeds 0 1 2 3 4
    python scripts/bench_longhorizon.py ETTh1.csv --horizons 96 --variants patchtst patchtst_rope
    python scripts/bench_longhorizon.py --smoke       # a small generated file, 1 epoch (the tests)
    python scripts/bench_longhorizon.py ETTh1.csv --speed PatchTST/PatchTST_supervised
    python scripts/bench_longhorizon.py ETTh1.csv --horizons 336 --variants official --seeds 2021 \
        --set model.official_weights=checkpoints/<setting>/checkpoint.pth

The protocol of the published tables (Informer, Autoformer, DLinear, PatchTST, thuml's
Time-Series-Library): every column but the time column is a channel, each its own series
(channel independence); borders by row, for the hourly ETT files rows [0, 8640) train,
[8640, 11520) validation, [11520, 14400) test (12/4/4 months of 30 days), the rows after 14,400
unused (`--borders`), or fractions as Time-Series-Library cuts its other files (`--split 0.7 0.1
0.2`: train int(0.7 n) rows, test int(0.2 n), validation the rest); every window whose forecast
lies in the test rows (stride 1), inputs reaching back into validation rows; every channel
z-scored with its training rows' mean and std; MSE and MAE in those z units, averaged over
channels, windows and steps. Each seqforecast run is `python -m seqforecast.train
experiment=longhorizon` (or, for the `patchtst*` variants, `experiment=patchtst`: the published
PatchTST, docs/patchtst.md) with the file's borders and horizon (and a variant's overrides).
Every run's validation error per epoch is kept (`val_curve`), so what a shorter patience would
have kept can be read off a longer run.

Reported per file and horizon: each variant's test MSE and MAE (mean ± std over seeds), its
paired MSE ratio to the project's NLinear on the same windows (geometric mean over seeds with a
95% Student-t interval, as `seqforecast.compare` gives it), the epochs selection kept and how
often a kept trained epoch beat the linear path on test; the baselines (NLinear, last value);
and, for ETTh1/ETTh2, the published rows (Nie et al. 2023, ICLR, "A Time Series is Worth 64
Words", Table 3: PatchTST/64, PatchTST/42 and DLinear as printed there).

PatchTST's published code scores fewer windows: its test loader drops the last incomplete batch
of 128 (`drop_last=True`), so the newest test windows are never scored. Each row therefore also
gives the MSE on those first windows only ("as the papers' code counts"), beside the full count.

`--speed DIR` times one training epoch of `experiment=patchtst` beside one of the official
code (DIR: the authors' `PatchTST_supervised` folder, with pandas and scikit-learn installed)
on the first file at the first horizon: the same batches (128 windows of time, every channel,
the last incomplete batch dropped), one torch thread each, each epoch in its own process, the
two alternating for `--rounds` rounds. Reported per epoch: the training steps (the official
code's own "cost time": its loader and steps) and the whole epoch as each runs it (seqforecast:
steps + a validation pass; the official loop: steps + validation and test passes).

Output: a Markdown table per file (benchmarks/longhorizon.md) and every run's numbers
(benchmarks/longhorizon.json). One report per table: a run merges into its `--out` where that
exists (its reference variant kept), as `--merge` joins reports (a seed a session, a study of
variants run later): a case (file, horizon, variant, seed) measured twice keeps its latest run
in the table and the earlier, where it differs, in `repeats` (named under the table), each run
with the command and machine that measured it (`report`), every merged report in
`merged_from`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (  # noqa: E402
    REPO,
    keep_latest,
    measured_in,
    run_facts,
    same_fields,
    source,
    stamp,
    timed_official,
    train_run,
    write_report,
)

from seqforecast.runs.loading import load_run  # noqa: E402
from seqforecast.stats import paired_ratio  # noqa: E402
from seqforecast.studies.references import loader_windows, windows_per_series  # noqa: E402
from seqforecast.training.evaluation import Evaluator  # noqa: E402
from seqforecast.training.metrics import evaluation  # noqa: E402

ETT_HOURLY = ("8640", "11520", "14400")  # 12, 4 and 4 months of 30 days, in hours
HORIZONS = (96, 192, 336, 720)
IN_LEN = 336
PAPER_BATCH = 128  # the published code's test batch, whose last incomplete one it drops

# A variant: its preset and overrides. `preset`: experiment=longhorizon; `alone`: the same
# Transformer without the linear path, plain selection (the lowest validation error wins);
# `patchtst`: the published PatchTST (experiment=patchtst), and the attention study on it.
ALONE = ["model.linear_path=none", "model.linear_init=zero", "trainer.validate_initial=false",
         "trainer.min_improvement=0", "trainer.selection_blocks=0"]
DIFF, DIFF_BLOCK = ["attention=diff"], ["attention=diff", "block_size=8"]
ROPE = ["pos_encoding=rope"]
NO_RESIDUAL = ["model.res_attention=false"]
VARIANTS = {
    "preset": ("longhorizon", []),
    "diff": ("longhorizon", DIFF),
    "diff_block": ("longhorizon", DIFF_BLOCK),
    "rope": ("longhorizon", ROPE),
    "alone": ("longhorizon", ALONE),
    "alone_diff": ("longhorizon", [*ALONE, *DIFF]),
    "alone_diff_block": ("longhorizon", [*ALONE, *DIFF_BLOCK]),
    "alone_rope": ("longhorizon", [*ALONE, *ROPE]),
    "patchtst": ("patchtst", []),
    "patchtst_diff": ("patchtst", DIFF),
    "patchtst_diff_block": ("patchtst", DIFF_BLOCK),
    "patchtst_rope": ("patchtst", ROPE),
    # The forecasting literature's mechanisms (docs/attention.md) carry no residual scores, so
    # each runs without residual attention, beside vanilla without it (`patchtst_plain`).
    "patchtst_plain": ("patchtst", NO_RESIDUAL),
    **{f"patchtst_{name}": ("patchtst", [*NO_RESIDUAL, f"attention={name}"])
       for name in ("probsparse", "autocorrelation", "fourier", "flow", "destationary")},
    # An official PatchTST checkpoint scored as it is (give --set model.official_weights=PATH):
    # epoch 0 is its weights (best.pt), so both window counts read it.
    "official": ("patchtst", ["trainer.epochs=0", "trainer.validate_initial=true"]),
}

# Nie et al. 2023 (ICLR), "A Time Series is Worth 64 Words", Table 3 (input 512 for /64, 336
# for /42 and DLinear), z units: {file: {forecaster: {horizon: (MSE, MAE)}}}.
PUBLISHED_SOURCE = "Nie et al. 2023 (ICLR), Table 3"
PUBLISHED = {
    "ETTh1": {
        "PatchTST/64": {96: (0.370, 0.400), 192: (0.413, 0.429), 336: (0.422, 0.440),
                        720: (0.447, 0.468)},
        "PatchTST/42": {96: (0.375, 0.399), 192: (0.414, 0.421), 336: (0.431, 0.436),
                        720: (0.449, 0.466)},
        "DLinear": {96: (0.375, 0.399), 192: (0.405, 0.416), 336: (0.439, 0.443),
                    720: (0.472, 0.490)},
    },
    "ETTh2": {
        "PatchTST/64": {96: (0.274, 0.337), 192: (0.341, 0.382), 336: (0.329, 0.384),
                        720: (0.379, 0.422)},
        "PatchTST/42": {96: (0.274, 0.336), 192: (0.339, 0.379), 336: (0.331, 0.380),
                        720: (0.379, 0.422)},
        "DLinear": {96: (0.289, 0.353), 192: (0.383, 0.418), 336: (0.448, 0.465),
                    720: (0.605, 0.551)},
    },
}

# --smoke: a small hourly file made here, its own borders and horizons, one tiny epoch.
SMOKE_ROWS, SMOKE_BORDERS, SMOKE_HORIZONS, SMOKE_IN = 700, ("400", "530", "660"), (24, 48), 96
SMOKE_EXTRA = ["epochs=1", "d_model=8", "n_heads=2", "ffn.d_ff=16", "model.encoder_layers=1",
               "trainer.patience=0", "log.figures=false"]


# ---------------------------------------------------------------- data


def header_and_rows(path: Path) -> tuple[list[str], int]:
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, sum(1 for _ in reader)


def borders_for(path: Path, args) -> tuple[str, str, str]:
    """(validation start, test start, test end) rows: --borders as given, or --split as
    Time-Series-Library cuts a file (train int(f_train n), test int(f_test n), the rest
    validation)."""
    if args.split is None:
        return tuple(args.borders)
    _, n = header_and_rows(path)
    train, _, test = args.split
    n_train, n_test = int(n * train), int(n * test)
    return str(n_train), str(n - n_test), str(n)


def write_smoke_file(path: Path, rows: int = SMOKE_ROWS) -> Path:
    """An hourly file in ETT's layout: a date column and three channels of different scales,
    daily and weekly cycles, a drift and noise (same bytes every time)."""
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["date", "HUFL", "MUFL", "OT"])
        for i in t:
            moment = str(np.datetime64("2016-07-01T00:00") + np.timedelta64(int(i), "h"))
            cells = [
                level * (1 + 0.3 * np.sin(2 * np.pi * i / 24 + k) + 0.1 * np.sin(
                    2 * np.pi * i / 168) + 0.0005 * i) + rng.normal(0, 0.05 * level)
                for k, level in enumerate((5.0, 2.0, 30.0))
            ]
            writer.writerow([moment.replace("T", " "), *(f"{c:.4f}" for c in cells)])
    return path


# ---------------------------------------------------------------- runs


def protocol(experiment: str, path: Path, borders, horizon: int, in_len: int) -> list[str]:
    """The overrides every run of a file and horizon shares: preset, file, borders, lengths."""
    val, test, end = borders
    time_column = header_and_rows(path)[0][0]
    return [f"experiment={experiment}", f"data.path={path}", f"data.time_column={time_column}",
            f"data.val_start={val}", f"data.test_start={test}", f"data.test_end={end}",
            f"in_len={in_len}", f"out_len={horizon}"]


def run_one(path: Path, borders, horizon: int, variant: str, seed: int, args) -> dict:
    run_dir = args.runs_dir / path.stem / f"h{horizon}" / variant / f"seed{seed}"
    experiment, variant_overrides = VARIANTS[variant]
    overrides = [
        *protocol(experiment, path, borders, horizon, args.in_len), f"seed={seed}",
        f"trainer.num_threads={args.threads}", *variant_overrides, *args.extra, *args.set,
    ]
    metrics, last, wall = train_run(overrides, run_dir)
    label = {"file": path.stem, "horizon": horizon, "variant": variant, "seed": seed}
    if metrics is None:
        return {**label, "status": f"failed: {last}"}
    test_rows = metrics["test"]
    return {
        **label,
        "status": "ok",
        "mse": test_rows["model"]["mse_scaled"],
        "mae": test_rows["model"]["mae_scaled"],
        "baselines": {
            name: {"mse": row["mse_scaled"], "mae": row["mae_scaled"]}
            for name, row in test_rows.items()
            if name != "model"
        },
        "val_mse": metrics["val"]["model"]["mse_scaled"],
        **run_facts(metrics, wall),
        "paper_count": paper_count(run_dir, args.paper_batch),
        "val_curve": val_curve(run_dir),
        "test_curve": test_curve(run_dir),
        "run_dir": str(run_dir),
    }


def val_curve(run_dir: Path) -> list[list]:
    """[epoch, the validation error selection read] of each epoch scored (z units), from the
    run's last.pt (best.pt where no epoch was trained: epochs=0 scores epoch 0 only)."""
    path = run_dir / "checkpoints" / "last.pt"
    if not path.exists():
        path = path.with_name("best.pt")
    last = torch.load(path, map_location="cpu", weights_only=True)
    return [[e["epoch"], e.get("val_mse_scaled", e["val_mse"])] for e in last["loop"]["history"]]


def test_curve(run_dir: Path) -> list[list]:
    """[epoch, test MSE (data units)] of each epoch whose test set the run scored for
    TensorBoard (`log.test_every`; none with the presets' 0), read from its events file: what
    the epoch a shorter patience keeps scores, on a run with a longer one."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    last = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    epoch_at = {e["step"]: e["epoch"] for e in last["loop"]["history"]}
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    if "test/mse" not in events.Tags()["scalars"]:
        return []
    return [[epoch_at[e.step], e.value] for e in events.Scalars("test/mse") if e.step in epoch_at]


def paper_count(run_dir: Path, batch: int = PAPER_BATCH) -> dict:
    """MSE and MAE (z units) of the model and NLinear on the test windows the published code
    scores: per channel, the first windows filling whole batches of `batch` (its test loader
    drops the last incomplete batch: `drop_last=True`)."""
    run = load_run(run_dir, "best", "cpu")
    data, test = run.data, run.data.test
    nlinear = Evaluator.for_run(data, run.config).baselines["nlinear"]
    errors = {"model": [], "nlinear": []}
    with evaluation(run.model):
        for index in test.chunks(1024):
            src, target = test.take(index)
            for name, forecast in (("model", run.model), ("nlinear", nlinear)):
                errors[name].append((forecast(src) - target).double())
    keep = loader_windows(test, batch)
    found = {"windows_per_channel": windows_per_series(test, keep)}
    for name, parts in errors.items():
        error = torch.cat(parts)[torch.from_numpy(keep)]
        found[name] = {"mse": float(error.square().mean()), "mae": float(error.abs().mean())}
    return found


# ---------------------------------------------------------------- speed beside the official code

# Runs inside the official code's folder: its own training loop for one epoch, timed.
OFFICIAL_EPOCH = timed_official("exp.exp_main", "Exp_Main", "run_longExp.py")


def official_args(path: Path, horizon: int, in_len: int, channels: int, workdir: Path) -> list:
    """The published ETTh script's arguments (scripts/PatchTST/etth1.sh), one epoch, on CPU."""
    name = path.stem
    return ["--random_seed", "2021", "--is_training", "1", "--root_path", f"{path.parent}/",
            "--data_path", path.name, "--model_id", f"{name}_{in_len}_{horizon}",
            "--model", "PatchTST", "--data", name if name in ("ETTh1", "ETTh2") else "custom",
            "--features", "M", "--seq_len", str(in_len), "--pred_len", str(horizon),
            "--enc_in", str(channels), "--e_layers", "3", "--n_heads", "4", "--d_model", "16",
            "--d_ff", "128", "--dropout", "0.3", "--fc_dropout", "0.3", "--head_dropout", "0",
            "--patch_len", "16", "--stride", "8", "--des", "speed", "--train_epochs", "1",
            "--itr", "1", "--batch_size", "128", "--learning_rate", "0.0001",
            "--num_workers", "0", "--use_gpu", "False",
            "--checkpoints", str(workdir / "official_checkpoints")]


def official_epoch(code: Path, path: Path, horizon: int, in_len: int, channels: int,
                   workdir: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", OFFICIAL_EPOCH,
         *official_args(path, horizon, in_len, channels, workdir)],
        cwd=code, env=env, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the official code failed: {(proc.stderr or proc.stdout)[-800:]}")
    cost = re.search(r"Epoch: 1 cost time: ([0-9.]+)", proc.stdout)
    timed = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"train_seconds": float(cost.group(1)), "epoch_seconds": timed["train_call_seconds"],
            "val_test_seconds": timed["vali_seconds"]}


def seqforecast_epoch(path: Path, borders, horizon: int, in_len: int, run_dir: Path) -> dict:
    overrides = [*protocol("patchtst", path, borders, horizon, in_len), "epochs=1",
                 "trainer.num_threads=1"]
    metrics, last, _ = train_run(overrides, run_dir)
    if metrics is None:
        raise SystemExit(f"seqforecast failed: {last}")
    loop = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["loop"]
    epoch = loop["history"][-1]
    return {"train_seconds": epoch["train_seconds"],
            "epoch_seconds": epoch["train_seconds"] + epoch["val_seconds"],
            "steps": loop["step"]}


def speed(args) -> dict:
    """One epoch each, alternating, `args.rounds` rounds: seconds per epoch, both ways."""
    path = args.files[0].resolve()
    borders, horizon = borders_for(path, args), args.horizons[0]
    channels = len(header_and_rows(path)[0]) - 1
    workdir = args.runs_dir / "speed"
    rounds = []
    for i in range(args.rounds):
        ours = seqforecast_epoch(path, borders, horizon, args.in_len, workdir / f"seqforecast{i}")
        theirs = official_epoch(args.speed.resolve(), path, horizon, args.in_len, channels,
                                workdir)
        rounds.append({"seqforecast": ours, "official": theirs})
        print(f"  round {i + 1}: seqforecast {ours['train_seconds']:.1f} s of steps, official "
              f"{theirs['train_seconds']:.1f} s", flush=True)
    best = {side: {key: min(r[side][key] for r in rounds) for key in ("train_seconds",
                                                                         "epoch_seconds")}
            for side in ("seqforecast", "official")}
    return {
        "file": path.stem, "horizon": horizon, "threads": 1, "rounds": rounds, "best": best,
        "steps": rounds[0]["seqforecast"]["steps"],
        "speedup_train": best["official"]["train_seconds"] / best["seqforecast"]["train_seconds"],
        "speedup_epoch": best["official"]["epoch_seconds"] / best["seqforecast"]["epoch_seconds"],
    }


def speed_markdown(s: dict) -> str:
    b = s["best"]
    return "\n".join([
        f"### One epoch, {s['file']} at horizon {s['horizon']}: seqforecast beside the official "
        f"code",
        "",
        f"{s['steps']} steps of 128 windows of time (every channel), 1 torch thread each, "
        f"alternating, best of {len(s['rounds'])} rounds (seconds).",
        "",
        "| | training steps | whole epoch as each runs it |",
        "|---|---|---|",
        f"| official PatchTST code | {b['official']['train_seconds']:.1f} | "
        f"{b['official']['epoch_seconds']:.1f} (steps + validation and test passes) |",
        f"| seqforecast experiment=patchtst | {b['seqforecast']['train_seconds']:.1f} | "
        f"{b['seqforecast']['epoch_seconds']:.1f} (steps + validation pass) |",
        f"| official ÷ seqforecast | {s['speedup_train']:.2f}x | {s['speedup_epoch']:.2f}x |",
        "",
    ])


# ---------------------------------------------------------------- summaries


def summarise(runs: list[dict], reference: str) -> dict:
    """Per variant: mean ± std of the test MSE and MAE over seeds, the paired MSE ratio to
    NLinear (and to the reference variant), the epochs kept, how often a kept trained epoch
    beat NLinear on test."""
    by_variant: dict[str, list[dict]] = {}
    for r in runs:
        by_variant.setdefault(r["variant"], []).append(r)
    ref = {r["seed"]: r["mse"] for r in by_variant.get(reference, []) if r["status"] == "ok"}
    out = {}
    for variant, rs in by_variant.items():
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            out[variant] = {"n": 0, "status": rs[0]["status"]}
            continue
        mse = {r["seed"]: r["mse"] for r in ok}
        nlinear = {r["seed"]: r["baselines"]["nlinear"]["mse"] for r in ok}
        trained = [r for r in ok if r["best_epoch"] > 0]
        vs_nlinear = paired_ratio(mse, nlinear)
        vs_ref = paired_ratio(mse, ref) if variant != reference and ref else None
        out[variant] = {
            "n": len(ok),
            "mse": statistics.mean(mse.values()),
            "mse_std": statistics.stdev(mse.values()) if len(ok) > 1 else 0.0,
            "mae": statistics.mean(r["mae"] for r in ok),
            "paper_count_mse": statistics.mean(r["paper_count"]["model"]["mse"] for r in ok),
            "vs_nlinear": _ratio(vs_nlinear),
            "vs_reference": _ratio(vs_ref) if vs_ref else None,
            "best_epochs": [r["best_epoch"] for r in ok],
            "trained_kept": len(trained),
            "trained_kept_beat_nlinear": sum(
                r["mse"] < r["baselines"]["nlinear"]["mse"] for r in trained
            ),
            "train_seconds": statistics.mean(r["train_seconds"] for r in ok),
            # Would a shorter patience have kept the same epoch? Read off each run's curve.
            "same_epoch_with_patience": {
                str(p): sum(kept_with_patience(r.get("val_curve", []), p) == r["best_epoch"]
                            for r in ok)
                for p in SHORTER_PATIENCE
            },
            # and, on runs that scored the test set every epoch, what its epoch scores
            "test_with_patience": patience_cost(ok),
        }
    return out


SHORTER_PATIENCE = (3, 5, 10)


def patience_cost(runs: list[dict]) -> dict:
    """For each shorter patience: the mean over runs with a test curve of the test MSE of the
    epoch it keeps over the kept epoch's ({} without such runs)."""
    curves = [(dict(map(tuple, r["test_curve"])), r) for r in runs if r.get("test_curve")]
    curves = [(c, r) for c, r in curves if r["best_epoch"] in c]
    if not curves:
        return {}
    return {
        str(p): statistics.mean(
            c[kept_with_patience(r["val_curve"], p)] / c[r["best_epoch"]] for c, r in curves)
        for p in SHORTER_PATIENCE
        if all(kept_with_patience(r["val_curve"], p) in c for c, r in curves)
    }


def _per_patience(entry: dict, key: str, cell, lead: str) -> list[str]:
    """A paragraph (blank line first) of each variant's summary[key] {patience: value}, a
    value written cell(value, summary); [] where no variant has it."""
    parts = [
        f"{horizon} {variant}: " + ", ".join(
            f"patience {p} {cell(value, s)}" for p, value in found.items())
        for horizon, h in entry["horizons"].items()
        for variant, s in h["summary"].items()
        if s["n"] and (found := s.get(key))
    ]
    return ["", lead + "; ".join(parts) + "."] if parts else []


def kept_with_patience(curve: list[list], patience: int) -> int:
    """The epoch plain early stopping with `patience` keeps on a [epoch, value] curve (reports
    written before the epochs were stored hold the values alone, from epoch 1)."""
    if curve and not isinstance(curve[0], list):
        curve = [[epoch, value] for epoch, value in enumerate(curve, start=1)]
    best, kept, since = math.inf, 0, 0
    for epoch, value in curve:
        if value < best:
            best, kept, since = value, epoch, 0
        else:
            since += 1
            if since >= patience:
                break
    return kept


def _ratio(p) -> dict:
    return {"ratio": p.ratio, "low": p.low, "high": p.high, "n": p.n, "verdict": p.verdict}


def _interval(r: dict | None) -> str:
    if r is None:
        return "reference"
    if math.isnan(r["low"]):
        return f"{r['ratio']:.3f} (n={r['n']})"
    return f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def markdown(report: dict, reference: str) -> str:
    out = []
    for name, entry in report["files"].items():
        val, test, end = entry["borders"]
        out += [
            f"### {name}",
            "",
            f"`{Path(entry['path']).name}`: {entry['channels']} channels, rows [0, {val}) train, "
            f"[{val}, {test}) validation, [{test}, {end}) test; input "
            f"{report['protocol']['in_len']}; z units (each channel scaled by its training "
            f"rows); seqforecast rows: mean ± std over n seeds.",
            "",
            "| horizon | forecaster | test MSE | test MAE | MSE ÷ NLinear [95% CI] | verdict | "
            "MSE as the papers' code counts | epochs kept | kept trained epoch beat NLinear |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for horizon, h in entry["horizons"].items():
            for variant, s in h["summary"].items():
                if not s["n"]:
                    out.append(f"| {horizon} | seqforecast {variant} | {s['status']} | | | | | | |")
                    continue
                r = s["vs_nlinear"]
                out.append(
                    f"| {horizon} | seqforecast {variant} (n={s['n']}) | {s['mse']:.4f} ± "
                    f"{s['mse_std']:.4f} | "
                    f"{s['mae']:.4f} | {_interval(r)} | {r['verdict']} | "
                    f"{s['paper_count_mse']:.4f} | {s['best_epochs']} | "
                    f"{s['trained_kept_beat_nlinear']} of {s['trained_kept']} |"
                )
            for base in ("nlinear", "last_value"):
                b = h["baselines"][base]
                paper = h["paper_count_nlinear"] if base == "nlinear" else None
                out.append(
                    f"| {horizon} | {base} | {b['mse']:.4f} | {b['mae']:.4f} | | | "
                    f"{'' if paper is None else f'{paper:.4f}'} | | |"
                )
            for forecaster, rows in PUBLISHED.get(name, {}).items():
                mse, mae = rows[int(horizon)]
                out.append(
                    f"| {horizon} | {forecaster} (published) | | | | | {mse:.3f} (MAE {mae:.3f})"
                    f" | | |"
                )
        out += _per_patience(
            entry, "same_epoch_with_patience", lambda same, s: f"{same} of {s['n']}",
            "Runs whose kept epoch a shorter patience would have kept too (read off each run's "
            "validation curve): ",
        )
        out += _per_patience(
            entry, "test_with_patience", lambda ratio, s: f"{ratio:.4f}",
            "Test MSE (data units) of the epoch a shorter patience keeps over the kept epoch's, "
            "on runs that scored the test set every epoch (log.test_every=1): ",
        )
        vs_ref = [
            (horizon, variant, s["vs_reference"])
            for horizon, h in entry["horizons"].items()
            for variant, s in h["summary"].items()
            if s.get("vs_reference")
        ]
        if vs_ref:
            out += ["", f"Paired MSE ratio to `{reference}`, seed by seed:", ""]
            out += ["| horizon | variant | ratio [95% CI] | verdict |", "|---|---|---|---|"]
            out += [f"| {h} | {v} | {_interval(r)} | {r['verdict']} |" for h, v, r in vs_ref]
        repeats = [f"{r['horizon']} {r['variant']} seed {r['seed']}: {r['mse']:.4f} / "
                   f"{r['paper_count']['model']['mse']:.4f} (epoch {r['best_epoch']})"
                   for r in report.get("repeats", []) if r["file"] == name
                   and r["status"] == "ok"]
        if repeats:
            out += ["", "Other runs of these cases, kept in the report beside the table's (test "
                    f"MSE, every window / the papers' count): {'; '.join(repeats)}."]
        out.append("")
    if any(name in PUBLISHED for name in report["files"]):
        out.append(
            f"Published rows: {PUBLISHED_SOURCE}, MSE and MAE as printed. PatchTST's published "
            f"code scores the test windows that fill whole batches of "
            f"{report['protocol']['paper_batch']} (drop_last): its rows belong in the column "
            f"that counts as it does."
        )
    return "\n".join(out) + "\n"


# What a run measured: two records of a case equal in these are one run met again (in another
# report, or read again from its run dir: `reused`, `wall_seconds` differ), not a repeat.
SAME_RUN = same_fields("status", "mse", "mae", "best_epoch", "epochs_run", "train_seconds",
                       "test_windows", "paper_count")


def merge_reports(reports: list[tuple[Path | None, dict]], variants: list[str]) -> dict:
    """One report from several ((file, report), in the order they were measured: e.g. a main
    table, each seed's report and a study of variants run later on the same files): every
    (file, horizon) summarised over its runs, `variants[0]` the reference of the paired ratios
    between variants. A case (file, horizon, variant, seed) measured twice keeps its latest
    run in the table and the earlier, where it differs, in `repeats`; each run keeps the
    command and machine of the report that measured it (`report`), and every merged report is
    in `merged_from`."""
    merged: dict = {
        "protocol": reports[0][1]["protocol"],
        "variants": variants,
        "files": {},
        "merged_from": [source(path, report) for path, report in reports],
        "wall_seconds": sum(report.get("wall_seconds", 0) for _, report in reports),
        "repeats": [],
    }
    kept: dict = {}
    repeats = merged["repeats"]
    for _, report in reports:
        tag = measured_in(report)
        repeats += [r for r in report.get("repeats", []) if r not in repeats]
        for stem, entry in report["files"].items():
            merged["files"].setdefault(stem, {**entry, "horizons": {}})
            for horizon, h in entry["horizons"].items():
                for r in h["runs"]:
                    keep_latest(kept, (stem, horizon, r["variant"], r["seed"]), r, repeats,
                                SAME_RUN, tag)
    runs: dict[tuple[str, str], list[dict]] = {}
    for (stem, horizon, _, _), r in kept.items():
        runs.setdefault((stem, horizon), []).append(r)
    for done in runs.values():  # reports written before test curves were kept: from the runs
        for r in done:
            last = Path(r.get("run_dir", "")) / "checkpoints" / "last.pt"
            if r["status"] == "ok" and "test_curve" not in r and last.is_file():
                r["test_curve"] = test_curve(Path(r["run_dir"]))
    for (stem, horizon), done in sorted(runs.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        order = [v for v in variants if any(r["variant"] == v for r in done)]
        order += sorted({r["variant"] for r in done} - set(order))
        merged["files"][stem]["horizons"][horizon] = horizon_entry(done, order)
    return merged


def merge(paths: list[Path], variants: list[str], out: Path, argv) -> int:
    merged = merge_reports([(p, json.loads(p.read_text())) for p in paths], variants)
    write_report(out, "scripts/bench_longhorizon.py", argv, **merged)
    write_tables(merged, variants[0], out)
    return 0


def horizon_entry(done: list[dict], order: list[str]) -> dict:
    """One (file, horizon)'s runs, sorted by variant (in `order`) and seed, summarised with
    `order[0]` the reference, beside the baselines every run scored on the same windows."""
    done.sort(key=lambda r: (order.index(r["variant"]), r["seed"]))
    ok = [r for r in done if r["status"] == "ok"]
    return {
        "summary": summarise(done, order[0]),
        "baselines": ok[0]["baselines"] if ok else {},
        "paper_count_nlinear": ok[0]["paper_count"]["nlinear"]["mse"] if ok else None,
        "test_windows": ok[0]["test_windows"] if ok else None,
        "runs": done,
    }


def write_tables(report: dict, reference: str, out: Path) -> None:
    """The report's Markdown tables, printed and written beside its JSON."""
    text = markdown(report, reference)
    out.with_suffix(".md").write_text(text)
    print(text)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="CSV files: a time column, channels")
    parser.add_argument(
        "--borders", nargs=3, default=list(ETT_HOURLY), metavar=("VAL", "TEST", "END"),
        help="rows (or times) where validation and test start and where test ends",
    )
    parser.add_argument(
        "--split", nargs=3, type=float, default=None, metavar=("TRAIN", "VAL", "TEST"),
        help="fractions instead of borders",
    )
    parser.add_argument("--horizons", nargs="+", type=int, default=list(HORIZONS))
    parser.add_argument("--in-len", type=int, default=IN_LEN)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--variants", nargs="+", default=["preset"], choices=list(VARIANTS),
        help="the first is the reference of the paired ratios between variants",
    )
    parser.add_argument("--set", nargs="*", default=[], help="further overrides for every run")
    parser.add_argument("--paper-batch", type=int, default=PAPER_BATCH,
                        help="the published code's test batch (the windows it scores)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "outputs" / "bench_longhorizon")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "longhorizon.json")
    parser.add_argument(
        "--smoke", action="store_true", help="a small generated file, 2 horizons, 1 seed"
    )
    parser.add_argument(
        "--merge", nargs="+", type=Path, default=None, metavar="JSON",
        help="no training: the runs of these reports, summarised together into --out",
    )
    parser.add_argument(
        "--speed", type=Path, default=None, metavar="DIR",
        help="time one epoch beside the official code in DIR (its PatchTST_supervised folder)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="--speed: epochs of each side")
    args = parser.parse_args(argv)
    if args.speed:
        if not args.files:
            parser.error("--speed needs a CSV file (ETTh1.csv)")
        found = speed(args)
        write_report(args.out, "scripts/bench_longhorizon.py", argv, speed=found)
        text = speed_markdown(found)
        args.out.with_suffix(".md").write_text(text)
        print(text)
        return 0
    if args.merge:
        return merge(args.merge, args.variants, args.out, argv)
    args.extra = []
    if args.smoke:
        args.files = [write_smoke_file(args.runs_dir / "smoke_data" / "ETTsmoke.csv")]
        args.borders, args.split, args.horizons = list(SMOKE_BORDERS), None, list(SMOKE_HORIZONS)
        args.in_len, args.seeds, args.extra = SMOKE_IN, args.seeds[:1], SMOKE_EXTRA
        args.paper_batch = 32
    if not args.files:
        parser.error("give at least one CSV file (or --smoke)")
    for path in args.files:
        if not path.is_file():
            parser.error(f"{path}: no such file")

    report: dict = {
        "protocol": {"in_len": args.in_len, "stride": 1, "units": "z (training rows)",
                     "paper_batch": args.paper_batch, "published_source": PUBLISHED_SOURCE},
        "variants": args.variants,
        "files": {},
    }
    # An --out that exists is the table's report: these runs are merged into it (as --merge
    # would), each time it is written, its reference variant kept.
    previous = json.loads(args.out.read_text()) if args.out.is_file() else None
    variants = list(args.variants)
    if previous:
        print(f"merging into {args.out}", file=sys.stderr)
        variants = [*previous.get("variants", []), *args.variants]
        variants = sorted(set(variants), key=variants.index)

    def save() -> dict:
        if previous is None:
            write_report(args.out, "scripts/bench_longhorizon.py", argv, **report)
            return report
        merged = merge_reports([(args.out, previous),
                                (None, {**stamp(__file__, argv), **report})], variants)
        write_report(args.out, "scripts/bench_longhorizon.py", argv, **merged)
        return merged
    started = time.perf_counter()
    files = {}  # stem -> (path, borders)
    for path in args.files:
        path = path.resolve()
        borders = borders_for(path, args)
        header, rows = header_and_rows(path)
        files[path.stem] = (path, borders)
        report["files"][path.stem] = {
            "path": str(path), "rows": rows, "channels": len(header) - 1,
            "borders": list(borders), "horizons": {},
        }
    cases = [(stem, h, v, s) for stem in files for h in args.horizons
             for v in args.variants for s in args.seeds]
    runs: dict[tuple[str, int], list[dict]] = {}

    def case(c):
        stem, horizon, variant, seed = c
        r = run_one(*files[stem], horizon, variant, seed, args)
        shown = (f"test MSE {r['mse']:.4f} (epoch {r['best_epoch']})" if r["status"] == "ok"
                 else r["status"])
        print(f"  {stem} h{horizon} {variant} seed {seed}: {shown}", flush=True)
        return r

    # All cases share one pool (each run is a subprocess); a horizon's summary is written as
    # soon as its runs are in, so a long benchmark that stops keeps what it finished.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(case, c): c for c in cases}
        for future in as_completed(futures):
            stem, horizon, _, _ = futures[future]
            done = runs.setdefault((stem, horizon), [])
            done.append(future.result())
            if len(done) < len(args.variants) * len(args.seeds):
                continue
            report["files"][stem]["horizons"][str(horizon)] = horizon_entry(done, args.variants)
            report["wall_seconds"] = round(time.perf_counter() - started, 1)
            save()
    for entry in report["files"].values():  # horizons in the order asked for
        entry["horizons"] = {str(h): entry["horizons"][str(h)] for h in args.horizons}
    failed = sum(r["status"] != "ok" for rs in runs.values() for r in rs)
    write_tables(save(), variants[0], args.out)
    print(f"wrote {args.out.with_suffix('.md')} ({report['wall_seconds']} s)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

r"""The input-96 leaderboard of the published tables: iTransformer, the published PatchTST at an
input of 96 steps, TimeXer, and the best linear fit (NLinear, DLinear) on the field's datasets by
name, over seeds, beside the published rows and the official code's own runs on this machine;
and the EPF markets (TimeXer's features MS: input 168, horizon 24, the price from its own past
and the exogenous series', with a linear fit reading every input beside).

    python scripts/bench_leaderboard.py --datasets etth1 etth2 ettm1 ettm2 weather --seeds 0 1 2
    python scripts/bench_leaderboard.py --datasets etth1 --models itransformer --jobs 2
    python scripts/bench_leaderboard.py --merge a.json b.json --out benchmarks/leaderboard.json
    python scripts/bench_leaderboard.py --official iTransformer --datasets etth1 ettm1 weather
    python scripts/bench_leaderboard.py --speed iTransformer --datasets etth1 --rounds 3
    python scripts/bench_leaderboard.py --models timexer --datasets etth1 ettm1
    python scripts/bench_leaderboard.py --models timexer --datasets np pjm be --horizons 24
    python scripts/bench_leaderboard.py --official TimeXer --models timexer --datasets np \
        --horizons 24
    python scripts/bench_leaderboard.py --speed TimeXer --models timexer --datasets etth1
    python scripts/bench_leaderboard.py --smoke      # a small generated file, 1 epoch (the tests)

Every run is `python -m seqforecast.train experiment=<model> dataset=<name> in_len=96
out_len=<horizon>` with the published sizes of that dataset and horizon (seqforecast/published/):
the dataset's borders, every channel z-scored on its training rows, MSE and MAE in those z units
over every test window (iTransformer's published test loader has a batch of 1). PatchTST's
published test loader drops the last incomplete batch of 128; its rows also give the MSE on
the windows that loader scores ("as the paper counts"). The linear rows are least-squares fits
on the training windows, the same windows scored: NLinear (the run's own baseline) and DLinear's
function class (a seasonal-trend split of the window, each part through a map shared by the
channels: as the split is invertible, that is every linear map of the window, fitted here in
closed form rather than by Adam). Each model's paired MSE ratio to the best of the two, over
seeds, has a 95% interval (seqforecast.stats.paired_ratio, as `compare` gives it).

`--official DIR` runs the authors' code of the one model `--models` names (iTransformer, the
default: DIR a checkout of thuml/iTransformer; TimeXer: of thuml/TimeXer; with pandas,
scikit-learn, tqdm, matplotlib and einops, and for TimeXer's imports reformer_pytorch, sktime
and patool, in `--official-python`) at its published settings and the seed its run.py fixes
(2023, 2021; `--official-seeds` sets others, to measure its own noise), every test window
scored, and keeps its test MSE and MAE beside. An EPF cell's horizon is 24 (`--horizons 24`).
`--speed DIR` times one training epoch of each, the same batches of 32 windows of time, one
torch thread each, alternating for `--rounds` rounds: the training steps, and the whole epoch as
each runs it (seqforecast: steps and a validation pass; the official loop: steps, then a
validation pass and a pass over the test windows one at a time).

One report for the table, benchmarks/leaderboard.json and .md: a run merges into its `--out`
where that exists, as `--merge` joins reports made elsewhere (cells run on several machines or
at different times). Each case's latest measurement is in the table (a run by cell, model,
variant and seed; the official code's by cell, model and seed; an epoch's speed by model and
variant), the earlier ones that differ are kept in `repeats` (named under the tables), every
measurement keeps the command and machine that measured it (`report`), and every merged
report's are in `merged_from`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import product
from pathlib import Path

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
from bench_longhorizon import paper_count, write_smoke_file  # noqa: E402

from seqforecast.datasets import entry  # noqa: E402
from seqforecast.model.linear_path import least_squares  # noqa: E402
from seqforecast.options import ConfigError  # noqa: E402
from seqforecast.published import published_overrides  # noqa: E402
from seqforecast.runs.loading import load_run  # noqa: E402
from seqforecast.stats import paired_ratio  # noqa: E402

IN_LEN, PAPER_BATCH = 96, 128
MODELS = ("itransformer", "patchtst", "timexer")
LINEAR = {"nlinear": "nlinear", "dlinear": "dlinear",  # the target channels' own windows
          "linear_all_inputs": "linear, every input"}  # exogenous series too, where there are
# The authors' code that --official and --speed run: model -> its name, its experiment module
# (each repository's run.py runs Exp_Long_Term_Forecast from it) and the seed its run.py fixes.
OFFICIAL_CODE = {
    "itransformer": ("iTransformer", "experiments.exp_long_term_forecasting", 2023),
    "timexer": ("TimeXer", "exp.exp_long_term_forecasting", 2021),
}
OFFICIAL_SEED = OFFICIAL_CODE["itransformer"][2]  # reports of one official run: iTransformer's
# iTransformer (Liu et al. 2024, ICLR), Table 10, input 96: MSE and MAE as printed there.
PUBLISHED_SOURCE = "Liu et al. 2024 (ICLR), iTransformer, Table 10 (input 96)"
PUBLISHED = {
    "etth1": {"iTransformer": (0.386, 0.405), "PatchTST": (0.414, 0.419),
              "DLinear": (0.386, 0.400)},
    "etth2": {"iTransformer": (0.297, 0.349), "PatchTST": (0.302, 0.348),
              "DLinear": (0.333, 0.387)},
    "ettm1": {"iTransformer": (0.334, 0.368), "PatchTST": (0.329, 0.367),
              "DLinear": (0.345, 0.372)},
    "ettm2": {"iTransformer": (0.180, 0.264), "PatchTST": (0.175, 0.259),
              "DLinear": (0.193, 0.292)},
    "weather": {"iTransformer": (0.174, 0.214), "PatchTST": (0.177, 0.218),
                "DLinear": (0.196, 0.255)},
}
# TimeXer (Wang et al. 2024, NeurIPS), Table 2: the EPF markets at input 168, horizon 24, MS.
PUBLISHED_EPF_SOURCE = ("Wang et al. 2024 (NeurIPS), TimeXer, Table 2 (EPF: input 168, "
                        "horizon 24, one target)")
PUBLISHED_EPF = {"np": {"TimeXer": (0.236, None)}, "pjm": {"TimeXer": (0.093, None)},
                 "be": {"TimeXer": (0.379, None)}, "fr": {"TimeXer": (0.385, None)},
                 "de": {"TimeXer": (0.440, None)}}


def published_rows(key: str) -> tuple[dict, str | None]:
    """A cell's published rows (forecaster -> (MSE, MAE)) and the table they come from."""
    dataset, _, horizon = key.partition("-")
    if horizon == "96" and dataset in PUBLISHED:
        return PUBLISHED[dataset], PUBLISHED_SOURCE
    if horizon == "24" and dataset in PUBLISHED_EPF:
        return PUBLISHED_EPF[dataset], PUBLISHED_EPF_SOURCE
    return {}, None


SMOKE = {"borders": ("400", "530", "660"), "horizon": 24,
         "extra": ["epochs=1", "d_model=16", "ffn.d_ff=16", "n_heads=2", "model.encoder_layers=1",
                   "in_len=48"]}


def in_len(model: str, dataset: str, horizon: int) -> int:
    """The cell's input: the protocol's 96, or the published setting's own where the benchmark
    has no other (the EPF markets: 168)."""
    if dataset in EPF:
        sizes = dict(o.partition("=")[::2] for o in published_overrides(model, dataset, horizon))
        return int(sizes.get("in_len", IN_LEN))
    return IN_LEN


def overrides(model: str, dataset: str, horizon: int, args) -> list[str]:
    """The run's command line: the preset, the dataset, the published sizes."""
    # The smoke file is no published dataset; SMOKE's sizes stand in for the published ones.
    sizes = [] if args.smoke else published_overrides(model, dataset, horizon)
    # in_len after the published sizes: the protocol's input even where a script sets its own
    found = [f"experiment={model}", f"dataset={dataset}", *sizes,
             f"in_len={IN_LEN if args.smoke else in_len(model, dataset, horizon)}",
             f"out_len={horizon}"]
    if args.smoke:
        val, test, end = SMOKE["borders"]
        return [*found, f"data.path={args.smoke_file}", f"data.val_start={val}",
                f"data.test_start={test}", f"data.test_end={end}", *SMOKE["extra"]]
    return [*found, f"data_dir={args.data_dir}"]


def run_one(dataset: str, horizon: int, model: str, seed: int, args) -> dict:
    label = {"dataset": dataset, "horizon": horizon, "model": model, "variant": args.variant,
             "seed": seed}
    run_dir = args.runs_dir / dataset / f"h{horizon}" / _name(label) / f"seed{seed}"
    cmd = [*overrides(model, dataset, horizon, args), f"seed={seed}",
           f"trainer.num_threads={args.threads}", "log.figures=false", *args.set]
    metrics, last, wall = train_run(cmd, run_dir)
    if metrics is None:
        return {**label, "status": f"failed: {last}"}
    test = metrics["test"]["model"]
    paper = paper_count(run_dir, args.paper_batch if model == "patchtst" else 1)
    record = {**label, "status": "ok", "run_dir": str(run_dir),
              "mse": test["mse_scaled"], "mae": test["mae_scaled"],
              "paper_mse": paper["model"]["mse"], "paper_mae": paper["model"]["mae"],
              **run_facts(metrics, wall)}
    print(f"  {dataset}-{horizon} {_name(label)} seed {seed}: test MSE "
          f"{record['mse']:.4f} "
          f"({record['epochs_run']} epochs, {wall:.0f} s)", flush=True)
    return record


def linear_fits(run_dir: Path) -> dict:
    """NLinear (the run's own least-squares baseline) and DLinear's class fitted by least
    squares on the run's training windows, scored on its test windows (z units)."""
    run = load_run(run_dir, "best", "cpu")
    data, targets = run.data, run.data.n_targets
    with open(Path(run_dir) / "metrics.json") as f:
        nlinear = json.load(f)["test"]["nlinear"]
    found = {"nlinear": {"mse": nlinear["mse_scaled"], "mae": nlinear["mae_scaled"]}}
    # Every channel of every window one sample, its window's values in, its horizon out.
    x = data.train.src[..., :targets].transpose(1, 2).reshape(-1, data.train.src.shape[1])
    y = data.train.target.transpose(1, 2).reshape(-1, data.train.target.shape[1])
    weight, bias = least_squares(x.double(), y.double(), 1e-6)
    src, target = data.test.src[..., :targets].double(), data.test.target.double()
    forecast = (src.transpose(1, 2) @ weight + bias).transpose(1, 2)  # [N, out_len, T]
    error = forecast - target
    found["dlinear"] = {"mse": float(error.square().mean()), "mae": float(error.abs().mean())}
    if len(data.state["columns"]) > targets:  # exogenous series (the EPF markets)
        # a linear map of every input channel's window (calendar features too) to the
        # targets' horizon: the inputs the model reads
        weight, bias = least_squares(data.train.src.flatten(1).double(),
                                     data.train.target.flatten(1).double(), 1e-6)
        forecast = (data.test.src.flatten(1).double() @ weight + bias).view_as(target)
        error = forecast - target
        found["linear_all_inputs"] = {"mse": float(error.square().mean()),
                                      "mae": float(error.abs().mean())}
    return found


# ---------------------------------------------------------------- the official code

# The EPF markets: features MS (the price from its own past and the exogenous series'), input
# 168, horizon 24 (TimeXer's scripts/forecast_exogenous/EPF/).
EPF = ("np", "pjm", "be", "fr", "de")
# What a model's run.py defaults to where the published script gives no value.
RUN_DEFAULTS = {"itransformer": {"d_model": "256", "ffn.d_ff": "256", "batch_size": "32",
                                 "model.encoder_layers": "2"},
                "timexer": {"d_model": "256", "ffn.d_ff": "2048", "batch_size": "4",
                            "model.encoder_layers": "1", "embedding.patch_len": "16"}}


def official_args(model: str, dataset: str, horizon: int, epochs: int | None, workdir: Path,
                  args) -> list:
    """The published script's arguments for (dataset, horizon), on CPU."""
    e = entry(dataset)
    sizes = {**RUN_DEFAULTS[model], **{k: v for k, _, v in (
        o.partition("=") for o in published_overrides(model, dataset, horizon))}}
    kind = {"etth1": "ETTh1", "etth2": "ETTh2", "ettm1": "ETTm1", "ettm2": "ETTm2"}
    path, steps = (Path(args.data_dir) / e.file).resolve(), in_len(model, dataset, horizon)
    ms = dataset in EPF  # one target (OT, the file's last column), the rest exogenous
    found = ["--is_training", "1", "--root_path", f"{path.parent}/", "--data_path", path.name,
             "--model_id", f"{dataset}_{steps}_{horizon}", "--model", OFFICIAL_CODE[model][0],
             "--data", kind.get(dataset, "custom"), "--features", "MS" if ms else "M",
             "--seq_len", str(steps), "--pred_len", str(horizon), "--enc_in",
             str(e.channels), "--dec_in", str(e.channels), "--c_out",
             "1" if ms else str(e.channels),
             "--e_layers", sizes["model.encoder_layers"], "--d_model", sizes["d_model"],
             "--d_ff", sizes["ffn.d_ff"], "--batch_size", sizes["batch_size"],
             "--learning_rate", sizes.get("lr", "0.0001"),
             "--des", "Exp", "--itr", "1", "--num_workers", "0",
             "--checkpoints", str(workdir / "official_checkpoints")]
    if model == "timexer":  # its run.py serves several tasks; iTransformer's knows no such flags
        found += ["--task_name", "long_term_forecast", "--patch_len",
                  sizes["embedding.patch_len"]]
    epochs = epochs or sizes.get("epochs")  # else run.py's own 10
    return found + (["--train_epochs", str(epochs)] if epochs else [])


def official_run(model: str, code: Path, dataset: str, horizon: int, epochs: int | None,
                 workdir: Path, args, seed: int | None = None) -> dict:
    """The official code's run of the cell (its own run.py, timed), at `seed` (None: the one
    its run.py fixes)."""
    _, module, fixed = OFFICIAL_CODE[model]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               OFFICIAL_SEED=str(fixed if seed is None else seed))
    workdir.mkdir(parents=True, exist_ok=True)
    # The output goes to a log as it comes (an EPF run takes hours: `tail -f` follows it).
    log = workdir / f"{model}_{dataset}_{horizon}_seed{env['OFFICIAL_SEED']}.log"
    # The state at each epoch's end: the same command run again after a stop goes on from
    # there (timed_official, resumable), its log appended to the stopped run's.
    state = log.with_suffix(".resume.pt")
    env["OFFICIAL_RESUME_STATE"] = str(state)
    with log.open("a" if state.is_file() else "w") as sink:
        proc = subprocess.run(
            [args.official_python, "-u", "-c",
             timed_official(module, "Exp_Long_Term_Forecast", "run.py", resumable=True),
             *official_args(model, dataset, horizon, epochs, workdir, args)],
            cwd=code, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    out = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"the official code failed ({log}): {out[-800:]}")
    costs = epoch_costs(out)
    scores = re.findall(r"mse:([0-9.]+), mae:([0-9.]+)", out)
    timed = json.loads([line for line in out.splitlines() if line.startswith('{"vali')][-1])
    return {"epochs": len(costs), "train_seconds": costs, "mse": float(scores[-1][0]),
            "mae": float(scores[-1][1]), "vali_seconds": timed["vali_seconds"],
            "train_call_seconds": timed["train_call_seconds"]}


def epoch_costs(log: str) -> list[float]:
    """Each epoch's "cost time" in an official run's log, appended to across stops: a stop can
    fall after an epoch's line and before its state was saved, so the epochs a resume replays
    from its state replace what the log holds beyond them (else the epoch runs twice)."""
    costs: list[float] = []
    for line in log.splitlines():
        if (cost := re.search(r"cost time: ([0-9.]+)", line)):
            costs.append(float(cost.group(1)))
        elif (resumed := re.match(r"\[resumed after epoch (\d+) ", line)):
            del costs[int(resumed.group(1)):]
    return costs


def official(args, model: str) -> dict:
    """(dataset-horizon) -> {model: {seed: the official run's test MSE, MAE, epochs,
    seconds}}."""
    found: dict = {}
    seeds = args.official_seeds or [OFFICIAL_CODE[model][2]]
    for dataset in args.datasets:
        for horizon in args.horizons:
            for seed in seeds:
                start = time.perf_counter()
                r = official_run(model, args.official.resolve(), dataset, horizon, None,
                                 args.runs_dir / "official", args, seed)
                r["wall_seconds"] = round(time.perf_counter() - start, 1)
                found.setdefault(f"{dataset}-{horizon}", {}).setdefault(model, {})[
                    str(seed)] = r
                print(f"  official {OFFICIAL_CODE[model][0]} {dataset}-{horizon} seed {seed}: "
                      f"test MSE {r['mse']:.4f} ({r['epochs']} epochs, "
                      f"{r['wall_seconds']:.0f} s)", flush=True)
    return found


def official_models(found: dict) -> dict:
    """A cell's official runs as {model: {seed: run}}; earlier reports held iTransformer's
    alone, as {seed: run} or (one run) the run itself."""
    if "mse" in found:
        return {"itransformer": {str(OFFICIAL_SEED): found}}
    if not found or any(key in OFFICIAL_CODE for key in found):
        return found
    return {"itransformer": found}


def speed(args, model: str) -> dict:
    """One epoch each, alternating: the training steps and the whole epoch, seconds."""
    dataset, horizon = args.datasets[0], args.horizons[0]
    workdir, rounds = args.runs_dir / "speed", []
    for i in range(args.rounds):
        run_dir = workdir / f"seqforecast{i}"
        metrics, last, _ = train_run([*overrides(model, dataset, horizon, args),
                                      "epochs=1", "trainer.num_threads=1",
                                      "log.figures=false", *args.set], run_dir)
        if metrics is None:
            raise SystemExit(f"seqforecast failed: {last}")
        loop = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["loop"]
        epoch = loop["history"][-1]
        ours = {"train_seconds": epoch["train_seconds"], "steps": loop["step"],
                "epoch_seconds": epoch["train_seconds"] + epoch["val_seconds"]}
        theirs = official_run(model, args.speed.resolve(), dataset, horizon, 1, workdir, args)
        theirs = {"train_seconds": theirs["train_seconds"][0],  # its own "cost time"
                  "epoch_seconds": theirs["train_call_seconds"]}  # + its validation passes
        rounds.append({"seqforecast": ours, "official": theirs})
        print(f"  round {i + 1}: steps {ours['train_seconds']:.1f} s (official "
              f"{theirs['train_seconds']:.1f} s); whole epoch {ours['epoch_seconds']:.1f} s "
              f"(official {theirs['epoch_seconds']:.1f} s)", flush=True)
    best = {side: {k: min(r[side][k] for r in rounds) for k in ("train_seconds",
                                                                 "epoch_seconds")}
            for side in ("seqforecast", "official")}
    ratio = {k: best["official"][k] / best["seqforecast"][k] for k in best["official"]}
    batch = {**RUN_DEFAULTS[model], **dict(o.partition("=")[::2] for o in overrides(
        model, dataset, horizon, args))}["batch_size"]
    return {"model": model, "dataset": dataset, "horizon": horizon, "threads": 1,
            "rounds": rounds, "variant": args.variant, "set": args.set, "batch": int(batch),
            "best": best, "steps": rounds[0]["seqforecast"]["steps"],
            "speedup_train": ratio["train_seconds"], "speedup_epoch": ratio["epoch_seconds"]}


# ---------------------------------------------------------------- the report


def _name(run: dict) -> str:
    """A run's model, with its variant where it has one (reports before variants have none)."""
    variant = run.get("variant", "")
    return f"{run['model']}:{variant}" if variant else run["model"]


def _order(name: str) -> tuple:
    model, _, variant = name.partition(":")
    return MODELS.index(model), variant


def summarise(runs: list[dict], linear: dict) -> dict:
    """Per model: mean ± std over seeds and the paired MSE ratio to the best linear fit."""
    best = min(linear, key=lambda name: linear[name]["mse"])
    out = {"best_linear": best}
    for model in sorted({_name(r) for r in runs}, key=_order):
        ok = [r for r in runs if _name(r) == model and r["status"] == "ok"]
        if not ok:
            continue
        mse = {r["seed"]: r["mse"] for r in ok}
        ratio = paired_ratio(mse, dict.fromkeys(mse, linear[best]["mse"]))
        out[model] = {
            "seeds": sorted(mse), "mse": statistics.mean(mse.values()),
            "mse_std": statistics.stdev(mse.values()) if len(ok) > 1 else 0.0,
            "mae": statistics.mean(r["mae"] for r in ok),
            "paper_mse": statistics.mean(r["paper_mse"] for r in ok),
            "epochs_run": [r["epochs_run"] for r in ok],
            "vs_linear": {"ratio": ratio.ratio, "low": ratio.low, "high": ratio.high,
                          "n": ratio.n},
        }
    return out


def _cell_order(key: str) -> tuple:
    """The table's order of cells: the published datasets', then the EPF markets', by horizon."""
    dataset, _, horizon = key.partition("-")
    known = [*PUBLISHED, *EPF]
    return known.index(dataset) if dataset in known else len(known), int(horizon)


def cells(runs: list[dict]) -> dict:
    """(dataset-horizon) -> its runs, linear fits and summary, in the table's order."""
    found: dict = {}
    for r in sorted(runs, key=lambda r: _cell_order(f"{r['dataset']}-{r['horizon']}")):
        found.setdefault(f"{r['dataset']}-{r['horizon']}", {"runs": []})["runs"].append(r)
    for cell in found.values():
        ok = [r for r in cell["runs"] if r["status"] == "ok"]
        cell["runs"].sort(key=lambda r: (_order(_name(r)), r["seed"]))
        if ok:
            cell["linear"] = ok[0].get("linear") or linear_fits(Path(ok[0]["run_dir"]))
            cell["test_windows"] = ok[0]["test_windows"]
            cell["summary"] = summarise(cell["runs"], cell["linear"])
    return found


def _official(found: dict) -> str:
    """The official runs' test MSE: one seed's, or the mean ± std of several."""
    mse = {int(seed): r["mse"] for seed, r in found.items()}
    if len(mse) == 1:
        (seed, value), = mse.items()
        return f"{value:.4f} (seed {seed})"
    return (f"{statistics.mean(mse.values()):.4f} ± {statistics.stdev(mse.values()):.4f} "
            f"(seeds {', '.join(map(str, sorted(mse)))})")


def _verdict(v: dict) -> str:
    if v["n"] < 2:
        return "one seed"
    if v["high"] < 1:
        return "below (beyond noise)"
    return "above (beyond noise)" if v["low"] > 1 else "within noise"


def markdown(report: dict) -> str:
    out = ["| cell | forecaster | test MSE (every window) | MAE | MSE as the paper counts | "
           "÷ best linear [95% CI] | verdict | published MSE | official code here |",
           "|---|---|---|---|---|---|---|---|---|"]
    names = {"itransformer": "iTransformer", "patchtst": "PatchTST", "timexer": "TimeXer"}
    sources = []
    for key, cell in report["cells"].items():
        if "summary" not in cell:
            continue
        published, source = published_rows(key)
        if source and source not in sources:
            sources.append(source)
        s, theirs = cell["summary"], official_models(report.get("official", {}).get(key, {}))
        for model in sorted((k for k in s if k != "best_linear"), key=_order):
            base, _, variant = model.partition(":")
            m, v = s[model], s[model]["vs_linear"]
            here = _official(theirs[model]) if model in theirs else ""
            pub = published.get(names[base]) if not variant else None
            shown = names[base] + (f", {variant}" if variant else "")
            out.append(
                f"| {key} | {shown} ({len(m['seeds'])} seeds) | {m['mse']:.4f} ± "
                f"{m['mse_std']:.4f} | {m['mae']:.4f} | {m['paper_mse']:.4f} | "
                f"{v['ratio']:.3f} [{v['low']:.3f}, {v['high']:.3f}] | {_verdict(v)} | "
                f"{f'{pub[0]:.3f}' if pub else ''} | {here} |")
        for name in (n for n in LINEAR if n in cell["linear"]):
            lin = cell["linear"][name]
            pub = published.get("DLinear") if name == "dlinear" else None
            best = " (best linear)" if name == s["best_linear"] else ""
            out.append(f"| {key} | {LINEAR[name]} (least squares){best} | {lin['mse']:.4f} | "
                       f"{lin['mae']:.4f} | | | | {f'{pub[0]:.3f}' if pub else ''} | |")
    out += ["", f"Published: {'; '.join(sources) or 'none for these cells'}. Test windows: "
            f"every one; PatchTST's published "
            f"loader scores those filling whole batches of {report['protocol']['paper_batch']} "
            f"(the paper's count)."]
    repeats = report.get("repeats") or []
    again = [f"{r['dataset']}-{r['horizon']} {_name(r)} seed {r['seed']}: {r['mse']:.4f}"
             for r in repeats if r["kind"] == "run" and r["status"] == "ok"]
    again += [f"{r['cell']} official {OFFICIAL_CODE[r['model']][0]} seed {r['seed']}: "
              f"{r['mse']:.4f}" for r in repeats if r["kind"] == "official"]
    if again:
        out += ["", "Other runs of these cases, kept in the report beside the table's (test "
                f"MSE): {'; '.join(again)}."]
    for found in report.get("speed") or []:
        out += ["", speed_markdown(found)]
        key = (found.get("model", "itransformer"), found.get("variant", ""))
        earlier = [f"{r['speedup_train']:.2f}x / {r['speedup_epoch']:.2f}x (best of "
                   f"{len(r['rounds'])} round{'s' if len(r['rounds']) > 1 else ''})"
                   for r in repeats if r["kind"] == "speed"
                   and (r.get("model", "itransformer"), r.get("variant", "")) == key]
        if earlier:
            out += ["", "Other runs of this epoch, kept in the report beside the table's (official "
                    f"÷ seqforecast, training steps / whole epoch): {', '.join(earlier)}."]
    return "\n".join(out) + "\n"


def speed_markdown(s: dict) -> str:
    b, ours = s["best"], " ".join(s.get("set") or []) or "as the preset (fp32)"
    model = s.get("model", "itransformer")  # earlier reports timed iTransformer alone
    return "\n".join([
        f"One epoch, {s['dataset']} at horizon {s['horizon']}, seqforecast {ours}: {s['steps']} "
        f"steps of {s.get('batch', 32)} windows of time, 1 torch thread each, alternating, "
        f"best of {len(s['rounds'])} rounds (seconds).",
        "",
        "| | training steps | whole epoch as each runs it |",
        "|---|---|---|",
        f"| official {OFFICIAL_CODE[model][0]} code | {b['official']['train_seconds']:.1f} | "
        f"{b['official']['epoch_seconds']:.1f} (steps, validation, test windows) |",
        f"| seqforecast experiment={model} | {b['seqforecast']['train_seconds']:.1f} | "
        f"{b['seqforecast']['epoch_seconds']:.1f} (steps, validation) |",
        f"| official ÷ seqforecast | {s['speedup_train']:.2f}x | {s['speedup_epoch']:.2f}x |",
    ])


def with_fits(found: dict) -> dict:
    """`cells`' cells, each run keeping its cell's linear fits (so merges need no run dirs)."""
    for cell in found.values():
        for r in cell["runs"]:
            r.setdefault("linear", cell.get("linear"))
    return found


def finish(report: dict, out: Path, argv) -> int:
    report["cells"] = with_fits(cells([r for c in report.get("cells", {}).values()
                                       for r in c["runs"]] + report.pop("new_runs", [])))
    write_report(out, "scripts/bench_leaderboard.py", argv, **report)
    text = markdown(report)
    out.with_suffix(".md").write_text(text)
    print(text)
    return 0


# What a measurement measured: two records of a case equal in these are one run met again (in
# another report, or read again from its run dir: `reused`, `wall_seconds` differ), not a repeat.
SAME_RUN = same_fields("status", "mse", "mae", "paper_mse", "paper_mae", "best_epoch",
                       "epochs_run", "train_seconds", "test_windows")
SAME_OFFICIAL = same_fields("mse", "mae", "epochs", "train_seconds", "vali_seconds",
                            "train_call_seconds")
SAME_SPEED = same_fields("rounds", "set")


def merge_reports(reports: list[tuple[Path | None, dict]]) -> dict:
    """One report from several ((file, report), in the order they were measured): each case's
    latest measurement in the table (a run by cell, model, variant and seed; an official run by
    cell, model and seed; a speed table by model and variant), the earlier ones that differ
    kept in `repeats`, each measurement with the command and machine of the report that
    measured it (`report`), and every merged report's in `merged_from`."""
    merged: dict = {"protocol": None, "cells": {}, "official": {}, "speed": [],
                    "merged_from": [], "repeats": []}
    runs: dict = {}
    official: dict = {}
    speeds: dict = {}
    repeats = merged["repeats"]
    for path, report in reports:
        merged["protocol"] = merged["protocol"] or report.get("protocol")
        merged["merged_from"].append(source(path, report))
        tag = measured_in(report)
        repeats += [r for r in report.get("repeats", []) if r not in repeats]
        for key, found in (report.get("official") or {}).items():
            for model, seeds in official_models(found).items():
                for seed, run in seeds.items():
                    keep_latest(official, (key, model, seed), run, repeats, SAME_OFFICIAL, tag,
                                case={"kind": "official", "cell": key, "model": model,
                                      "seed": seed})
        found = report.get("speed") or []
        for one in [found] if isinstance(found, dict) else found:  # one per variant
            keep_latest(speeds, (one.get("model", "itransformer"), one.get("variant", "")), one,
                        repeats, SAME_SPEED, tag, case={"kind": "speed"})
        for cell in report.get("cells", {}).values():
            for r in cell["runs"]:
                keep_latest(runs, (r["dataset"], r["horizon"], r["model"], r.get("variant", ""),
                                   r["seed"]), r, repeats, SAME_RUN, tag, case={"kind": "run"})
    for (key, model, seed), run in official.items():
        merged["official"].setdefault(key, {}).setdefault(model, {})[seed] = run
    merged["speed"] = [speeds[k] for k in sorted(speeds, key=lambda k: (MODELS.index(k[0]),
                                                                         k[1]))]
    merged["new_runs"] = list(runs.values())
    return merged


def merge(paths: list[Path], out: Path, argv) -> int:
    return finish(merge_reports([(p, json.loads(p.read_text())) for p in paths]), out, argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["etth1", "etth2", "ettm1", "ettm2",
                                                          "weather"])
    parser.add_argument("--horizons", nargs="+", type=int, default=[96])
    parser.add_argument("--models", nargs="+", default=None, choices=MODELS,
                        help="default: all; with --official or --speed, the one whose official "
                             "code DIR holds (default: itransformer)")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides for every run")
    parser.add_argument("--variant", default="",
                        help="a name for the runs --set changes (kept apart in the tables)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-dir", default=str(REPO / "data"), help="where the files are")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "outputs" / "bench_leaderboard")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "leaderboard.json")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON")
    parser.add_argument("--official", type=Path, metavar="DIR",
                        help="also run the official code of --models in DIR at each cell")
    parser.add_argument("--official-seeds", nargs="+", type=int, default=None,
                        help="default: the seed its run.py fixes (iTransformer 2023, TimeXer "
                             "2021)")
    parser.add_argument("--official-python", default=sys.executable,
                        help="the Python (with pandas, scikit-learn) that runs the official code")
    parser.add_argument("--speed", type=Path, metavar="DIR",
                        help="time one epoch beside the official code of --models in DIR")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paper-batch", type=int, default=PAPER_BATCH,
                        help="PatchTST's published test batch (the windows it scores)")
    parser.add_argument("--smoke", action="store_true",
                        help="a small generated file, 1 epoch, 1 seed (the tests)")
    args = parser.parse_args(argv)
    official_model = None
    if args.speed or args.official:
        chosen = args.models or ["itransformer"]
        if len(chosen) != 1 or chosen[0] not in OFFICIAL_CODE:
            parser.error(f"--official and --speed run one model's official code: --models "
                         f"{' or '.join(OFFICIAL_CODE)}")
        official_model = chosen[0]
    args.models = args.models or list(MODELS)
    if args.merge:
        return merge(args.merge, args.out, argv)
    if args.smoke:
        args.smoke_file = write_smoke_file(args.runs_dir / "smoke_data" / "ETTsmoke.csv")
        args.datasets, args.horizons, args.seeds = ["etth1"], [SMOKE["horizon"]], args.seeds[:1]
        args.paper_batch = 32
    else:  # every cell's published setting exists, before any run starts
        models = [official_model] if official_model else args.models
        try:
            for model, dataset, horizon in product(models, args.datasets, args.horizons):
                published_overrides(model, dataset, horizon)
        except ConfigError as err:
            parser.error(str(err))
    report: dict = {"protocol": {"in_len": IN_LEN, "units": "z (training rows)",
                                 "paper_batch": args.paper_batch,
                                 "published": PUBLISHED_SOURCE},
                    "cells": {}, "official": {}, "speed": [], "new_runs": []}
    if args.speed:
        report["speed"] = [speed(args, official_model)]
    if args.official:
        report["official"] = official(args, official_model)
    if not (args.speed or args.official):
        cases = [(d, h, m, s) for d in args.datasets for h in args.horizons
                 for m in args.models for s in args.seeds]
        with ThreadPoolExecutor(args.jobs) as pool:
            report["new_runs"] = list(pool.map(lambda c: run_one(*c, args), cases))
    if args.out.is_file():  # the table's report: these runs merged into it
        print(f"merging into {args.out}", file=sys.stderr)
        report["cells"] = with_fits(cells(report.pop("new_runs")))
        report = merge_reports([(args.out, json.loads(args.out.read_text())),
                                (None, {**stamp(__file__, argv), **report})])
    return finish(report, args.out, argv)


if __name__ == "__main__":
    sys.exit(main())

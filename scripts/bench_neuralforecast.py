"""seqforecast beside neuralforecast: the same DataFrame, the same splits, horizon and test
windows, the published models of both (iTransformer, PatchTST, TimeXer), each side trained with
the same budget, three seeds each, scored on every test window.

    python scripts/bench_neuralforecast.py                        # ETTh1-96, 3 models x 3 seeds
    python scripts/bench_neuralforecast.py --cells np-24 --models timexer itransformer
    python scripts/bench_neuralforecast.py --smoke --out /tmp/nf.json   # a tiny file (the suite)
    python scripts/bench_neuralforecast.py --merge elsewhere.json         # join another report

neuralforecast is the `peers` extra (`make peers`); without it its rows say so and ours run.

The frame: the cell's file as a DataFrame, z-scored by its training rows' mean and standard
deviation (the field's protocol, in which every paper reports ETT's MSE), cut at the published
test end. Ours: `Forecaster(experiment=<model>, dataset=<file>, seed=s).fit(frame)`, which
trains the CLI's run on that frame (the published settings of the cell, the published splits).
neuralforecast: the frame in its long format, `NeuralForecast.cross_validation(val_size,
test_size, step_size=1, refit=False)`: trained on the training rows, early-stopped on the
validation rows, every test window forecast (inputs reaching back into the validation rows, as
ours). Its models get ours' published sizes (d_model, heads, layers, feed-forward width,
dropout, patches), learning rate, batch (in windows of every channel: a univariate model's
batch is batch x channels single series), epochs as steps (an epoch: the training windows over
the batch) and patience (in validation checks of one epoch each), trained on MSE with
`scaler_type=identity` and each model's own instance norm (use_norm / RevIN), as ours. What
stays its own: its learning-rate schedule, optimizer details and initialisation, and what its
models take (nf 3.3: iTransformer no calendar tokens, TimeXer no known-future values).

Scores: test MSE and MAE in z units over every test window, channel and step (ours: the run's
metrics.json `mse_scaled`; theirs: its cross-validation frame, its windows checked against the
cell's: the same origins, the same truth); per model the paired ratio neuralforecast / ours over
the seeds with its 95% interval (seqforecast.stats.paired_ratio); seconds per epoch of training
(ours: train_seconds over the epochs run; theirs: fit seconds over the steps run, times the steps
of an epoch) and each case's peak resident memory, each case in a fresh process on
`--threads` torch threads. Cases alternate sides (ours, theirs, ours, ...), so that load on
this shared machine falls on both.

One report per table: a run merges into its `--out` where that exists (a case's latest
measurement kept, an earlier different one in `repeats`), so cells and seeds can be run in
different sessions. benchmarks/neuralforecast.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, keep_latest, run_worker, stamp  # noqa: E402

SCRIPT = str(Path(__file__).resolve())
OUT = REPO / "benchmarks" / "neuralforecast.json"
SIDES = ("seqforecast", "neuralforecast")
MODELS = ("itransformer", "patchtst", "timexer")

# A cell: the file's catalog name (its published borders and settings, which the experiments
# resolve), the window, which columns are forecast and which are covariates (past: `hist`,
# known ahead: `futr`; the EPF markets' two day-ahead forecasts).
CELLS = {
    "etth1-96": dict(dataset="etth1", file="ETTh1.csv", time="date", in_len=96, out_len=96,
                     borders=None, targets="all", hist=[], futr=[]),
}
for market, exogenous in {"np": ["Grid load forecast", "Wind power forecast"],
                          "pjm": ["System load forecast", "Zonal COMED load foecast"],
                          "be": ["Generation forecast", "System load forecast"]}.items():
    CELLS[f"{market}-24"] = dict(dataset=market, file=f"EPF/{market.upper()}.csv", time="date",
                                 in_len=168, out_len=24, borders=None, targets=["OT"],
                                 hist=exogenous, futr=exogenous)

# What a model of each side takes of a cell's covariates: neuralforecast 3.3's flags
# (EXOGENOUS_HIST / EXOGENOUS_FUTR); ours, every kind but in the channel-independent PatchTST,
# which refuses them (docs/data.md).
NF_TAKES = {"itransformer": {"futr"}, "patchtst": set(), "timexer": {"hist"}}
OURS_TAKES = {"itransformer": {"hist", "futr"}, "patchtst": set(), "timexer": {"hist", "futr"}}
NF_CLASS = {"itransformer": "iTransformer", "patchtst": "PatchTST", "timexer": "TimeXer"}
NF_MULTIVARIATE = {"itransformer": True, "patchtst": False, "timexer": True}

SMOKE = dict(dataset="etth1", file="smoke.csv", time="date", in_len=32, out_len=12,
             borders=(300, 400, 500), targets="all", hist=[], futr=[])
SMOKE_SETTINGS = ["d_model=16", "n_heads=2", "ffn.d_ff=16", "model.encoder_layers=1",
                  "epochs=1", "batch_size=16"]


# ---------------------------------------------------------------- the cell's frame


def read_frame(cell: dict, data_dir: Path):
    """The cell's file as a wide frame (the time column, then the channels), cut at the test
    end and z-scored by its training rows' statistics: (frame, channels)."""
    import pandas as pd

    raw = pd.read_csv(data_dir / cell["file"], skipinitialspace=True)  # EPF's ", name"
    channels = [c for c in raw.columns if c != cell["time"]]
    val_start, _, test_end = borders(cell)
    raw = raw.iloc[:test_end].reset_index(drop=True)
    train = raw[channels].iloc[:val_start].to_numpy(np.float64)
    mean, std = train.mean(axis=0), train.std(axis=0)  # ddof 0, as the published scaler
    scaled = raw.copy()
    scaled[channels] = (raw[channels].to_numpy(np.float64) - mean) / std
    return scaled, channels


def borders(cell: dict) -> tuple[int, int, int]:
    """(validation start, test start, test end) rows: the cell's (`with_borders`)."""
    return tuple(cell["borders"])


def with_borders(cell: dict) -> dict:
    """The cell with its file's published borders, from its catalog entry
    (configs/dataset/<name>.yaml: data.val_start, test_start, test_end) where it has none."""
    if cell["borders"]:
        return cell
    from seqforecast.config.compose import compose_config

    data = compose_config([f"dataset={cell['dataset']}"]).data
    return {**cell, "borders": [int(data[k]) for k in ("val_start", "test_start", "test_end")]}


def targets_of(cell: dict, channels: list[str]) -> list[str]:
    covariates = set(cell["hist"]) | set(cell["futr"])
    return [c for c in channels if c not in covariates] if cell["targets"] == "all" \
        else list(cell["targets"])


# ---------------------------------------------------------------- one case, in its worker


def ours(spec: dict) -> dict:
    """Our side: the Forecaster on the scaled frame, the CLI's run with the cell's published
    settings; its metrics.json's scores, epochs and seconds, and its training process's peak
    resident memory."""
    from seqforecast import Forecaster

    cell = spec["cell_spec"]
    scaled, channels = read_frame(cell, Path(spec["data_dir"]))
    val_start, test_start, test_end = borders(cell)
    targets = targets_of(cell, channels)
    overrides = [f"experiment={spec['model']}", f"dataset={cell['dataset']}",
                 f"in_len={cell['in_len']}", f"out_len={cell['out_len']}",
                 f"data.val_start={val_start}", f"data.test_start={test_start}",
                 f"data.test_end={test_end}", "log.figures=false",
                 f"seed={spec['seed']}", f"trainer.num_threads={spec['threads']}",
                 *spec["settings"]]
    takes = OURS_TAKES[spec["model"]]
    futr = cell["futr"] if "futr" in takes else []
    hist = [c for c in cell["hist"] if c not in futr] if "hist" in takes else []
    if not hist:  # the frame's covariates are the ones given here, not the dataset entry's
        overrides.append("data.features=[]")
    run_dir = Path(spec["runs"]) / spec["cell"] / spec["model"] / f"seqforecast-seed{spec['seed']}"
    fc = Forecaster(*overrides, run_dir=run_dir)
    fc.fit(scaled, id_col=None, time_col=cell["time"], target_col=targets,
           hist_exog_list=hist or None, futr_exog_list=futr or None)
    metrics, run = fc.metrics, fc.metrics["run"]
    # z units: the frame's own (its standardisation again is the identity to float rounding)
    test = metrics["test"]["model"]
    return {"mse": test["mse_scaled"], "mae": test["mae_scaled"],
            "test_windows": metrics["splits"]["test"]["windows"],
            "epochs_run": run["epochs_run"], "train_seconds": run["train_seconds"],
            "seconds_per_epoch": run["train_seconds"] / run["epochs_run"],
            "peak_mib": run["peak_rss_mib"], "run_dir": str(run_dir),
            "covariates": {"hist": hist, "futr": futr}}


def published(spec: dict) -> dict:
    """Our config of the cell, composed (not trained): the settings neuralforecast's model is
    given, as plain values."""
    from omegaconf import OmegaConf

    from seqforecast.config.compose import compose_config

    cell = spec["cell_spec"]
    cfg = compose_config([f"experiment={spec['model']}", f"dataset={cell['dataset']}",
                          f"in_len={cell['in_len']}", f"out_len={cell['out_len']}",
                          f"data_dir={spec['data_dir']}", *spec["settings"]])
    return OmegaConf.to_container(cfg, resolve=True)


def theirs(spec: dict) -> dict:
    """neuralforecast's side: its model of the same name with our published settings,
    cross-validated on the same frame and windows."""
    import logging

    import torch

    torch.set_num_threads(spec["threads"])
    import neuralforecast
    from neuralforecast import NeuralForecast
    from neuralforecast import models as nf_models
    from neuralforecast.losses.pytorch import MSE
    from pytorch_lightning.callbacks import Callback

    for name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cell, model = spec["cell_spec"], spec["model"]
    cfg = published(spec)
    scaled, channels = read_frame(cell, Path(spec["data_dir"]))
    val_start, test_start, test_end = borders(cell)
    targets = targets_of(cell, channels)
    takes = NF_TAKES[model]
    futr = cell["futr"] if "futr" in takes else []
    # a model that reads no values ahead reads the known-ahead columns as past ones
    hist = [c for c in dict.fromkeys([*cell["hist"], *cell["futr"]]) if c not in futr] \
        if "hist" in takes else []
    # long: one series a target, the covariates beside each
    long = scaled.melt(id_vars=[cell["time"], *hist, *futr], value_vars=targets,
                       var_name="unique_id", value_name="y").rename(columns={cell["time"]: "ds"})
    long["ds"] = np.tile(np.arange(len(scaled)), len(targets))  # integer steps: freq=1
    long = long[["unique_id", "ds", "y", *hist, *futr]]

    n_series, batch = len(targets), cfg["trainer"]["batch_size"]
    train_windows = val_start - cell["in_len"] - cell["out_len"] + 1
    # as ours: the last incomplete batch left out where the recipe drops it, else a step
    steps_per_epoch = max(1, train_windows // batch if cfg["trainer"]["drop_last"]
                          else math.ceil(train_windows / batch))
    windows_batch = batch if NF_MULTIVARIATE[model] else batch * n_series
    common = dict(
        h=cell["out_len"], input_size=cell["in_len"], loss=MSE(), valid_loss=MSE(),
        max_steps=cfg["trainer"]["epochs"] * steps_per_epoch, val_check_steps=steps_per_epoch,
        early_stop_patience_steps=cfg["trainer"]["patience"],
        learning_rate=cfg["trainer"]["lr"], batch_size=n_series,
        windows_batch_size=windows_batch, inference_windows_batch_size=256,
        # ours' type1 schedule (halved every epoch from the third): its StepLR halving after
        # every epoch, one epoch earlier
        num_lr_decays=cfg["trainer"]["epochs"] if cfg["trainer"]["schedule"] == "type1" else -1,
        scaler_type="identity", random_seed=spec["seed"], alias=NF_CLASS[model],
        enable_progress_bar=False, enable_model_summary=False, logger=False,
        accelerator="cpu", enable_checkpointing=False)
    if hist:
        common["hist_exog_list"] = hist
    if futr:
        common["futr_exog_list"] = futr
    m, ffn = cfg["model"], cfg["ffn"]
    if model == "itransformer":
        made = nf_models.iTransformer(n_series=n_series, hidden_size=cfg["d_model"],
                                      n_heads=cfg["n_heads"], e_layers=m["encoder_layers"],
                                      d_ff=ffn["d_ff"], dropout=m["dropout"], use_norm=True,
                                      **common)
    elif model == "patchtst":
        emb = cfg["embedding"]
        made = nf_models.PatchTST(encoder_layers=m["encoder_layers"], n_heads=cfg["n_heads"],
                                  hidden_size=cfg["d_model"], linear_hidden_size=ffn["d_ff"],
                                  dropout=m["dropout"], fc_dropout=m["dropout"],
                                  head_dropout=m["head_dropout"],
                                  attn_dropout=cfg["attention_dropout"],
                                  patch_len=emb["patch_len"], stride=emb["stride"], revin=True,
                                  revin_affine=m["revin_affine"], revin_subtract_last=False,
                                  # its BatchNorm always; this flag is pre-norm
                                  res_attention=True, batch_normalization=m["norm_first"],
                                  **common)
    else:
        made = nf_models.TimeXer(n_series=n_series, hidden_size=cfg["d_model"],
                                 n_heads=cfg["n_heads"], e_layers=m["encoder_layers"],
                                 d_ff=ffn["d_ff"], dropout=m["dropout"],
                                 patch_len=cfg["embedding"]["patch_len"], use_norm=True,
                                 **common)

    class FitClock(Callback):  # the fit's own seconds, without the test windows' forecasts
        seconds = 0.0

        def on_fit_start(self, trainer, module):
            self.start = time.perf_counter()

        def on_fit_end(self, trainer, module):
            FitClock.seconds += time.perf_counter() - self.start

    made.trainer_kwargs.setdefault("callbacks", []).append(FitClock())
    nf = NeuralForecast(models=[made], freq=1)
    cv = nf.cross_validation(df=long, val_size=test_start - val_start,
                             test_size=test_end - test_start, step_size=1, n_windows=None,
                             refit=False)
    forecast, truth = by_window(cv, NF_CLASS[model], cell, scaled, targets)
    trained = nf.models[0]  # the fitted copy of `made`
    # the step each loss was logged at counts from 0
    steps = int(trained.train_trajectories[-1][0]) + 1 if trained.train_trajectories else 0
    return {"mse": float(np.mean((forecast - truth) ** 2)),
            "mae": float(np.mean(np.abs(forecast - truth))),
            "test_windows": int(forecast.shape[1]), "steps_run": steps,
            "steps_per_epoch": steps_per_epoch,
            "epochs_run": round(steps / steps_per_epoch, 2),
            "train_seconds": round(FitClock.seconds, 2),
            "seconds_per_epoch": FitClock.seconds * steps_per_epoch / max(steps, 1),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "version": neuralforecast.__version__,
            "covariates": {"hist": hist, "futr": futr}}


def by_window(cv, column: str, cell: dict, scaled, targets: list[str]):
    """neuralforecast's cross-validation frame -> (forecasts, truth) [series, windows,
    out_len], in origin order, checked against the cell's own windows: every origin of the
    test rows, the truth the scaled frame's rows."""
    out_len = cell["out_len"]
    _, test_start, test_end = borders(cell)
    origins = np.arange(test_start, test_end - out_len + 1)
    forecasts, truths = [], []
    for target in targets:
        rows = cv[cv["unique_id"] == target].sort_values(["cutoff", "ds"])
        found = rows["cutoff"].to_numpy().reshape(-1, out_len)[:, 0] + 1
        if not np.array_equal(found, origins):
            raise RuntimeError(f"{target}: {len(found)} forecast origins, the cell has "
                               f"{len(origins)} ({origins[0]}..{origins[-1]})")
        truth = scaled[target].to_numpy()[origins[:, None] + np.arange(out_len)]
        if not np.allclose(rows["y"].to_numpy().reshape(-1, out_len), truth):
            raise RuntimeError(f"{target}: its truth differs from the frame's rows")
        forecasts.append(rows[column].to_numpy().reshape(-1, out_len))
        truths.append(truth)
    return np.stack(forecasts), np.stack(truths)


def worker(spec: dict) -> dict:
    label = {k: spec[k] for k in ("cell", "model", "side", "seed")}
    start = time.perf_counter()
    found = ours(spec) if spec["side"] == "seqforecast" else theirs(spec)
    return {**label, "status": "ok", "threads": spec["threads"],
            "wall_seconds": round(time.perf_counter() - start, 1), **found}


# ---------------------------------------------------------------- the table


def summarise(cases: list[dict]) -> list[dict]:
    """Per cell and model: each side's mean and std over seeds, the paired ratio
    neuralforecast / seqforecast of MSE and MAE over the seeds both have, seconds an epoch and
    peak memory (means), the test windows of each."""
    from seqforecast.stats import paired_ratio, summarize

    rows = []
    keys = sorted({(c["cell"], c["model"]) for c in cases})
    for cell, model in keys:
        row = {"cell": cell, "model": model}
        by_side = {s: {c["seed"]: c for c in cases if (c["cell"], c["model"], c["side"]) ==
                       (cell, model, s) and c.get("status") == "ok"} for s in SIDES}
        for side, runs in by_side.items():
            if not runs:
                found = [c for c in cases if (c["cell"], c["model"], c["side"]) ==
                         (cell, model, side)]
                row[side] = {"n": 0, "status": found[0]["status"] if found else "not run"}
                continue
            mse, mae = (summarize([r[k] for r in runs.values()]) for k in ("mse", "mae"))
            row[side] = {
                "n": mse.n, "seeds": sorted(runs), "mse": mse.mean, "mse_std": mse.std,
                "mae": mae.mean, "mae_std": mae.std,
                "seconds_per_epoch": statistics.mean(r["seconds_per_epoch"]
                                                     for r in runs.values()),
                "epochs_run": statistics.mean(r["epochs_run"] for r in runs.values()),
                "peak_mib": max(r["peak_mib"] for r in runs.values()),
                "test_windows": sorted({r["test_windows"] for r in runs.values()}),
                "threads": sorted({r["threads"] for r in runs.values()})}
        for metric in ("mse", "mae"):
            ratio = paired_ratio({s: r[metric] for s, r in by_side["neuralforecast"].items()},
                                 {s: r[metric] for s, r in by_side["seqforecast"].items()})
            row[f"{metric}_ratio"] = {"n": ratio.n, "ratio": ratio.ratio, "low": ratio.low,
                                      "high": ratio.high, "verdict": ratio.verdict}
        rows.append(row)
    return rows


def _fmt(value, digits=4) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.{digits}g}"


def table(report: dict) -> str:
    lines = ["| cell | model | side | seeds | test MSE | test MAE | s/epoch | epochs | "
             "peak MiB | test windows |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["summary"]:
        for side in SIDES:
            s = row[side]
            if not s["n"]:
                lines.append(f"| {row['cell']} | {row['model']} | {side} | 0 | "
                             f"{s['status']} | | | | | |")
                continue
            lines.append(
                f"| {row['cell']} | {row['model']} | {side} | {s['n']} | "
                f"{_fmt(s['mse'])} ± {_fmt(s['mse_std'], 2)} | "
                f"{_fmt(s['mae'])} ± {_fmt(s['mae_std'], 2)} | {_fmt(s['seconds_per_epoch'], 3)}"
                f" | {_fmt(s['epochs_run'], 3)} | {s['peak_mib']:.0f} | "
                f"{', '.join(map(str, s['test_windows']))} |")
    lines += ["", "| cell | model | MSE neuralforecast / seqforecast [95%] | MAE ratio [95%] |"
              " verdict (MSE) |", "|---|---|---|---|---|"]
    for row in report["summary"]:
        r, a = row["mse_ratio"], row["mae_ratio"]
        lines.append(f"| {row['cell']} | {row['model']} | {_fmt(r['ratio'])} "
                     f"[{_fmt(r['low'])}, {_fmt(r['high'])}] (n={r['n']}) | {_fmt(a['ratio'])} "
                     f"[{_fmt(a['low'])}, {_fmt(a['high'])}] | {r['verdict']} |")
    return "\n".join(lines) + "\n"


def markdown(report: dict) -> str:
    """The report's page (benchmarks/neuralforecast.md): the commands and machines its cases
    came from, then its tables."""
    sources = "\n".join(f"- `{s['command']}` ({s['machine']['cpu']})"
                        for s in report["merged_from"])
    return (f"# seqforecast beside neuralforecast\n\nMeasured by:\n\n{sources}\n\n"
            f"{table(report)}")


def merged(out: Path, report: dict, cases: list[dict]) -> dict:
    """`cases` measured now (each tagged with the command and machine that measured it),
    merged into the report at `out` where it exists: a case's latest measurement kept, an
    earlier different measurement in `repeats` (a row that was not run is only replaced)."""
    tag = {"command": report["command"], "machine": report["machine"]}
    kept, repeats = {}, []
    same = lambda a, b: all(a.get(k) == b.get(k) for k in ("mse", "mae", "train_seconds"))  # noqa: E731
    if out.is_file():
        before = json.loads(out.read_text())
        repeats = before.get("repeats", [])
        kept = {_key(c): c for c in before["cases"]}
    for case in cases:
        before = kept.get(_key(case), {}).get("status") == "ok"
        if case.get("status") != "ok" and before:
            continue  # a case not run (here) leaves the measurement where it was
        if not before:
            kept.pop(_key(case), None)  # nothing measured to keep
        keep_latest(kept, _key(case), case, repeats, same, tag)
    all_cases = sorted(kept.values(), key=_key)
    sources = [c["report"] for c in [*all_cases, *repeats] if "report" in c]
    return {**report, "merged_from": [s for i, s in enumerate(sources) if s not in sources[:i]],
            "cases": all_cases, "repeats": repeats, "summary": summarise(all_cases)}


def _key(case: dict) -> tuple:
    return case["cell"], case["model"], case["seed"], case["side"]


# ---------------------------------------------------------------- main


def write_smoke_file(path: Path, rows: int = 560) -> None:
    """An hourly file of ETT's layout: a date column and three channels with daily cycles."""
    rng = np.random.default_rng(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(rows)
    lines = ["date,HUFL,MUFL,OT"]
    for i in t:
        moment = str(np.datetime64("2016-07-01T00:00") + np.timedelta64(int(i), "h"))
        cells = [level * (1 + 0.3 * np.sin(2 * np.pi * i / 24 + k)) + rng.normal(0, 0.05 * level)
                 for k, level in enumerate((5.0, 2.0, 30.0))]
        lines.append(",".join([moment.replace("T", " "), *(f"{c:.4f}" for c in cells)]))
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=["etth1-96"], choices=sorted(CELLS))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--runs", type=Path, default=None,
                        help="where our runs go (default: a temporary folder)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="overrides of every case's config, e.g. epochs=1 (neuralforecast's "
                             "model gets the same sizes and budget)")
    parser.add_argument("--timeout", type=int, default=4 * 3600, help="seconds a case")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny file and tiny models, one epoch (the suite's check)")
    parser.add_argument("--again", action="store_true",
                        help="measure cases --out holds already (default: skip them)")
    parser.add_argument("--merge", nargs="+", type=Path, default=[], metavar="REPORT",
                        help="join these reports' cases into --out (nothing is run)")
    parser.add_argument("--in-process", action="store_true",
                        help="each case in this process (the suite; no timeout, no isolation)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    if args.merge:  # each case keeps the command and machine that measured it
        report = save(args, argv, [c for path in args.merge
                                   for c in json.loads(path.read_text())["cases"]])
        args.out.with_suffix(".md").write_text(markdown(report))
        print(table(report))
        return 0
    cells = {name: with_borders(CELLS[name]) for name in args.cells}
    settings: list[str] = list(args.set)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir, runs = args.data_dir, args.runs or Path(tmp) / "runs"
        if args.smoke:
            data_dir = Path(tmp) / "data"
            write_smoke_file(data_dir / SMOKE["file"])
            cells, settings = {"smoke": SMOKE}, [*SMOKE_SETTINGS, *settings]
        nf = _importable("neuralforecast")
        done = set() if args.again or not args.out.is_file() else {
            _key(c) for c in json.loads(args.out.read_text())["cases"] if c["status"] == "ok"}
        cases = []
        for cell_name, cell in cells.items():
            if not (data_dir / cell["file"]).is_file():
                sys.exit(f"error: {data_dir / cell['file']} is missing: give --data-dir, the "
                         f"folder that holds {cell['file']}")
            for model in args.models:
                for seed in args.seeds:
                    for side in args.sides:  # alternating: ours, theirs, ours, ...
                        label = {"cell": cell_name, "model": model, "side": side, "seed": seed}
                        if _key(label) in done:
                            continue
                        if side == "neuralforecast" and not nf:
                            cases.append({**label, "status": "not run: neuralforecast is not "
                                          "installed (make peers)"})
                            continue
                        spec = {**label, "cell_spec": cell, "data_dir": str(data_dir),
                                "runs": str(runs), "threads": args.threads,
                                "settings": settings}
                        found = run_worker(SCRIPT, spec, args.timeout, label,
                                           in_process=args.in_process)
                        print(f"  {json.dumps(found)}", flush=True)
                        cases.append(found)
                        report = save(args, argv, [found])  # each case kept as it ends
    report = save(args, argv, [c for c in cases if c.get("status", "").startswith("not run")])
    text = table(report)
    args.out.with_suffix(".md").write_text(markdown(report))
    print(text)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}", file=sys.stderr)
    return 0


def save(args, argv: list[str] | None, cases: list[dict]) -> dict:
    """`cases` merged into --out (made where missing), which is written back."""
    report = {**stamp(SCRIPT, argv), "threads": args.threads, "date": time.strftime("%Y-%m-%d")}
    report = merged(args.out, report, cases)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main())

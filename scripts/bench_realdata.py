"""Real series: seqforecast's presets against the naive baselines and statistical and neural
peers, every forecaster scored on exactly the same test windows.

    python scripts/bench_realdata.py                       # every dataset, 3 seeds, all peers
    python scripts/bench_realdata.py --datasets co2 --seeds 0 1 2 3 4
    python scripts/bench_realdata.py --variants preset preset_diff ablate_point  # see VARIANTS
    python scripts/bench_realdata.py --smoke               # a tiny slice, no peers (the suite)

The series ship inside statsmodels (nothing is downloaded); `--write-data` writes them to
data/real/*.csv, which the presets (`experiment=co2|sunspots|elnino`) read. The copies in the
repository were written by it.

Protocol, per dataset: the rows in time order, split 70/15/15 with seqforecast's rounding;
the test windows are every window whose forecast lies in the test rows (stride 1), inputs
reaching back into validation rows (the standard protocol, as statsforecast's and
neuralforecast's cross-validation). Metrics in the data's units. Gaps (co2) are filled
forward, the same series for every forecaster. Every forecaster is fitted once: seqforecast
and neuralforecast on the training rows with the validation rows for early stopping;
statsforecast on all rows before the first test window (`refit=False`: each later window is
forecast with the same parameters from all rows before its origin).
Peers (`pip install -e '.[peers]'`): statsforecast AutoETS, MSTL, SeasonalNaive, AutoTheta;
neuralforecast PatchTST and NHITS with `--neural-steps` training steps, each trained on MSE and
on MQLoss (its multi-quantile loss: a median and quantiles). A peer that cannot
be imported is named in one line and skipped.

Intervals, on the same windows: every seqforecast run scores the conformal bands of its model
and baselines (calibrated on the validation windows); statsforecast's models give their own
`level` intervals, and AutoETS and SeasonalNaive also statsforecast's conformal ones
(`ConformalIntervals`, calibrated on the last `--conformal-windows` windows before each
origin's fit). With --adaptive every seqforecast run's bands are also scored
adaptively (`seqforecast.evaluate intervals=adaptive`, nothing retrained). Each peer is asked
for the central 20-95% intervals, so that with its point as the
median it forecasts the 13 quantiles seqforecast scores (0.025 ... 0.975), and all are scored by
the same code (seqforecast.probabilistic.sums): coverage and width of the 80% and 95% bands,
MSIS over the series' in-sample seasonal-naive MAE, CRPS from the 13 quantiles.

The script checks window alignment: its own last value and seasonal naive on the series must
equal the baseline rows of every seqforecast run. Results: one table per dataset, an interval
table per dataset, and benchmarks/realdata.json.

One report per table: a run merges into its `--out` where that exists, as `--merge` joins
reports (a rerun of some variants, the peers of another run): per dataset, a case's latest
measurement in the table (a seqforecast run by variant and seed, a peer by its row), the
earlier one, where it differs, in `repeats` (named under the table), each with the command and
machine that measured it (`report`), every merged report in `merged_from`.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import multiprocessing
import queue as queue_module
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (  # noqa: E402
    REPO,
    keep_latest,
    measured_in,
    rescore,
    run_facts,
    same_fields,
    source,
    stamp,
    train_run,
    write_report,
)

from seqforecast.data.csv_data import mase_scale  # noqa: E402
from seqforecast.data.windows import split_ranges  # noqa: E402
from seqforecast.probabilistic.sums import IntervalSums  # noqa: E402


@dataclass(frozen=True)
class Dataset:
    name: str
    target: str
    in_len: int
    out_len: int
    seasons: tuple[int, ...]  # the seasonal naive's periods; the first is the peers' season
    about: str

    @property
    def path(self) -> Path:
        return REPO / "data" / "real" / f"{self.name}.csv"


DATASETS = {
    "co2": Dataset("co2", "co2", 104, 52, (52,), "Mauna Loa CO2, weekly 1958-2001, 59 gaps"),
    "sunspots": Dataset(
        "sunspots", "sunactivity", 44, 11, (11,), "yearly sunspot activity 1700-2008"
    ),
    "elnino": Dataset("elnino", "sst", 48, 12, (12,), "El Nino sea surface temp., monthly"),
}
SPLIT = (0.7, 0.15, 0.15)
# --smoke: enough rows for a few windows in each split at the dataset's lengths.
SMOKE_ROWS = {"co2": 400, "sunspots": 120, "elnino": 160}

# seqforecast variants: overrides on top of the dataset's preset (`experiment=<name>`).
VARIANTS = {
    "preset": [],
    "preset_diff": ["attention=diff"],
    "preset_rope": ["pos_encoding=rope"],
    # The least-squares linear path alone: epoch 0's weights (the Transformer's output is zero
    # there), kept because a step of 1e-12 cannot beat them by trainer.min_improvement.
    "linear_path_alone": ["epochs=1", "lr=1e-12"],
    # One change of the preset undone at a time: what each one buys.
    "ablate_point": ["embedding=point"],  # the preset's patch sizes then do not apply
    "ablate_no_linear": ["model.linear_path=none", "model.linear_init=zero"],
    "ablate_recipe": [
        "lr=0.002",
        "model.dropout=0",
        "trainer.patience=10",
        "trainer.validate_initial=false",
        "trainer.min_improvement=0",
    ],
}
# data=csv with the synthetic data's recipe instead of the real-series one: point tokens,
# last-value normalisation, no linear path, no dropout, no epoch 0.
SYNTHETIC_RECIPE = [
    "model.instance_norm=last",
    "model.linear_path=none",
    "model.linear_init=zero",
    "model.dropout=0",
    "trainer.validate_initial=false",
    "trainer.min_improvement=0",
]
# neuralforecast's training budget besides --neural-steps: windows per batch (its default,
# 1024, made one PatchTST fit on co2 run past 15 minutes on this 2-core machine).
NEURAL_WINDOWS = 128

# The quantiles every forecaster's bands are scored at (the run's intervals.quantiles), and
# the central intervals that give them around a peer's point (statsforecast's `level`).
QUANTILES = (0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.975)
PEER_LEVELS = (20, 40, 60, 80, 90, 95)
BANDS = (0.8, 0.95)

# The default data=csv configuration, no preset: only the dataset's own facts.
DEFAULT_CSV = "default_csv"
SYNTHETIC_RECIPE_CSV = "synthetic_recipe_csv"


# ---------------------------------------------------------------- data


def write_data() -> None:
    """Write data/real/*.csv from statsmodels' copies of the series."""
    import statsmodels.api as sm

    out = REPO / "data" / "real"
    out.mkdir(parents=True, exist_ok=True)
    co2 = sm.datasets.co2.load_pandas().data["co2"]
    rows = [(f"{t:%Y-%m-%d}", "" if np.isnan(v) else f"{v:.1f}") for t, v in co2.items()]
    _write_csv(out / "co2.csv", ("time", "co2"), rows)
    sun = sm.datasets.sunspots.load_pandas().data
    rows = [(f"{int(y)}-01-01", f"{v:g}") for y, v in zip(sun.YEAR, sun.SUNACTIVITY, strict=True)]
    _write_csv(out / "sunspots.csv", ("time", "sunactivity"), rows)
    elnino = sm.datasets.elnino.load_pandas().data
    rows = [
        (f"{int(row.YEAR)}-{month:02d}-01", f"{row[col]:.2f}")
        for _, row in elnino.iterrows()
        for month, col in enumerate(elnino.columns[1:], start=1)
    ]
    _write_csv(out / "elnino.csv", ("time", "sst"), rows)
    print(f"wrote {', '.join(sorted(p.name for p in out.glob('*.csv')))} to {out}")


def _write_csv(path: Path, header: tuple[str, str], rows: list[tuple[str, str]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def read_values(path: Path, ds: Dataset, fill: bool = True) -> np.ndarray:
    """The target column, gaps filled forward (as data.fill=ffill does; NaN with fill=False)."""
    with path.open() as f:
        values = np.array([float(r[ds.target] or "nan") for r in csv.DictReader(f)])
    for i in range(1, len(values) if fill else 0):
        if np.isnan(values[i]):
            values[i] = values[i - 1]
    return values


@dataclass
class Windows:
    """Every test window: origins (first forecast row), truth [n, out_len]."""

    train_rows: int
    val_rows: int
    test_rows: int
    origins: np.ndarray
    truth: np.ndarray
    scale: float  # MSIS's: the in-sample seasonal-naive MAE on the training rows, as seqforecast


def held_out_windows(ds: Dataset, values: np.ndarray, observed: np.ndarray) -> Windows:
    """`observed`: the values with their gaps (NaN), for the MSIS scale as seqforecast has it."""
    n = len(values)
    rows = split_ranges(n, SPLIT)  # seqforecast's own split points
    origins = np.arange(rows["test"].start, n - ds.out_len + 1)
    truth = np.stack([values[o : o + ds.out_len] for o in origins])
    scale = float(mase_scale(observed[:, None], rows["train"], 1, list(ds.seasons))[0, 0])
    return Windows(len(rows["train"]), len(rows["val"]), len(rows["test"]), origins, truth,
                   scale)


def scores(forecast: np.ndarray, truth: np.ndarray) -> dict:
    err = forecast - truth
    return {"mse": float(np.mean(err**2)), "mae": float(np.mean(np.abs(err)))}


def interval_scores(quantiles: np.ndarray, w: Windows) -> dict:
    """quantiles [n, out_len, 13] at QUANTILES -> coverage, width, MSIS and CRPS, scored by
    seqforecast's own code on the same windows."""
    import torch

    sums = IntervalSums(QUANTILES, BANDS)
    truth = torch.from_numpy(w.truth)[..., None]  # [n, out_len, 1]
    scale = torch.full((len(truth), 1), w.scale, dtype=torch.float64)
    sums.add(torch.from_numpy(quantiles)[:, :, None, :], truth, scale)
    return {k: v for k, v in sums.totals().items() if not k.startswith("pinball_")}


def own_baselines(ds: Dataset, values: np.ndarray, w: Windows) -> dict[str, dict]:
    """last value and seasonal naive on the same windows, from the series directly."""
    last = np.stack([np.full(ds.out_len, values[o - 1]) for o in w.origins])
    rows = {"last_value": scores(last, w.truth)}
    for m in ds.seasons:
        name = "seasonal_naive" if len(ds.seasons) == 1 else f"seasonal_naive_{m}"
        steps = np.arange(ds.out_len) % m
        naive = np.stack([values[o - m + steps] for o in w.origins])
        rows[name] = scores(naive, w.truth)
    return rows


# ---------------------------------------------------------------- seqforecast


def data_overrides(ds: Dataset, path: Path) -> list[str]:
    """The default data=csv configuration for a dataset: only its own facts."""
    season = ds.seasons[0] if len(ds.seasons) == 1 else list(ds.seasons)
    return [
        "data=csv", f"data.path={path}", f"data.target={ds.target}", "data.time_column=time",
        "data.fill=ffill", f"in_len={ds.in_len}", f"out_len={ds.out_len}",
        f"data.season={season}",
    ]


def run_seqforecast(
    ds: Dataset, path: Path, variant: str, seed: int, out: Path, threads: int, extra: list[str],
    adaptive_bands: bool = False,
) -> dict:
    if variant == DEFAULT_CSV:
        overrides = data_overrides(ds, path)
    elif variant == SYNTHETIC_RECIPE_CSV:
        overrides = [*data_overrides(ds, path), *SYNTHETIC_RECIPE]
    else:
        overrides = [f"experiment={ds.name}", f"data.path={path}", *VARIANTS[variant]]
    run_dir = out / ds.name / variant / f"seed{seed}"
    metrics, last, wall = train_run(
        [*overrides, f"seed={seed}", f"trainer.num_threads={threads}", *extra], run_dir
    )
    if metrics is None:
        return {"variant": variant, "seed": seed, "status": f"failed: {last}"}
    adaptive = rescore_adaptive(run_dir) if adaptive_bands else None
    return {
        "variant": variant,
        "seed": seed,
        "status": "ok",
        "test": metrics["test"],
        **({"adaptive": adaptive} if adaptive else {}),
        "val_mse": metrics["val"]["model"]["mse"],
        **run_facts(metrics, wall),
        "test_rows": metrics["splits"]["test"]["rows"],
        "run_dir": str(run_dir),
        "val_curve": val_curve(run_dir),
    }


def rescore_adaptive(run_dir: Path) -> dict | None:
    """The run's test rows with every forecaster's bands adaptive (ACI, nothing retrained), or
    None if that failed. The run was just trained: never an earlier re-score's."""
    metrics = rescore(run_dir, "adaptive", reuse=False)
    return None if metrics is None else metrics["test"]


def val_curve(run_dir: Path) -> list[float]:
    """Validation MSE by epoch (epoch 0 first when scored), from the run's train.log."""
    pattern = re.compile(r"epoch (\d+)(?:/\d+ .*?| \(before training\)) +val_mse ([\d.e+-]+)")
    curve = {}
    for line in (run_dir / "train.log").read_text().splitlines():
        match = pattern.search(line)
        if match:
            curve[int(match.group(1))] = float(match.group(2))
    return [curve[k] for k in sorted(curve)]


def swing(curve: list[float]) -> float:
    """The largest rise of validation MSE from one epoch to the next, as a ratio (1 = none)."""
    return max([b / a for a, b in itertools.pairwise(curve)] + [1.0])


def check_alignment(own: dict, runs: list[dict], w: Windows) -> list[str]:
    """The script's last value and seasonal naive against every run's baseline rows."""
    problems = []
    for r in runs:
        if r["status"] != "ok":
            continue
        if r["test_windows"] != len(w.origins):
            problems.append(f"{r['variant']} seed {r['seed']}: {r['test_windows']} windows")
        for name, row in own.items():
            theirs = r["test"].get(name, {}).get("mse")
            if theirs is None or not math.isclose(theirs, row["mse"], rel_tol=1e-4):
                problems.append(
                    f"{r['variant']} seed {r['seed']}: {name} mse {theirs} vs {row['mse']:.6g}"
                )
    return problems


# ---------------------------------------------------------------- peers


def statsforecast_peers(ds: Dataset, values, w: Windows, timeout: float,
                        conformal_windows: int) -> list[dict]:
    import pandas as pd
    from statsforecast import StatsForecast
    from statsforecast.models import MSTL, AutoETS, AutoTheta, SeasonalNaive
    from statsforecast.utils import ConformalIntervals

    m = ds.seasons[0]
    models = {
        "AutoETS": lambda: AutoETS(season_length=m),
        "MSTL": lambda: MSTL(season_length=list(ds.seasons)),
        "SeasonalNaive": lambda: SeasonalNaive(season_length=m),
        "AutoTheta": lambda: AutoTheta(season_length=m),
    }
    frame = pd.DataFrame({"unique_id": 0, "ds": np.arange(len(values)), "y": values})

    def forecast(name: str, conformal: bool = False):
        """(point [n, out_len], quantiles [n, out_len, 13]) on the test windows."""
        sf = StatsForecast(models=[models[name]()], freq=1, n_jobs=1)
        intervals = (ConformalIntervals(h=ds.out_len, n_windows=conformal_windows)
                     if conformal else None)
        cv = sf.cross_validation(
            df=frame, h=ds.out_len, step_size=1, n_windows=len(w.origins), refit=False,
            level=list(PEER_LEVELS), prediction_intervals=intervals,
        )
        point = _by_window(cv, name, ds.out_len, w)
        return point, _level_quantiles(cv, name, point, ds.out_len, w)

    rows = [_peer(f"statsforecast {name}", forecast, name, w, timeout) for name in models]
    for name in ("AutoETS", "SeasonalNaive"):
        rows.append(_peer(f"statsforecast {name} conformal",
                          lambda n: forecast(n, conformal=True), name, w, timeout))
    return rows


def neuralforecast_peers(ds: Dataset, values, w: Windows, steps: int, timeout: float) -> list[dict]:
    import logging

    import pandas as pd
    from neuralforecast import NeuralForecast
    from neuralforecast.losses.pytorch import MQLoss
    from neuralforecast.models import NHITS, PatchTST

    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    common = dict(
        h=ds.out_len, input_size=ds.in_len, max_steps=steps, val_check_steps=50,
        early_stop_patience_steps=5, scaler_type="standard", random_seed=0,
        windows_batch_size=NEURAL_WINDOWS,
        enable_progress_bar=False, enable_model_summary=False, logger=False,
        accelerator="cpu",
    )
    # Each model twice: trained on MSE (a point), and on MQLoss (neuralforecast's multi-quantile
    # pinball loss) at the central 20-95% levels: its median and the 12 quantiles around it.
    mq = {"loss": MQLoss(level=list(PEER_LEVELS)), "valid_loss": MQLoss(level=list(PEER_LEVELS))}
    models = {
        "PatchTST": lambda: PatchTST(**common),
        "NHITS": lambda: NHITS(**common),
        "PatchTST MQLoss": lambda: PatchTST(**common, **mq),
        "NHITS MQLoss": lambda: NHITS(**common, **mq),
    }
    frame = pd.DataFrame({"unique_id": 0, "ds": np.arange(len(values)), "y": values})

    def forecast(name: str):
        """A point [n, out_len]; for an MQLoss model (point, quantiles [n, out_len, 13])."""
        model = models[name]()
        nf = NeuralForecast(models=[model], freq=1)
        cv = nf.cross_validation(
            df=frame, val_size=w.val_rows, test_size=w.test_rows, step_size=1,
            n_windows=None, refit=False,
        )
        column = str(model)  # the frame's column prefix: the model's alias or class name
        if not name.endswith("MQLoss"):
            return _by_window(cv, column, ds.out_len, w)
        point = _by_window(cv, f"{column}-median", ds.out_len, w)
        # MQLoss does not keep its quantiles in order; sorted (rearranged) before scoring
        return point, np.sort(_level_quantiles(cv, column, point, ds.out_len, w), axis=-1)

    rows = [_peer(f"neuralforecast {name}", forecast, name, w, timeout) for name in models]
    return [{**row, "max_steps": steps} for row in rows]


def _peer(label: str, forecast, name: str, w: Windows, timeout: float) -> dict:
    """Run forecast(name) in a child process, at most `timeout` seconds: a peer failing or
    running over is a result of the benchmark, not the end of it."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child() -> None:
        try:
            queue.put(("ok", forecast(name)))
        except Exception as err:
            queue.put(("failed", f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"))

    start = time.perf_counter()
    process = context.Process(target=child)
    process.start()
    try:
        status, result = queue.get(timeout=timeout)
    except queue_module.Empty:
        status, result = "skipped", f"over {timeout:.0f} s"
    process.join(5)
    if process.is_alive():
        process.kill()
    row = {"forecaster": label, "fit_seconds": round(time.perf_counter() - start, 1)}
    if status == "ok" and isinstance(result, tuple):  # a point and its quantiles
        row.update(scores(result[0], w.truth))
        row["intervals"] = interval_scores(result[1], w)
    elif status == "ok":
        row.update(scores(result, w.truth))
    else:
        row["status"] = f"{status}: {result}"
    print(f"  {row}", flush=True)
    return row


def _level_quantiles(cv, column: str, point: np.ndarray, out_len: int, w: Windows) -> np.ndarray:
    """A peer's `<column>-lo-<c>` / `-hi-<c>` bounds at PEER_LEVELS around its point [n, out_len]
    -> its 13 quantiles [n, out_len, 13] at QUANTILES, in the columns' order."""
    lower = [_by_window(cv, f"{column}-lo-{c}", out_len, w) for c in reversed(PEER_LEVELS)]
    upper = [_by_window(cv, f"{column}-hi-{c}", out_len, w) for c in PEER_LEVELS]
    return np.stack([*lower, point, *upper], axis=-1)


def _by_window(cv, column: str, out_len: int, w: Windows) -> np.ndarray:
    """A cross-validation frame -> forecasts [n_windows, out_len] in origin order, checked
    against the script's windows (same origins, same truth)."""
    cv = cv.sort_values(["cutoff", "ds"])
    forecast = cv[column].to_numpy().reshape(-1, out_len)
    truth = cv["y"].to_numpy().reshape(-1, out_len)
    origins = cv["cutoff"].to_numpy().reshape(-1, out_len)[:, 0] + 1
    if not (np.array_equal(origins, w.origins) and np.allclose(truth, w.truth)):
        raise RuntimeError(f"its windows differ from the test windows ({len(origins)} origins)")
    return forecast


# ---------------------------------------------------------------- report


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per variant: mean and std over seeds of the test MSE and MAE, and train seconds."""
    by_variant: dict[str, list[dict]] = {}
    for r in runs:
        by_variant.setdefault(r["variant"], []).append(r)
    summary = {}
    for variant, rs in by_variant.items():
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            summary[variant] = {"status": rs[0]["status"], "n": 0}
            continue
        mse = [r["test"]["model"]["mse"] for r in ok]
        mae = [r["test"]["model"]["mae"] for r in ok]
        summary[variant] = {
            "n": len(ok),
            "mse": statistics.mean(mse),
            "mse_std": statistics.stdev(mse) if len(mse) > 1 else 0.0,
            "mae": statistics.mean(mae),
            "mae_std": statistics.stdev(mae) if len(mae) > 1 else 0.0,
            "train_seconds": statistics.mean(r["train_seconds"] for r in ok),
            # the model's conformal bands (mean over seeds), where the runs scored them
            "intervals": {k: statistics.mean(r["test"]["model"][k] for r in ok)
                          for k in INTERVAL_KEYS if all(k in r["test"]["model"] for r in ok)},
            "intervals_adaptive": {
                k: statistics.mean(r["adaptive"]["model"][k] for r in ok)
                for k in INTERVAL_KEYS if all(k in r.get("adaptive", {}).get("model", {})
                                              for r in ok)
            },
            "best_epochs": [r["best_epoch"] for r in ok],
            "largest_val_rise": max(swing(r["val_curve"]) for r in ok),
        }
    return summary


INTERVAL_KEYS = ("coverage_80", "width_80", "coverage_95", "width_95", "msis_80", "msis_95",
                 "crps")


def interval_table(summary: dict, baselines: dict, peers: list[dict],
                   adaptive_baselines: dict | None = None) -> list[dict]:
    """A row per forecaster with bands: seqforecast's variants (conformal and, with
    --adaptive, adaptive; mean over seeds), the runs' baselines alike, the peers (their own
    intervals or statsforecast's conformal ones); by MSIS at 80%, the lowest first."""
    rows = []
    for kind in ("intervals", "intervals_adaptive"):
        method = "adaptive" if kind == "intervals_adaptive" else "conformal"
        rows += [{"forecaster": f"seqforecast {v} ({method})", **s[kind]}
                 for v, s in summary.items() if s.get(kind)]
    for method, table in (("conformal", baselines), ("adaptive", adaptive_baselines or {})):
        rows += [{"forecaster": f"{name} ({method})",
                  **{k: row[k] for k in INTERVAL_KEYS if k in row}}
                 for name, row in table.items() if name != "model" and "crps" in row]
    rows += [{"forecaster": p["forecaster"], **p["intervals"]} for p in peers if "intervals" in p]
    return sorted(rows, key=lambda r: r.get("msis_80", math.inf))


def print_intervals(rows: list[dict]) -> None:
    if not rows:
        return
    print("  bands on the same test windows: coverage (nominal 0.8, 0.95), width, MSIS, CRPS")
    print(f"  {'forecaster':44s}" + "".join(f"{k:>12s}" for k in INTERVAL_KEYS))
    for r in rows:
        print(f"  {r['forecaster']:44s}" + "".join(f"{r.get(k, math.nan):>12.4g}"
                                                   for k in INTERVAL_KEYS))


def print_table(ds: Dataset, summary: dict, baselines: dict, peers: list[dict]) -> list[dict]:
    rows = []
    for variant, s in summary.items():
        if s["n"]:
            rows.append({
                "forecaster": f"seqforecast {variant}", "mse": s["mse"], "mse_std": s["mse_std"],
                "mae": s["mae"], "fit_seconds": s["train_seconds"], "n": s["n"],
            })
        else:
            rows.append({"forecaster": f"seqforecast {variant}", "status": s["status"]})
    for name, row in baselines.items():
        rows.append({"forecaster": name, **row})
    rows.extend(peers)
    ok = sorted((r for r in rows if "mse" in r), key=lambda r: r["mse"])
    failed = [r for r in rows if "mse" not in r]
    print(
        f"\n{ds.name}: {ds.about}; in {ds.in_len}, out {ds.out_len}, "
        f"season {list(ds.seasons)}; test MSE / MAE in the data's units"
    )
    print(f"  {'forecaster':34s} {'test MSE':>22s} {'MAE':>10s} {'fit s':>8s}")
    for r in ok:
        spread = f" ± {r['mse_std']:.3g} (n={r['n']})" if "mse_std" in r else ""
        fit = f"{r['fit_seconds']:.1f}" if r.get("fit_seconds") is not None else "-"
        print(f"  {r['forecaster']:34s} {r['mse']:>10.4g}{spread:>12s} {r['mae']:>10.4g} {fit:>8s}")
    for r in failed:
        print(f"  {r['forecaster']:34s} {r['status']}")
    return ok + failed


def markdown(report: dict, datasets: list[str]) -> str:
    """One Markdown table per dataset, best first (for the README)."""
    out = []
    for name in datasets:
        r = report[name]
        out.append(
            f"**{name}** ({r['about']}; {r['rows']} rows, in {r['in_len']}, out {r['out_len']}, "
            f"season {r['seasons']}, {r['test_windows']} test windows)\n"
        )
        out.append("| forecaster | test MSE | test MAE | fit s |")
        out.append("|---|---|---|---|")
        for row in r["table"]:
            if "mse" not in row:
                out.append(f"| {row['forecaster']} | {row['status']} | | |")
                continue
            spread = f" ± {row['mse_std']:.3g} (n={row['n']})" if "mse_std" in row else ""
            fit = f"{row['fit_seconds']:.1f}" if row.get("fit_seconds") is not None else "-"
            out.append(
                f"| {row['forecaster']} | {row['mse']:.4g}{spread} | {row['mae']:.4g} | {fit} |"
            )
        out.append("")
        again = [x for x in report.get("repeats", []) if x["dataset"] == name]
        shown = [f"seqforecast {v} {s['mse']:.4g} ± {s['mse_std']:.3g} (n={s['n']})"
                 for v, s in summarise([x for x in again if "variant" in x]).items() if s["n"]]
        shown += [f"{x['forecaster']} {x['mse']:.4g}" for x in again if "mse" in x
                  and "forecaster" in x]
        if shown:
            out += ["Other runs of these cases, kept in the report beside the table's (test "
                    f"MSE): {'; '.join(shown)}.", ""]
        if r.get("intervals"):
            out.append("| bands | " + " | ".join(INTERVAL_KEYS) + " |")
            out.append("|---" * (len(INTERVAL_KEYS) + 1) + "|")
            for row in r["intervals"]:
                cells = [f"{row[k]:.4g}" if k in row else "" for k in INTERVAL_KEYS]
                out.append(f"| {row['forecaster']} | " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- one report of several

PEERS = ("statsforecast ", "neuralforecast ")  # the table's rows that are peers
# What a run measured: two records of a case equal in these are one run met again (in another
# report, or read again from its run dir: `reused`, `wall_seconds` differ), not a repeat.
SAME_RUN = same_fields("status", "test", "adaptive", "val_mse", "best_epoch", "epochs_run",
                       "train_seconds", "test_rows", "val_curve")
SAME_PEER = same_fields("status", "mse", "mae", "fit_seconds", "intervals")


def merge_reports(reports: list[tuple[Path | None, dict]]) -> dict:
    """One report from several ((file, report), in the order they were measured: e.g. a full
    run, then a rerun of some variants with later code, or the peers of another run), per
    dataset: each case's latest measurement in the table (a seqforecast run by variant and
    seed, a peer by its row's name), the earlier ones that differ in `repeats`, each with the
    command and machine of the report that measured it (`report`); the table, the bands and
    the summary made again from them as one run of the script would, the baselines' rows from
    the latest report with runs (every run scores the same windows); every merged report in
    `merged_from`."""
    merged: dict = {"protocol": reports[0][1]["protocol"],
                    "merged_from": [source(path, report) for path, report in reports],
                    "repeats": []}
    repeats = merged["repeats"]
    for _, report in reports:
        repeats += [r for r in report.get("repeats", []) if r not in repeats]
    for name, ds in DATASETS.items():
        found = [(report[name], measured_in(report)) for _, report in reports if name in report]
        if not found:
            continue
        runs: dict = {}
        peers: dict = {}
        variants: list[str] = []
        problems: list[str] = []
        baselines, adaptive = None, None
        for entry, tag in found:
            case = {"dataset": name}
            for r in entry["runs"]:
                variants += [r["variant"]] if r["variant"] not in variants else []
                keep_latest(runs, (r["variant"], r["seed"]), r, repeats, SAME_RUN, tag, case)
            for row in entry["table"]:
                if row["forecaster"].startswith(PEERS):
                    keep_latest(peers, row["forecaster"], row, repeats, SAME_PEER, tag, case)
            ok = [r for r in entry["runs"] if r["status"] == "ok"]
            if ok:
                baselines = {k: v for k, v in ok[0]["test"].items() if k != "model"}
                adaptive = ok[0].get("adaptive")
            elif baselines is None:  # no runs: the script's own baselines, as the table gave
                baselines = {row["forecaster"]: {k: v for k, v in row.items()
                                                 if k != "forecaster"}
                             for row in entry["table"] if not row["forecaster"].startswith(
                                 (*PEERS, "seqforecast "))}
            problems += [p for p in entry["alignment_problems"] if p not in problems]
        done = sorted(runs.values(), key=lambda r: (variants.index(r["variant"]), r["seed"]))
        summary = summarise(done)
        table = print_table(ds, summary, baselines, list(peers.values()))
        last = found[-1][0]
        merged[name] = {
            **{k: last[k] for k in ("about", "in_len", "out_len", "seasons", "rows",
                                    "test_windows")},
            "table": table,
            "intervals": interval_table(summary, baselines, list(peers.values()), adaptive),
            "summary": summary, "runs": done, "alignment_problems": problems,
        }
    return merged


def datasets_in(report: dict) -> list[str]:
    return [name for name in DATASETS if name in report]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--variants", nargs="*", default=["preset", "preset_diff", DEFAULT_CSV],
        choices=[*VARIANTS, DEFAULT_CSV, SYNTHETIC_RECIPE_CSV],
    )
    parser.add_argument("--peers", nargs="*", default=["stats", "neural"],
                        choices=["stats", "neural"])
    parser.add_argument("--neural-steps", type=int, default=500)
    parser.add_argument("--adaptive", action="store_true",
                        help="also score every run's bands adaptively (intervals=adaptive)")
    parser.add_argument("--conformal-windows", type=int, default=10,
                        help="statsforecast ConformalIntervals' calibration windows")
    parser.add_argument("--peer-timeout", type=float, default=600, help="seconds per peer")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="seqforecast runs at a time")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "outputs" / "bench_realdata")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "realdata.json")
    parser.add_argument("--write-data", action="store_true", help="write data/real/ first")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="JSON",
                        help="no training: these reports as one, into --out")
    parser.add_argument(
        "--smoke", action="store_true",
        help="a tiny slice: the first rows of each series, 1 epoch, no peers (for the tests)",
    )
    args = parser.parse_args(argv)
    if args.merge:
        merged = merge_reports([(p, json.loads(p.read_text())) for p in args.merge])
        write_report(args.out, "scripts/bench_realdata.py", argv, **merged)
        args.out.with_suffix(".md").write_text(markdown(merged, datasets_in(merged)))
        return 0
    if args.write_data:
        write_data()
    extra: list[str] = []
    if args.smoke:
        args.peers, args.seeds = [], args.seeds[:1]
        extra = ["epochs=1", "d_model=16", "n_heads=2", "trainer.patience=0",
                 "log.figures=false"]  # drawing them took half a smoke run's CPU

    report = {"protocol": {"split": SPLIT, "test_windows_stride": 1, "fill": "ffill"}}
    # An --out that exists is the table's report: this run is merged into it (as --merge
    # would), each time it is written.
    previous = json.loads(args.out.read_text()) if args.out.is_file() else None
    if previous:
        print(f"merging into {args.out}", file=sys.stderr)

    def save() -> dict:
        found = report if previous is None else merge_reports(
            [(args.out, previous), (None, {**stamp(__file__, argv), **report})])
        write_report(args.out, "scripts/bench_realdata.py", argv, **found)
        return found
    for name in args.datasets:
        ds = DATASETS[name]
        path = ds.path
        if args.smoke:  # the first rows of the series, as a file of its own
            path = args.runs_dir / "smoke_data" / path.name
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = ds.path.read_text().splitlines(keepends=True)
            path.write_text("".join(lines[: 1 + SMOKE_ROWS[name]]))
        values = read_values(path, ds)
        w = held_out_windows(ds, values, read_values(path, ds, fill=False))
        print(
            f"{name}: {len(values)} rows, train {w.train_rows} / val {w.val_rows} / test "
            f"{w.test_rows}, {len(w.origins)} test windows", flush=True,
        )
        cases = [(variant, seed) for variant in args.variants for seed in args.seeds]

        def run_case(case, ds=ds, path=path):
            variant, seed = case
            r = run_seqforecast(ds, path, variant, seed, args.runs_dir, args.threads, extra,
                                args.adaptive)
            shown = f"test mse {r['test']['model']['mse']:.5g}" if r["status"] == "ok" else ""
            print(f"  seqforecast {variant} seed {seed}: {shown or r['status']}", flush=True)
            return r

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each run is a subprocess
            runs = list(pool.map(run_case, cases))
        own = own_baselines(ds, values, w)
        problems = check_alignment(own, runs, w)
        for p in problems:
            print(f"  ALIGNMENT: {p}")
        peers: list[dict] = []
        if "stats" in args.peers and _importable("statsforecast"):
            peers += statsforecast_peers(ds, values, w, args.peer_timeout,
                                         args.conformal_windows)
        if "neural" in args.peers and _importable("neuralforecast"):
            peers += neuralforecast_peers(ds, values, w, args.neural_steps, args.peer_timeout)
        ok_runs = [r for r in runs if r["status"] == "ok"]
        baseline_rows = {
            k: v for k, v in (ok_runs[0]["test"] if ok_runs else {}).items() if k != "model"
        }
        summary = summarise(runs)
        table = print_table(ds, summary, baseline_rows or own, peers)
        adaptive_rows = ok_runs[0].get("adaptive") if ok_runs else None
        bands = interval_table(summary, baseline_rows, peers, adaptive_rows)
        print_intervals(bands)
        report[name] = {
            "about": ds.about, "in_len": ds.in_len, "out_len": ds.out_len,
            "seasons": list(ds.seasons), "rows": len(values), "test_windows": len(w.origins),
            "table": table, "intervals": bands, "summary": summary, "runs": runs,
            "alignment_problems": problems,
        }
        # Written after every dataset: a long run that stops keeps what it finished.
        written = save()
    args.out.with_suffix(".md").write_text(markdown(written, datasets_in(written)))
    print(f"wrote {args.out.with_suffix('.md')}", file=sys.stderr)
    bad = [n for n in args.datasets if report[n]["alignment_problems"]]
    failed = [r for n in args.datasets for r in report[n]["runs"] if r["status"] != "ok"]
    return 1 if bad or failed else 0


def _importable(package: str) -> bool:
    try:
        __import__(package)
    except ImportError:
        print(f"  {package} is not installed: its peers are skipped (pip install -e '.[peers]')")
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())

"""Forecasts with uncertainty, measured over seeds on the held-out test windows: for each loss
(`mse`, `quantile`, `gaussian`) a run per seed of one preset; then

- coverage: each forecaster's conformal bands (the model and every baseline) against their
  nominal 80% and 95%, and a probabilistic model's own bands (mean and spread over seeds);
- CRPS: each model's (its conformal band's, and its own quantiles') over each baseline's
  conformal CRPS, paired by seed (geometric mean and 95% interval, as `compare`);
- MSE: each probabilistic model's point (median or mean) over the MSE-trained model's.

    python scripts/bench_intervals.py                                   # the default synthetic task
    python scripts/bench_intervals.py --name etth1_96 --methods split adaptive \\
        --set experiment=patchtst data.path=../shared/data/ETTh1.csv out_len=96
    python scripts/bench_intervals.py --smoke                           # tiny runs (the suite)

Every (loss, seed) run goes to --runs-dir/<loss>/seed<k> and is reused when its metrics.json is
there (so a long study can be run in parts). With --methods, the first method is the runs'
own (`intervals=`); each further one re-scores the kept model with `seqforecast.evaluate
intervals=<method>` (nothing retrained), as does the first for a run saved before intervals
existed. Report: the tables, and benchmarks/intervals_<name>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, rescore, train_run, write_report  # noqa: E402

from seqforecast.stats import paired_ratio  # noqa: E402

LOSSES = ("mse", "quantile", "gaussian")
LEVELS = ("80", "95")
SMOKE = ["experiment=quick", "data.train_size=64", "data.val_size=48", "data.test_size=128"]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=["split"], choices=["split", "adaptive"],
                   help="interval methods scored: the first is the runs' own")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="overrides of every run (the preset)")
    p.add_argument("--name", default="synthetic", help="the report's name")
    p.add_argument("--runs-dir", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--smoke", action="store_true", help="tiny runs, 2 seeds")
    args = p.parse_args(argv)
    if args.smoke:
        args.set, args.seeds = [*SMOKE, *args.set], args.seeds[:2]
    args.runs_dir = args.runs_dir or REPO / "outputs" / "bench_intervals" / args.name
    args.out = args.out or REPO / "benchmarks" / f"intervals_{args.name}.json"
    return args


def run_all(args) -> dict[str, dict[int, dict]]:
    """{method: {"<loss>/<seed>": metrics.json}} of every run, training what is missing."""
    found: dict[str, dict] = {m: {} for m in args.methods}
    own_method = args.methods[0]
    for loss in args.losses:
        for seed in args.seeds:
            run_dir = args.runs_dir / loss / f"seed{seed}"
            key = f"{loss}/{seed}"
            if (run_dir / "metrics.json").is_file():
                metrics = json.loads((run_dir / "metrics.json").read_text())
            else:
                overrides = [*args.set, f"loss={loss}", f"seed={seed}", f"intervals={own_method}"]
                metrics, last, wall = train_run(overrides, run_dir)
                if metrics is None:
                    print(f"{key}: failed: {last}", file=sys.stderr)
                    continue
                print(f"{key}: best epoch {metrics['run']['best_epoch']} of "
                      f"{metrics['run']['epochs_run']}, {wall:.0f} s", file=sys.stderr)
            if "crps" not in metrics["test"]["model"]:  # a run saved before intervals existed
                metrics = rescored(run_dir, own_method)
            found[own_method][key] = metrics
            for method in args.methods[1:]:
                found[method][key] = rescored(run_dir, method)
    return found


def rescored(run_dir: Path, method: str) -> dict:
    """The kept model's metrics with its bands scored by `method` (an earlier re-score's when
    there: the runs are reused too)."""
    metrics = rescore(run_dir, method, reuse=True)
    if metrics is None:
        raise RuntimeError(f"seqforecast.evaluate run_dir={run_dir} intervals={method} failed")
    return metrics


def _spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1
            else 0.0, "n": len(values)}


def _pair(group: dict[int, float], reference: dict[int, float]) -> dict:
    p = paired_ratio(group, reference)
    return {"ratio": p.ratio, "low": p.low, "high": p.high, "seeds": p.n, "verdict": p.verdict}


def summarise(runs: dict[str, dict], losses, seeds) -> dict:
    """Coverage, CRPS pairs and MSE pairs of one method's runs."""
    by_loss = {loss: {s: runs[f"{loss}/{s}"]["test"] for s in seeds if f"{loss}/{s}" in runs}
               for loss in losses}
    coverage, crps, mse = {}, {}, {}
    for loss, tests in by_loss.items():
        if not tests:
            continue
        rows = next(iter(tests.values()))
        for name in rows:
            for prefix in ("", "own_") if name == "model" else ("",):
                label = f"{loss}: {name}{' (own)' if prefix else ''}"
                if not all(f"{prefix}coverage_80" in t[name] for t in tests.values()):
                    continue
                coverage[label] = {
                    level: _spread([t[name][f"{prefix}coverage_{level}"] for t in tests.values()])
                    for level in LEVELS
                }
                if name != "model":
                    continue
                model_crps = {s: t["model"][f"{prefix}crps"] for s, t in tests.items()}
                for baseline in rows:
                    if baseline != "model" and "crps" in rows[baseline]:
                        reference = {s: t[baseline]["crps"] for s, t in tests.items()}
                        crps[f"{label} / {baseline}"] = _pair(model_crps, reference)
        if loss != "mse" and by_loss.get("mse"):
            mse[f"{loss} / mse"] = _pair({s: t["model"]["mse"] for s, t in tests.items()},
                                         {s: t["model"]["mse"] for s, t in by_loss["mse"].items()})
    return {"coverage": coverage, "crps_over_baseline": crps, "mse_over_mse_model": mse}


def show(method: str, summary: dict, windows) -> None:
    print(f"\n## {method} bands ({windows} test windows)\n")
    print("| forecaster | coverage 80% | coverage 95% |\n|---|---|---|")
    for label, found in summary["coverage"].items():
        cells = [f"{found[lv]['mean']:.3f} ± {found[lv]['std']:.3f}" for lv in LEVELS]
        print(f"| {label} | {' | '.join(cells)} |")
    for title, key in (("CRPS over the baseline's conformal CRPS", "crps_over_baseline"),
                       ("MSE of the point over the MSE-trained model's", "mse_over_mse_model")):
        print(f"\n| {title} | paired ratio [95%] | verdict |\n|---|---|---|")
        for label, p in summary[key].items():
            print(f"| {label} | {p['ratio']:.3f} [{p['low']:.3f}, {p['high']:.3f}] | "
                  f"{p['verdict']} |")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    found = run_all(args)
    report = {}
    for method, runs in found.items():
        if not runs:
            continue
        split = next(iter(runs.values()))["splits"]["test"]
        windows = split.get("windows", split.get("series"))  # CSV windows, synthetic series
        report[method] = {"test_windows": windows,
                          **summarise(runs, args.losses, args.seeds)}
        show(method, report[method], windows)
    write_report(args.out, __file__, argv, seeds=args.seeds, overrides=args.set,
                 methods=report,
                 runs={m: {k: v["test"] for k, v in r.items()} for m, r in found.items()})


if __name__ == "__main__":
    main()

"""A seed sweep stacked against the same runs one after another, side by side.

    python scripts/bench_stacked.py                                 # the default config, 5 seeds
    python scripts/bench_stacked.py --set experiment=itransformer dataset=etth1 data_dir=DIR

Each round runs the sweep twice, the order alternating between rounds: `--multirun seed=...`
with Hydra's basic launcher (each job its own run, its own kernels: `trainer.kernels=auto`,
the native CPU kernels here) and with `hydra/launcher=stacked` (one batched model, torch's
kernels), every run with `trainer.num_threads=--threads`, so both sides use the same threads.
Both are whole commands in fresh processes (start-up, data, training, every evaluation and
file), timed by the wall clock. The table also pairs each seed's held-out test MSE stacked and
solo (their paired ratio over the seeds with its 95% interval, as `compare`): the stack trains
the same function from the same initial weights on the same batches, so the ratio should be 1
within noise (not exactly: the kernels differ, and so do the dropout draws). Printed as a
table and added to --out (benchmarks/stacked.json) as an entry (`--name`, default the --set
overrides), with the command and machine that measured it; the report holds every sweep
measured (`--merge` joins reports into it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import add_entry, merge_entries, repo_env, save_report

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from seqforecast.stats import paired_ratio  # noqa: E402

SMOKE = ["experiment=quick", "data.train_size=64", "data.val_size=16", "epochs=1",
         "log.figures=false"]
SIDES = {"one_after_another": [], "stacked": ["hydra/launcher=stacked"]}


def sweep(side: str, seeds: list[int], overrides: list[str], threads: int, sweep_dir: Path
          ) -> dict:
    """Run one side's sweep; its wall time and each seed's metrics."""
    args = [sys.executable, "-m", "seqforecast.train", "--multirun", *SIDES[side], *overrides,
            f"trainer.num_threads={threads}", f"seed={','.join(map(str, seeds))}",
            f"hydra.sweep.dir={sweep_dir}"]
    started = time.perf_counter()
    proc = subprocess.run(args, env=repo_env(), capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{side} sweep failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    runs = {}
    for metrics_file in sweep_dir.glob("*/metrics.json"):
        metrics = json.loads(metrics_file.read_text())
        seed = json.loads((metrics_file.parent / "status.json").read_text())["overrides"]
        seed = int(next(o for o in seed if o.startswith("seed=")).partition("=")[2])
        runs[seed] = {"test_mse": metrics["test"]["model"]["mse"],
                      "val_mse": metrics["val"]["model"]["mse"],
                      "train_seconds": metrics["run"]["train_seconds"],
                      "kernels": metrics["run"]["kernels"],
                      "best_epoch": metrics["run"]["best_epoch"]}
    return {"side": side, "wall_s": round(wall, 2), "runs": dict(sorted(runs.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", nargs="*", default=[], help="overrides for every run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "stacked.json")
    parser.add_argument("--name", default=None,
                        help="the sweep's name in the report (default: the --set overrides)")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="JSON",
                        help="no sweeps: these reports' entries as one, into --out (a report "
                             "of one sweep: an entry named by its file)")
    parser.add_argument("--smoke", action="store_true", help="a tiny config, 2 seeds (tests)")
    args = parser.parse_args(argv)
    if args.merge:
        save_report(args.out, merge_entries(args.merge, prefix="stacked_"))
        return 0
    overrides = [*SMOKE, *args.set] if args.smoke else list(args.set)
    seeds = args.seeds[:2] if args.smoke else args.seeds
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench_stacked_") as tmp:
        for r in range(args.rounds):
            order = list(SIDES) if r % 2 == 0 else list(SIDES)[::-1]
            found = {side: sweep(side, seeds, overrides, args.threads,
                                 Path(tmp) / f"round{r}_{side}") for side in order}
            rounds.append(found)
    best = {side: min(rounds, key=lambda found: found[side]["wall_s"])[side] for side in SIDES}
    solo, stacked = best["one_after_another"], best["stacked"]
    ratio = paired_ratio({s: v["test_mse"] for s, v in stacked["runs"].items()},
                         {s: v["test_mse"] for s, v in solo["runs"].items()})
    speedup = solo["wall_s"] / stacked["wall_s"]
    print(f"{len(seeds)} seeds, {args.threads} thread(s) a run, {' '.join(overrides) or 'default'}")
    print(f"{'':22}{'wall s':>10}{'mean test MSE':>16}")
    for side, found in best.items():
        mean = sum(v["test_mse"] for v in found["runs"].values()) / len(found["runs"])
        print(f"{side:22}{found['wall_s']:>10.1f}{mean:>16.6g}")
    print(f"speed-up {speedup:.2f}x; test MSE stacked / one after another: {ratio.ratio:.4f} "
          f"[{ratio.low:.4f}, {ratio.high:.4f}] over {ratio.n} seeds")
    add_entry(args.out, __file__, argv, args.name or " ".join(args.set) or "default",
              seeds=seeds, threads=args.threads, overrides=overrides, rounds=rounds, best=best,
              speedup=round(speedup, 3),
              test_mse_ratio={"ratio": ratio.ratio, "low": ratio.low, "high": ratio.high,
                              "n": ratio.n})
    return 0


if __name__ == "__main__":
    sys.exit(main())

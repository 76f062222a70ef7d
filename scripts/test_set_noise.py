r"""How big must the held-out synthetic test set be? Score trained runs on many test draws.

    python scripts/test_set_noise.py outputs/<date>/<time> [more run dirs] \
        [--sizes 256 1000 2048 4096] [--draws 10]

For each run (its best checkpoint, through the same evaluation path training uses) and each
test-set size, the test set is drawn `--draws` times from fresh test seeds and scored. The
table gives, per size, the largest relative deviation of one draw's MSE from the mean over
draws, and the coefficient of variation: the size is large enough when one run's test MSE moves
by less than 5% between test seeds. Writes benchmarks/test_set_noise.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from seqforecast.data import build_data  # noqa: E402
from seqforecast.runs.loading import load_run  # noqa: E402
from seqforecast.training.evaluation import Evaluator  # noqa: E402

FIRST_SEED = 7_000_001  # away from the seeds runs use for training, validation and test


def measure(run_dir: Path, sizes: list[int], draws: int) -> list[dict]:
    run = load_run(run_dir, "best", "cpu", with_data=False)
    rows = []
    for size in sizes:
        mses = []
        for k in range(draws):
            data_cfg = {**run.config["data"], "test_size": size, "test_seed": FIRST_SEED + k}
            data = build_data(data_cfg, run.config["seed"], "cpu")
            evaluator = Evaluator(data, {}, run.config["trainer"]["eval_batch_size"])
            mses.append(evaluator.model_metrics(run.model, "test")["mse"])
        mean = statistics.fmean(mses)
        rows.append({
            "run": str(run_dir),
            "attention": run.config["attention"]["name"],
            "seed": run.config["seed"],
            "size": size,
            "draws": draws,
            "mean_mse": mean,
            "max_rel_dev": max(abs(m / mean - 1) for m in mses),
            "cv": statistics.stdev(mses) / mean,
            "mses": mses,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--sizes", nargs="+", type=int, default=[256, 1000, 2048, 4096])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "test_set_noise.json")
    args = parser.parse_args()
    rows = [row for run in args.runs for row in measure(run, args.sizes, args.draws)]
    print(f"{'attention':<10} {'seed':>4} {'size':>6} {'mean MSE':>11} {'max |dev|':>10} {'CV':>7}")
    for row in rows:
        print(f"{row['attention']:<10} {row['seed']:>4} {row['size']:>6} {row['mean_mse']:>11.4g} "
              f"{row['max_rel_dev']:>10.1%} {row['cv']:>7.1%}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"draws": args.draws, "rows": rows}, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

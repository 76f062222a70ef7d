"""python -m seqforecast.evaluate run_dir=outputs/<date>/<time> [checkpoint=best|last] [device=...]

Re-evaluates a run from its saved config and checkpoint (loaded with weights_only=True): the
same table as training printed (identical numbers on CPU for checkpoint=best), metrics and
figures written to <run_dir>/evaluate/<checkpoint>/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .cli_args import parse_key_values, run_tool
from .training.baselines import fit_baselines
from .training.monitor import save_visuals
from .training.report import evaluate, format_table, write_metrics
from .training.restore import LoadedRun, load_run

USAGE = __doc__.strip().splitlines()[0]
DEFAULTS = {"run_dir": None, "checkpoint": "best", "device": None}


def reevaluate(run: LoadedRun, checkpoint: str) -> dict:
    train, config = run.data.train, run.config
    baselines = fit_baselines(train.src, train.target, config["data"].get("season", 0))
    results = evaluate(run.model, run.data, config["trainer"]["eval_batch_size"], baselines)
    out_dir = run.run_dir / "evaluate" / checkpoint
    info = {"checkpoint": checkpoint, "epoch": run.checkpoint["epoch"]}
    write_metrics(out_dir / "metrics.json", results, info)
    signed = config["attention"]["name"] == "diff"
    save_visuals(out_dir, run.model, run.data, baselines, signed, f"{checkpoint} checkpoint")
    return results


def evaluate_command(argv: list[str]) -> None:
    args = parse_key_values(argv, DEFAULTS, ["run_dir"], USAGE)
    run = load_run(Path(args["run_dir"]), args["checkpoint"], args["device"])
    results = reevaluate(run, args["checkpoint"])
    print(f"{args['checkpoint']} checkpoint (epoch {run.checkpoint['epoch']}) of {run.run_dir}")
    print(format_table(results))
    print(f"written to {run.run_dir / 'evaluate' / args['checkpoint']}")


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, evaluate_command)


if __name__ == "__main__":
    sys.exit(main())

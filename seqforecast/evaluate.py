"""python -m seqforecast.evaluate run_dir=outputs/<date>/<time> [checkpoint=best|last]
                                [device=...] [allow_changed_data=false|true]
                                [intervals=split|adaptive|none]

Re-evaluates a run from its saved config and checkpoint (loaded with weights_only=True) through
the same evaluation path training uses: the same table as training printed (identical numbers
on CPU for checkpoint=best), metrics and figures written to <run_dir>/evaluate/<checkpoint>/.

A CSV run is scored on the rows and with the scaler saved in its checkpoint, never re-fitted
from the file as it is now. If the file's rows changed since training (rows appended, edited,
removed: a hash of each split's rows is kept), evaluate refuses in one line saying what
changed; allow_changed_data=true evaluates the file as it is now with the saved split starts
and scaler (the test split then runs to the file's end).

intervals= scores the bands another way than the run did (at the run's levels and quantiles;
adaptive: CSV runs), written to <run_dir>/evaluate/<checkpoint>_<method>/, nothing retrained.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .cli_args import parse_bool, parse_key_values, run_tool
from .config import compose_config
from .config.check import resolved
from .config.rules import check_intervals
from .options import ConfigError
from .probabilistic.conformal import INTERVAL_METHODS
from .runs.loading import LoadedRun, load_run
from .training.evaluation import Evaluator
from .training.monitor import save_visuals
from .training.report import (
    format_intervals,
    format_table,
    intervals_heading,
    write_metrics,
    write_per_series,
)
from .training.runtime import configure_threads

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
DEFAULTS = {"run_dir": None, "checkpoint": "best", "device": None, "allow_changed_data": "false",
            "intervals": None}


def interval_settings(run: LoadedRun, method: str | None) -> dict | None:
    """The run's `intervals` config, or with `method` another method at the run's levels and
    quantiles (a run without intervals: the method's defaults); ConfigError if the run
    cannot have it."""
    own = run.config["intervals"]
    if method is None:
        return own
    if method not in INTERVAL_METHODS:
        raise ConfigError(f"intervals={method} is not allowed: choose one of "
                          f"{', '.join(INTERVAL_METHODS)}")
    settings = resolved(compose_config([f"intervals={method}"]))["intervals"]  # its defaults
    if own["method"] != "none":
        settings.update(levels=own["levels"], quantiles=own["quantiles"])
    check_intervals(settings, run.config["data"])
    return settings


def output_folder(checkpoint: str, method: str | None) -> str:
    """best, or best_adaptive for bands scored another way than the run did."""
    return checkpoint if method is None else f"{checkpoint}_{method}"


def reevaluate(run: LoadedRun, checkpoint: str, method: str | None = None,
               intervals: dict | None = None) -> dict:
    """`intervals`: interval_settings(run, method), when the caller has them already."""
    # The run's own thread rule: a product's sums split over another thread count round
    # differently, and evaluate reproduces the run's numbers exactly.
    n_params = sum(p.numel() for p in run.model.parameters())
    configure_threads(run.config["trainer"]["num_threads"], n_params)
    evaluator = Evaluator.for_run(run.data, run.config)
    if intervals is None:
        intervals = interval_settings(run, method)
    results = evaluator.evaluate(run.model, intervals)
    out_dir = run.run_dir / "evaluate" / output_folder(checkpoint, method)
    info = {"checkpoint": checkpoint, "epoch": run.checkpoint["epoch"], "notes": run.data.notes}
    write_metrics(out_dir / "metrics.json", results, info, run.data.info)
    if run.data.series_ids:
        write_per_series(out_dir / "per_series.csv", evaluator.per_series(), run.data.series_ids)
    label = f"{checkpoint} checkpoint"
    bands = run.bands if checkpoint == "best" else None  # bands.json: the kept model's
    save_visuals(out_dir, run.model, run.data, evaluator.baselines, label, bands)
    return results


def parse(argv: list[str]) -> tuple[dict[str, str], bool]:
    """The command line's key=value arguments, and whether a changed data file is allowed."""
    args = parse_key_values(argv, DEFAULTS, ["run_dir"], USAGE)
    return args, parse_bool(args, "allow_changed_data", USAGE)


def evaluate_command(argv: list[str]) -> None:
    args, allow_changed = parse(argv)
    run = load_run(
        Path(args["run_dir"]), args["checkpoint"], args["device"], allow_changed_data=allow_changed
    )
    method = args["intervals"]
    intervals = interval_settings(run, method)  # a bad method: one line before any scoring
    results = reevaluate(run, args["checkpoint"], method, intervals)
    for note in run.data.notes:
        print(note)
    print(f"{args['checkpoint']} checkpoint (epoch {run.checkpoint['epoch']}) of {run.run_dir}")
    print(format_table(results, run.data.info))
    table = format_intervals(results)
    if table:
        print(intervals_heading(intervals or {}) + ":")
        print(table)
    print(f"written to {run.run_dir / 'evaluate' / output_folder(args['checkpoint'], method)}")


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, evaluate_command)


if __name__ == "__main__":
    sys.exit(main())

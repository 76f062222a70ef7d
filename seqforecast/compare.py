"""python -m seqforecast.compare <run or sweep dir or glob>... [reference=<group>]
                               [split=test|test_curve|val] [out=<dir>]

Results over seeds. Reads run dirs (a --multirun sweep dir, several dirs, or globs), groups the
runs by the config values that differ except `seed`, and prints a table per metric: mean ± std
and n over seeds of the model's MSE and MAE and of its MSE over each baseline's, on the held-out
test split by default. Against a reference group (the first, or reference=<group>: its label
or a word of it, e.g. reference=vanilla) it gives the paired ratio of MSEs (and MAEs) on the
seeds both share, with a 95% interval, and says which differences are within noise.

Writes compare.md (the tables), compare.csv (one row per group and metric), compare_runs.csv
(one row per run) and compare.png (each seed's MSE per group, log scale) to out=<dir>, by
default the folder that holds the runs. Failed or incomplete runs are listed, not averaged.
No run dirs, runs of different datasets or horizons, or runs scored on different windows: one
line, exit 2.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .cli_args import UsageError, run_tool
from .comparison.output import write_all
from .comparison.runs import (
    CompareError,
    check_comparable,
    find_run_dirs,
    group_runs,
    load_run,
    pick_reference,
)
from .comparison.summary import compare
from .data import EVAL_SPLITS

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
OPTIONS = ("reference", "split", "out")


def parse(argv: list[str]) -> tuple[list[str], dict[str, str | None]]:
    """Paths and key=value options. A path may hold '=' (sweep job dirs do), so an argument is
    an option only when its key is one of OPTIONS and it is no existing path."""
    paths, options = [], dict.fromkeys(OPTIONS)
    options["split"] = "test"
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in OPTIONS and not Path(arg).exists():
            options[key] = value
        elif arg.startswith("-"):
            raise UsageError(f"unexpected argument {arg!r}; usage: {USAGE}")
        else:
            paths.append(arg)
    if not paths:
        raise UsageError(f"give at least one run or sweep dir; usage: {USAGE}")
    if options["split"] not in EVAL_SPLITS:
        raise UsageError(
            f"split={options['split']!r} is not allowed: choose one of {', '.join(EVAL_SPLITS)}"
        )
    return paths, options


def compare_command(argv: list[str]) -> None:
    paths, options = parse(argv)
    split = options["split"]
    runs = [load_run(path, split) for path in find_run_dirs(paths)]
    counted = [run for run in runs if run.ok]
    excluded = [run for run in runs if not run.ok]
    if not counted:
        reasons = "; ".join(f"{run.path.name}: {run.problem}" for run in excluded[:3])
        raise CompareError(f"none of the {len(runs)} run(s) can be compared ({reasons})")
    check_comparable(counted, split)
    groups = group_runs(counted)
    reference = pick_reference(groups, options["reference"])
    groups = [reference, *(g for g in groups if g is not reference)]
    result = compare(split, groups, reference, excluded)
    out_dir = Path(options["out"]) if options["out"] else default_out_dir(runs)
    command = "python -m seqforecast.compare " + " ".join(shlex.quote(a) for a in argv)
    print(write_all(result, out_dir, command), end="")
    print(f"written to {out_dir}/compare.md, compare.csv, compare_runs.csv, compare.png")


def default_out_dir(runs) -> Path:
    """The deepest folder holding every run: the sweep dir for one sweep."""
    parents = [run.path.parent for run in runs]
    common = parents[0]
    while not all(p == common or common in p.parents for p in parents):
        common = common.parent
    return common


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, compare_command)


if __name__ == "__main__":
    sys.exit(main())

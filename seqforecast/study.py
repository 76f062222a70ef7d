r"""python -m seqforecast.study <study> [report] [models=a,b] [cells=c,d] [seeds=0,1,2]
                             [dir=<study dir>] [from=<dir>,<study.json>] [<override> ...]

A study is a grid of runs (seqforecast/studies/<study>.yaml, or a .yaml of your own): models,
their cells (dataset, horizon, sizes), the values of one swept option, seeds. Without `report`
it runs every job not yet completed, one `seqforecast.train --multirun` per cell (leaving out
the jobs the `from` dirs and reports hold completed), then writes the report; with `report` it
only writes the report. Any other key=value is a Hydra override given to every job, so the
launcher is yours to choose:

    python -m seqforecast.study attention hydra/launcher=joblib hydra.launcher.n_jobs=2 \
        trainer.num_threads=1                       # one machine, two jobs at a time
    python -m seqforecast.study attention hydra/launcher=slurm hydra.launcher.partition=cpu
    python -m seqforecast.study attention report from=cluster_copy/attention
    python -m seqforecast.study attention models=timexer from=benchmarks/attention_study.json

Runs go to dir (outputs/study/<study>), each at <model>/<cell>/<value>-seed<seed>; the same
command again trains only what is missing, continuing from its last epoch a job a stop cut short
(skip_completed=true). The report (study.md, study.json in dir) reads dir and the `from` dirs,
merging partial studies, and the `from` reports (an earlier study.json: its runs count for the
jobs no dir holds, so a study grows from its committed report after its run dirs are gone):
per cell each value's test MSE over seeds and its paired ratio to the reference value with a 95%
interval, seconds per epoch and peak memory; the sign test over all pairs; and the jobs not yet
run (of the cells asked for: with `models` or `cells`, the others are named once, as not asked
for, unless they hold runs).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .cli_args import UsageError, run_tool
from .studies.grid import StudyError, load_study
from .studies.launch import run_cells
from .studies.report import build_report, held_jobs, markdown, write_report

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
OPTIONS = ("models", "cells", "seeds", "dir", "from")


def parse(argv: list[str]) -> tuple[str, bool, dict[str, str | None], list[str]]:
    if not argv or "=" in argv[0] or argv[0].startswith("-"):
        raise UsageError(f"name a study first; usage: {USAGE}")
    name, rest = argv[0], argv[1:]
    report_only = bool(rest) and rest[0] == "report"
    rest = rest[1:] if report_only else rest
    options: dict[str, str | None] = dict.fromkeys(OPTIONS)
    overrides = []
    for arg in rest:
        key, sep, value = arg.partition("=")
        if sep and key in OPTIONS:
            options[key] = value
        elif sep or arg.startswith(("+", "~")):
            overrides.append(arg)
        else:
            raise UsageError(f"unexpected argument {arg!r}; usage: {USAGE}")
    if report_only and overrides:
        raise UsageError(f"report reads runs, it trains none: drop {' '.join(overrides)}")
    return name, report_only, options, overrides


def _list(value: str | None) -> list[str] | None:
    return [v for v in value.split(",") if v] if value else None


def study_command(argv: list[str]) -> None:
    name, report_only, options, overrides = parse(argv)
    study = load_study(name)
    if options["seeds"]:
        try:
            seeds = tuple(int(s) for s in _list(options["seeds"]))
        except ValueError:
            raise StudyError(f"seeds={options['seeds']!r}: give integers, e.g. seeds=0,1,2") \
                from None
        study = replace(study, seeds=seeds)
    cells = study.select(_list(options["models"]), _list(options["cells"]))
    study_dir = Path(options["dir"] or f"outputs/study/{study.name}")
    sources = [Path(d) for d in _list(options["from"]) or []]
    failed, stopped = ([], None) if report_only else run_cells(
        study, cells, study_dir, overrides, held_jobs(study, sources))
    command = "python -m seqforecast.study " + " ".join(shlex.quote(a) for a in argv)
    selection = " ".join(f"{k}={options[k]}" for k in ("models", "cells") if options[k])
    report = build_report(study, study_dir, sources, command, cells, selection or None)
    json_path, md_path = write_report(report, study_dir)
    print(markdown(report), end="")
    print(f"written to {md_path} and {json_path}")
    if stopped:  # the sweep printed why, in one line
        print(f"[study] stopped at {stopped}: its launcher submitted no job (the error above); "
              f"the cells after it were not launched, the runs done are kept and reported: the "
              f"same command again runs what is missing", file=sys.stderr)
        sys.exit(2)
    if failed:
        print(f"[study] cells with failed jobs: {', '.join(failed)} (reasons above and in "
              f"each cell's summary.json)", file=sys.stderr)
        sys.exit(1)


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, study_command)


if __name__ == "__main__":
    sys.exit(main())

r"""python -m seqforecast.study <study> [report|plan] [models=a,b] [cells=c,d] [seeds=0,1,2]
         [dir=<study dir>] [from=<dir>,<study.json>] [budget_hours=H] [<override> ...]

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

With `plan` it runs nothing: it checks every job's configuration (one line for one that cannot
be built), counts the jobs done and left, and probes each configuration left (a few steps and a
validation pass, one thread) for the seconds an epoch takes, the core-hours the jobs left need
at most, and the peak memory (plan.md, plan.json in dir). A launch checks every configuration
first too, and says what is done and left; with `budget_hours=` it plans first and refuses, in
one line, a launch whose jobs left need more core-hours. While it runs, it says after each cell
how many jobs are done and failed, and when the rest should end at the pace so far.

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

import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .cli_args import UsageError, run_tool
from .studies.grid import StudyError, load_study
from .studies.launch import run_cells, tally
from .studies.plan import build_plan, check_budget, configurations, plan_markdown, write_plan
from .studies.report import build_report, collect, held_jobs, markdown, write_report

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
OPTIONS = ("models", "cells", "seeds", "dir", "from", "budget_hours")
MODES = ("report", "plan")  # what a study does instead of running its jobs


def parse(argv: list[str]) -> tuple[str, str | None, dict[str, str | None], list[str]]:
    if not argv or "=" in argv[0] or argv[0].startswith("-"):
        raise UsageError(f"name a study first; usage: {USAGE}")
    name, rest = argv[0], argv[1:]
    mode = rest[0] if rest and rest[0] in MODES else None
    rest = rest[1:] if mode else rest
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
    if mode == "report" and overrides:
        raise UsageError(f"report reads runs, it trains none: drop {' '.join(overrides)}")
    return name, mode, options, overrides


def _list(value: str | None) -> list[str] | None:
    return [v for v in value.split(",") if v] if value else None


def _budget(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        hours = float(value)
    except ValueError:
        hours = math.nan
    if not hours > 0:
        raise StudyError(f"budget_hours={value!r} is not allowed: core-hours > 0, e.g. "
                         f"budget_hours=12")
    return hours


def study_command(argv: list[str]) -> None:
    name, mode, options, overrides = parse(argv)
    budget = _budget(options["budget_hours"])
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
    held = held_jobs(study, sources) if mode != "report" else set()
    if mode == "plan" or budget is not None:
        plan = build_plan(study, cells, study_dir, overrides, held)
        path = write_plan(plan, study_dir)
        print(plan_markdown(plan), end="")
        print(f"written to {path} and {path.with_suffix('.md')}")
        if budget is not None:
            check_budget(plan, budget)
        if mode == "plan":
            return
    failed, stopped = [], None
    if mode is None:
        configs = configurations(study, cells, study_dir, overrides, held)
        left = sum(len(c.left) for c in configs)
        print(f"[study] {study.name}: {sum(len(c.seeds) for c in configs)} jobs in "
              f"{len(configs)} configurations checked, {left} left", file=sys.stderr,
              flush=True)
        labels = {c.label for c in cells}

        def progress() -> tuple[int, int, int]:
            runs, failures, _ = collect(study, study_dir, sources)
            return tally(runs, failures, labels, study_dir)

        failed, stopped = run_cells(study, cells, study_dir, overrides, held, progress)
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

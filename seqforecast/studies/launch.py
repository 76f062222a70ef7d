"""Running a study: one `seqforecast.train --multirun` per cell, through whichever Hydra
launcher the user names (the basic one in-process, `hydra/launcher=joblib` on one machine,
`hydra/launcher=slurm` on a cluster), each job in its own run dir of the study dir.

The seeds are swept before the values, so jobs run seed by seed, each seed's whole row of
values together: a study stopped part-way leaves complete pairs, not one side of them.
`skip_completed=true` makes a rerun of the same command train only the jobs not yet completed;
the jobs a `from` report or dir holds completed are not launched at all. A launcher that submits
no job (a SLURM controller that does not answer) stops the study at that cell: every later cell
would fail the same way.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..comparison.runs import resumable
from ..launcher_errors import NOT_SUBMITTED
from .grid import Cell, Study
from .report import failure_job

SUBDIR = "${{hydra.runtime.choices.{group}}}-seed${{seed}}"  # <value>-seed<seed>


def cell_dir(study_dir: Path, cell: Cell) -> Path:
    return Path(study_dir) / cell.model / cell.name


def multirun_command(study: Study, cell: Cell, study_dir: Path, extra: list[str],
                     seeds: tuple[int, ...] | None = None,
                     values: tuple[str, ...] | None = None) -> list[str]:
    """The command for one cell's jobs (all of them, or `seeds` x `values`): the cell's
    overrides, seeds x values, the user's overrides (a launcher, threads, data_dir) last so
    they win."""
    values = study.values[cell.model] if values is None else values
    return _multirun(cell, study_dir, extra, study.seeds if seeds is None else seeds,
                     [f"{study.group}=" + ",".join(values)], SUBDIR.format(group=study.group))


def multirun_commands(study: Study, cell: Cell, study_dir: Path, extra: list[str],
                      seeds: tuple[int, ...], values: tuple[str, ...]) -> list[list[str]]:
    """The commands for `seeds` x `values` of a cell: one multirun sweeping the group's
    options, or, where the values are named sets of overrides (which Hydra cannot sweep), a
    multirun of the seeds per value, its run dirs named as the sweep's would be."""
    if cell.model not in (study.value_sets or {}):
        return [multirun_command(study, cell, study_dir, extra, seeds, values)]
    return [_multirun(cell, study_dir, extra, seeds, study.value_overrides(cell.model, value),
                      f"{value}-seed${{seed}}") for value in values]


def _multirun(cell: Cell, study_dir: Path, extra: list[str], seeds: tuple[int, ...],
              value: list[str], subdir: str) -> list[str]:
    return [
        sys.executable, "-m", "seqforecast.train", "--multirun",
        *cell.overrides,
        "seed=" + ",".join(str(s) for s in seeds),
        *value,
        "skip_completed=true",
        f"hydra.sweep.dir={cell_dir(study_dir, cell)}",
        f"hydra.sweep.subdir={subdir}",
        *extra,
    ]


def run_sweep(command: list[str]) -> int:
    """One multirun, a process of its own (a Hydra app and its launcher own their process),
    writing to the study's streams: its exit code."""
    return subprocess.run(command).returncode


def sweeps(study: Study, cell: Cell, held: set[tuple]) -> list[tuple[tuple[int, ...],
                                                                   tuple[str, ...]]]:
    """The cell's jobs that `held` (model, cell, value, seed) lacks, as multiruns of seeds x
    values in seed order: one for the whole cell where nothing is held, one per run of seeds
    that lack the same values otherwise, none for a seed whose whole row is held."""
    groups: list[tuple[list[int], tuple[str, ...]]] = []
    for seed in study.seeds:
        missing = tuple(v for v in study.values[cell.model]
                        if (cell.model, cell.name, v, seed) not in held)
        if not missing:
            continue
        if groups and groups[-1][1] == missing:
            groups[-1][0].append(seed)
        else:
            groups.append(([seed], missing))
    return [(tuple(seeds), values) for seeds, values in groups]


def run_cells(study: Study, cells: list[Cell], study_dir: Path, extra: list[str],
              held: set[tuple] = frozenset(),
              progress: Callable[[], tuple[int, int, int]] | None = None
              ) -> tuple[list[str], str | None]:
    """Run each cell's multirun(s) in turn, leaving out the jobs `held` elsewhere (a `from`
    report or dir); returns the cells whose sweep did not exit cleanly (a failed job: its reason
    is in the cell's summary.json and in the report), and the cell at which the study stopped
    because its launcher submitted no job (None where it did not: the sweep printed why).
    `progress()`: the jobs of `cells` done, failed and stopped (resumable) so far, said after
    each cell with the time the rest should take at the pace of this launch."""
    failed = []
    total = len(study.seeds) * sum(len(study.values[c.model]) for c in cells)
    started, done_before = time.monotonic(), progress()[0] if progress else 0
    for cell in cells:
        todo = sweeps(study, cell, held)
        jobs = sum(len(seeds) * len(values) for seeds, values in todo)
        kept = len(study.seeds) * len(study.values[cell.model]) - jobs
        print(f"[study] {cell.label}: {jobs} jobs in {cell_dir(study_dir, cell)}"
              + (f" ({kept} held by from=)" if kept else ""), file=sys.stderr, flush=True)
        for seeds, values in todo:
            for command in multirun_commands(study, cell, study_dir, extra, seeds, values):
                code = run_sweep(command)
                if code == NOT_SUBMITTED:
                    return failed, cell.label
                if code and cell.label not in failed:
                    failed.append(cell.label)
        if progress:
            print("[study] " + progress_line(*progress(), total, done_before,
                                             time.monotonic() - started),
                  file=sys.stderr, flush=True)
    return failed, None


def tally(runs: dict, failures: list[dict], labels: set[str], study_dir: Path
          ) -> tuple[int, int, int]:
    """This launch's jobs (of the cells `labels`) done, failed and stopped, from `collect`'s
    runs and failures. A failure only a `from=` source records (its run dir not in the study
    dir) is a job this launch runs again, so it is left, not this launch's failure; a run dir
    in the study dir that did not complete was stopped (resumable) or failed."""
    done = sum(f"{model}/{cell}" in labels for model, cell, _, _ in runs)
    root = study_dir.resolve()
    here = {failure_job(f): f["reason"] for f in failures
            if f"{f['model']}/{f['cell']}" in labels and f.get("run_dir")
            and Path(f["run_dir"]).is_dir() and Path(f["run_dir"]).resolve().is_relative_to(root)}
    stopped = sum(resumable(reason) for reason in here.values())
    return done, len(here) - stopped, stopped


def progress_line(done: int, failed: int, stopped: int, total: int, done_before: int,
                  seconds: float) -> str:
    """Jobs done, failed, stopped and left, and the time the rest should take at this
    launch's pace. A stopped job (a signal, a killed process) is left, not failed: the same
    command goes on with it (from its checkpoint where it saved one)."""
    left = total - done - failed
    ran = done - done_before
    eta = (f"; the {left} left should take about {seconds / ran * left / 3600:.1f} h at this "
           f"launch's pace" if ran > 0 and left > 0 else "")
    halted = (f", {stopped} stopped (the same command goes on with "
              f"{'it' if stopped == 1 else 'them'})" if stopped else "")
    return f"progress: {done} of {total} jobs done, {failed} failed{halted}{eta}"

"""Running a study: one `seqforecast.train --multirun` per cell, through whichever Hydra
launcher the user names (the basic one in-process, `hydra/launcher=joblib` on one machine,
`hydra/launcher=slurm` on a cluster), each job in its own run dir of the study dir.

The seeds are swept before the values, so jobs run seed by seed, each seed's whole row of
values together: a study stopped part-way leaves complete pairs, not one side of them.
`skip_completed=true` makes a rerun of the same command train only the jobs not yet completed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .grid import Cell, Study

SUBDIR = "${{hydra.runtime.choices.{group}}}-seed${{seed}}"  # <value>-seed<seed>


def cell_dir(study_dir: Path, cell: Cell) -> Path:
    return Path(study_dir) / cell.model / cell.name


def multirun_command(study: Study, cell: Cell, study_dir: Path, extra: list[str]) -> list[str]:
    """The command for one cell's jobs: the cell's overrides, seeds x values, the user's
    overrides (a launcher, threads, data_dir) last so they win."""
    return [
        sys.executable, "-m", "seqforecast.train", "--multirun",
        *cell.overrides,
        "seed=" + ",".join(str(s) for s in study.seeds),
        f"{study.group}=" + ",".join(study.values[cell.model]),
        "skip_completed=true",
        f"hydra.sweep.dir={cell_dir(study_dir, cell)}",
        "hydra.sweep.subdir=" + SUBDIR.format(group=study.group),
        *extra,
    ]


def run_cells(study: Study, cells: list[Cell], study_dir: Path, extra: list[str]) -> list[str]:
    """Run each cell's multirun in turn; returns the cells whose sweep did not exit cleanly
    (a failed job: its reason is in the cell's summary.json and in the report)."""
    failed = []
    for cell in cells:
        command = multirun_command(study, cell, study_dir, extra)
        print(f"[study] {cell.label}: {len(study.seeds) * len(study.values[cell.model])} jobs "
              f"in {cell_dir(study_dir, cell)}", file=sys.stderr, flush=True)
        if subprocess.run(command).returncode != 0:
            failed.append(cell.label)
    return failed

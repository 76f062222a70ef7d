"""A study's plan before its launch: each job's configuration checked (a value that cannot
serve its position, a lookback shorter than a patch: one line, before anything runs), the
jobs done and left, and, from a short probe of each distinct configuration (its seeds share
it), the seconds an epoch takes, the core-hours left and the peak memory. `budget_hours=`
refuses a launch whose jobs left need more.

The probe builds each configuration's run as `seqforecast.train` does, on one thread, in this
process (the data read, the model built), times a few training steps and one validation pass
(runs/probe.py), and measures the resident set's peak above its start (training/memory.py
resets it per run). An epoch's seconds are the steps' times the epoch's steps plus the
validation pass; a job's are that times `trainer.epochs`, an upper bound (early stopping
ends most jobs sooner; a cell's completed runs say how much: `epochs run`).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config import validate_config
from ..config.compose import compose_config
from ..options import ConfigError
from .grid import Cell, Study, StudyError
from .report import collect

PROBE = ["trainer.num_threads=1", "log.figures=false", "trainer.compile=false"]


@dataclass
class Configuration:
    """One cell's value: the jobs its seeds make."""

    cell: Cell
    value: str
    seeds: tuple[int, ...]  # every seed of the study
    left: tuple[int, ...]  # those not completed (here or in a `from` source)
    epochs: int = 0
    epoch_seconds: float | None = None
    peak_mib: float | None = None

    @property
    def job_hours(self) -> float | None:
        """At most, one job's core-hours (all its epochs, on one thread)."""
        if self.epoch_seconds is None:
            return None
        return self.epochs * self.epoch_seconds / 3600


def _compose(study: Study, cell: Cell, value: str, extra: list[str], seed: int):
    overrides = [*cell.overrides, *study.value_overrides(cell.model, value), f"seed={seed}",
                 *extra]
    try:
        cfg = compose_config(overrides)
        validate_config(cfg)
    except ConfigError as err:
        raise StudyError(f"{cell.label} {study.group}={value}: {err}") from None
    return cfg


def configurations(study: Study, cells: list[Cell], study_dir: Path, extra: list[str],
                   held: set[tuple]) -> list[Configuration]:
    """Every (cell, value) of `cells`, checked, with its seeds left."""
    done = set(collect(study, study_dir, [])[0]) | set(held)
    out = []
    for cell in cells:
        for value in study.values[cell.model]:
            cfg = _compose(study, cell, value, extra, study.seeds[0])
            left = tuple(s for s in study.seeds if (cell.model, cell.name, value, s) not in done)
            out.append(Configuration(cell, value, study.seeds, left, int(cfg.trainer.epochs)))
    return out


def probe(study: Study, config: Configuration, extra: list[str], steps: int = 3) -> None:
    """Time an epoch of the configuration and measure its peak memory (in place)."""
    import torch  # torch work only when probing

    from ..runs.probe import build_loop, time_epoch
    from ..training.memory import PeakMemory

    cfg = _compose(study, config.cell, config.value, [*extra, *PROBE], config.seeds[0])
    memory = PeakMemory(torch.device("cpu"))
    memory.start()  # the probe's own peak, as a run's
    with tempfile.TemporaryDirectory(prefix="seqforecast-plan-") as run_dir:
        try:
            timed = time_epoch(build_loop(cfg, Path(run_dir)), steps)
        except (ConfigError, ValueError) as err:  # the data's refusal (DataError is one)
            raise StudyError(f"{config.cell.label} {study.group}={config.value}: "
                             f"{str(err).splitlines()[0]}") from None
    peak = memory.report()
    config.epoch_seconds = timed["epoch_seconds"]
    config.peak_mib = peak["peak_rss_mib"] - (peak["rss_at_start_mib"] or 0.0)


def build_plan(study: Study, cells: list[Cell], study_dir: Path, extra: list[str],
               held: set[tuple], probing: bool = True) -> dict:
    configs = configurations(study, cells, study_dir, extra, held)
    for config in configs:
        if probing and config.left:
            probe(study, config, extra)
            print(f"[plan] {config.cell.label} {study.group}={config.value}: "
                  f"{config.epoch_seconds:.3g} s an epoch", file=sys.stderr, flush=True)
    jobs = sum(len(c.seeds) for c in configs)
    left = sum(len(c.left) for c in configs)
    timed = [c for c in configs if c.left and c.job_hours is not None]
    hours = sum(c.job_hours * len(c.left) for c in timed) if probing else None
    peaks = [c.peak_mib for c in timed if c.peak_mib is not None]
    return {
        "study": study.name, "group": study.group, "jobs": jobs, "done": jobs - left,
        "left": left, "core_hours_at_most": hours,
        "peak_mib": max(peaks) if peaks else None,
        "configurations": [
            {"cell": c.cell.label, "value": c.value, "seeds_left": list(c.left),
             "epochs": c.epochs, "epoch_seconds": c.epoch_seconds,
             "job_core_hours_at_most": c.job_hours, "peak_mib": c.peak_mib}
            for c in configs],
    }


def check_budget(plan: dict, budget_hours: float) -> None:
    """StudyError in one line where the jobs left need more core-hours than the budget."""
    need = plan["core_hours_at_most"]
    if need is None or need <= budget_hours:
        return
    smallest = min((c["job_core_hours_at_most"] for c in plan["configurations"]
                    if c["seeds_left"] and c["job_core_hours_at_most"] is not None),
                   default=math.inf)
    if smallest > budget_hours:
        raise StudyError(f"budget_hours={budget_hours:g} is too small for even one job: the "
                         f"smallest left needs up to {smallest:.2f} core-hours; raise the "
                         f"budget, or lower trainer.epochs")
    raise StudyError(f"budget_hours={budget_hours:g} is not enough: the {plan['left']} jobs "
                     f"left need up to {need:.1f} core-hours (its plan lists them); "
                     f"raise the budget, or run fewer cells (cells=, models=, seeds=)")


def plan_markdown(plan: dict) -> str:
    hours = plan["core_hours_at_most"]
    lines = [f"# Plan: {plan['study']}", "",
             f"{plan['jobs']} jobs: {plan['done']} done, {plan['left']} left"
             + (f", needing up to {hours:.2f} core-hours (every epoch run; early stopping "
                f"ends most sooner)" if hours is not None else "")
             + (f"; peak memory up to {plan['peak_mib']:.0f} MiB a job"
                if plan["peak_mib"] is not None else "") + ".", "",
             f"| cell | {plan['group']} | seeds left | epochs | s/epoch (probe) | "
             f"core-hours a job, at most | peak MiB |", "|---|---|---|---|---|---|---|"]
    for c in plan["configurations"]:
        seconds = "-" if c["epoch_seconds"] is None else f"{c['epoch_seconds']:.3g}"
        job = "-" if c["job_core_hours_at_most"] is None else f"{c['job_core_hours_at_most']:.3g}"
        peak = "-" if c["peak_mib"] is None else f"{c['peak_mib']:.0f}"
        lines.append(f"| {c['cell']} | {c['value']} | "
                     f"{', '.join(map(str, c['seeds_left'])) or 'none'} | {c['epochs']} | "
                     f"{seconds} | {job} | {peak} |")
    return "\n".join(lines) + "\n"


def write_plan(plan: dict, out_dir: Path) -> Path:
    """plan.json and plan.md in the study dir; the path of the first."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "plan.json"
    path.write_text(json.dumps(plan, indent=1) + "\n")
    (out_dir / "plan.md").write_text(plan_markdown(plan))
    return path

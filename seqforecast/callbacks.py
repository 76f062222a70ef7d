"""Hydra callbacks: the sweep summary.

In `--multirun`, each job writes status.json in its run dir (completed, failed with its
reason, or interrupted). After every job, `SweepSummary` prints one line for it on stderr
(the sweep's progress display: jobs run without progress bars under parallel launchers) and
gathers all statuses into `<sweep dir>/summary.json`, so a sweep's failures are listed in one
place while the other jobs keep running. It rescans the job dirs each time under a file lock,
so launchers that run jobs in parallel processes still leave a complete summary.
"""

from __future__ import annotations

import fcntl
import json
import sys
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from .training.files import atomic_write_text
from .training.status import read_status

SUMMARY_FILE = "summary.json"


def sweep_summary(sweep_dir: Path) -> dict:
    jobs = []
    for status_path in sorted(Path(sweep_dir).glob("*/status.json")):
        record = read_status(status_path.parent)
        jobs.append({"job": status_path.parent.name, **record})
    jobs.sort(key=lambda j: int(j["job"].split("_", 1)[0]) if j["job"][0].isdigit() else 0)
    counts = {}
    for job in jobs:
        counts[job["status"]] = counts.get(job["status"], 0) + 1
    return {"jobs": jobs, "counts": counts}


def job_line(num: int, run_dir: Path) -> str:
    record = read_status(run_dir) or {"status": "unknown"}
    if record["status"] == "completed":
        detail = f"best val_mse {record['best_val_mse']:.6g}"
    else:
        detail = record.get("reason") or "no status.json"
    return f"[sweep] job {num} {record['status']}: {detail} ({run_dir})"


class SweepSummary(Callback):
    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        run_dir = Path(config.hydra.runtime.output_dir)
        print(job_line(config.hydra.job.num, run_dir), file=sys.stderr, flush=True)
        with open(sweep_dir / ".summary.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            summary = sweep_summary(sweep_dir)
            atomic_write_text(sweep_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")

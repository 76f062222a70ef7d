"""status.json in each run dir: completed, failed (with the reason) or interrupted."""

from __future__ import annotations

import json
from pathlib import Path

from .files import atomic_write_text

STATUS_FILE = "status.json"


def write_status(run_dir: Path, status: str, reason: str | None = None, **extra) -> None:
    record = {"status": status, "reason": reason, **extra}
    atomic_write_text(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def read_status(run_dir: Path) -> dict | None:
    path = Path(run_dir) / STATUS_FILE
    return json.loads(path.read_text()) if path.is_file() else None

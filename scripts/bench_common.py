"""What the benchmark scripts share: the machine they ran on, and their JSON report."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path


def best_of_rounds(
    specs: list[dict], repeats: int, run: Callable[[dict], dict], show: Callable[[dict], None]
) -> list[dict]:
    """Run every spec `repeats` times, the order reversed every other round, and keep each
    spec's fastest successful result (most tokens/s): the one least disturbed by the rest of
    a shared machine. Every round's tokens/s is kept in `rounds_tokens_per_s`."""
    rounds: list[list[dict]] = [[] for _ in specs]
    for round_ in range(repeats):
        order = range(len(specs)) if round_ % 2 == 0 else reversed(range(len(specs)))
        for i in order:
            result = run(specs[i])
            rounds[i].append(result)
            show(result)
    kept = []
    for results in rounds:
        ok = [r for r in results if r["status"] == "ok"]
        best = max(ok, key=lambda r: r["tokens_per_s"]) if ok else results[0]
        best["rounds_tokens_per_s"] = [r["tokens_per_s"] for r in ok]
        kept.append(best)
    return kept


def write_report(out: Path, script: str, argv: list[str] | None, **fields) -> None:
    """Write the report to `out` with the command and machine it came from."""
    report = dict(
        command=" ".join(["python", f"scripts/{Path(script).name}", *(argv or sys.argv[1:])]),
        machine=dict(
            platform=platform.platform(), cpus=os.cpu_count(), python=sys.version.split()[0]
        ),
        **fields,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}", file=sys.stderr)

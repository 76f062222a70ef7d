"""Reading the benchmark's largest files: seqforecast's CSV reader on a file of Traffic's shape,
its clean-file path (numpy's C parser) beside its cell-by-cell reader, and pandas beside both
where it is installed.

    python scripts/bench_csv.py                      # Traffic's shape, 2 rounds
    python scripts/bench_csv.py --rows 2000 --columns 50 --rounds 1   # a quick look

The file is generated (not committed): `--rows` x (a `date` column + `--columns` series) of
values written as the benchmark writes them (ISO dates, floats of a few digits), about 105 MB
at Traffic's 17,544 x 862. Each case reads it in a fresh Python process, timed from the call
to its return, with the process's peak resident memory (ru_maxrss) and its peak before the
read (its imports done): the read's own memory is the difference. The cases alternate, their
order reversed every other round, and each keeps its fastest round. Cases:

- `seqforecast`: `read_series` as a run calls it (every series column and the time column
  parsed; a clean file goes through `read_clean`),
- `cell by cell`: the same call with the clean-file path switched off (every file took this
  path before; it still reads any file with a gap, quoting or an error, and names the line),
- `pandas`: `pandas.read_csv` and `pd.to_datetime` of the date column (if pandas imports).

Printed as a table and written to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_common import REPO, run_worker, write_report

CASES = ("seqforecast", "cell by cell", "pandas")


def write_file(path: Path, rows: int, columns: int, seed: int = 0) -> None:
    """Traffic-like: hourly ISO dates, occupancy rates with four decimals."""
    rng = np.random.default_rng(seed)
    times = np.datetime64("2016-07-01T02:00") + np.arange(rows) * np.timedelta64(1, "h")
    with path.open("w") as f:
        f.write(",".join(["date", *map(str, range(columns - 1)), "OT"]) + "\n")
        for start in range(0, rows, 1000):
            block = rng.random((min(1000, rows - start), columns)) * 0.2
            for moment, row in zip(times[start:start + len(block)], block, strict=True):
                text = str(moment).replace("T", " ") + ":00"
                f.write(text + "," + ",".join(f"{v:.4f}" for v in row) + "\n")


def worker(spec: dict) -> dict:
    import resource
    import time

    path, case = Path(spec["path"]), spec["case"]
    if case == "pandas":
        import pandas as pd
    else:
        from seqforecast.data import csv_series
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # imports done
    if case == "pandas":
        start = time.perf_counter()
        frame = pd.read_csv(path)
        times = pd.to_datetime(frame["date"])
        shape = (len(frame), frame.shape[1] - 1)
        del times
    else:
        header = path.open().readline().strip().split(",")
        if case == "cell by cell":
            csv_series.read_clean = lambda *args: None
        start = time.perf_counter()
        series = csv_series.read_series(path, header[1:], "date")
        shape = series.values.shape
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": case, "status": "ok", "seconds": seconds, "peak_mib": peak,
            "before_mib": before, "shape": list(shape)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=17544)
    parser.add_argument("--columns", type=int, default=862, help="series columns")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "csv_read.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traffic_shaped.csv"
        write_file(path, args.rows, args.columns)
        size_mb = path.stat().st_size / 1e6
        print(f"{path.name}: {args.rows} rows x {args.columns} series + date, {size_mb:.0f} MB",
              file=sys.stderr)
        rounds: dict[str, list[dict]] = {case: [] for case in CASES}
        for i in range(args.rounds):
            for case in CASES if i % 2 == 0 else reversed(CASES):
                result = run_worker(__file__, {"path": str(path), "case": case}, 3600,
                                    {"case": case})
                rounds[case].append(result)
                print(f"  round {i + 1} {case}: {result.get('seconds', 0):.2f} s, peak "
                      f"{result.get('peak_mib', 0):.0f} MiB ({result['status']})",
                      file=sys.stderr)
    best = {}
    for case, results in rounds.items():
        ok = [r for r in results if r["status"] == "ok"]
        best[case] = min(ok, key=lambda r: r["seconds"]) if ok else results[0]
    lines = ["| reader | seconds | peak memory (MiB) | of which the read (MiB) |",
             "|---|---|---|---|"]
    for case, r in best.items():
        if r["status"] != "ok":
            lines.append(f"| {case} | {r['status']} | | |")
            continue
        lines.append(f"| {case} | {r['seconds']:.2f} | {r['peak_mib']:.0f} | "
                     f"{r['peak_mib'] - r['before_mib']:.0f} |")
    print("\n".join(lines))
    write_report(args.out, __file__, argv, rows=args.rows, columns=args.columns,
                 file_mb=round(size_mb, 1), rounds=rounds, best=best, table="\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write data/example.csv: a small hourly series to train on (generated here, not downloaded).

    python scripts/make_example_csv.py [--out data/example.csv] [--days 60] [--seed 7]

Columns: `time` (hourly, ISO 8601), `load` (the target: daily and weekly cycles, a slow
trend, a response to temperature, noise) and `temperature` (a covariate with its own daily
cycle). The same arguments always write the same bytes.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np


def example_rows(days: int, seed: int) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(seed)
    hours = np.arange(days * 24)
    hour_of_day = hours % 24
    day = hours / 24
    temperature = (
        12
        + 7 * np.sin(2 * np.pi * (hour_of_day - 9) / 24)
        + 4 * np.sin(2 * np.pi * day / 30)
        + rng.normal(0, 0.8, hours.size)
    )
    load = (
        100
        + 18 * np.sin(2 * np.pi * (hour_of_day - 7) / 24)
        + 9 * np.where((day.astype(int) % 7) >= 5, -1.0, 0.4)  # weekends use less
        + 0.05 * day
        + 0.9 * np.abs(temperature - 16)  # heating or cooling
        + rng.normal(0, 1.5, hours.size)
    )
    start = datetime(2024, 1, 1)
    return [
        ((start + timedelta(hours=int(h))).strftime("%Y-%m-%d %H:%M"), float(v), float(t))
        for h, v, t in zip(hours, load, temperature, strict=True)
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/example.csv"))
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    lines = ["time,load,temperature"]
    lines += [f"{t},{v:.3f},{c:.3f}" for t, v, c in example_rows(args.days, args.seed)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out} ({len(lines) - 1} rows)")


if __name__ == "__main__":
    main()

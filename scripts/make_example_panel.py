r"""Write a deterministic long-format panel: many daily series of different levels, trends,
seasonal periods and lengths, with some empty cells.

    python scripts/make_example_panel.py                     # data/panel_example.csv
    python scripts/make_example_panel.py --series 10000 --min-length 500 --max-length 500 \
        --out /tmp/panel_10k.csv                             # the scale benchmark's panel

Columns: `store` (the series id), `date` (ISO day), `sales` (the target) and `promo` (a
covariate: 1 on promotion days, which lift sales). Each series starts on its own day and runs
for its own number of days; its level spans three orders of magnitude, its seasonal period is
7, 12 or 24 days, its trend up or down. About 0.5% of the sales cells are empty (a gap), and
a few series are too short for some splits (the panel's "left out" note lists them). Rows
are written date by date, the series interleaved, as a database export would.
"""

from __future__ import annotations

import argparse
import csv
from datetime import date, timedelta
from pathlib import Path

import numpy as np

PERIODS = (7, 12, 24)


def make_panel(series: int, min_length: int, max_length: int, seed: int = 0) -> list[tuple]:
    """Rows (store, date, sales, promo), sorted by date then store; sales None for a gap."""
    rng = np.random.default_rng(seed)
    first_day = date(2020, 1, 1)
    rows = []
    for s in range(series):
        length = int(rng.integers(min_length, max_length + 1))
        if min_length < max_length and rng.random() < 0.03:
            length = int(rng.integers(30, 70))  # too short for some splits
        start = int(rng.integers(0, 120)) if min_length < max_length else 0
        level = 10 ** rng.uniform(0, 3)
        period = PERIODS[s % len(PERIODS)]
        t = np.arange(length)
        season = rng.uniform(0.1, 0.4) * np.sin(2 * np.pi * t / period + rng.uniform(0, 6.3))
        trend = rng.uniform(-0.3, 0.6) * t / max(length, 1)
        promo = (rng.random(length) < 0.1).astype(int)
        noise = rng.normal(0, 0.05, length)
        sales = level * (1 + trend + season + 0.3 * promo + noise)
        gaps = rng.random(length) < 0.005
        gaps[0] = gaps[-1] = False  # gaps inside a series only
        store = f"store_{s:05d}"
        for k in range(length):
            day = first_day + timedelta(days=start + k)
            value = None if gaps[k] else round(float(sales[k]), 3)
            rows.append((day.isoformat(), store, value, int(promo[k])))
    rows.sort()
    return [(store, day, value, promo) for day, store, value, promo in rows]


def write_panel(path: Path, rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["store", "date", "sales", "promo"])
        for store, day, value, promo in rows:
            writer.writerow([store, day, "" if value is None else value, promo])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--min-length", type=int, default=150)
    parser.add_argument("--max-length", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("data/panel_example.csv"))
    args = parser.parse_args(argv)
    rows = make_panel(args.series, args.min_length, args.max_length, args.seed)
    write_panel(args.out, rows)
    print(f"wrote {args.out}: {args.series} series, {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Composing the training config: Hydra's composition with seqforecast's speed-ups
(seqforecast/config/speed.py) beside Hydra's own, in one process, on one torch thread; with the
speed-ups twice: as the first composition of its group choices, and with those choices composed
before (the kept defaults list and merged files; other values each time, as a sweep or a test
suite composes them).

    python scripts/bench_compose.py                   # 5 rounds of 20 compositions a case
    python scripts/bench_compose.py --rounds 1 --repeats 3    # a quick look (the suite)

Each round times `--repeats` compositions of each override list on each side (Hydra alone: what
the speed-ups replaced put back; first: the kept compositions dropped before each; kept), the
sides alternating (their order reversed every other round); each side keeps its fastest round.
Each round's last composition of a case is checked to be the same config on every side. Printed
as a table and written to --out as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench_common import REPO, write_report

CASES = {"default": [], "attention=diff": ["attention=diff", "block_size=16"],
         "experiment=itransformer": ["experiment=itransformer"],
         "data=csv (a recipe)": ["data=csv", "data.path=x.csv", "model=encoder"]}


SIDES = ("hydra", "first", "kept")  # Hydra alone; the speed-ups, choices new; choices kept


def time_case(overrides: list[str], repeats: int, side: str) -> tuple[float, str]:
    """Seconds a composition (mean of `repeats`) and the last one's YAML."""
    import contextlib

    from omegaconf import OmegaConf

    from seqforecast.config import compose_config
    from seqforecast.config.speed import forget_compositions, without

    seconds = 0.0
    with without() if side == "hydra" else contextlib.nullcontext():
        if side == "kept":
            compose_config(overrides)  # its choices composed once before, untimed
        for _ in range(repeats):
            if side == "first":
                forget_compositions()
            started = time.perf_counter()
            cfg = compose_config(overrides)
            seconds += time.perf_counter() - started
    seconds /= repeats
    return seconds, OmegaConf.to_yaml(cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "compose.json")
    args = parser.parse_args(argv)

    import torch

    from seqforecast.config import compose_config
    from seqforecast.config.speed import installed

    torch.set_num_threads(1)
    compose_config([])  # the imports and the schemas' registration, once
    best: dict[tuple[str, str], float] = {}
    for r in range(args.rounds):
        for name, overrides in CASES.items():
            configs = {}
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                seconds, configs[side] = time_case(overrides, args.repeats, side)
                best[name, side] = min(best.get((name, side), seconds), seconds)
            if len(set(configs.values())) != 1:
                print(f"error: {name} composes another config with the speed-ups",
                      file=sys.stderr)
                return 1
    rows = []
    for name, overrides in CASES.items():
        hydra = best[name, "hydra"]
        rows.append({"case": name, "overrides": overrides, "hydra_ms": round(1e3 * hydra, 1),
                     "first_ms": round(1e3 * best[name, "first"], 1),
                     "kept_ms": round(1e3 * best[name, "kept"], 1),
                     "first_ratio": round(best[name, "first"] / hydra, 3),
                     "kept_ratio": round(best[name, "kept"] / hydra, 3)})
    print(f"one composition, fastest of {args.rounds} rounds of {args.repeats} "
          f"(speed-ups: {', '.join(installed())}; 1 torch thread)\n")
    print("| case | Hydra alone (ms) | first of its choices (ms) | ratio | choices kept (ms) "
          "| ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['case']} | {row['hydra_ms']} | {row['first_ms']} | "
              f"{row['first_ratio']:.2f} | {row['kept_ms']} | {row['kept_ratio']:.2f} |")
    write_report(args.out, __file__, argv, rounds=args.rounds, repeats=args.repeats,
                 speed_ups=installed(), results=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

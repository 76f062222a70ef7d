"""Composing the training config: Hydra's composition with seqforecast's speed-ups
(seqforecast/config/speed.py) beside Hydra's own, in one process, on one torch thread.

    python scripts/bench_compose.py                   # 5 rounds of 20 compositions a case
    python scripts/bench_compose.py --rounds 1 --repeats 3    # a quick look (the suite)

Each round times `--repeats` compositions of each override list, once with the speed-ups and
once with what they replaced put back, the two sides alternating (their order reversed every
other round); each side keeps its fastest round. Each round's last composition of a case is
checked to be the same config on both sides. Printed as a table and written to --out as JSON.
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


def time_case(overrides: list[str], repeats: int, fast: bool) -> tuple[float, str]:
    """Seconds a composition (mean of `repeats`) and the last one's YAML."""
    import contextlib

    from omegaconf import OmegaConf

    from seqforecast.config import compose_config
    from seqforecast.config.speed import without

    with contextlib.nullcontext() if fast else without():
        started = time.perf_counter()
        for _ in range(repeats):
            cfg = compose_config(overrides)
        seconds = (time.perf_counter() - started) / repeats
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
    best: dict[tuple[str, bool], float] = {}
    for r in range(args.rounds):
        for name, overrides in CASES.items():
            sides = (True, False) if r % 2 == 0 else (False, True)
            configs = []
            for fast in sides:
                seconds, yaml_text = time_case(overrides, args.repeats, fast)
                best[name, fast] = min(best.get((name, fast), seconds), seconds)
                configs.append(yaml_text)
            if configs[0] != configs[1]:
                print(f"error: {name} composes another config without the speed-ups",
                      file=sys.stderr)
                return 1
    rows = [{"case": name, "overrides": overrides,
             "hydra_ms": round(1e3 * best[name, False], 1),
             "with_speed_ups_ms": round(1e3 * best[name, True], 1),
             "ratio": round(best[name, True] / best[name, False], 3)}
            for name, overrides in CASES.items()]
    print(f"one composition, fastest of {args.rounds} rounds of {args.repeats} "
          f"(speed-ups: {', '.join(installed())}; 1 torch thread)\n")
    print("| case | Hydra alone (ms) | with the speed-ups (ms) | ratio |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['case']} | {row['hydra_ms']} | {row['with_speed_ups_ms']} | "
              f"{row['ratio']:.2f} |")
    write_report(args.out, __file__, argv, rounds=args.rounds, repeats=args.repeats,
                 speed_ups=installed(), results=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Training on a panel of many series: memory and the data loader's share of a step.

    python scripts/bench_panel.py                       # 10,000 series x 500 steps (README)
    python scripts/bench_panel.py --series 500 --steps 20

Writes the panel with scripts/make_example_panel.py (every series `--length` days), reads it
as `experiment=panel_example` does (long format, per-series splits and scaling), and then:

1. **Memory**: the panel's windows are `WindowSplit`s, forecast-start indices into one buffer
   of rows. Reported: the buffer and index bytes, what copying every window into tensors
   would take, and the process's peak RSS after reading and building (Python's csv rows
   dominate it) and at the end (the reference copy of the training windows included).
2. **Loader share of a training step**, from the training loop's own clock (`train_model`,
   the loop every run uses): each step's time to fetch its batch over the whole step
   (`train/data_fraction`), the first `--warmup` steps dropped, median kept.
3. **Side by side, same run**: the time to fetch one batch of random windows from the
   buffer (index arithmetic) and from a copy of every window (the reference, held as tensors
   like a single series' splits), alternated over `--rounds`.

Threads: `--threads` torch threads (default 1; state it with the numbers). Results print as
a table and go to --out as JSON.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench_common import REPO, write_report


class StopAfter(Exception):
    pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--length", type=int, default=500)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "panel.json")
    args = parser.parse_args(argv)

    import torch
    from make_example_panel import make_panel, write_panel
    from omegaconf import OmegaConf

    from seqforecast import build_model
    from seqforecast.config import compose_config
    from seqforecast.data import Split, panel_data
    from seqforecast.training import train_model
    from seqforecast.training.monitor import Monitor

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "panel.csv"
    t0 = time.perf_counter()
    write_panel(path, make_panel(args.series, args.length, args.length))
    write_s = time.perf_counter() - t0
    cfg = compose_config(["experiment=panel_example", f"data.path={path}"])
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    t0 = time.perf_counter()
    data = panel_data(plain["data"], torch.device("cpu"))
    load_s = time.perf_counter() - t0
    peak_after_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    train = data.train
    in_len, out_len = train.in_len, train.out_len
    columns = train.values.shape[1]
    held_bytes = (
        sum(
            t.numel() * t.element_size()
            for split in (data.train, data.val, data.test)
            for t in (split.starts, split.series)
        )
        + train.values.numel() * train.values.element_size()
    )
    windows = sum(len(s) for s in (data.train, data.val, data.test))
    copy_bytes = windows * (in_len * columns + out_len * data.n_targets) * 4

    # The loader's share of a step, from the loop's own clock.
    fractions, step_s = [], []
    batch = plain["trainer"]["batch_size"]

    class Clock(Monitor):
        def on_step(self, step, scalars):
            fractions.append(scalars["data_fraction"])
            step_s.append(batch * (in_len + out_len) / scalars["tokens_per_s"])
            if step >= args.steps + args.warmup:
                raise StopAfter

    model = build_model(plain, data.n_features, data.n_targets)
    trainer = dict(plain["trainer"], epochs=1, validate_initial=False, log_every=1)  # per step
    with tempfile.TemporaryDirectory() as ckpt:
        try:
            train_model(model, data, trainer, Path(ckpt), seed=0, config_yaml="",
                        monitor=Clock(), progress=False)
        except StopAfter:
            pass
    fraction = statistics.median(fractions[args.warmup :])
    step = statistics.median(step_s[args.warmup :])

    # Fetching one batch: index arithmetic over the buffer vs a copy of every training window.
    copied = Split(*train.take(slice(None)))
    gen = torch.Generator().manual_seed(0)
    times = {"buffer": [], "copies": []}
    for r in range(args.rounds):
        index = torch.randint(0, len(train), (batch,), generator=gen)
        order = ("buffer", "copies") if r % 2 == 0 else ("copies", "buffer")
        for name in order:
            split = train if name == "buffer" else copied
            t0 = time.perf_counter()
            split.take(index)
            times[name].append(time.perf_counter() - t0)
    fetch = {name: statistics.median(values) for name, values in times.items()}
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    result = {
        "series": len(data.series_ids),
        "length": args.length,
        "rows": int(train.values.shape[0]),
        "windows": {"train": len(data.train), "val": len(data.val), "test": len(data.test)},
        "write_csv_s": write_s,
        "read_and_build_s": load_s,
        "held_bytes": held_bytes,
        "copied_windows_bytes": copy_bytes,
        "peak_rss_after_build_bytes": peak_after_build,
        "peak_rss_bytes": peak_rss,
        "batch": batch,
        "median_step_s": step,
        "loader_fraction_of_step": fraction,
        "timed_steps": len(fractions[args.warmup :]),
        "fetch_batch_s": fetch,
        "threads": torch.get_num_threads(),
    }
    mb = 1 / 2**20
    total = sum(result["windows"].values())
    print(f"\npanel: {result['series']} series x {args.length} steps, {result['rows']} rows, "
          f"{total} windows; torch threads: {result['threads']}")
    print(f"read + split + scale + index: {load_s:.1f} s (writing the CSV: {write_s:.1f} s)")
    print("\n| what | value |\n|---|---|")
    print(f"| buffer + window indices held | {held_bytes * mb:,.0f} MiB |")
    print(f"| every window copied (reference) | {copy_bytes * mb:,.0f} MiB |")
    print(f"| peak RSS reading + building (the CSV's text) | {peak_after_build * mb:,.0f} MiB |")
    print(f"| peak RSS at the end (+ reference copies) | {peak_rss * mb:,.0f} MiB |")
    print(f"| median training step (batch {batch}) | {step * 1e3:.1f} ms |")
    print(f"| loader share of a step (loop clock) | {fraction:.2%} |")
    print(f"| fetch a batch: buffer (index arithmetic) | {fetch['buffer'] * 1e6:.0f} µs |")
    print(f"| fetch a batch: copied windows (reference) | {fetch['copies'] * 1e6:.0f} µs |")
    write_report(args.out, __file__, argv, result=result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

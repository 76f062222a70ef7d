r"""Where a training step's time goes: the run's own loop (`RunLoop.step`: the batch, forward,
loss, backward, clipping, the optimizer and the schedule) for any config, under torch's profiler.

    python scripts/profile_step.py experiment=timexer dataset=etth1 out_len=96 \
        data_dir=../shared/data
    python scripts/profile_step.py --steps 50 --threads 2 attention=diff block_size=16

It times `--steps` steps unprofiled (after `--warmup`), then profiles as many, and splits the
profiled time into the matrix products (mm, addmm, bmm, baddbmm, the fused attention kernels)
and everything else. torch's FlopCounterMode counts one step's products (forward and
backward), so the products' achieved rate sits beside this machine's (torch.mm at 2048^2, in
the same run; `--matmul-size` smaller is quicker and rougher, as the tests take it): where they
are equal, the products run as fast as this core runs them, and a step can be no faster than
the products' share of it. The operations that take the most time print as a table; all of it
goes to --out as JSON: an entry (`--name`, default the overrides) added to that report,
benchmarks/profile_step.json, which holds every config's profile with the command and machine
that measured it (`--merge` joins reports into it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench_common import REPO, add_entry, matmul_gflops, merge_entries, save_report
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from seqforecast.config.compose import compose_config
from seqforecast.runs.probe import build_loop
from seqforecast.training.loop import RunLoop

# The profiler's names of the operations that are matrix products (the arithmetic any kernel
# must do); the rest of a step is elementwise work, reductions, copies and dispatch.
PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::_scaled_dot_product_flash_attention_for_cpu_backward"}


def profile_steps(loop: RunLoop, steps: int, warmup: int, top: int) -> dict:
    """Time `steps` steps, then profile as many and count one step's products' FLOPs."""
    total = loop.steps_per_epoch
    needed = warmup + 2 * steps + 1  # warm-up, timed, profiled, one counted
    if needed > total:
        raise SystemExit(f"the epoch has {total} steps; --warmup {warmup} and --steps {steps} "
                         f"(timed, then profiled, then one counted) need {needed}: lower them")
    batch = iter(range(total))
    for _ in range(warmup):
        loop.step(next(batch))
    started = time.perf_counter()
    for _ in range(steps):
        loop.step(next(batch))
    step_ms = (time.perf_counter() - started) / steps * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            loop.step(next(batch))
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    profiled_ms = sum(e.self_cpu_time_total for e in events) / 1e3 / steps
    products_ms = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS) / 1e3 / steps
    with FlopCounterMode(display=False) as counter:
        loop.step(next(batch))
    flops = counter.get_total_flops()
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return {
        "step_ms": step_ms,
        "profiled_step_ms": profiled_ms,
        "products_ms": products_ms,
        "products_gflop": flops / 1e9,
        "products_gflop_per_s": flops / 1e9 / (products_ms / 1e3) if products_ms else None,
        "top": [{"op": e.key, "ms_per_step": e.self_cpu_time_total / 1e3 / steps,
                 "calls_per_step": e.count / steps, "product": e.key in PRODUCTS}
                for e in events[:top]],
    }


def table(report: dict) -> str:
    found = report["found"]
    lines = [
        f"{found['step_ms']:.2f} ms a step ({report['steps']} steps, {report['threads']} "
        f"thread(s), {report['kernels']} kernels); under the profiler "
        f"{found['profiled_step_ms']:.2f} ms, of which matrix products "
        f"{found['products_ms']:.2f} ms ({found['products_gflop']:.3f} GFLOP a step: "
        f"{found['products_gflop_per_s'] or 0:.1f} GFLOP/s; torch.mm at "
        f"{report.get('matmul_size', 2048)}^2 here: "
        f"{report['matmul_gflop_per_s']:.1f} GFLOP/s)",
        "",
        "| operation | ms a step | calls a step | product |",
        "|---|---|---|---|",
    ]
    lines += [f"| {e['op']} | {e['ms_per_step']:.3f} | {e['calls_per_step']:g} | "
              f"{'yes' if e['product'] else ''} |" for e in found["top"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="the training config's overrides")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=25, help="operations in the table")
    parser.add_argument("--matmul-size", type=int, default=2048,
                        help="n of the machine's rate's n x n products (smaller: quicker, "
                             "rougher; its 6 products at 2048 take 3 s on one AVX2 core)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "profile_step.json",
                        help="the report this profile is added to (made if missing)")
    parser.add_argument("--name", default=None,
                        help="the profile's name in the report (default: the overrides)")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="JSON",
                        help="no profiling: these reports' profiles as one, into --out (a "
                             "report of one profile: an entry named by its file)")
    args = parser.parse_args(argv)
    if args.merge:
        save_report(args.out, merge_entries(args.merge, prefix="profile_step_"))
        return 0
    overrides = [*args.overrides, f"trainer.num_threads={args.threads}"]
    with tempfile.TemporaryDirectory() as run_dir:
        loop = build_loop(compose_config([*overrides, "log.figures=false"]), Path(run_dir))
        found = profile_steps(loop, args.steps, args.warmup, args.top)
        # on the run's threads: the best of 5
        rate = matmul_gflops(args.matmul_size, repeats=5, pick=min)
        report = {"overrides": overrides, "steps": args.steps, "threads": args.threads,
                  "kernels": loop.kernels, "matmul_gflop_per_s": rate,
                  "matmul_size": args.matmul_size, "found": found}
    print(table(report))
    add_entry(args.out, __file__, argv, args.name or " ".join(args.overrides) or "default",
              **report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

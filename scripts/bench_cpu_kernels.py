"""The C kernels of seqforecast/native beside the torch paths they replace, at the published
PatchTST's shapes (ETTh, 128 windows x 7 channels a step: 896 series of 42 patches, d_model
16, 4 heads, d_ff 128), on one torch thread:

    python scripts/bench_cpu_kernels.py                 # the table in docs/patchtst.md#speed

- attention, forward + backward, per layer of the residual stack (q and k 4, 8, 12 wide a head
  as residual attention carries the earlier layers'): the C kernel against cache_sized.py's
  sliced torch path (heads folded into the batch, the carried q and k concatenated: what the
  model ran before) and torch's scaled_dot_product_attention on the same tensors;
- dropout on the FFN's hidden block [37632, 128], forward + backward: the C kernel's mask
  against the same mask by torch ops (SEQFORECAST_NATIVE=0) and torch's F.dropout;
- the whole training step of `experiment=patchtst` (forward, backward, Adam) with the kernels
  and with SEQFORECAST_NATIVE=0 (the post-norm residual kernel counts here).

Cases alternate within each round; each keeps its fastest round (median of its timed steps),
the one least disturbed by the rest of a shared machine. Printed as a table, saved as JSON.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, write_report  # noqa: E402

from seqforecast.attention import cache_sized, native  # noqa: E402
from seqforecast.config import compose_config  # noqa: E402
from seqforecast.model.builder import build_model  # noqa: E402
from seqforecast.model.dropout import dropout  # noqa: E402
from seqforecast.training.runtime import keep_freed_memory  # noqa: E402

BATCH, HEADS, LENGTH, HEAD = 896, 4, 42, 4  # series, heads, patches, head width
HIDDEN = (BATCH * LENGTH, 128)


def _timed(step: Callable[[], None], steps: int) -> float:
    """Median seconds of `steps` calls after one warm-up."""
    step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _switched(on: bool, step: Callable[[], None]) -> Callable[[], None]:
    """step with the kernels on or off (SEQFORECAST_NATIVE)."""

    def run() -> None:
        os.environ["SEQFORECAST_NATIVE"] = "1" if on else "0"
        try:
            step()
        finally:
            os.environ["SEQFORECAST_NATIVE"] = "1"

    return run


def attention_cases(width: int) -> dict[str, Callable[[], None]]:
    """Layer `width // 4` of the stack: its q and k carry `width // 4` pieces of 4."""
    pieces = width // HEAD

    def heads(w: int) -> torch.Tensor:  # [B, H, L, w] over [B, L, H, w] storage, as the model
        return torch.randn(BATCH, LENGTH, HEADS, w).transpose(1, 2).requires_grad_()

    q, k = [heads(HEAD) for _ in range(pieces)], [heads(HEAD) for _ in range(pieces)]
    v = heads(HEAD)

    def backward(out: torch.Tensor) -> None:
        out.backward(torch.ones_like(out))

    def sdpa() -> None:
        backward(F.scaled_dot_product_attention(torch.cat(q, -1), torch.cat(k, -1), v, scale=0.5))

    return {
        f"attention w={width}: C kernel": _switched(
            True, lambda: backward(cache_sized.heads_attention(q, k, v, 0.5))),
        f"attention w={width}: torch sliced path": _switched(
            False, lambda: backward(cache_sized.heads_attention(q, k, v, 0.5))),
        f"attention w={width}: torch SDPA": sdpa,
    }  # fmt: skip


def dropout_cases() -> dict[str, Callable[[], None]]:
    x = torch.randn(*HIDDEN, requires_grad=True)
    grad = torch.randn(*HIDDEN)

    def ours() -> None:
        dropout(x, 0.3, training=True).backward(grad)

    def torchs() -> None:
        F.dropout(x, 0.3, training=True).backward(grad)

    return {
        "dropout [37632, 128]: C kernel": _switched(True, ours),
        "dropout [37632, 128]: same mask by torch ops": _switched(False, ours),
        "dropout [37632, 128]: torch F.dropout": torchs,
    }


def step_cases() -> dict[str, Callable[[], None]]:
    cfg = compose_config(["experiment=patchtst", f"data.path={REPO / 'data' / 'example.csv'}",
                          "in_len=336", "out_len=96"])  # fmt: skip
    model = build_model(cfg, n_features=7, n_targets=7).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src, tgt = torch.randn(128, 336, 7), torch.randn(128, 96, 7)

    def step() -> None:
        loss = (model(src) - tgt).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return {
        "training step: C kernels": _switched(True, step),
        "training step: torch paths (SEQFORECAST_NATIVE=0)": _switched(False, step),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed calls per case and round")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "cpu_kernels.json")
    args = parser.parse_args(argv)
    if not native.available():
        raise SystemExit("the C kernels could not be built here (see the warning above)")
    torch.set_num_threads(1)
    keep_freed_memory(torch.device("cpu"))  # as training runs
    torch.manual_seed(0)
    cases = {**attention_cases(4), **attention_cases(8), **attention_cases(12), **dropout_cases(),
             **step_cases()}  # fmt: skip
    best: dict[str, float] = {}
    for r in range(args.rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in order:
            best[name] = min(best.get(name, float("inf")), _timed(cases[name], args.steps))
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    groups: dict[str, dict[str, float]] = {}
    for name in cases:  # the first case of a group is the kernel, the rest its references
        group, label = name.split(": ", 1)
        groups.setdefault(group, {})[label] = best[name]
    print(f"\nms, 1 torch thread, fastest of {args.rounds} rounds (median of {args.steps} calls)\n")
    print(table(groups))
    write_report(args.out, __file__, argv, threads=1, rounds=args.rounds, steps=args.steps,
                 seconds=groups)  # fmt: skip


def table(seconds: dict[str, dict[str, float]]) -> str:
    """The report's `seconds` (case -> {path: seconds}, the kernel first) as a markdown table."""
    lines = ["| case (ms) | C kernels | torch path it replaces | torch's own | "
             "torch path ÷ kernels |", "|---|---|---|---|---|"]  # fmt: skip
    for group, timings in seconds.items():
        ours, *others = timings.values()
        cells = [f"{t * 1e3:.1f}" for t in others] + [""] * (2 - len(others))
        lines.append(f"| {group} | {ours * 1e3:.1f} | {' | '.join(cells)} | "
                     f"{others[0] / ours:.2f}x |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()

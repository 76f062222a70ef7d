"""The C kernels of seqforecast/native beside stock PyTorch (trainer.kernels=torch), at the
published PatchTST's shapes (ETTh, 128 windows x 7 channels a step: 896 series of 42 patches,
d_model 16, 4 heads, d_ff 128), on one torch thread:

    python scripts/bench_cpu_kernels.py                 # the table in docs/patchtst.md#speed

- attention, forward + backward, per layer of the residual stack (q and k 4, 8, 12 wide a head
  as residual attention carries the earlier layers'): the C kernel against the explicit path
  a residual call takes under trainer.kernels=torch (the carried q and k concatenated, scores,
  softmax, weights times v) and torch's scaled_dot_product_attention on the same tensors;
- dropout on the FFN's hidden block [37632, 128], forward + backward: the C kernel's mask
  against torch's F.dropout (nn.Dropout: trainer.kernels=torch);
- the whole training step of `experiment=patchtst` (forward, backward, Adam) built with
  trainer.kernels=native and with trainer.kernels=torch (the sliced FFN and the post-norm
  residual kernel count here).

Cases alternate within each round; each keeps its fastest round (median of its timed steps),
the one least disturbed by the rest of a shared machine. Printed as a table, saved as JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, write_report  # noqa: E402

from seqforecast.config import compose_config  # noqa: E402
from seqforecast.model.builder import build_model  # noqa: E402
from seqforecast.native import attention as native_attention  # noqa: E402
from seqforecast.native import build  # noqa: E402
from seqforecast.native.dropout import dropout  # noqa: E402
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


def attention_cases(width: int) -> dict[str, Callable[[], None]]:
    """Layer `width // 4` of the stack: its q and k carry `width // 4` pieces of 4."""
    pieces = width // HEAD

    def heads(w: int) -> torch.Tensor:  # [B, H, L, w] over [B, L, H, w] storage, as the model
        return torch.randn(BATCH, LENGTH, HEADS, w).transpose(1, 2).requires_grad_()

    q, k = [heads(HEAD) for _ in range(pieces)], [heads(HEAD) for _ in range(pieces)]
    v = heads(HEAD)

    def backward(out: torch.Tensor) -> None:
        out.backward(torch.ones_like(out))

    def explicit() -> None:  # the explicit path (attention/scored.py) on the joined q and k
        scores = (torch.cat(q, -1) * 0.5) @ torch.cat(k, -1).transpose(-1, -2)
        backward(scores.softmax(-1) @ v)

    def sdpa() -> None:
        backward(F.scaled_dot_product_attention(torch.cat(q, -1), torch.cat(k, -1), v, scale=0.5))

    return {
        f"attention w={width}: C kernel": lambda: backward(native_attention.attention(q, k, v,
                                                                                      0.5)),
        f"attention w={width}: explicit path (kernels=torch)": explicit,
        f"attention w={width}: torch SDPA": sdpa,
    }


def dropout_cases() -> dict[str, Callable[[], None]]:
    x = torch.randn(*HIDDEN, requires_grad=True)
    grad = torch.randn(*HIDDEN)

    def ours() -> None:
        dropout(x, 0.3, training=True).backward(grad)

    def torchs() -> None:
        F.dropout(x, 0.3, training=True).backward(grad)

    return {
        "dropout [37632, 128]: C kernel": ours,
        "dropout [37632, 128]: F.dropout (kernels=torch)": torchs,
    }


def step_cases() -> dict[str, Callable[[], None]]:
    cfg = compose_config(["experiment=patchtst", f"data.path={REPO / 'data' / 'example.csv'}",
                          "in_len=336", "out_len=96"])
    src, tgt = torch.randn(128, 336, 7), torch.randn(128, 96, 7)

    def step_of(kernels: str) -> Callable[[], None]:
        model = build_model(cfg, n_features=7, n_targets=7, kernels=kernels).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step() -> None:
            loss = (model(src) - tgt).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return step

    return {
        "training step: C kernels (kernels=native)": step_of("native"),
        "training step: kernels=torch": step_of("torch"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed calls per case and round")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "cpu_kernels.json")
    args = parser.parse_args(argv)
    why = build.unavailable()
    if why is not None:
        raise SystemExit(f"the C kernels cannot run here: {why}")
    torch.set_num_threads(1)
    keep_freed_memory(torch.device("cpu"))  # as training runs
    torch.manual_seed(0)
    cases = {**attention_cases(4), **attention_cases(8), **attention_cases(12), **dropout_cases(),
             **step_cases()}
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
                 seconds=groups)


def table(seconds: dict[str, dict[str, float]]) -> str:
    """The report's `seconds` (case -> {path: seconds}, the kernel first) as a markdown table."""
    lines = ["| case (ms) | C kernels | trainer.kernels=torch | torch's fused attention | "
             "torch ÷ C kernels |", "|---|---|---|---|---|"]
    for group, timings in seconds.items():
        ours, *others = timings.values()
        cells = [f"{t * 1e3:.1f}" for t in others] + [""] * (2 - len(others))
        lines.append(f"| {group} | {ours * 1e3:.1f} | {' | '.join(cells)} | "
                     f"{others[0] / ours:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

r"""Forward + backward speed and peak memory of every attention backend, side by side with torch.

    python scripts/bench_attention.py                       # the README table
    python scripts/bench_attention.py --lengths 256 1024 --repeats 1
    python scripts/bench_attention.py --cases literature --lengths 1024 4096 \
        --out benchmarks/attention_literature.json
    python scripts/bench_attention.py --cases literature --shape patchtst --lengths 42 \
        --out benchmarks/attention_literature_patchtst.json

Each (case, length) runs in a fresh Python process, so one case's allocations and caches cannot
colour the next. A case builds its module and a [B, L, d_model] input, then times
`out = attn(x, x, causal=True); out.sum().backward()`: one warm-up step, then at least
`--steps` timed steps, reporting the median. Every case runs `--repeats` times (order reversed
every other round) and the table keeps its fastest round, the one least disturbed by the rest
of a shared machine. Peak memory is the process's resident-set high-water mark (VmHWM, reset
through /proc/self/clear_refs just before the warm-up) above the resident set at that moment,
so it counts what the step itself allocates. Cases whose estimated memory would not fit are
skipped and say so. The table is printed and written as JSON (--out).

References, in the same run: torch's fused `scaled_dot_product_attention` (causal, full; no
projections) and `torch.nn.MultiheadAttention` (causal mask, need_weights=False). The
block-local rows have references computing the same function: SDPA with the same causal
block-local window as a boolean mask (`sdpa_band16`: each query sees its own block up to
itself and the whole previous block), and FlexAttention with that window as a block mask
(`flex_block16`, compiled; where this torch cannot run it on the device, the row says why).
Both are attention cores only, without projections, so they do less than the diff rows.
`flex_diff_block16` is diff's own function as two FlexAttention calls (one per half, the
values shared) combined with lambda: the composition a GPU kernel must beat; `diff_block16_triton`
and `diff_block16_flex` are the diff layer on those kernels (attention.kernel).

On a GPU (`--device cuda`, `--dtype bf16` or fp32) each step is timed with CUDA events and the
peak is torch's allocator's high-water mark above what the case holds before its warm-up:

    python scripts/bench_attention.py --device cuda --dtype bf16 --lengths 4096 16384 65536 \
        --cases sdpa_causal flex_block16 flex_diff_block16 diff_block16 diff_block16_triton
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench_common import DTYPES, Clock, PeakMemory, best_of_rounds, run_worker, write_report

DEFAULTS = dict(batch=4, d_model=64, heads=4, block_size=16)
# The attention shapes of the two published models (`--shape`), their token counts given by
# --lengths: PatchTST at ETTh1 (d_model 16, 4 heads, 128 windows x 7 channels, 42 patches at
# input 336) and iTransformer (d_model 512, 8 heads, batch 32, 7 variates at ETTh1, 21 at Weather).
SHAPES = {
    "default": DEFAULTS,
    "patchtst": dict(batch=128 * 7, d_model=16, heads=4, block_size=16),
    "itransformer": dict(batch=32, d_model=512, heads=8, block_size=16),
    # one sequence, one pair of heads: a check that each case runs (the GPU visit's --tiny on a
    # CPU, where Triton's interpreter runs its kernel program by program: 12 of its 15 s at the
    # default's 16 programs)
    "tiny": dict(batch=1, d_model=16, heads=2, block_size=16),
}
CASES = {
    # name: (description, quadratic memory factor or None when memory is linear in L)
    "sdpa_causal": ("F.scaled_dot_product_attention, causal, full (reference)", None),
    # The block-local window as a mask: the fair reference for diff_block16 (same keys seen).
    "sdpa_band16": (
        "F.scaled_dot_product_attention, causal block-local window (bs 16) as a "
        "bool mask (reference)",
        0.5,
    ),
    "flex_block16": ("FlexAttention, the same window as a block mask, compiled (reference)", None),
    "torch_mha": ("torch.nn.MultiheadAttention, causal, need_weights=False", None),
    "vanilla": ("seqforecast vanilla, causal, need_weights=False", None),
    "einsum": ("seqforecast einsum, causal, need_weights=False", None),
    "diff_block16": ("seqforecast diff (paper layout), block_size=16, causal", None),
    "diff_block16_triton": ("seqforecast diff block 16 on attention.kernel=triton", None),
    "diff_block16_flex": ("seqforecast diff block 16 on attention.kernel=flex", None),
    "flex_diff_block16": ("diff's function as two FlexAttention calls (one per half, the "
                          "values shared) combined with lambda, compiled (reference)", None),
    # Dense diff without weights runs on the fused kernel: linear memory too.
    "diff_full": ("seqforecast diff (paper layout), block_size=0, causal (fused kernel)", None),
    # The wide layout: each q/k half as wide as a head (1.5x the projection weights).
    "diff_wide_block16": ("seqforecast diff, head_layout=wide, block_size=16, causal", None),
    "diff_wide_full": ("seqforecast diff, head_layout=wide, block_size=0, causal", None),
    # The forecasting literature's mechanisms, none causal but flow and destationary, beside
    # the references without a mask (`--cases literature`).
    "sdpa_nomask": ("F.scaled_dot_product_attention, no mask (reference)", None),
    "vanilla_explicit": ("seqforecast vanilla, no mask, need_weights=True (the explicit path: "
                         "the score matrix)", 3.0),
    "vanilla_nomask": ("seqforecast vanilla, no mask, need_weights=False (fused)", None),
    "probsparse": ("seqforecast probsparse (factor 5), no mask", None),
    "autocorrelation": ("seqforecast autocorrelation (factor 1), no mask", None),
    "fourier": ("seqforecast fourier (32 random modes), no mask", None),
    "flow": ("seqforecast flow, no mask", None),
    "destationary": ("seqforecast destationary (no factors: its explicit scores), no mask", 3.0),
}
CORE = [case for case in CASES if case not in (
    "sdpa_nomask", "vanilla_explicit", "vanilla_nomask", "probsparse", "autocorrelation",
    "fourier", "flow", "destationary")]
LITERATURE = [case for case in CASES if case not in CORE]


# --------------------------------------------------------------------------- worker side


def _tensor(shape, device, dtype):
    import torch

    return torch.randn(shape, device=device, dtype=dtype, requires_grad=True)


def _build_step(case: str, length: int, cfg: dict, device: str, dtype):
    import torch
    import torch.nn.functional as F

    from seqforecast.attention import build_attention

    batch, d_model, heads = cfg["batch"], cfg["d_model"], cfg["heads"]
    if case in ("sdpa_causal", "sdpa_nomask"):
        shape = (batch, heads, length, d_model // heads)
        q, k, v = (_tensor(shape, device, dtype) for _ in range(3))
        causal = case == "sdpa_causal"

        def step():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()

        return step

    if case in ("sdpa_band16", "flex_block16", "flex_diff_block16"):
        return _banded_step(case, length, cfg, device, dtype)

    x = _tensor((batch, length, d_model), device, dtype)
    if case == "torch_mha":
        mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).to(device, dtype)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(length, device=device,
                                                                    dtype=dtype)

        def step():
            out, _ = mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)
            out.sum().backward()

        return step

    if case in LITERATURE:
        return _unmasked_step(case, length, cfg, device, dtype)
    if case.startswith("diff"):
        block_size = cfg["block_size"] if "block16" in case else 0
        layout = "wide" if "_wide" in case else "paper"
        kernel = case.rpartition("_")[2] if case.endswith(("_triton", "_flex")) else "auto"
        attn = build_attention("diff", d_model, heads, block_size=block_size, head_layout=layout,
                               kernel=kernel, trains_on=torch.device(device).type)
    else:
        attn = build_attention(case, d_model, heads)
    attn.to(device, dtype)

    def step():
        out, _ = attn(x, x, causal=True, need_weights=False)
        out.sum().backward()

    return step


def _unmasked_step(case: str, length: int, cfg: dict, device: str, dtype):
    """Self-attention without a mask: the literature's backends and vanilla's paths."""
    from seqforecast.attention import build_attention

    batch, d_model, heads = cfg["batch"], cfg["d_model"], cfg["heads"]
    name = case.removesuffix("_explicit").removesuffix("_nomask")
    context = {"lengths": (length, length)} if name == "fourier" else {}
    attn = build_attention(name, d_model, heads, **context).to(device, dtype)
    weights = case == "vanilla_explicit"
    x = _tensor((batch, length, d_model), device, dtype)

    def step():
        out, _ = attn(x, x, need_weights=weights)
        out.sum().backward()

    return step


def band(query, key, block_size: int):
    """The causal block-local window: key j is seen by query i when j <= i and j lies in i's
    block or the one before (block_local.py with lookahead 0)."""
    return (key <= query) & (key // block_size >= query // block_size - 1)


def _banded_step(case: str, length: int, cfg: dict, device: str, dtype):
    import torch
    import torch.nn.functional as F

    batch, d_model, heads, bs = cfg["batch"], cfg["d_model"], cfg["heads"], cfg["block_size"]
    head = d_model // heads
    shape = (batch, heads, length, head)
    q, k, v = (_tensor(shape, device, dtype) for _ in range(3))
    if case == "sdpa_band16":
        positions = torch.arange(length, device=device)
        mask = band(positions[:, None], positions[None, :], bs)  # [L, L] bool

        def step():
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()

        return step
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = create_block_mask(
        lambda b, h, qi, ki: band(qi, ki, bs), None, None, length, length, device=device
    )
    flex = torch.compile(flex_attention)
    if case == "flex_block16":

        def step():
            flex(q, k, v, block_mask=block_mask).sum().backward()

        return step
    # diff's function (paper layout: each half head / 2 wide, one v of the head's width):
    # softmax(q1 k1^T) v - lambda softmax(q2 k2^T) v, one call per half
    q1, k1, q2, k2 = (_tensor((batch, heads, length, head // 2), device, dtype)
                      for _ in range(4))
    lam = torch.tensor(0.8, device=device, dtype=dtype, requires_grad=True)

    def step():
        first = flex(q1, k1, v, block_mask=block_mask, scale=(head // 2) ** -0.5)
        second = flex(q2, k2, v, block_mask=block_mask, scale=(head // 2) ** -0.5)
        (first - lam * second).sum().backward()

    return step


def run_case(case: str, length: int, cfg: dict, repeats: int, min_seconds: float,
             device: str = "cpu", dtype: str = "fp32") -> dict:
    import torch

    torch.manual_seed(0)
    try:
        step = _build_step(case, length, cfg, device, getattr(torch, DTYPES[dtype]))
        if "flex" in case or "triton" in case:
            step()  # compiling happens here, before the memory baseline
    except Exception as err:  # a kernel this machine cannot run: say why, in the row
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:80]
        return {"case": case, "length": length, "status": f"unavailable: {reason}"}
    peak = PeakMemory(device)
    start = time.perf_counter()
    step()  # warm-up: first-call allocations and kernel selection
    warmup_s = time.perf_counter() - start
    times = []
    clock = Clock(device)
    deadline = time.perf_counter() + min_seconds
    while len(times) < repeats or (time.perf_counter() < deadline and warmup_s < 1.0):
        times.append(clock.time(step))
    median = statistics.median(times)
    return {
        "case": case,
        "length": length,
        "status": "ok",
        "median_s": median,
        "tokens_per_s": cfg["batch"] * length / median,
        "peak_mib": peak.mib(),
        "repeats": len(times),
        "threads": torch.get_num_threads(),
        "device": device,
        "dtype": dtype,
    }


# --------------------------------------------------------------------------- driver side


def _available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _skip_reason(case: str, length: int, cfg: dict) -> str | None:
    factor = CASES[case][1]
    if factor is None:
        return None
    # Score-sized float32 tensors alive at once in forward + backward.
    need = factor * cfg["batch"] * cfg["heads"] * length * length * 4
    if need > 0.6 * _available_bytes():
        return f"skipped: needs ~{need / 2**30:.0f} GiB, {_available_bytes() / 2**30:.0f} GiB free"
    return None


def _spawn(case: str, length: int, cfg: dict, args) -> dict:
    skip = _skip_reason(case, length, cfg)
    if skip:
        return {"case": case, "length": length, "status": skip}
    spec = dict(case=case, length=length, cfg=cfg, repeats=args.steps, min_seconds=args.min_seconds,
                device=args.device, dtype=args.dtype)
    return run_worker(__file__, spec, args.timeout, label={"case": case, "length": length},
                      in_process=args.in_process)


def _lookup(results, case, length):
    for r in results:
        if r["case"] == case and r["length"] == length and r["status"] == "ok":
            return r
    return None


def evaluate_targets(results) -> list[dict]:
    """The issue's targets, each a ratio of two measured cases and the bound it must meet."""
    checks = [  # (target, (case, L), (case, L), key, bound, at_least)
        *(
            (
                f"diff block 16 tokens/s >= {goal}x SDPA causal at L={n}",
                ("diff_block16", n),
                ("sdpa_causal", n),
                "tokens_per_s",
                goal,
                True,
            )
            for n, goal in ((4096, 2.0), (16384, 5.0))
        ),
        (
            "diff block 16 tokens/s >= 3x SDPA with the same band mask at L=4096",
            ("diff_block16", 4096),
            ("sdpa_band16", 4096),
            "tokens_per_s",
            3.0,
            True,
        ),
        (
            "diff block 16 peak memory at L=16384 <= 5x L=4096",
            ("diff_block16", 16384),
            ("diff_block16", 4096),
            "peak_mib",
            5.0,
            False,
        ),
        *(
            (
                f"{case} tokens/s >= 0.8x nn.MultiheadAttention at L=1024",
                (case, 1024),
                ("torch_mha", 1024),
                "tokens_per_s",
                0.8,
                True,
            )
            for case in ("vanilla", "einsum")
        ),
        # Sub-quadratic by design: their reason to exist is beating the L x L score matrix.
        *(
            (
                f"{case} tokens/s >= 1x vanilla's explicit path at L=4096",
                (case, 4096),
                ("vanilla_explicit", 4096),
                "tokens_per_s",
                1.0,
                True,
            )
            for case in ("probsparse", "autocorrelation")
        ),
    ]
    targets = []
    for target, num, den, key, bound, at_least in checks:
        a, b = _lookup(results, *num), _lookup(results, *den)
        value = None if a is None or b is None else a[key] / b[key]
        met = None if value is None else (value >= bound if at_least else value <= bound)
        targets.append(dict(target=target, value=value, met=met))
    return targets


def format_table(results, lengths) -> str:
    lines = [
        "| case | " + " | ".join(f"L={n} tok/s (peak MiB)" for n in lengths) + " |",
        "|---|" + "---|" * len(lengths),
    ]
    for case in [c for c in CASES if any(r["case"] == c for r in results)]:
        cells = []
        for n in lengths:
            r = next((r for r in results if r["case"] == case and r["length"] == n), None)
            if r is None:
                cells.append("-")
            elif r["status"] != "ok":
                cells.append(r["status"])
            else:
                cells.append(f"{r['tokens_per_s']:,.0f} ({r['peak_mib']:,.0f})")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--cases", nargs="+", default=CORE,
                        choices=[*CASES, "literature"],
                        help="cases to run; `literature`: the forecasting literature's backends "
                             "beside vanilla's and SDPA's unmasked paths")
    parser.add_argument("--shape", choices=list(SHAPES), default="default",
                        help="batch, d_model and heads: the default table's, those of the "
                             "published PatchTST or iTransformer, or tiny (a check that each "
                             "case runs)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the cases")
    parser.add_argument("--steps", type=int, default=3, help="minimum timed steps per case")
    parser.add_argument("--min-seconds", type=float, default=2.0, help="time fast cases this long")
    parser.add_argument("--timeout", type=int, default=900, help="seconds before a case is skipped")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (timed by CUDA events)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="fp32",
                        help="the inputs' and the layers' dtype")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/attention.json"))
    parser.add_argument("--in-process", action="store_true",
                        help="each case in this process, not a fresh one (tests, tiny checks: "
                             "the timings are then not isolated)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(run_case(**spec)))
        return 0

    cfg = dict(SHAPES[args.shape])
    if "literature" in args.cases:
        args.cases = [c for c in args.cases if c != "literature"] + LITERATURE

    def show(r: dict) -> None:
        shown = f"{r['tokens_per_s']:,.0f} tok/s" if r["status"] == "ok" else r["status"]
        print(f"{r['case']:>13} L={r['length']:<6} {shown}", file=sys.stderr, flush=True)

    specs = [dict(case=case, length=length) for length in args.lengths for case in args.cases]
    results = best_of_rounds(
        specs, args.repeats, lambda s: _spawn(s["case"], s["length"], cfg, args), show
    )

    targets = evaluate_targets(results)
    print(format_table(results, args.lengths))
    print()
    for t in targets:
        value = "n/a" if t["value"] is None else f"{t['value']:.2f}"
        verdict = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        print(f"- {t['target']}: {value} ({verdict})")

    write_report(
        args.out,
        __file__,
        argv,
        config={**cfg, "device": args.device, "dtype": args.dtype},
        cases={k: v[0] for k, v in CASES.items()},
        results=results,
        targets=targets,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

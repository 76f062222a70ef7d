"""Training throughput of every backend, side by side with torch.nn.Transformer.

    python scripts/bench_train.py                      # the README table
    python scripts/bench_train.py --sizes default --steps 8

Every case is a fresh Python process that trains for one epoch with seqforecast's own loop
(`train_model`: forward, MSE, backward, clipping, AdamW, LR schedule) and reads each step's
time from the loop's own clock (the `train/tokens_per_s` it reports). The first `--warmup`
steps are dropped and the median step kept. Each case runs `--repeats` times, the order of
the cases reversed every other round, and the table keeps each case's fastest median (the
one least disturbed by the rest of the machine; every round is in the JSON).

The reference is `torch.nn.Transformer` with the same dimensions (pre-norm, GELU, no
dropout), the same input/output projections, positional table, placeholders and last-value
normalisation, trained by the same loop.

Also measured, in the same run: this machine's fp32 matmul rate (torch.mm, 2048^2; smaller
with `--matmul-size`, quicker and rougher: the tests, the GPU visit's --tiny), each
model's FLOPs per token counted from the model (seqforecast/model/flops.py: forward x 3, every
attention on its explicit path; the reference has the same dimensions, so the same count), the
achieved fraction of that rate, torch's FlopCounterMode count beside it (it counts the fused
attention kernel as 0 on CPU, so it reads low wherever attention runs fused), and the time to
generate a batch of data relative to a step. Tokens
are series steps: batch x (in_len + out_len) per step. Results print as a table and go to
--out as JSON.

On a GPU (`--device cuda`): the windows live on the device, the loop syncs once a step (its
clock then times the device's work), `--dtype bf16` trains every case under bf16 autocast
(trainer.precision=bf16), and the matmul rate is the device's at that dtype:

    python scripts/bench_train.py --device cuda --dtype bf16 --sizes default large long
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_common import DTYPES, best_of_rounds, matmul_gflops, run_worker, write_report

SIZES = {
    "default": dict(d_model=64, heads=4, enc=2, dec=1, in_len=24, out_len=12, label=8, batch=64),
    "large": dict(d_model=128, heads=4, enc=3, dec=3, in_len=96, out_len=48, label=48, batch=64),
    "long": dict(d_model=64, heads=4, enc=2, dec=1, in_len=1024, out_len=256, label=256, batch=8),
}
# name: (model, options); options: block_size, compile, precision, weights_every_step
CASES = {
    "reference": ("reference", {}),
    "vanilla": ("vanilla", {}),
    "einsum": ("einsum", {}),
    "diff": ("diff", {}),
    "diff_block16": ("diff", {"block_size": 16}),
    "diff_wide": ("diff", {"head_layout": "wide"}),
    "diff_wide_block16": ("diff", {"block_size": 16, "head_layout": "wide"}),
    "vanilla_bf16": ("vanilla", {"precision": "bf16"}),
    "vanilla_compile": ("vanilla", {"compile": True}),
    "vanilla_weights_every_step": ("vanilla", {"weights_every_step": True}),
}
PLAN = {
    "default": ["reference", "vanilla", "einsum", "diff", "diff_block16", "diff_wide"],
    "large": [
        "reference", "vanilla", "einsum", "diff", "diff_block16",
        "vanilla_bf16", "vanilla_compile", "vanilla_weights_every_step",
    ],
    "long": ["reference", "vanilla", "diff", "diff_block16", "diff_wide_block16"],
}
MATMUL_SIZE = 2048  # n of the matmul rate's n x n products (--matmul-size)


# --------------------------------------------------------------------------- worker side


def reference_model(size: dict):
    """torch.nn.Transformer dressed like seqforecast's forecaster (oneshot decoding)."""
    import torch
    from torch import nn

    from seqforecast.model.positional import SinusoidalEncoding

    class ReferenceTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            d = size["d_model"]
            self.in_len, self.out_len, self.label = size["in_len"], size["out_len"], size["label"]
            self.src_embed, self.tgt_embed = nn.Linear(1, d), nn.Linear(1, d)
            self.placeholder = nn.Parameter(torch.randn(d) * 0.02)
            self.encoding = SinusoidalEncoding(d, size["in_len"] + size["out_len"], dropout=0.0)
            self.transformer = nn.Transformer(
                d, size["heads"], size["enc"], size["dec"], 4 * d, dropout=0.0,
                activation="gelu", batch_first=True, norm_first=True,
            )
            self.head = nn.Linear(d, 1)

        def forward(self, src, tgt=None):
            level = src[:, -1:]
            src = src - level
            x = self.encoding(self.src_embed(src))
            known = self.tgt_embed(src[:, -self.label :])
            fill = self.placeholder.expand(src.shape[0], self.out_len, -1)
            y = self.encoding(torch.cat([known, fill], dim=1), offset=self.in_len - self.label)
            out = self.transformer(x, y)
            return self.head(out)[:, -self.out_len :] + level

    return ReferenceTransformer()


def overrides(size: dict, model: str, options: dict) -> list[str]:
    return [
        f"attention={'vanilla' if model == 'reference' else model}",
        f"d_model={size['d_model']}", f"n_heads={size['heads']}",
        f"model.encoder_layers={size['enc']}", f"model.decoder_layers={size['dec']}",
        f"in_len={size['in_len']}", f"out_len={size['out_len']}",
        f"model.label_len={size['label']}", f"batch_size={size['batch']}",
        f"block_size={options.get('block_size', 0)}",
        f"trainer.compile={options.get('compile', False)}",
        f"trainer.precision={options.get('precision', 'fp32')}",
        "pos_encoding.max_len=2048",
        *([f"attention.head_layout={options['head_layout']}"] if "head_layout" in options else []),
    ]


def count_flops(model, src, target) -> int:
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    model.train()
    with FlopCounterMode(display=False) as counter:
        F.mse_loss(model(src, target), target).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def run_case(size_name: str, case: str, steps: int, warmup: int, device: str = "cpu",
             dtype: str = "fp32") -> dict:
    import torch
    from omegaconf import OmegaConf

    from seqforecast import build_model
    from seqforecast.config import compose_config
    from seqforecast.data import GENERATORS, synthetic_data
    from seqforecast.model.flops import training_flops
    from seqforecast.training import train_model
    from seqforecast.training.monitor import Monitor

    size = SIZES[size_name]
    model_name, options = CASES[case]
    cfg = compose_config(overrides(size, model_name, options))
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    batch = size["batch"]
    plain["data"].update(train_size=batch * (steps + warmup), val_size=batch, test_size=batch)
    trainer_cfg = dict(plain["trainer"], epochs=1, patience=0, log_every=1)  # per-step times
    if dtype == "bf16":
        trainer_cfg["precision"] = "bf16"
    torch.manual_seed(0)
    data = synthetic_data(plain["data"], 0, torch.device(device))
    build = (lambda: reference_model(size)) if model_name == "reference" else (
        lambda: build_model(plain)
    )
    # FLOPs counted on the explicit attention paths (the fused attention counted too); torch's
    # counter on the step as it runs beside it, which sees the fused kernel as 0 FLOPs on CPU.
    flops = batch * training_flops(plain)
    counter_flops = count_flops(build().to(device), data.train.src[:batch],
                                data.train.target[:batch])
    model = build().to(device)
    if options.get("weights_every_step"):
        from seqforecast.attention import Attention

        plain_attend = Attention.attend

        def with_weights(self, query, key_value, call, key_padding_mask=None):
            return plain_attend(self, query, key_value, call._replace(need_weights=True),
                                key_padding_mask)

        Attention.attend = with_weights  # every call the explicit path, with its weights
    compiled = False
    if options.get("compile"):
        from seqforecast.training.runtime import compile_model

        compiled = compile_model(model)

    window_tokens = size["in_len"] + size["out_len"]
    seconds: list[float] = []

    class StepClock(Monitor):
        def on_step(self, step, scalars):
            seconds.append(batch * window_tokens / scalars["tokens_per_s"])

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        train_model(model, data, trainer_cfg, Path(tmp), seed=0, config_yaml="",
                    monitor=StepClock(), progress=False)
    wall = time.perf_counter() - started
    timed = seconds[warmup:]
    step = statistics.median(timed)

    generator = GENERATORS[plain["data"]["name"]]
    gen = torch.Generator().manual_seed(1)
    draws = []
    for _ in range(20):
        t0 = time.perf_counter()
        generator(batch, size["in_len"], size["out_len"], generator=gen)
        draws.append(time.perf_counter() - t0)
    data_batch = statistics.median(draws)
    return {
        "size": size_name,
        "case": case,
        "status": "ok",
        "median_step_s": step,
        "steps_per_s": 1 / step,
        "tokens_per_s": batch * window_tokens / step,
        "flops_per_step": flops,
        "counter_flops_per_token": counter_flops / (batch * window_tokens),
        "flops_per_token": flops / (batch * window_tokens),
        "achieved_gflops": flops / step / 1e9,
        "data_batch_s": data_batch,
        "data_fraction_of_step": data_batch / step,
        "timed_steps": len(timed),
        "wall_s": wall,
        "compiled": compiled,
        "threads": torch.get_num_threads(),
        "device": device,
        "dtype": dtype,
    }


def matmul_rate(n: int = MATMUL_SIZE, device: str = "cpu", dtype: str = "fp32") -> dict:
    return {"case": "matmul", "status": "ok", "n": n, "device": device, "dtype": dtype,
            "gflops": matmul_gflops(n, device=device, dtype=dtype)}


# --------------------------------------------------------------------------- driver side


def spawn(spec: dict, timeout: int, in_process: bool = False) -> dict:
    return run_worker(__file__, spec, timeout, in_process=in_process)


def find(results, size, case):
    return next(
        (r for r in results if r.get("size") == size and r["case"] == case and r["status"] == "ok"),
        None,
    )


def evaluate_targets(results) -> list[dict]:
    targets = []
    for size in SIZES:
        ours, ref = find(results, size, "vanilla"), find(results, size, "reference")
        if ours and ref and size != "long":
            value = ref["median_step_s"] / ours["median_step_s"]
            targets.append(dict(target=f"{size}: vanilla step >= 0.9x torch.nn.Transformer speed",
                                value=value, met=value >= 0.9))
    diff, vanilla = find(results, "long", "diff_block16"), find(results, "long", "vanilla")
    if diff and vanilla:
        value = vanilla["median_step_s"] / diff["median_step_s"]
        targets.append(dict(target="long (in 1024, out 256): diff block 16 faster than vanilla",
                            value=value, met=value > 1.0))
    fractions = [r["data_fraction_of_step"] for r in results if r.get("data_fraction_of_step")]
    if fractions:
        worst = max(fractions)
        targets.append(dict(target="a generated batch costs < 5% of a step (worst case)",
                            value=worst, met=worst < 0.05))
    return targets


def format_table(results, peak: float | None) -> str:
    lines = [
        "| size | case | steps/s | tokens/s | vs reference | MFLOP/token (formula) | "
        "MFLOP/token (torch counter) | GFLOP/s | of matmul peak | data gen / step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["case"] == "matmul":
            continue
        if r["status"] != "ok":
            lines.append(f"| {r['size']} | {r['case']} | {r['status']} | | | | | | | |")
            continue
        ref = find(results, r["size"], "reference")
        ratio = f"{ref['median_step_s'] / r['median_step_s']:.2f}x" if ref else "-"
        share = f"{r['achieved_gflops'] / peak:.1%}" if peak else "-"
        lines.append(
            f"| {r['size']} | {r['case']} | {r['steps_per_s']:.2f} | {r['tokens_per_s']:,.0f} | "
            f"{ratio} | {r['flops_per_token'] / 1e6:.2f} | "
            f"{r['counter_flops_per_token'] / 1e6:.2f} | {r['achieved_gflops']:.2f} | {share} | "
            f"{r['data_fraction_of_step']:.2%} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=list(PLAN), choices=list(SIZES))
    parser.add_argument("--cases", nargs="+", choices=list(CASES), help="default: all planned")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=5, help="steps dropped first")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the cases")
    parser.add_argument("--timeout", type=int, default=1200)
    parser.add_argument("--matmul-size", type=int, default=MATMUL_SIZE,
                        help="n of the matmul rate's n x n products (smaller: quicker, rougher; "
                             "its 11 products at 2048 take 5 s on one AVX2 core)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda")
    parser.add_argument("--dtype", choices=list(DTYPES), default="fp32",
                        help="bf16: every case under bf16 autocast")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/train.json"))
    parser.add_argument("--in-process", action="store_true",
                        help="each case in this process, not a fresh one (tests, tiny checks: "
                             "the timings are then not isolated)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        spec = json.loads(args.worker)
        if spec["case"] == "matmul":
            print(json.dumps(matmul_rate(spec["n"], spec["device"], spec["dtype"])))
        else:
            print(json.dumps(run_case(spec["size"], spec["case"], spec["steps"], spec["warmup"],
                                      spec["device"], spec["dtype"])))
        return 0

    on = dict(device=args.device, dtype=args.dtype)
    n = args.matmul_size
    results = [spawn({"case": "matmul", "n": n, **on}, args.timeout, args.in_process)]
    peak = results[0].get("gflops")
    print(f"{args.dtype} matmul (torch.mm {n}^2): {peak:.1f} GFLOP/s", file=sys.stderr)

    def show(r: dict) -> None:
        shown = f"{r['tokens_per_s']:,.0f} tok/s" if r["status"] == "ok" else r["status"]
        print(f"{r['size']:>8} {r['case']:<28} {shown}", file=sys.stderr, flush=True)

    for size in args.sizes:
        specs = [
            dict(size=size, case=case, steps=args.steps, warmup=args.warmup, **on)
            for case in PLAN[size]
            if not args.cases or case in args.cases
        ]
        results += best_of_rounds(specs, args.repeats,
                                  lambda s: spawn(s, args.timeout, args.in_process), show)

    targets = evaluate_targets(results)
    print(f"{args.dtype} matmul rate of this machine ({args.device}): {peak:.1f} GFLOP/s\n")
    print(format_table(results, peak))
    print()
    for t in targets:
        value = f"{t['value']:.2%}" if "%" in t["target"] else f"{t['value']:.2f}"
        print(f"- {t['target']}: {value} ({'met' if t['met'] else 'MISSED'})")
    write_report(
        args.out,
        __file__,
        argv,
        sizes=SIZES,
        cases={k: {"model": v[0], **v[1]} for k, v in CASES.items()},
        matmul_gflops=peak,
        device=args.device,
        dtype=args.dtype,
        results=results,
        targets=targets,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

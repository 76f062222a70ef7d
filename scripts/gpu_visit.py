r"""One prepared GPU visit: the measurements a lent GPU is for, in one command, into one JSON and
one markdown table.

    python scripts/gpu_visit.py --out benchmarks/gpu_visit                  # on a CUDA machine
    python scripts/gpu_visit.py --official-dir official/ --out benchmarks/gpu_visit
    python scripts/gpu_visit.py --tiny --device cpu --out /tmp/visit         # its logic (tests)

A device's time is lent by the minute, so every part runs as a subprocess of the project's own
scripts and CLI under a time budget of its own (`--budget`, seconds, shared out by PARTS'
weights); a part that fails or runs over is a row saying so, and the parts after it still run.
The parts, in the order a short visit needs them:

1. `attention`: scripts/bench_attention.py at L = 4096, 16384, 65536 in bf16 and fp32: torch's
   fused causal SDPA, FlexAttention with the band (one call, and diff's function as two calls),
   the diff layer block 16 on its explicit windows and on the Triton kernel.
2. `train`: scripts/bench_train.py, the default, large and long sizes, fp32 and bf16.
3. `mission`: `python -m seqforecast.train attention=diff block_size=16 device=cuda` end to end,
   3 seeds: wall seconds (start-up included) and the held-out test MSE.
4. `official`: one epoch of `experiment=patchtst` and `experiment=itransformer` at ETTh1-96
   beside the authors' code (scripts/bench_leaderboard.py --speed), where `--official-dir`
   holds their checkouts (`PatchTST`, `iTransformer`) and `--data-dir` the files; else a row
   saying it was not run. On a GPU, a row saying it was not run: the script runs the authors'
   code on the CPU only, so far.
5. `stacked`: scripts/bench_stacked.py, a 16-seed sweep of the default config at 10 epochs
   (16 runs one after another must fit the visit) stacked (`hydra/launcher=stacked`) against
   the same runs one after another: wall seconds each and the paired test-MSE ratio.

On the device tool's machine (Python 3.12, torch and triton there, no hydra-core or omegaconf
and no network), after `make gpu-wheels` here, the run carries `.whl` and is:

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 \
      && python3 scripts/gpu_visit.py --budget 420 --out $OUT/visit

`--tiny` shrinks every part to seconds (fp32 only, L = 32 at one sequence of two heads without
FlexAttention's rows and one timed step, two training steps, the matmul rate at 256^2, a small
synthetic set, one seed; two for the stacked sweep; the attention and train cases in their
script's process, `--in-process`) so that the suite runs the whole chain on the CPU; its numbers
mean nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import REPO, merge_entries, repo_env, write_report

SCRIPTS = Path(__file__).resolve().parent
LENGTHS = [4096, 16384, 65536]
ATTENTION_CASES = ["sdpa_causal", "flex_block16", "flex_diff_block16", "diff_block16",
                   "diff_block16_triton"]
MISSION = ["attention=diff", "block_size=16"]


def run(cmd: list[str], timeout: float, cwd: Path = REPO) -> tuple[str, float, str]:
    """(status, wall seconds, the output's tail): `ok`, `failed: ...` or `over budget`."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=repo_env(), cwd=cwd,
                              timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        return f"over budget ({timeout:.0f} s)", time.perf_counter() - start, ""
    wall = time.perf_counter() - start
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
    return ("ok" if proc.returncode == 0 else f"failed: {tail[0][:160]}"), wall, tail[0]


def dtypes(args) -> tuple[str, ...]:
    return ("fp32",) if args.tiny else ("bf16", "fp32")


def attention(args, budget: float, out: Path) -> dict:
    lengths = [32] if args.tiny else LENGTHS
    # tiny: FlexAttention's rows left out (compiling them takes a minute on a CPU)
    cases = [c for c in ATTENTION_CASES if not (args.tiny and "flex" in c)]
    found = {}
    for dtype in dtypes(args):
        path = out / f"attention_{dtype}.json"
        cmd = [sys.executable, str(SCRIPTS / "bench_attention.py"), "--device", args.device,
               "--dtype", dtype, "--lengths", *map(str, lengths), "--cases", *cases,
               "--repeats", "1", "--steps", "1" if args.tiny else "5", "--min-seconds",
               "0" if args.tiny else "1", "--out", str(path),
               *(["--in-process", "--shape", "tiny"] if args.tiny else [])]
        status, wall, _ = run(cmd, budget / len(dtypes(args)))
        rows = json.loads(path.read_text())["results"] if path.is_file() else []
        found[dtype] = {"status": status, "seconds": round(wall, 1), "results": rows}
    return found


def train(args, budget: float, out: Path) -> dict:
    found = {}
    for dtype in reversed(dtypes(args)):
        path = out / f"train_{dtype}.json"
        sizes = ["default"] if args.tiny else ["default", "large", "long"]
        cmd = [sys.executable, str(SCRIPTS / "bench_train.py"), "--device", args.device,
               "--dtype", dtype, "--sizes", *sizes, "--repeats", "1",
               "--steps", "2" if args.tiny else "20", "--warmup", "1" if args.tiny else "5",
               "--out", str(path)]
        if args.tiny:
            cmd += ["--cases", "vanilla", "--in-process", "--matmul-size", "256"]
        status, wall, _ = run(cmd, budget / len(dtypes(args)))
        report = json.loads(path.read_text()) if path.is_file() else {}
        found[dtype] = {"status": status, "seconds": round(wall, 1),
                        "matmul_gflops": report.get("matmul_gflops"),
                        "results": report.get("results", [])}
    return found


def mission(args, budget: float, out: Path) -> dict:
    seeds = [0] if args.tiny else [0, 1, 2]
    # tiny: no figures either (drawing them took half the run's CPU, 4.8 of 9.5 s)
    small = ["epochs=1", "data.train_size=64", "data.val_size=32", "data.test_size=64",
             "log.figures=false"]
    runs = []
    for seed in seeds:
        run_dir = args.runs_dir / "mission" / f"seed{seed}"
        cmd = [sys.executable, "-m", "seqforecast.train", *MISSION, f"device={args.device}",
               f"seed={seed}", f"hydra.run.dir={run_dir}", *(small if args.tiny else [])]
        status, wall, _ = run(cmd, budget / len(seeds))
        metrics = run_dir / "metrics.json"
        mse = json.loads(metrics.read_text())["test"]["model"]["mse"] if metrics.is_file() \
            else None
        runs.append({"seed": seed, "status": status, "wall_seconds": round(wall, 1),
                     "test_mse": mse})
    return {"command": " ".join(["python -m seqforecast.train", *MISSION]), "runs": runs}


def official(args, budget: float, out: Path) -> dict:
    found = {}
    for model, checkout in (("patchtst", "PatchTST"), ("itransformer", "iTransformer")):
        code = args.official_dir / checkout if args.official_dir else None
        if args.tiny or code is None or not code.is_dir():
            found[model] = {"status": "not run: no official checkout (--official-dir)"}
            continue
        if args.device != "cpu":  # the comparison would be the GPU against one CPU thread
            found[model] = {"status": "not run: bench_leaderboard --speed runs the authors' "
                                      "code on the CPU only (its GPU arguments not wired yet)"}
            continue
        path = out / f"official_{model}.json"
        cmd = [sys.executable, str(SCRIPTS / "bench_leaderboard.py"), "--speed", str(code),
               "--models", model, "--datasets", "etth1", "--horizons", "96", "--rounds", "1",
               "--data-dir", str(args.data_dir), "--runs-dir", str(args.runs_dir / "official"),
               "--set", f"device={args.device}", "--out", str(path)]
        status, wall, _ = run(cmd, budget / 2)
        speed = json.loads(path.read_text()).get("speed", []) if path.is_file() else []
        found[model] = {"status": status, "seconds": round(wall, 1), "speed": speed}
    return found


def stacked(args, budget: float, out: Path) -> dict:
    path = out / "stacked.json"
    cmd = [sys.executable, str(SCRIPTS / "bench_stacked.py"), "--out", str(path)]
    if args.tiny:
        cmd += ["--smoke", "--set", f"device={args.device}"]
    else:  # 10 of the default 50 epochs: 16 runs one after another must fit the visit
        cmd += ["--seeds", *map(str, range(STACKED_RUNS)), "--set", f"device={args.device}",
                f"epochs={STACKED_EPOCHS}"]
    status, wall, _ = run(cmd, budget)
    # its report holds every sweep it measured there: this one is the last
    report = merge_entries([path])["entries"][-1] if path.is_file() else {}
    return {"status": status, "seconds": round(wall, 1), "speedup": report.get("speedup"),
            "test_mse_ratio": report.get("test_mse_ratio"), "best": report.get("best")}


# name -> (the part, its weight in the time budget), in the order a short visit needs them
PARTS = {"attention": (attention, 3), "train": (train, 3), "mission": (mission, 2),
         "official": (official, 3), "stacked": (stacked, 3)}
STACKED_RUNS, STACKED_EPOCHS = 16, 10


def table(report: dict) -> str:
    """The visit as markdown: one line per measured row."""
    lines = [f"GPU visit on {report['device']} ({report['device_name']}), "
             f"{report['total_seconds']:.0f} s in all.", "",
             "| part | what | result |", "|---|---|---|"]
    for dtype, part in report["parts"]["attention"].items():
        for r in part["results"]:
            shown = f"{r['tokens_per_s']:,.0f} tok/s, {r['peak_mib']:,.0f} MiB" \
                if r["status"] == "ok" else r["status"]
            lines.append(f"| attention {dtype} | {r['case']} L={r['length']} | {shown} |")
        if part["status"] != "ok":
            lines.append(f"| attention {dtype} | the run | {part['status']} |")
    for dtype, part in report["parts"]["train"].items():
        for r in part["results"]:
            if r["case"] == "matmul":
                continue
            shown = f"{r['tokens_per_s']:,.0f} tok/s ({r['median_step_s'] * 1e3:.1f} ms a step)"\
                if r["status"] == "ok" else r["status"]
            lines.append(f"| train {dtype} | {r['size']} {r['case']} | {shown} |")
        if part["status"] != "ok":
            lines.append(f"| train {dtype} | the run | {part['status']} |")
    for r in report["parts"]["mission"]["runs"]:
        shown = f"{r['wall_seconds']:.1f} s, test MSE {r['test_mse']:.5f}" \
            if r["status"] == "ok" else r["status"]
        lines.append(f"| mission | seed {r['seed']} | {shown} |")
    for model, part in report["parts"]["official"].items():
        shown = part["status"]
        for s in part.get("speed", []):
            shown = (f"epoch {s['best']['seqforecast']['epoch_seconds']:.1f} s against the "
                     f"official {s['best']['official']['epoch_seconds']:.1f} s "
                     f"({s['speedup_epoch']:.2f}x)")
        lines.append(f"| official | {model} ETTh1-96 one epoch | {shown} |")
    part = report["parts"]["stacked"]
    shown = part["status"]
    if part.get("speedup"):
        best, ratio = part["best"], part["test_mse_ratio"]
        shown = (f"{best['stacked']['wall_s']:.1f} s stacked against "
                 f"{best['one_after_another']['wall_s']:.1f} s one after another "
                 f"({part['speedup']:.2f}x); test MSE ratio {ratio['ratio']:.4f} "
                 f"[{ratio['low']:.4f}, {ratio['high']:.4f}]")
    # a part that failed or ran over its budget left no report: its best is None
    runs = (part.get("best") or {}).get("stacked", {}).get("runs", {})
    lines.append(f"| stacked | {len(runs)} runs | {shown} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=480.0,
                        help="seconds for all parts together (a lent device's minutes)")
    parser.add_argument("--official-dir", type=Path,
                        help="holds the authors' checkouts: PatchTST/, iTransformer/")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--tiny", action="store_true", help="seconds-long parts (the suite)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/gpu_visit"),
                        help="the reports: at most 8 files, the most a device run sends back")
    parser.add_argument("--runs-dir", type=Path,
                        help="the runs' own folders (default: a temporary folder)")
    args = parser.parse_args(argv)
    # the parts run in the repository's folder: a path given relative to the caller's folder
    # must name the same place there
    for name in ("out", "runs_dir", "data_dir"):
        if getattr(args, name) is not None:
            setattr(args, name, getattr(args, name).resolve())
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA device; --tiny --device cpu runs the logic")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.runs_dir is None:  # the runs' folders go with the visit; the reports stay in --out
        with tempfile.TemporaryDirectory(prefix="gpu_visit_") as scratch:
            args.runs_dir = Path(scratch)
            return visit(args, argv)
    return visit(args, argv)


def visit(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Every part in turn, within the budget; the reports written to `args.out`."""
    import torch

    weights = sum(weight for _, weight in PARTS.values())
    start, parts = time.perf_counter(), {}
    for name, (part, weight) in PARTS.items():
        began = time.perf_counter()
        parts[name] = part(args, args.budget * weight / weights, args.out)
        print(f"{name}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    report = {"device": args.device, "device_name": torch.cuda.get_device_name()
              if args.device.startswith("cuda") else "the CPU", "torch": torch.__version__,
              "total_seconds": round(time.perf_counter() - start, 1), "parts": parts}
    markdown = table(report)
    print(markdown)
    (args.out / "visit.md").write_text(markdown + "\n")
    write_report(args.out / "visit.json", __file__, argv, **report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

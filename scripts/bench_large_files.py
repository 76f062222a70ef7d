r"""The field's large files on this machine: a training step's time and the peak memory of each
published model (iTransformer, PatchTST, TimeXer) at Electricity's shape (26,304 hourly rows x
321 channels) and Traffic's (17,544 x 862), with each file's published settings, and what a run
of each would take here.

    python scripts/bench_large_files.py                        # both files, horizons 96 and 720
    python scripts/bench_large_files.py --files traffic --models patchtst --horizons 96
    python scripts/bench_large_files.py --memory-gib 20 --steps 2
    python scripts/bench_large_files.py --merge a.json b.json --out benchmarks/large_files.json

The files are not here (no network), and a step's cost depends on a file's shape, not its
values: the benchmark writes a synthetic file of each one's shape (its rows, its channels, a
`date` column an hour apart, each channel a level, a daily and a weekly cycle and noise) under
the file's own name in a temporary data dir, so `dataset=electricity` and `dataset=traffic` run
by name, with their catalog borders and the published settings of each model, file and horizon
(`experiment=<model> dataset=<file> out_len=<h>`: seqforecast/published/).

Each case runs in a fresh process, one torch thread, its address space capped at
`--memory-gib` (so a case that needs more than this machine has fails alone, saying so, instead
of taking the machine down). It builds the run as `seqforecast.train` does (runs/probe.py),
takes `--warmup` training steps, times `--steps` more, and times the forward pass of one
evaluation batch (trainer.eval_batch_size windows, no gradient) on the validation windows. From
these: an epoch's seconds (its steps, then a validation pass of the validation windows), a run's
at most (every epoch of the published `trainer.epochs`, plus one pass over the test windows;
early stopping ends most runs sooner) and the resident set's peak above its size before the
run was built (training/memory.py). The report (--out, JSON, and a Markdown table beside it)
keeps the command and machine.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, run_worker, save_report, stamp  # noqa: E402

FILES = ("electricity", "traffic")
MODELS = ("itransformer", "patchtst", "timexer")
MACHINE_GIB = 24  # this machine's memory (the README's figure): what "fits here" is against
START = "2016-07-01 02:00:00"  # Electricity's first row; any hourly start serves the benchmark


def write_file(path: Path, rows: int, channels: int, seed: int = 0) -> Path:
    """A CSV of `rows` hourly rows: `date`, then `channels` columns named as the benchmark's
    files name theirs (0, 1, ..., the last OT)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    hours = np.arange(rows)[:, None]
    level = rng.uniform(1, 100, channels)
    values = level * (1 + 0.3 * np.sin(2 * np.pi * (hours / 24 + rng.uniform(0, 1, channels)))
                      + 0.1 * np.sin(2 * np.pi * hours / 168)) \
        + rng.normal(0, 1, (rows, channels)) * level * 0.05
    start = np.datetime64(START.replace(" ", "T"))
    dates = (start + np.arange(rows).astype("timedelta64[h]")).astype(str)
    names = [*map(str, range(channels - 1)), "OT"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write(",".join(["date", *names]) + "\n")
        for date, row in zip(dates, values, strict=True):
            out.write(date.replace("T", " ") + "," + ",".join(f"{v:.4f}" for v in row) + "\n")
    return path


def shaped_data_dir(root: Path, files: list[str], shapes: dict[str, tuple[int, int]]) -> Path:
    """A data dir holding a synthetic file of each of `files`' shape, under its catalog name."""
    from seqforecast.datasets import entry

    for name in files:
        rows, channels = shapes[name]
        path = root / entry(name).file
        if not path.is_file():
            started = time.perf_counter()
            write_file(path, rows, channels)
            print(f"wrote {path} ({rows} x {channels}, {time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    return root


def shape_overrides(rows: int, channels: int) -> list[str]:
    """A file of another shape than its catalog entry's (--shape, the tests): the entry's
    rows and channels, and the published borders (the first 70% of rows train, the last 20%
    test: TSLib's Dataset_Custom, as the catalog's)."""
    test = int(rows * 0.2)
    return [f"dataset.rows={rows}", f"dataset.channels={channels}",
            f"data.val_start={int(rows * 0.7)}", f"data.test_start={rows - test}",
            f"data.test_end={rows}"]


def case_overrides(spec: dict) -> list[str]:
    """The run's command line: the model's published settings for the file and horizon."""
    return [f"experiment={spec['model']}", f"dataset={spec['file']}",
            f"out_len={spec['horizon']}", f"data_dir={spec['data_dir']}",
            "trainer.num_threads=1", "log.figures=false", "trainer.compile=false",
            *spec.get("shape", []), *spec.get("set", [])]


def measure(spec: dict) -> dict:
    """One case, in this process: build, step, time, and the peak memory."""
    import torch

    from seqforecast.config import validate_config
    from seqforecast.config.compose import compose_config
    from seqforecast.runs.probe import build_loop
    from seqforecast.training.memory import PeakMemory
    from seqforecast.training.metrics import predict

    label = {k: spec[k] for k in ("file", "model", "horizon")}
    cfg = compose_config(case_overrides(spec))
    validate_config(cfg)
    memory = PeakMemory(torch.device("cpu"))
    memory.start()
    with tempfile.TemporaryDirectory(prefix="seqforecast-large-") as run_dir:
        loop = build_loop(cfg, Path(run_dir))
        total = loop.steps_per_epoch
        for batch in range(spec["warmup"]):
            loop.step(batch % total)
        started = time.perf_counter()
        for batch in range(spec["warmup"], spec["warmup"] + spec["steps"]):
            loop.step(batch % total)
        step_seconds = (time.perf_counter() - started) / spec["steps"]
        eval_batch = int(cfg.trainer.eval_batch_size)
        val, test = loop.data.val, loop.data.test
        started = time.perf_counter()
        # take() gathers just these windows; val.src would gather every one of them
        predict(loop.net, val.take(slice(0, eval_batch))[0], eval_batch)
        eval_seconds = time.perf_counter() - started
        parameters = sum(p.numel() for p in loop.net.parameters())
        peak = memory.report()
        calibration = calibrate(loop, cfg) if spec.get("calibration") else {}
    epochs = int(cfg.trainer.epochs)
    val_seconds = eval_seconds * math.ceil(len(val) / eval_batch)
    test_seconds = eval_seconds * math.ceil(len(test) / eval_batch)
    epoch_seconds = total * step_seconds + val_seconds
    return {**label, "status": "ok", "in_len": int(cfg.in_len),
            "batch_size": int(cfg.trainer.batch_size), "eval_batch_size": eval_batch,
            "d_model": int(cfg.d_model), "parameters": parameters,
            "train_windows": len(loop.data.train), "val_windows": len(val),
            "test_windows": len(test), "steps_per_epoch": total,
            "step_seconds": step_seconds, "eval_batch_seconds": eval_seconds,
            "epoch_seconds": epoch_seconds, "epochs": epochs,
            "run_hours_at_most": (epochs * epoch_seconds + test_seconds) / 3600,
            "peak_mib": peak["peak_rss_mib"] - (peak["rss_at_start_mib"] or 0.0),
            **calibration}


def calibrate(loop, cfg) -> dict:
    """The end of a run's conformal calibration (every forecaster calibrated on the validation
    windows' errors and scored on the test windows: Evaluator.interval_metrics), timed, and the
    resident set's peak while it runs above its size before."""
    import torch
    from omegaconf import OmegaConf

    from seqforecast.training.memory import PeakMemory

    intervals = OmegaConf.to_container(cfg.intervals, resolve=True)
    memory = PeakMemory(torch.device("cpu"))
    memory.start()
    started = time.perf_counter()
    try:
        loop.evaluator.interval_metrics(loop.net, intervals)
    except (MemoryError, RuntimeError) as err:  # the training step's row stands; this fails
        if not out_of_memory(err):
            raise
        return {"calibration_method": intervals["method"], "calibration_seconds": None,
                "calibration_peak_mib": None}
    seconds = time.perf_counter() - started
    peak = memory.report()
    return {"calibration_method": intervals["method"], "calibration_seconds": seconds,
            "calibration_peak_mib": peak["peak_rss_mib"] - (peak["rss_at_start_mib"] or 0.0)}


def out_of_memory(err: Exception) -> bool:
    """A MemoryError, or torch's allocator refusing (a RuntimeError that says so)."""
    return isinstance(err, MemoryError) or "alloc" in str(err).lower()


def worker(spec: dict) -> dict:
    """measure(spec) with the address space capped: a case that needs more memory than the
    cap fails alone, its row saying so."""
    if spec["capped"]:  # a process of its own (not --in-process: the caller's)
        cap = int(spec["memory_gib"] * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    label = {k: spec[k] for k in ("file", "model", "horizon")}
    try:
        return measure(spec)
    except (MemoryError, RuntimeError) as err:
        if out_of_memory(err):
            return {**label, "status": f"out of memory: needs more than {spec['memory_gib']:g} "
                                       f"GiB of address space"}
        raise


def hours(h: float) -> str:
    return f"{h:.2f}" if h < 10 else f"{h:.0f}"


def markdown(report: dict) -> str:
    machine = report.get("machine", {})
    lines = [
        f"One torch thread a case ({machine.get('cpu', '?')}, torch "
        f"{machine.get('torch', '?')}, {machine.get('torch_cpu_capability', '?')}); "
        + (f"address space capped at {report['memory_gib']:g} GiB; " if report.get("capped", True)
           else "in one process, uncapped; ")
        + f"{report['steps']} steps timed "
        f"after {report['warmup']}; a run at most: every epoch of the published "
        f"`trainer.epochs`, each with its validation pass, then the test pass.",
        "",
        "| file | model | horizon | input | batch | parameters | s a step | steps an epoch | "
        "s an epoch | epochs | core-hours a run, at most | peak MiB | fits in "
        f"{MACHINE_GIB} GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    calibrated = [r for r in report["cases"] if "calibration_seconds" in r]
    for r in report["cases"]:
        head = f"| {r['file']} | {r['model']} | {r['horizon']} |"
        if r["status"] != "ok":
            lines.append(f"{head} | | | | | | | | | {r['status']} |")
            continue
        fits = "yes" if r["peak_mib"] < MACHINE_GIB * 1024 else "no"
        lines.append(
            f"{head} {r['in_len']} | {r['batch_size']} | {r['parameters']:,} | "
            f"{r['step_seconds']:.3g} | {r['steps_per_epoch']} | {r['epoch_seconds']:.0f} | "
            f"{r['epochs']} | {hours(r['run_hours_at_most'])} | {r['peak_mib']:.0f} | {fits} |")
    if calibrated:
        lines += ["", "The end of a run: every forecaster's conformal calibration on the "
                  "validation windows and its scoring on the test windows (`--calibration`).", "",
                  "| file | model | horizon | intervals | seconds | peak MiB |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['file']} | {r['model']} | {r['horizon']} | {r['calibration_method']} | "
                  + (f"{r['calibration_seconds']:.0f} | {r['calibration_peak_mib']:.0f} |"
                     if r["calibration_seconds"] is not None else
                     f"out of memory: needs more than {report['memory_gib']:g} GiB of address "
                     f"space | |") for r in calibrated]
    return "\n".join(lines) + "\n"


def write(report: dict, out: Path) -> None:
    save_report(out, report)
    text = markdown(report)
    out.with_suffix(".md").write_text(text)
    print(text)


def merge(paths: list[Path], out: Path, argv) -> int:
    """One report of several: each case's latest measurement (by file, model, horizon)."""
    reports = [json.loads(p.read_text()) for p in paths]
    cases: dict = {}
    for report in reports:
        for case in report["cases"]:
            cases[(case["file"], case["model"], case["horizon"])] = {
                **case, "measured": {"command": report["command"], "machine": report["machine"]}}
    first = reports[-1]
    write({**stamp(__file__, argv),
           **{k: first.get(k) for k in ("memory_gib", "capped", "steps", "warmup")},
           "merged_from": [str(p) for p in paths], "cases": sorted(
               cases.values(), key=lambda c: (FILES.index(c["file"]) if c["file"] in FILES else 9,
                                              MODELS.index(c["model"]), c["horizon"]))}, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", nargs="+", default=list(FILES))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--horizons", nargs="+", type=int, default=[96, 720])
    parser.add_argument("--steps", type=int, default=2, help="training steps timed")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--memory-gib", type=float, default=20.0,
                        help="each case's address space cap (this machine has 24 GiB)")
    parser.add_argument("--shape", nargs="+", default=[], metavar="FILE=ROWSxCHANNELS",
                        help="another shape for a file (the tests: a small one)")
    parser.add_argument("--set", nargs="*", default=[], help="further overrides for every case")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the synthetic files are written (default: a temporary dir)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds a case may take")
    parser.add_argument("--calibration", action="store_true",
                        help="also time the end of a run's conformal calibration, and its peak")
    parser.add_argument("--in-process", action="store_true",
                        help="each case in this process, uncapped (the tests)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "large_files.json")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.merge:
        return merge(args.merge, args.out, argv)
    from seqforecast.datasets import entry

    shapes = {name: (entry(name).rows, entry(name).channels) for name in args.files}
    catalog = dict(shapes)
    for given in args.shape:
        name, _, shape = given.partition("=")
        rows, _, channels = shape.partition("x")
        if name not in shapes or not (rows.isdigit() and channels.isdigit()):
            parser.error(f"--shape {given!r}: give FILE=ROWSxCHANNELS for one of "
                         f"{', '.join(shapes)}, e.g. traffic=2000x8")
        shapes[name] = (int(rows), int(channels))
    with tempfile.TemporaryDirectory(prefix="seqforecast-files-") as tmp:
        data_dir = shaped_data_dir(Path(args.data_dir or tmp), args.files, shapes)
        cases = []
        for file in args.files:
            for model in args.models:
                for horizon in args.horizons:
                    spec = {"file": file, "model": model, "horizon": horizon,
                            "data_dir": str(data_dir), "steps": args.steps,
                            "warmup": args.warmup, "memory_gib": args.memory_gib,
                            "capped": not args.in_process, "set": args.set,
                            "calibration": args.calibration,
                            "shape": [] if shapes[file] == catalog[file] else
                            shape_overrides(*shapes[file])}
                    found = run_worker(__file__, spec, args.timeout,
                                       {k: spec[k] for k in ("file", "model", "horizon")},
                                       in_process=args.in_process)
                    cases.append(found)
                    print(f"  {file} {model} {horizon}: " + (
                        f"{found['step_seconds']:.3g} s a step, peak {found['peak_mib']:.0f} MiB"
                        if found["status"] == "ok" else found["status"]), flush=True)
    write({**stamp(__file__, argv), "memory_gib": args.memory_gib, "capped": not args.in_process,
           "steps": args.steps,
           "warmup": args.warmup, "shapes": {k: list(v) for k, v in shapes.items()},
           "cases": cases}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

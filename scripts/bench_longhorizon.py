r"""What the long-horizon study cannot do (`python -m seqforecast.study longhorizon`: ETTh1 and
ETTh2 at input 336, horizons 96-720, the project's recipe and the published PatchTST over seeds,
beside the linear fits and PatchTST's Table 3; docs/benchmarks/longhorizon.md): an official
PatchTST checkpoint scored on the same windows, one epoch beside the official code, and what a
shorter patience would have kept.

    python scripts/bench_longhorizon.py --official ETTh1_336.pth --dataset etth1 --horizon 336
    python scripts/bench_longhorizon.py --table     # the official rows beside the study's, again
    python scripts/bench_longhorizon.py --speed PatchTST/PatchTST_supervised --dataset etth1 \
        --horizon 96 --rounds 3
    python scripts/bench_longhorizon.py --patience outputs/<a run made with log.test_every=1>

`--official PTH` scores the authors' checkpoint (`checkpoints/<setting>/checkpoint.pth` of their
`PatchTST_supervised` code, trained with its published ETTh script) as `experiment=patchtst`
loads it (`model.official_weights`, epoch 0, no training) on every test window and on the
windows the published code scores (its test loader drops the last incomplete batch of 128), and
adds it to benchmarks/longhorizon_official.json, whose table shows it beside the study's
`patchtst vanilla` row of the cell (`--study`, benchmarks/longhorizon.json) and NLinear.

`--speed DIR` times one training epoch of `experiment=patchtst` beside one of the official code
(DIR: the authors' `PatchTST_supervised` folder, with pandas and scikit-learn installed) at the
cell: the same batches (128 windows of time, every channel, the last incomplete batch dropped),
one torch thread each, each epoch in its own process, the two alternating for `--rounds` rounds.
Reported per epoch: the training steps (the official code's own "cost time": its loader and
steps) and the whole epoch as each runs it (seqforecast: steps + a validation pass; the official
loop: steps + validation and test passes).

`--patience RUN_DIR...` reads each run's validation error per epoch (its last.pt) and, where the
run scored its test set every epoch (`log.test_every=1`, from its TensorBoard events), the test
MSE of each epoch: the epoch plain early stopping with a shorter patience (3, 5, 10) would have
kept, and its test MSE over the run's own (benchmarks/patchtst_patience.json).

`--official` and `--patience` add their measurements to their `--out` report (`add_entry`: one
entry each, with the command and machine that measured it), so reports made in several sessions
stay one; a run read again by `--patience` replaces its earlier entry. `--speed` measures its
rounds as one report and writes it whole (`write_report`), in place of the last one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (  # noqa: E402
    REPO,
    add_entry,
    merge_entries,
    save_report,
    timed_official,
    train_run,
    write_report,
)

from seqforecast.config.saved import saved_config  # noqa: E402
from seqforecast.datasets import entry as dataset_entry  # noqa: E402
from seqforecast.studies.references import paper_count  # noqa: E402

IN_LEN = 336  # the protocol's input
PAPER_BATCH = 128  # the published code's test batch, whose last incomplete one it drops
SHORTER_PATIENCE = (10, 5, 3)
STUDY = REPO / "benchmarks" / "longhorizon.json"


def protocol(dataset: str, horizon: int, args) -> list[str]:
    """The overrides of the study's `patchtst` job of the cell (studies/longhorizon.yaml), and
    `--set`'s."""
    return ["experiment=patchtst", f"dataset={dataset}", f"out_len={horizon}",
            f"in_len={args.in_len}", f"data_dir={args.data_dir}", "log.figures=false",
            "trainer.num_threads=1", *args.set]


# ---------------------------------------------------------------- an official checkpoint scored


def official(args) -> dict:
    """The checkpoint as `experiment=patchtst` loads it, scored at epoch 0 on both counts."""
    cell = f"{args.dataset}-{args.horizon}"
    run_dir = args.runs_dir / "official" / cell / Path(args.official).stem
    overrides = [*protocol(args.dataset, args.horizon, args), "trainer.epochs=0",
                 "trainer.validate_initial=true",
                 f"model.official_weights={Path(args.official).resolve()}"]
    metrics, last, _ = train_run(overrides, run_dir)
    if metrics is None:
        raise SystemExit(f"scoring {args.official} failed: {last}")
    test = metrics["test"]
    paper = paper_count(run_dir, args.paper_batch)
    found = {"cell": cell, "weights": str(args.official), "run_dir": str(run_dir),
             "mse": test["model"]["mse_scaled"], "mae": test["model"]["mae_scaled"],
             "paper_mse": paper["mse"], "paper_mae": paper["mae"],
             "windows_per_channel": paper["windows_per_channel"]}
    add_entry(args.out, __file__, args.argv, cell, **found)
    print(f"{cell}: test MSE {found['mse']:.4f} every window, {found['paper_mse']:.4f} as the "
          f"published code counts")
    return found


def study_rows(path: Path) -> dict:
    """cell -> the study's `patchtst vanilla` row and the cell's NLinear (both counts)."""
    if not path.is_file():
        return {}
    found = {}
    for cell in json.loads(path.read_text())["cells"]:
        for row in cell["rows"]:
            if cell["model"] == "patchtst" and row["value"] == "vanilla":
                nlinear = (cell.get("linear") or {}).get("nlinear", {})
                paper = (cell.get("linear_paper") or {}).get("nlinear", {})
                found[cell["cell"]] = {**row, "nlinear": nlinear.get("mse"),
                                       "nlinear_paper": paper.get("mse")}
    return found


def _pair(a: float | None, b: float | None, digits: int = 4) -> str:
    return " / ".join("-" if x is None else f"{x:.{digits}f}" for x in (a, b))


def official_markdown(entries: list[dict], study: dict) -> str:
    """Each official checkpoint (its latest scoring per cell) beside the study's row."""
    latest = {e["cell"]: e for e in entries}
    lines = ["| cell | seqforecast `experiment=patchtst` (every / papers' count) | official "
             "checkpoint (every / papers') | seqforecast ÷ official | NLinear (every / papers') |",
             "|---|---|---|---|---|"]
    for cell, e in sorted(latest.items()):
        row = study.get(cell)
        ours = (f"{_pair(row['mse'], row.get('paper_mse'))} (n={len(row['seeds'])})"
                if row else "not in the study")
        ratio = _pair(row["mse"] / e["mse"], row["paper_mse"] / e["paper_mse"], 3) \
            if row and row.get("paper_mse") else "-"
        lines.append(f"| {cell} | {ours} | {_pair(e['mse'], e['paper_mse'])} | {ratio} | "
                     f"{_pair(row['nlinear'], row['nlinear_paper']) if row else '-'} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- speed beside the official code

# Runs inside the official code's folder: its own training loop for one epoch, timed.
OFFICIAL_EPOCH = timed_official("exp.exp_main", "Exp_Main", "run_longExp.py")


def official_args(path: Path, in_len: int, horizon: int, channels: int, workdir: Path) -> list:
    """The published ETTh script's arguments (scripts/PatchTST/etth1.sh), one epoch, on CPU."""
    name = path.stem
    return ["--random_seed", "2021", "--is_training", "1", "--root_path", f"{path.parent}/",
            "--data_path", path.name, "--model_id", f"{name}_{in_len}_{horizon}",
            "--model", "PatchTST", "--data", name if name in ("ETTh1", "ETTh2") else "custom",
            "--features", "M", "--seq_len", str(in_len), "--pred_len", str(horizon),
            "--enc_in", str(channels), "--e_layers", "3", "--n_heads", "4", "--d_model", "16",
            "--d_ff", "128", "--dropout", "0.3", "--fc_dropout", "0.3", "--head_dropout", "0",
            "--patch_len", "16", "--stride", "8", "--des", "speed", "--train_epochs", "1",
            "--itr", "1", "--batch_size", "128", "--learning_rate", "0.0001",
            "--num_workers", "0", "--use_gpu", "False",
            "--checkpoints", str(workdir / "official_checkpoints")]


def official_epoch(code: Path, path: Path, in_len: int, horizon: int, channels: int,
                   workdir: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", OFFICIAL_EPOCH,
         *official_args(path, in_len, horizon, channels, workdir)],
        cwd=code, env=env, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the official code failed: {(proc.stderr or proc.stdout)[-800:]}")
    cost = re.search(r"Epoch: 1 cost time: ([0-9.]+)", proc.stdout)
    timed = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"train_seconds": float(cost.group(1)), "epoch_seconds": timed["train_call_seconds"],
            "val_test_seconds": timed["vali_seconds"]}


def seqforecast_epoch(args, run_dir: Path) -> dict:
    metrics, last, _ = train_run([*protocol(args.dataset, args.horizon, args), "epochs=1"],
                                 run_dir)
    if metrics is None:
        raise SystemExit(f"seqforecast failed: {last}")
    loop = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["loop"]
    epoch = loop["history"][-1]
    return {"train_seconds": epoch["train_seconds"],
            "epoch_seconds": epoch["train_seconds"] + epoch["val_seconds"],
            "steps": loop["step"]}


def speed(args) -> dict:
    """One epoch each, alternating, `args.rounds` rounds: seconds per epoch, both ways."""
    found = dataset_entry(args.dataset)
    path = Path(args.data_dir, found.file).resolve()
    workdir = args.runs_dir / "speed"
    rounds = []
    for i in range(args.rounds):
        ours = seqforecast_epoch(args, workdir / f"seqforecast{i}")
        theirs = official_epoch(args.speed.resolve(), path, args.in_len, args.horizon,
                                found.channels, workdir)
        rounds.append({"seqforecast": ours, "official": theirs})
        print(f"  round {i + 1}: seqforecast {ours['train_seconds']:.1f} s of steps, official "
              f"{theirs['train_seconds']:.1f} s", flush=True)
    best = {side: {key: min(r[side][key] for r in rounds) for key in ("train_seconds",
                                                                         "epoch_seconds")}
            for side in ("seqforecast", "official")}
    return {
        "file": path.stem, "horizon": args.horizon, "threads": 1, "rounds": rounds,
        "best": best, "steps": rounds[0]["seqforecast"]["steps"],
        "speedup_train": best["official"]["train_seconds"] / best["seqforecast"]["train_seconds"],
        "speedup_epoch": best["official"]["epoch_seconds"] / best["seqforecast"]["epoch_seconds"],
    }


def speed_markdown(s: dict) -> str:
    b = s["best"]
    return "\n".join([
        f"### One epoch, {s['file']} at horizon {s['horizon']}: seqforecast beside the official "
        f"code",
        "",
        f"{s['steps']} steps of 128 windows of time (every channel), 1 torch thread each, "
        f"alternating, best of {len(s['rounds'])} rounds (seconds).",
        "",
        "| | training steps | whole epoch as each runs it |",
        "|---|---|---|",
        f"| official PatchTST code | {b['official']['train_seconds']:.1f} | "
        f"{b['official']['epoch_seconds']:.1f} (steps + validation and test passes) |",
        f"| seqforecast experiment=patchtst | {b['seqforecast']['train_seconds']:.1f} | "
        f"{b['seqforecast']['epoch_seconds']:.1f} (steps + validation pass) |",
        f"| official ÷ seqforecast | {s['speedup_train']:.2f}x | {s['speedup_epoch']:.2f}x |",
        "",
    ])


# ---------------------------------------------------------------- what a shorter patience keeps


def val_curve(run_dir: Path) -> list[list]:
    """[epoch, the validation error selection read] of each epoch scored, from last.pt."""
    last = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    return [[e["epoch"], e.get("val_mse_scaled", e["val_mse"])] for e in last["loop"]["history"]]


def test_curve(run_dir: Path) -> list[list]:
    """[epoch, test MSE (data units)] of each epoch whose test set the run scored for
    TensorBoard (`log.test_every`), read from its events file ([] where it scored none)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    last = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    epoch_at = {e["step"]: e["epoch"] for e in last["loop"]["history"]}
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    if "test/mse" not in events.Tags()["scalars"]:
        return []
    return [[epoch_at[e.step], e.value] for e in events.Scalars("test/mse") if e.step in epoch_at]


def kept_with_patience(curve: list[list], patience: int) -> int:
    """The epoch plain early stopping with `patience` keeps on an [epoch, value] curve."""
    best, kept, since = math.inf, 0, 0
    for epoch, value in curve:
        if value < best:
            best, kept, since = value, epoch, 0
        else:
            since += 1
            if since >= patience:
                break
    return kept


def patience_entry(run_dir: Path, batch: int = PAPER_BATCH) -> dict:
    """A run's own kept epoch and, per shorter patience, the epoch it keeps and that epoch's
    test MSE over the kept one's (None without a test curve holding both)."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    val, test = val_curve(run_dir), dict(map(tuple, test_curve(run_dir)))
    best = metrics["run"]["best_epoch"]
    kept = {}
    for p in SHORTER_PATIENCE:
        epoch = kept_with_patience(val, p)
        ratio = test[epoch] / test[best] if epoch in test and best in test else None
        kept[str(p)] = {"epoch": epoch, "test_ratio": ratio}
    return {"run_dir": str(run_dir), "best_epoch": best,
            "epochs_run": metrics["run"]["epochs_run"],
            "patience": saved_config(run_dir).trainer.patience,
            "mse": metrics["test"]["model"].get("mse_scaled", metrics["test"]["model"]["mse"]),
            "paper_mse": paper_count(run_dir, batch)["mse"],
            "val_curve": val, "test_curve": [[e, v] for e, v in sorted(test.items())],
            "kept": kept}


def add_patience_entry(out: Path, argv: list[str] | None, run_dir: Path, batch: int) -> None:
    """Add a run's patience entry to `out`, named by its last three folders (a study run's
    model, cell and value-seed), in place of an entry read off the same run dir before."""
    if out.is_file():
        report = merge_entries([out])
        report["entries"] = [e for e in report["entries"] if e.get("run_dir") != str(run_dir)]
        save_report(out, report)
    add_entry(out, __file__, argv, "/".join(run_dir.parts[-3:]), **patience_entry(run_dir, batch))


def patience_markdown(entries: list[dict]) -> str:
    """One row a run: its own patience and kept epoch (its test MSE, both counts), then the
    epoch each shorter patience keeps and, where the run scored every epoch's test set, that
    epoch's test MSE over the kept one's."""
    lines = ["| run | its patience: epoch kept (test MSE, every window / papers' count) | " +
             " | ".join(f"patience {p}: epoch (test MSE ÷ the run's)" for p in SHORTER_PATIENCE)
             + " |", "|---" * (2 + len(SHORTER_PATIENCE)) + "|"]
    for e in entries:
        kept = [f"{k['epoch']}" + ("" if k["test_ratio"] is None else f" ({k['test_ratio']:.4f})")
                for k in (e["kept"][str(p)] for p in SHORTER_PATIENCE)]
        lines.append(f"| {e['name']} | {e['patience']}: {e['best_epoch']} of {e['epochs_run']} "
                     f"({e['mse']:.4f} / {e['paper_mse']:.4f}) | {' | '.join(kept)} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--official", type=Path, metavar="PTH",
                      help="score an official PatchTST checkpoint at --dataset, --horizon")
    mode.add_argument("--table", action="store_true", help="the official rows' table, again")
    mode.add_argument("--speed", type=Path, metavar="DIR",
                      help="time one epoch beside the official code in DIR "
                           "(its PatchTST_supervised folder)")
    mode.add_argument("--patience", nargs="+", type=Path, metavar="RUN_DIR",
                      help="what a shorter patience would have kept, read off these runs")
    parser.add_argument("--dataset", default="etth1", choices=["etth1", "etth2"])
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--in-len", type=int, default=IN_LEN)
    parser.add_argument("--set", nargs="*", default=[], help="further overrides for the run")
    parser.add_argument("--paper-batch", type=int, default=PAPER_BATCH,
                        help="the published code's test batch (the windows it scores)")
    parser.add_argument("--rounds", type=int, default=2, help="--speed: epochs of each side")
    parser.add_argument("--data-dir", default=str(REPO / "data"), help="where the files are")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "outputs" / "bench_longhorizon")
    parser.add_argument("--study", type=Path, default=STUDY,
                        help="the study's report the official rows stand beside")
    parser.add_argument("--out", type=Path, default=None,
                        help="the report (default: benchmarks/longhorizon_official.json, "
                             "patchtst_speed.json or patchtst_patience.json)")
    args = parser.parse_args(argv)
    args.argv = argv
    default = ("longhorizon_official" if args.official or args.table else
               "patchtst_speed" if args.speed else "patchtst_patience")
    args.out = args.out or REPO / "benchmarks" / f"{default}.json"
    if args.speed:
        found = speed(args)
        write_report(args.out, __file__, argv, speed=found)
        text = speed_markdown(found)
    elif args.patience:
        for run_dir in args.patience:
            if not (run_dir / "metrics.json").is_file():
                parser.error(f"{run_dir}: not a completed run dir (no metrics.json)")
        for run_dir in args.patience:
            add_patience_entry(args.out, argv, run_dir, args.paper_batch)
        text = patience_markdown(merge_entries([args.out])["entries"])
    else:
        if args.official:
            if not args.official.is_file():
                parser.error(f"--official {args.official}: no such file")
            official(args)
        if not args.out.is_file():
            parser.error(f"{args.out}: no official rows yet (give --official PTH)")
        text = official_markdown(merge_entries([args.out])["entries"], study_rows(args.study))
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

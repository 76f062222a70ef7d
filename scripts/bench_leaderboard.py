r"""The authors' code beside the leaderboard: the official iTransformer and TimeXer run on this
machine at their published settings, each cell's test MSE beside the leaderboard study's own
(`python -m seqforecast.study leaderboard` and `leaderboard_epf`: the published models over
seeds, the best linear fit and the published rows; docs/benchmarks/leaderboard.md), and one
training epoch of each timed, alternating. What a study cannot do: run code that is not this
package's.

    python scripts/bench_leaderboard.py --official iTransformer --datasets etth1 ettm1 weather
    python scripts/bench_leaderboard.py --official TimeXer --models timexer --datasets np \
        --horizons 24
    python scripts/bench_leaderboard.py --speed iTransformer --datasets etth1 --rounds 3
    python scripts/bench_leaderboard.py --speed TimeXer --models timexer --datasets etth1
    python scripts/bench_leaderboard.py --merge a.json b.json \
        --out benchmarks/leaderboard_official.json
    python scripts/bench_leaderboard.py --table      # the table again, from the reports

`--official DIR` runs the authors' code of the one model `--models` names (iTransformer, the
default: DIR a checkout of thuml/iTransformer; TimeXer: of thuml/TimeXer; with pandas,
scikit-learn, tqdm, matplotlib and einops, and for TimeXer's imports reformer_pytorch, sktime
and patool, in `--official-python`) at its published settings and the seed its run.py fixes
(2023, 2021; `--official-seeds` sets others, to measure its own noise), every test window
scored, and keeps its test MSE and MAE. An EPF cell's horizon is 24 (`--horizons 24`).
`--speed DIR` times one training epoch of each, the same batches of 32 windows of time, one
torch thread each, alternating for `--rounds` rounds: the training steps, and the whole epoch as
each runs it (seqforecast: steps and a validation pass; the official loop: steps, then a
validation pass and a pass over the test windows one at a time).

The table puts each official run beside the study's row of the same cell and model (the study
reports `--study`, by default benchmarks/leaderboard.json and leaderboard_epf.json) and the
published row. One report for it, benchmarks/leaderboard_official.json and .md: a run merges
into its `--out` where that exists, as `--merge` joins reports made elsewhere. Each case's
latest measurement is in the table (an official run by cell, model and seed; an epoch's speed by
model and variant), the earlier ones that differ are kept in `repeats` (named under the
tables), every measurement keeps the command and machine that measured it (`report`), and every
merged report's are in `merged_from`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from itertools import product
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (  # noqa: E402
    REPO,
    keep_latest,
    measured_in,
    same_fields,
    source,
    stamp,
    timed_official,
    train_run,
    write_report,
)

from seqforecast.datasets import entry  # noqa: E402
from seqforecast.options import ConfigError  # noqa: E402
from seqforecast.published import published_overrides  # noqa: E402
from seqforecast.published.results import TABLES  # noqa: E402

IN_LEN = 96  # the leaderboard's input (the EPF markets: their published 168)
MODELS = ("itransformer", "patchtst", "timexer")
# The authors' code that --official and --speed run: model -> its name, its experiment module
# (each repository's run.py runs Exp_Long_Term_Forecast from it) and the seed its run.py fixes.
OFFICIAL_CODE = {
    "itransformer": ("iTransformer", "experiments.exp_long_term_forecasting", 2023),
    "timexer": ("TimeXer", "exp.exp_long_term_forecasting", 2021),
}
OFFICIAL_SEED = OFFICIAL_CODE["itransformer"][2]  # reports of one official run: iTransformer's
STUDIES = (REPO / "benchmarks" / "leaderboard.json", REPO / "benchmarks" / "leaderboard_epf.json")


def in_len(model: str, dataset: str, horizon: int) -> int:
    """The cell's input: the protocol's 96, or the published setting's own where the leaderboard
    keeps it (the EPF markets: 168)."""
    if dataset in EPF:
        sizes = dict(o.partition("=")[::2] for o in published_overrides(model, dataset, horizon))
        return int(sizes.get("in_len", IN_LEN))
    return IN_LEN


def overrides(model: str, dataset: str, horizon: int, args) -> list[str]:
    """seqforecast's run of the cell, as the leaderboard study's job of it: the preset, the
    dataset, the published sizes, the input."""
    return [f"experiment={model}", f"dataset={dataset}",
            *published_overrides(model, dataset, horizon),
            f"in_len={in_len(model, dataset, horizon)}", f"out_len={horizon}",
            f"data_dir={args.data_dir}"]



# ---------------------------------------------------------------- the official code

# The EPF markets: features MS (the price from its own past and the exogenous series'), input
# 168, horizon 24 (TimeXer's scripts/forecast_exogenous/EPF/).
EPF = ("np", "pjm", "be", "fr", "de")
# What a model's run.py defaults to where the published script gives no value.
RUN_DEFAULTS = {"itransformer": {"d_model": "256", "ffn.d_ff": "256", "batch_size": "32",
                                 "model.encoder_layers": "2"},
                "timexer": {"d_model": "256", "ffn.d_ff": "2048", "batch_size": "4",
                            "model.encoder_layers": "1", "embedding.patch_len": "16"}}


def official_args(model: str, dataset: str, horizon: int, epochs: int | None, workdir: Path,
                  args) -> list:
    """The published script's arguments for (dataset, horizon), on CPU."""
    e = entry(dataset)
    sizes = {**RUN_DEFAULTS[model], **{k: v for k, _, v in (
        o.partition("=") for o in published_overrides(model, dataset, horizon))}}
    kind = {"etth1": "ETTh1", "etth2": "ETTh2", "ettm1": "ETTm1", "ettm2": "ETTm2"}
    path, steps = (Path(args.data_dir) / e.file).resolve(), in_len(model, dataset, horizon)
    ms = dataset in EPF  # one target (OT, the file's last column), the rest exogenous
    found = ["--is_training", "1", "--root_path", f"{path.parent}/", "--data_path", path.name,
             "--model_id", f"{dataset}_{steps}_{horizon}", "--model", OFFICIAL_CODE[model][0],
             "--data", kind.get(dataset, "custom"), "--features", "MS" if ms else "M",
             "--seq_len", str(steps), "--pred_len", str(horizon), "--enc_in",
             str(e.channels), "--dec_in", str(e.channels), "--c_out",
             "1" if ms else str(e.channels),
             "--e_layers", sizes["model.encoder_layers"], "--d_model", sizes["d_model"],
             "--d_ff", sizes["ffn.d_ff"], "--batch_size", sizes["batch_size"],
             "--learning_rate", sizes.get("lr", "0.0001"),
             "--des", "Exp", "--itr", "1", "--num_workers", "0",
             "--checkpoints", str(workdir / "official_checkpoints")]
    if model == "timexer":  # its run.py serves several tasks; iTransformer's knows no such flags
        found += ["--task_name", "long_term_forecast", "--patch_len",
                  sizes["embedding.patch_len"]]
    epochs = epochs or sizes.get("epochs")  # else run.py's own 10
    return found + (["--train_epochs", str(epochs)] if epochs else [])


def official_run(model: str, code: Path, dataset: str, horizon: int, epochs: int | None,
                 workdir: Path, args, seed: int | None = None) -> dict:
    """The official code's run of the cell (its own run.py, timed), at `seed` (None: the one
    its run.py fixes)."""
    _, module, fixed = OFFICIAL_CODE[model]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               OFFICIAL_SEED=str(fixed if seed is None else seed))
    workdir.mkdir(parents=True, exist_ok=True)
    # The output goes to a log as it comes (an EPF run takes hours: `tail -f` follows it).
    log = workdir / f"{model}_{dataset}_{horizon}_seed{env['OFFICIAL_SEED']}.log"
    # The state at each epoch's end: the same command run again after a stop goes on from
    # there (timed_official, resumable), its log appended to the stopped run's.
    state = log.with_suffix(".resume.pt")
    env["OFFICIAL_RESUME_STATE"] = str(state)
    with log.open("a" if state.is_file() else "w") as sink:
        proc = subprocess.run(
            [args.official_python, "-u", "-c",
             timed_official(module, "Exp_Long_Term_Forecast", "run.py", resumable=True),
             *official_args(model, dataset, horizon, epochs, workdir, args)],
            cwd=code, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    out = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"the official code failed ({log}): {out[-800:]}")
    costs = epoch_costs(out)
    scores = re.findall(r"mse:([0-9.]+), mae:([0-9.]+)", out)
    timed = json.loads([line for line in out.splitlines() if line.startswith('{"vali')][-1])
    return {"epochs": len(costs), "train_seconds": costs, "mse": float(scores[-1][0]),
            "mae": float(scores[-1][1]), "vali_seconds": timed["vali_seconds"],
            "train_call_seconds": timed["train_call_seconds"]}


def epoch_costs(log: str) -> list[float]:
    """Each epoch's "cost time" in an official run's log, appended to across stops: a stop can
    fall after an epoch's line and before its state was saved, so the epochs a resume replays
    from its state replace what the log holds beyond them (else the epoch runs twice)."""
    costs: list[float] = []
    for line in log.splitlines():
        if (cost := re.search(r"cost time: ([0-9.]+)", line)):
            costs.append(float(cost.group(1)))
        elif (resumed := re.match(r"\[resumed after epoch (\d+) ", line)):
            del costs[int(resumed.group(1)):]
    return costs


def official(args, model: str) -> dict:
    """(dataset-horizon) -> {model: {seed: the official run's test MSE, MAE, epochs,
    seconds}}."""
    found: dict = {}
    seeds = args.official_seeds or [OFFICIAL_CODE[model][2]]
    for dataset in args.datasets:
        for horizon in args.horizons:
            for seed in seeds:
                start = time.perf_counter()
                r = official_run(model, args.official.resolve(), dataset, horizon, None,
                                 args.runs_dir / "official", args, seed)
                r["wall_seconds"] = round(time.perf_counter() - start, 1)
                found.setdefault(f"{dataset}-{horizon}", {}).setdefault(model, {})[
                    str(seed)] = r
                print(f"  official {OFFICIAL_CODE[model][0]} {dataset}-{horizon} seed {seed}: "
                      f"test MSE {r['mse']:.4f} ({r['epochs']} epochs, "
                      f"{r['wall_seconds']:.0f} s)", flush=True)
    return found


def official_models(found: dict) -> dict:
    """A cell's official runs as {model: {seed: run}}; earlier reports held iTransformer's
    alone, as {seed: run} or (one run) the run itself."""
    if "mse" in found:
        return {"itransformer": {str(OFFICIAL_SEED): found}}
    if not found or any(key in OFFICIAL_CODE for key in found):
        return found
    return {"itransformer": found}


def speed(args, model: str) -> dict:
    """One epoch each, alternating: the training steps and the whole epoch, seconds."""
    dataset, horizon = args.datasets[0], args.horizons[0]
    workdir, rounds = args.runs_dir / "speed", []
    for i in range(args.rounds):
        run_dir = workdir / f"seqforecast{i}"
        metrics, last, _ = train_run([*overrides(model, dataset, horizon, args),
                                      "epochs=1", "trainer.num_threads=1",
                                      "log.figures=false", *args.set], run_dir)
        if metrics is None:
            raise SystemExit(f"seqforecast failed: {last}")
        loop = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["loop"]
        epoch = loop["history"][-1]
        ours = {"train_seconds": epoch["train_seconds"], "steps": loop["step"],
                "epoch_seconds": epoch["train_seconds"] + epoch["val_seconds"]}
        theirs = official_run(model, args.speed.resolve(), dataset, horizon, 1, workdir, args)
        theirs = {"train_seconds": theirs["train_seconds"][0],  # its own "cost time"
                  "epoch_seconds": theirs["train_call_seconds"]}  # + its validation passes
        rounds.append({"seqforecast": ours, "official": theirs})
        print(f"  round {i + 1}: steps {ours['train_seconds']:.1f} s (official "
              f"{theirs['train_seconds']:.1f} s); whole epoch {ours['epoch_seconds']:.1f} s "
              f"(official {theirs['epoch_seconds']:.1f} s)", flush=True)
    best = {side: {k: min(r[side][k] for r in rounds) for k in ("train_seconds",
                                                                 "epoch_seconds")}
            for side in ("seqforecast", "official")}
    ratio = {k: best["official"][k] / best["seqforecast"][k] for k in best["official"]}
    batch = {**RUN_DEFAULTS[model], **dict(o.partition("=")[::2] for o in overrides(
        model, dataset, horizon, args))}["batch_size"]
    return {"model": model, "dataset": dataset, "horizon": horizon, "threads": 1,
            "rounds": rounds, "variant": args.variant, "set": args.set, "batch": int(batch),
            "best": best, "steps": rounds[0]["seqforecast"]["steps"],
            "speedup_train": ratio["train_seconds"], "speedup_epoch": ratio["epoch_seconds"]}


# ---------------------------------------------------------------- the report


NAMES = {"itransformer": "iTransformer", "patchtst": "PatchTST", "timexer": "TimeXer"}


def _official(found: dict) -> str:
    """The official runs' test MSE: one seed's, or the mean ± std of several."""
    mse = {int(seed): r["mse"] for seed, r in found.items()}
    if len(mse) == 1:
        (seed, value), = mse.items()
        return f"{value:.4f} (seed {seed})"
    return (f"{statistics.mean(mse.values()):.4f} ± {statistics.stdev(mse.values()):.4f} "
            f"(seeds {', '.join(map(str, sorted(mse)))})")


def study_rows(paths: list[Path]) -> dict:
    """(cell, model) -> the study's row (its mean test MSE over seeds, the seeds, its ratio to
    the cell's best linear fit) and the cell's published MSE, from the study reports."""
    found = {}
    for path in paths:
        if not Path(path).is_file():
            continue
        report = json.loads(Path(path).read_text())
        for cell in report["cells"]:
            for row in cell["rows"]:
                found[(cell["cell"], cell["model"])] = {
                    "mse": row["mse"], "mse_std": row["mse_std"], "seeds": row["seeds"],
                    "vs_linear": row.get("vs_linear"),
                    "published": (cell.get("published") or {}).get(cell["model"])}
    return found


def _cell_order(key: str) -> tuple:
    """The table's order of cells: the published tables' order, by horizon."""
    known = [cell for table in TABLES.values() for cell in table.rows]
    return known.index(key) if key in known else len(known), key


def markdown(report: dict, studies: dict) -> str:
    out = ["| cell | model | official code here | seqforecast here (the study) | ÷ official | "
           "published MSE |", "|---|---|---|---|---|---|"]
    for key in sorted(report.get("official", {}), key=_cell_order):
        for model, seeds in sorted(official_models(report["official"][key]).items()):
            ours = studies.get((key, model))
            theirs = statistics.mean(r["mse"] for r in seeds.values())
            shown = (f"{ours['mse']:.4f} ± {ours['mse_std']:.4f} ({len(ours['seeds'])} seeds)"
                     if ours else "not in the study reports")
            pub = ours["published"] if ours else None
            ratio = f"{ours['mse'] / theirs:.3f}" if ours else ""
            out.append(f"| {key} | {NAMES[model]} | {_official(seeds)} | {shown} | {ratio} | "
                       f"{f'{pub[0]:.3f}' if pub else ''} |")
    repeats = report.get("repeats") or []
    again = [f"{r['cell']} official {OFFICIAL_CODE[r['model']][0]} seed {r['seed']}: "
             f"{r['mse']:.4f}" for r in repeats if r["kind"] == "official"]
    if again:
        out += ["", "Other runs of these cases, kept in the report beside the table's (test "
                f"MSE): {'; '.join(again)}."]
    for found in report.get("speed") or []:
        out += ["", speed_markdown(found)]
        key = (found.get("model", "itransformer"), found.get("variant", ""))
        earlier = [f"{r['speedup_train']:.2f}x / {r['speedup_epoch']:.2f}x (best of "
                   f"{len(r['rounds'])} round{'s' if len(r['rounds']) > 1 else ''})"
                   for r in repeats if r["kind"] == "speed"
                   and (r.get("model", "itransformer"), r.get("variant", "")) == key]
        if earlier:
            out += ["", "Other runs of this epoch, kept in the report beside the table's (official "
                    f"÷ seqforecast, training steps / whole epoch): {', '.join(earlier)}."]
    return "\n".join(out) + "\n"


def speed_markdown(s: dict) -> str:
    b, ours = s["best"], " ".join(s.get("set") or []) or "as the preset (fp32)"
    model = s.get("model", "itransformer")  # earlier reports timed iTransformer alone
    return "\n".join([
        f"One epoch, {s['dataset']} at horizon {s['horizon']}, seqforecast {ours}: {s['steps']} "
        f"steps of {s.get('batch', 32)} windows of time, 1 torch thread each, alternating, "
        f"best of {len(s['rounds'])} rounds (seconds).",
        "",
        "| | training steps | whole epoch as each runs it |",
        "|---|---|---|",
        f"| official {OFFICIAL_CODE[model][0]} code | {b['official']['train_seconds']:.1f} | "
        f"{b['official']['epoch_seconds']:.1f} (steps, validation, test windows) |",
        f"| seqforecast experiment={model} | {b['seqforecast']['train_seconds']:.1f} | "
        f"{b['seqforecast']['epoch_seconds']:.1f} (steps, validation) |",
        f"| official ÷ seqforecast | {s['speedup_train']:.2f}x | {s['speedup_epoch']:.2f}x |",
    ])


def finish(report: dict, out: Path, argv, studies: list[Path]) -> int:
    write_report(out, "scripts/bench_leaderboard.py", argv, **report)
    text = markdown(report, study_rows(studies))
    out.with_suffix(".md").write_text(text)
    print(text)
    return 0


# What a measurement measured: two records of a case equal in these are one run met again (in
# another report), not a repeat.
SAME_OFFICIAL = same_fields("mse", "mae", "epochs", "train_seconds", "vali_seconds",
                            "train_call_seconds")
SAME_SPEED = same_fields("rounds", "set")


def merge_reports(reports: list[tuple[Path | None, dict]]) -> dict:
    """One report from several ((file, report), in the order they were measured): each case's
    latest measurement in the table (an official run by cell, model and seed; a speed table by
    model and variant), the earlier ones that differ kept in `repeats`, each measurement with
    the command and machine of the report that measured it (`report`), and every merged
    report's in `merged_from`."""
    merged: dict = {"official": {}, "speed": [], "merged_from": [], "repeats": []}
    official: dict = {}
    speeds: dict = {}
    repeats = merged["repeats"]
    for path, report in reports:
        merged["merged_from"].append(source(path, report))
        tag = measured_in(report)
        repeats += [r for r in report.get("repeats", []) if r not in repeats]
        for key, found in (report.get("official") or {}).items():
            for model, seeds in official_models(found).items():
                for seed, run in seeds.items():
                    keep_latest(official, (key, model, seed), run, repeats, SAME_OFFICIAL, tag,
                                case={"kind": "official", "cell": key, "model": model,
                                      "seed": seed})
        found = report.get("speed") or []
        for one in [found] if isinstance(found, dict) else found:  # one per variant
            keep_latest(speeds, (one.get("model", "itransformer"), one.get("variant", "")), one,
                        repeats, SAME_SPEED, tag, case={"kind": "speed"})
    for (key, model, seed), run in official.items():
        merged["official"].setdefault(key, {}).setdefault(model, {})[seed] = run
    merged["speed"] = [speeds[k] for k in sorted(speeds, key=lambda k: (MODELS.index(k[0]),
                                                                         k[1]))]
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["etth1"])
    parser.add_argument("--horizons", nargs="+", type=int, default=[96])
    parser.add_argument("--models", nargs="+", default=["itransformer"],
                        choices=list(OFFICIAL_CODE), help="the one whose official code DIR holds")
    parser.add_argument("--set", nargs="*", default=[],
                        help="further overrides for seqforecast's epoch (--speed)")
    parser.add_argument("--variant", default="",
                        help="a name for the epoch --set changes (kept apart in the tables)")
    parser.add_argument("--data-dir", default=str(REPO / "data"), help="where the files are")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "outputs" / "bench_leaderboard")
    parser.add_argument("--out", type=Path,
                        default=REPO / "benchmarks" / "leaderboard_official.json")
    parser.add_argument("--study", nargs="+", type=Path, default=list(STUDIES),
                        help="the study reports whose rows the table shows beside")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON")
    parser.add_argument("--table", action="store_true",
                        help="write the table again from --out and the study reports")
    parser.add_argument("--official", type=Path, metavar="DIR",
                        help="run the official code of --models in DIR at each cell")
    parser.add_argument("--official-seeds", nargs="+", type=int, default=None,
                        help="default: the seed its run.py fixes (iTransformer 2023, TimeXer "
                             "2021)")
    parser.add_argument("--official-python", default=sys.executable,
                        help="the Python (with pandas, scikit-learn) that runs the official code")
    parser.add_argument("--speed", type=Path, metavar="DIR",
                        help="time one epoch beside the official code of --models in DIR")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if len(args.models) != 1:
        parser.error(f"--official and --speed run one model's official code: --models "
                     f"{' or '.join(OFFICIAL_CODE)}")
    model = args.models[0]
    if args.merge:
        return finish(merge_reports([(p, json.loads(p.read_text())) for p in args.merge]),
                      args.out, argv, args.study)
    if args.table:
        return finish(json.loads(args.out.read_text()), args.out, argv, args.study)
    if not (args.official or args.speed):
        parser.error("give --official DIR, --speed DIR, --merge or --table; the leaderboard's "
                     "own runs are a study: python -m seqforecast.study leaderboard")
    try:  # every cell's published setting exists, before any run starts
        for dataset, horizon in product(args.datasets, args.horizons):
            published_overrides(model, dataset, horizon)
    except ConfigError as err:
        parser.error(str(err))
    report: dict = {"official": {}, "speed": []}
    if args.speed:
        report["speed"] = [speed(args, model)]
    if args.official:
        report["official"] = official(args, model)
    if args.out.is_file():  # the table's report: these runs merged into it
        print(f"merging into {args.out}", file=sys.stderr)
        report = merge_reports([(args.out, json.loads(args.out.read_text())),
                                (None, {**stamp(__file__, argv), **report})])
    return finish(report, args.out, argv, args.study)


if __name__ == "__main__":
    sys.exit(main())

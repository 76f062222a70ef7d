"""A study's report: the verdict across cells per model and value (verdict.py: win rate and
skill score against the reference with paired bootstrap intervals, the sign test); per cell,
each value's test MSE over seeds, its paired ratio to the reference with a 95% interval,
seconds per epoch and peak memory; the searched-lookback track where the study has one (per
value, cell and seed the lookback candidate with the lowest validation MSE); per value, the
sign test over every pair of every cell; and the jobs that have not run.

Runs are read from any number of study dirs (one machine's, a cluster's, partial ones): a run
dir is <dir>/<model>/<cell>/<value>-seed<seed>. Where one job completed in several dirs, the
newest counts and the report says how many it set aside. An earlier report (its study.json)
counts too, for the jobs no dir holds: the report is what outlives its run dirs (another
machine, a cleaned disk), so a study can grow from it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from ..comparison.runs import (
    CompareError,
    Run,
    check_comparable,
    find_run_dirs,
    load_run,
    override_key,
    window_prints,
)
from ..config.saved import saved_choices
from ..published.results import published_table
from ..stats import paired_ratio, sign_test, summarize
from .grid import Cell, Study, StudyError
from .references import LINEAR, linear_fits, linear_paper_count, paper_count
from .verdict import verdicts

SPLIT = "test"
REPORTED = "study.report"  # the config key of a run read back from a report: the report's path
# ...and of the overrides its cell's jobs shared beyond the cell's own (None: not recorded)
REPORTED_EXTRAS = "study.extra_overrides"


def _score(run: Run, key: str) -> float:
    """The model's score on the test windows, in z units where the data was scaled."""
    model = run.metrics[SPLIT]["model"]
    return model.get(f"{key}_scaled", model[key])


def _val_score(run: Run) -> float | None:
    """The model's validation MSE (z units where scaled): what a lookback is chosen on."""
    model = run.metrics.get("val", {}).get("model")
    if not model:
        return None
    return model.get("mse_scaled", model.get("mse"))


def _memory(run: Run) -> float | None:
    info = run.metrics["run"]
    if info.get("peak_rss_mib") is None:  # a run made before seqforecast recorded it
        return None
    return info["peak_rss_mib"] - (info.get("rss_at_start_mib") or 0.0)


def _run_dirs(study_dir: Path | None, sources: list[Path]) -> list[Path]:
    """The run dirs under the study dir (which may not exist yet) and the merged dirs (which
    must)."""
    for extra in sources:
        if not Path(extra).is_dir():
            raise StudyError(f"from={extra}: no such directory or report")
    existing = [str(d) for d in (study_dir, *sources) if d is not None and Path(d).is_dir()]
    try:
        return find_run_dirs(existing) if existing else []
    except CompareError:  # no run dirs there yet
        return []


def report_runs(path: Path, study: Study) -> tuple[dict, list[dict]]:
    """The jobs of `study` an earlier report (a study.json) holds, as runs: each one's test
    scores and what the report keeps of it (epochs, seconds, memory, its run dir's name), and
    the failed jobs it lists. A cell it holds must have been made with this study's overrides."""
    try:
        report = json.loads(Path(path).read_text())
        entries, group = list(report["cells"]), report["group"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StudyError(f"from={path}: not a study report (a study.json): "
                         f"{str(err).splitlines()[0]}") from None
    if group != study.group:
        raise StudyError(f"from={path}: a report of {group}, not of this study's {study.group}")
    cells = {(c.model, c.name): c for c in study.cells}
    runs = {}
    for entry in entries:
        cell = cells.get((entry["model"], entry["cell"]))
        if cell is None:
            continue
        if list(entry["overrides"]) != list(cell.overrides):
            raise StudyError(
                f"from={path}: {cell.label} was made with {' '.join(entry['overrides'])}, this "
                f"study's is {' '.join(cell.overrides)}: not the same jobs")
        split = {"windows": entry.get("test_windows"),
                 "fingerprint": entry.get("test_fingerprint")}
        if entry.get("test_fingerprint_v1") is not None:  # reports since 2026-12-05
            split["fingerprint_v1"] = entry["test_fingerprint_v1"]
        for row in entry["rows"]:
            for seed, kept in row["runs"].items():
                metrics = {SPLIT: {"model": {"mse": kept["mse"], "mae": kept["mae"]}},
                           "run": {k: v for k, v in kept.items()
                                   if k not in ("mse", "mae", "val_mse")},
                           "splits": {SPLIT: split}}
                if kept.get("val_mse") is not None:  # reports since the lookback search
                    metrics["val"] = {"model": {"mse": kept["val_mse"]}}
                if entry.get("linear"):  # a study with reference rows
                    metrics["linear"] = entry["linear"]
                if entry.get("linear_paper"):
                    metrics["linear_paper"] = entry["linear_paper"]
                config = {REPORTED: str(path), REPORTED_EXTRAS: entry.get("extra_overrides")}
                runs[(cell.model, cell.name, row["value"], int(seed))] = Run(
                    Path(kept["run_dir"]), int(seed), config, [], metrics)
    failed = [f for f in report.get("failed", []) if (f["model"], f["cell"]) in cells]
    return runs, failed


def _value(study: Study, model: str, run_dir: Path) -> str | None:
    """The value a run dir holds: its swept group's option, or, for a model whose values are
    named sets of overrides, the name its dir carries (<value>-seed<seed>)."""
    if model in (study.value_sets or {}):
        name = run_dir.name.rpartition("-seed")[0]
        return name if name in study.values[model] else None
    return saved_choices(run_dir).get(study.group)


def _same_run(found: Run, recorded: Run) -> bool:
    """Whether a report's record of a job is the run already found: its run dir, its score."""
    return (found.path.resolve() == recorded.path.resolve()
            and _score(found, "mse") == _score(recorded, "mse"))


def failure_job(failure: dict) -> tuple:
    """The job a failure record (`collect`'s, a report's "failed") is of: the key of
    `collect`'s runs, (model, cell, value, seed)."""
    return failure["model"], failure["cell"], failure["value"], failure["seed"]


def collect(study: Study, study_dir: Path | None,
            sources: list[Path]) -> tuple[dict, list[dict], int]:
    """{(model, cell, value, seed): Run} of the study's jobs found under the study dir and the
    `from` dirs (the newest where a job is there twice) or in the `from` reports (where no dir
    holds the job), the runs that did not complete (with why), and how many duplicates were set
    aside (a report's record of a run a dir holds is that run, not a duplicate)."""
    reports = [d for d in sources if Path(d).is_file()]
    dirs = [d for d in sources if d not in reports]
    cells = {(c.model, c.name) for c in study.cells}
    found: dict[tuple, list[Run]] = {}
    failed = []
    for path in _run_dirs(study_dir, dirs):
        model, cell = path.parts[-3], path.parts[-2]
        if (model, cell) not in cells:
            continue
        run = load_run(path, SPLIT)
        value = _value(study, model, path)
        key = (model, cell, value, run.seed)
        if not run.ok:
            failed.append({"model": model, "cell": cell, "value": value, "seed": run.seed,
                           "reason": run.problem, "run_dir": str(path)})
            continue
        found.setdefault(key, []).append(run)
    newest = {k: max(runs, key=lambda r: (r.path / "metrics.json").stat().st_mtime)
              for k, runs in found.items()}
    duplicates = sum(len(runs) - 1 for runs in found.values())
    # a job a dir holds says where it stands now: a report's record of its failure is older
    in_dirs = {failure_job(f) for f in failed}
    for report in reports:  # the jobs no dir holds (nor an earlier report)
        held, listed = report_runs(report, study)
        for key, run in held.items():
            if key not in newest:
                newest[key] = run
            elif not _same_run(newest[key], run):  # a report made from the dir holds its runs
                duplicates += 1
        failed += [f for f in listed if f not in failed and failure_job(f) not in in_dirs]
    # a job that failed in one place and completed in another (a rerun elsewhere) has run
    failed = [f for f in failed if failure_job(f) not in newest]
    return newest, failed, duplicates


def _row(value: str, runs: dict[int, Run], reference: dict[int, Run]) -> dict:
    mse = {seed: _score(r, "mse") for seed, r in runs.items()}
    mae = {seed: _score(r, "mae") for seed, r in runs.items()}
    ref = {seed: _score(r, "mse") for seed, r in reference.items()}
    pair = paired_ratio(mse, ref)
    spread = summarize(list(mse.values()))
    memory = [m for m in (_memory(r) for r in runs.values()) if m is not None]
    info = [r.metrics["run"] for r in runs.values()]
    return {
        "value": value,
        "seeds": sorted(runs),
        "mse": spread.mean,
        "mse_std": spread.std,
        "mae": summarize(list(mae.values())).mean,
        "ratio": {"n": pair.n, "ratio": pair.ratio, "low": pair.low, "high": pair.high,
                  "verdict": pair.verdict},
        "pair_ratios": {seed: mse[seed] / ref[seed] for seed in sorted(set(mse) & set(ref))},
        "seconds_per_epoch": summarize([i["train_seconds"] / i["epochs_run"] for i in info]).mean,
        "epochs_run": [i["epochs_run"] for i in info],
        "peak_mib": summarize(memory).mean if memory else None,
        "runs": {seed: {"mse": mse[seed], "mae": mae[seed], "val_mse": _val_score(r),
                        "run_dir": str(r.path),
                        **{k: r.metrics["run"].get(k) for k in (
                            "best_epoch", "epochs_run", "train_seconds", "peak_rss_mib",
                            "rss_at_start_mib")}}
                 for seed, r in sorted(runs.items())},
    }


def _extras(run: Run, cell: Cell, group: str,
            study_sets: dict[str, tuple[str, ...]] | None = None) -> frozenset[str] | None:
    """The overrides a job ran with beyond its cell's own and what the study sweeps (the seed,
    the value): the command line's (threads, data_dir, `attention.gate=headwise` for a gated
    grid). A run read back from a report has its cell's recorded ones, or None (an older
    report's)."""
    if REPORTED in run.config:
        found = run.config.get(REPORTED_EXTRAS)
        return None if found is None else frozenset(found)
    swept = {override_key(o) for o in cell.overrides} | {group, "seed", "skip_completed"}
    swept |= {override_key(o) for sets in (study_sets or {}).values() for o in sets}
    return frozenset(o for o in run.overrides if override_key(o) not in swept)


def _shared_overrides(runs: list[Run], cell: Cell, group: str,
                      study_sets: dict | None = None) -> tuple[list[str], list[str]]:
    """The extra overrides every job of the cell shares, and those only some have (a cell whose
    jobs were made with different command lines: the report says so rather than hide it)."""
    known = [e for e in (_extras(r, cell, group, study_sets) for r in runs) if e is not None]
    if not known:
        return [], []
    shared = frozenset.intersection(*known)
    return sorted(shared), sorted(frozenset.union(*known) - shared)


def _cell(study: Study, cell: Cell, runs: dict) -> dict:
    by_value = {v: {seed: runs[(cell.model, cell.name, v, seed)] for seed in study.seeds
                    if (cell.model, cell.name, v, seed) in runs}
                for v in study.values[cell.model]}
    reference = by_value[study.reference(cell.model)]
    present = [r for value_runs in by_value.values() for r in value_runs.values()]
    entry = {"model": cell.model, "cell": cell.name, "reference": study.reference(cell.model),
             "overrides": list(cell.overrides), "rows": [], "problem": None}
    missing = [f"{v}-seed{s}" for v in study.values[cell.model] for s in study.seeds
               if s not in by_value[v]]
    entry["missing"] = missing
    if not present:
        return entry
    try:
        check_comparable([r for r in present if REPORTED not in r.config], SPLIT)
        _same_windows(present)  # a report's runs among them: by what the report kept
    except CompareError as err:  # e.g. runs of another file version under the same name
        entry["problem"] = str(err)
        return entry
    entry["extra_overrides"], entry["differing_overrides"] = _shared_overrides(
        present, cell, study.group, (study.value_sets or {}).get(cell.model))
    entry["test_windows"] = _known(present, "windows")
    # Both fingerprints of one run: a run that records the former beside the current one, if any
    recorder = next((r for r in present if r.metrics["splits"][SPLIT].get("fingerprint_v1")),
                    None)
    entry["test_fingerprint"] = _known([recorder] if recorder else present, "fingerprint")
    entry["test_fingerprint_v1"] = _known([recorder], "fingerprint_v1") if recorder else None
    entry["rows"] = [_row(v, value_runs, reference) for v, value_runs in by_value.items()
                     if value_runs]
    if study.references:
        _score_references(study, cell, entry, by_value)
    return entry


def _score_references(study: Study, cell: Cell, entry: dict, by_value: dict) -> None:
    """The cell's reference rows (references.py): its linear fits and the best of them, each
    row's paired MSE ratio to that best fit, the MSE on the windows the model's published
    loader scores, and the published rows of this cell."""
    refs = study.references
    runs = sorted((r for value_runs in by_value.values() for r in value_runs.values()),
                  key=lambda r: (REPORTED in r.config, r.seed))  # a run dir's first
    # the fits a report kept, else those of a run dir (a report made before the study had
    # reference rows names run dirs that may be gone: no fits then, rather than a failure)
    first = runs[0]
    linear = refs.linear and (first.metrics.get("linear") or (
        linear_fits(first.path) if REPORTED not in first.config else None))
    if linear:
        entry["linear"] = linear
        best = min(entry["linear"], key=lambda name: entry["linear"][name]["mse"])
        entry["best_linear"] = best
        for row in entry["rows"]:
            mse = {seed: run["mse"] for seed, run in row["runs"].items()}
            pair = paired_ratio(mse, dict.fromkeys(mse, entry["linear"][best]["mse"]))
            row["vs_linear"] = {"n": pair.n, "ratio": pair.ratio, "low": pair.low,
                                "high": pair.high, "verdict": pair.verdict}
    batch = refs.paper_batch.get(cell.model, 1)  # 1: every window is scored
    if linear and batch > 1:  # the fits on the windows the model's published loader scores
        paper = first.metrics.get("linear_paper") or (
            linear_paper_count(first.path, batch) if REPORTED not in first.config else None)
        if paper:  # (none from a report made before the fits were counted so)
            entry["linear_paper"] = paper
    for row in entry["rows"]:
        for seed, kept in row["runs"].items():
            run = by_value[row["value"]][seed]
            if batch == 1:
                paper = {"mse": kept["mse"], "mae": kept["mae"]}
            elif REPORTED in run.config:
                paper = {"mse": run.metrics["run"].get("paper_mse"),
                         "mae": run.metrics["run"].get("paper_mae")}
            else:
                paper = paper_count(run.path, batch)
            kept["paper_mse"], kept["paper_mae"] = paper["mse"], paper["mae"]
        known = [r["paper_mse"] for r in row["runs"].values() if r["paper_mse"] is not None]
        row["paper_mse"] = summarize(known).mean if len(known) == len(row["runs"]) else None
    if refs.published:  # every published row of the cell: the report shows each once
        rows = published_table(refs.published).rows.get(cell.name, {})
        entry["published"] = {name: list(scores) for name, scores in rows.items()}


def _searched(study: Study, cell: Cell, runs: dict) -> dict | None:
    """The searched-lookback track of a cell that searches it: per value and seed, the run of
    the candidate (the cell's fixed lookback or one of its `-L<n>` cells) with the lowest
    validation MSE, as a cell entry `<cell> searched` with the lookback each run chose. A seed
    counts only where every candidate has run (the same budget for every value)."""
    candidates = study.candidates(cell)
    if len(candidates) < 2:
        return None
    chosen, lookbacks = {}, {}
    for value in study.values[cell.model]:
        for seed in study.seeds:
            found = [(c, runs.get((cell.model, c.name, value, seed))) for c in candidates]
            if any(r is None or _val_score(r) is None for _, r in found):
                continue
            best, run = min(found, key=lambda cr: _val_score(cr[1]))
            chosen[(cell.model, cell.name, value, seed)] = run
            lookbacks.setdefault(value, {})[seed] = best.lookback
    entry = _cell(study, cell, chosen)
    entry["track"] = "searched"
    entry["lookbacks"] = lookbacks
    entry["candidates"] = [c.lookback for c in candidates]
    return entry


def _known(runs: list[Run], key: str):
    """The test split's `key` (windows, fingerprint) as the runs that record it have it."""
    return next((v for r in runs if (v := r.metrics["splits"][SPLIT].get(key)) is not None),
                None)


def _same_windows(runs: list[Run]) -> None:
    """Runs read back from a report beside run dirs: the same test windows, by fingerprint
    where both record one (reports since 2026-12-04; `window_prints`), else by their number."""
    splits = [r.metrics["splits"][SPLIT] for r in runs]
    for key, values in (("fingerprint", window_prints(splits)),
                        ("window", [info.get("windows") for info in splits])):
        seen = set(values) - {None}
        if len(seen) > 1:
            raise CompareError(f"the runs were scored on different {SPLIT} windows ({key}s "
                               f"differ between the report and the run dirs); compare runs "
                               f"scored on the same {SPLIT} set")
        if seen and None not in values:
            return


def held_jobs(study: Study, sources: list[Path]) -> set[tuple[str, str, str, int]]:
    """The jobs (model, cell, value, seed) that completed in the `from` dirs and reports: a
    study growing from them trains only the others, as a rerun skips what its own dir holds."""
    return set(collect(study, None, sources)[0]) if sources else set()


def build_report(study: Study, study_dir: Path, sources: list[Path], command: str,
                 asked: list[Cell] | None = None, selection: str | None = None) -> dict:
    """The report of every cell of the study; `asked`: the cells the command named
    (`selection`, e.g. `cells=etth1-96`), None: all. A cell not asked for that holds no run is
    not `not run` but not asked for."""
    runs, failed, duplicates = collect(study, study_dir, sources)
    cells = [_cell(study, cell, runs) for cell in study.cells]
    for cell, entry in zip(study.cells, cells, strict=True):
        entry["asked"] = asked is None or cell in asked
        entry["track"] = "fixed" if cell.searches is None else "candidate"
        entry["lookback"] = cell.lookback
    searched = [e for e in (_searched(study, c, runs) for c in study.fixed_cells()) if e]
    references = {m: study.reference(m) for m in study.values}
    axes = {m: study.axis(m) for m in study.values}
    signs = []
    values = list(dict.fromkeys(v for vs in study.values.values() for v in vs[1:]))
    for value in values:
        ratios, by_model = [], {}
        for entry in cells:
            if entry["track"] != "fixed":  # a lookback candidate's pairs are not the cell's
                continue
            for row in entry["rows"]:
                if row["value"] == value:
                    ratios += row["pair_ratios"].values()
                    by_model.setdefault(entry["model"], []).extend(row["pair_ratios"].values())
        test = sign_test(ratios)
        signs.append({"value": value, **asdict(test), "pairs": len(ratios),
                      "by_model": {m: asdict(sign_test(r)) for m, r in by_model.items()}})
    return {
        "study": study.name,
        "title": study.title,
        "group": study.group,
        "seeds": list(study.seeds),
        "command": command,
        "dirs": [str(d) for d in (study_dir, *sources)],
        "cells": cells,
        "verdicts": verdicts([e for e in cells if e["track"] == "fixed"], references, axes),
        "searched": searched,
        "searched_verdicts": verdicts(searched, references, axes),
        "sign_tests": signs,
        "references": None if study.references is None else {
            "linear": study.references.linear,
            "published": study.references.published and published_table(
                study.references.published).source,
            "paper_batch": study.references.paper_batch},
        "failed": failed,
        "duplicates_set_aside": duplicates,
        "selection": selection,
    }


def _f(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _spread(std: float) -> str:
    return "" if math.isnan(std) else f" ± {std:.4f}"  # no spread from one seed


def _interval(ratio: dict) -> str:
    if ratio["n"] == 0:
        return "-"
    if ratio["n"] < 2 or math.isnan(ratio["low"]):
        return f"{ratio['ratio']:.3f} (n={ratio['n']})"
    return f"{ratio['ratio']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]"


def _ci(value: float, ci: list[float], digits: int = 3) -> str:
    if math.isnan(value):
        return "-"
    if math.isnan(ci[0]):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _verdict_lines(rows: list[dict], group: str) -> list[str]:
    """The verdict table: per model and value, over the cells that hold both it and the
    reference (verdict.py)."""
    lines = [f"| model | axis | {group} | cells | win rate [95% CI] | skill score [95% CI] | "
             f"cells lower / higher | sign test (lower/higher, p) | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in rows:
        sign = v["sign_test"]
        lines.append(
            f"| {v['model']} | {v['axis']} | {v['value']} | {v['cells']} | "
            f"{_ci(v['win_rate'], v['win_rate_ci'], 2)} | {_ci(v['skill'], v['skill_ci'])} | "
            f"{v['cells_lower']} / {v['cells_higher']} | {sign['below']}/{sign['above']}, "
            f"p = {sign['p']:.2g} | {v['verdict']} |")
    return lines


def _reference_lines(report: dict) -> list[str]:
    """The cells beside their reference rows (references.py), a cell's models together: each
    row's test MSE, MAE, the MSE on the windows its published loader scores, its paired ratio
    to the cell's best linear fit; the linear fits; the published rows."""
    refs = report["references"]
    lines = ["", "## Beside the reference rows", "",
             "| cell | forecaster | test MSE (every window) | MAE | MSE as the paper counts | "
             "÷ best linear [95% CI] | verdict | published MSE |",
             "|---|---|---|---|---|---|---|---|"]
    by_cell: dict[str, list[dict]] = {}
    for entry in report["cells"]:
        if entry["rows"] and entry.get("track", "fixed") == "fixed":
            by_cell.setdefault(entry["cell"], []).append(entry)
    for name, entries in by_cell.items():
        for entry in entries:
            published = (entry.get("published") or {}).get(entry["model"])
            for row in entry["rows"]:
                shown = entry["model"] if len(entry["rows"]) == 1 else \
                    f"{entry['model']} {row['value']}"
                ratio = row.get("vs_linear")
                lines.append(
                    f"| {name} | {shown} ({len(row['seeds'])} seeds) | "
                    f"{_f(row['mse'])}{_spread(row['mse_std'])} | {_f(row['mae'])} | "
                    f"{_f(row.get('paper_mse'))} | {_interval(ratio) if ratio else '-'} | "
                    f"{ratio['verdict'] if ratio else ''} | "
                    f"{_f(published[0], 3) if published else ''} |")
        linear = next((e for e in entries if e.get("linear")), None)
        published = {k: v for e in entries for k, v in (e.get("published") or {}).items()}
        if linear:
            # the fits on a published loader's windows, from the cell's entry whose model has
            # such a loader (a cell's models share their windows, not their loaders)
            paper = next((e["linear_paper"] for e in entries if e.get("linear_paper")), {})
            for fit, scores in linear["linear"].items():
                best = " (best linear)" if fit == linear["best_linear"] else ""
                pub = published.get("dlinear") if fit == "dlinear" else None
                counted = f" {_f(paper[fit]['mse'])} " if fit in paper else " "
                lines.append(f"| {name} | {LINEAR.get(fit, fit)} (least squares){best} | "
                             f"{_f(scores['mse'])} | {_f(scores['mae'])} |{counted}| | | "
                             f"{_f(pub[0], 3) if pub else ''} |")
        # the published rows no row above stands beside, each on its own
        beside = {e["model"] for e in entries} | ({"dlinear"} if linear else set())
        lines += [f"| {name} | {forecaster} (published) | | | | | | {_f(scores[0], 3)} |"
                  for forecaster, scores in published.items() if forecaster not in beside]
    batches = ", ".join(f"{m} {b}" for m, b in refs.get("paper_batch", {}).items())
    counted = (f"the windows filling whole batches of its published test loader ({batches}; "
               f"every window for the others; the linear fits: those of the cell's first model "
               f"with such a loader)" if batches else "every window")
    lines += ["", f"Published: {refs['published'] or 'none'}. Test windows: every one; the MSE "
              f"as the paper counts: {counted}."]
    return lines


def _searched_lines(report: dict) -> list[str]:
    group = report["group"]
    lines = ["", "## Searched lookback", "",
             "Per value, cell and seed, the lookback candidate with the lowest validation MSE "
             "(the same candidates for every value); its test MSE and the lookbacks chosen, "
             "seed by seed.", "",
             f"| model | cell | candidates | {group} | seeds | test MSE | ÷ reference [95% CI] | "
             f"verdict | lookbacks chosen |", "|---|---|---|---|---|---|---|---|---|"]
    for entry in report["searched"]:
        for row in entry["rows"]:
            ref = row["value"] == entry["reference"]
            chosen = entry["lookbacks"].get(row["value"], {})
            lines.append(
                f"| {entry['model']} | {entry['cell']} | "
                f"{', '.join(map(str, entry['candidates']))} | {row['value']} | "
                f"{len(row['seeds'])} | {_f(row['mse'])}{_spread(row['mse_std'])} | "
                f"{'reference' if ref else _interval(row['ratio'])} | "
                f"{'' if ref else row['ratio']['verdict']} | "
                f"{', '.join(str(chosen[s]) for s in sorted(chosen))} |")
    if report.get("searched_verdicts"):
        lines += ["", "Across the searched cells:", "",
                  *_verdict_lines(report["searched_verdicts"], group)]
    return lines


def markdown(report: dict) -> str:
    group = report["group"]
    lines = [f"# {report['title']}", ""]
    if report.get("verdicts"):
        lines += ["Verdict across cells, per model and value against its reference: win rate "
                  "(the share of cells where its test MSE is lower, a tie one half) and skill "
                  "score (1 - the geometric mean of its MSE ratios, above 0: lower error), as "
                  "fev-bench defines them, with paired bootstrap 95% intervals over cells and "
                  "seeds; the cells whose paired interval is beyond noise each way; the sign "
                  "test over every seed of every cell.", "",
                  *_verdict_lines(report["verdicts"], group), ""]
    lines += [
        f"Test MSE on every test window (z units where the data is scaled), mean ± std over "
        f"the seeds shown; ÷ reference: the paired MSE ratio to the cell's reference {group} "
        f"on the seeds both have (geometric mean, 95% t interval); s/epoch: training seconds "
        f"over epochs run (validation passes included); peak MiB: the resident set's peak "
        f"above its size at the run's start.", "",
        f"| model | cell | {group} | seeds | test MSE | ÷ reference [95% CI] | verdict | "
        f"s/epoch | epochs run | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in report["cells"]:
        for row in entry["rows"]:
            ref = row["value"] == entry["reference"]
            lines.append(
                f"| {entry['model']} | {entry['cell']} | {row['value']} | {len(row['seeds'])} | "
                f"{_f(row['mse'])}{_spread(row['mse_std'])} | "
                f"{'reference' if ref else _interval(row['ratio'])} | "
                f"{'' if ref else row['ratio']['verdict']} | {_f(row['seconds_per_epoch'], 1)} | "
                f"{', '.join(str(e) for e in row['epochs_run'])} | {_f(row['peak_mib'], 0)} |"
            )
    if report["sign_tests"]:  # none where each model has one value (a leaderboard)
        lines += ["", "Sign test over every pair (each seed of each cell) against the "
                  "reference:", "", f"| {group} | pairs | lower error | higher error | ties | "
                  f"p (two-sided) | per model (lower/higher) |", "|---|---|---|---|---|---|---|"]
    for s in report["sign_tests"]:
        per_model = "; ".join(f"{m} {t['below']}/{t['above']}" for m, t in s["by_model"].items())
        lines.append(f"| {s['value']} | {s['pairs']} | {s['below']} | {s['above']} | "
                     f"{s['ties']} | {s['p']:.3g} | {per_model or '-'} |")
    if report.get("references"):
        lines += _reference_lines(report)
    if report.get("searched"):
        lines += _searched_lines(report)
    # A cell the command did not ask for, with no run anywhere, was not meant to run.
    unasked = [e for e in report["cells"]
               if not e.get("asked", True) and not e["rows"] and not e["problem"]]
    not_run = [e for e in report["cells"] if (e["missing"] or e["problem"]) and e not in unasked]
    if not_run or unasked:
        lines += ["", "Not in the table:", ""]
        for e in not_run:
            if e["problem"]:
                what = e["problem"]
            elif not e["rows"]:
                what = f"not run ({len(e['missing'])} jobs)"
            else:
                what = f"{len(e['missing'])} job(s) not completed: {', '.join(e['missing'])}"
            lines.append(f"- {e['model']}/{e['cell']}: {what}")
    if unasked:
        lines.append(f"- not asked for (`{report.get('selection')}`): "
                     f"{', '.join(e['model'] + '/' + e['cell'] for e in unasked)}")
    for f in report["failed"]:
        lines.append(f"- {f['model']}/{f['cell']} {f['value']} seed {f['seed']}: {f['reason']}")
    lines += _extras_lines(report["cells"])
    if report["duplicates_set_aside"]:
        lines += ["", f"{report['duplicates_set_aside']} older run(s) of jobs completed more "
                  f"than once were set aside (the newest counts)."]
    lines += ["", f"Made with: `{report['command']}`"]
    return "\n".join(lines) + "\n"


def _extras_lines(cells: list[dict]) -> list[str]:
    """What the jobs ran with beyond their cells' overrides: one line where every cell's jobs
    share the same, else one per cell; and each cell whose jobs differ."""
    ran = [e for e in cells if e["rows"]]
    shared = {tuple(e.get("extra_overrides") or ()) for e in ran}
    lines = []
    if len(shared) == 1 and (common := next(iter(shared))):
        lines += ["", f"Every job also ran with: `{' '.join(common)}`."]
    elif len(shared) > 1:
        lines += ["", "Each cell's jobs also ran with:", ""]
        lines += [f"- {e['model']}/{e['cell']}: `{' '.join(e.get('extra_overrides') or ())}`"
                  for e in ran]
    for e in ran:
        if e.get("differing_overrides"):
            lines += ["", f"{e['model']}/{e['cell']}: its jobs were made with different command "
                      f"lines; only some had `{' '.join(e['differing_overrides'])}`."]
    return lines


def write_report(report: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "study.json", out_dir / "study.md"
    json_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path

"""What a run reports: the results table it prints and metrics.json.

The numbers come from `evaluation.Evaluator`; this module only lays them out, one block per
split, each headed by what the split is (so the selection set is never read as a result).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..probabilistic.sums import OWN, is_interval_score
from .evaluation import ratios
from .files import atomic_write_text
from .metrics import IN_SCALED_UNITS, METRICS

SPLIT_TITLES = {
    "test": "test (held out)",
    "test_curve": "test_curve (the reference sigmoid curve, one series)",
    "val": "val (the selection set: early stopping and search, not a result)",
}


def describe_split(info: Mapping) -> str:
    """One phrase for a split's info: its series (synthetic), its rows and windows (CSV), or
    its series and windows (a panel)."""
    if "panel_series" in info:
        left = info["left_out"]
        shown = ", ".join(map(str, left[:5])) + (
            f" and {len(left) - 5} more" if len(left) > 5 else ""
        )
        return (
            f"{info['panel_series']} series, {info['windows']} windows every {info['stride']} "
            f"step(s) ({info['protocol']} protocol; split by {info['split_by']})"
            + (f"; left out (too short): {shown}" if left else "")
        )
    if "series" in info and "seed" in info:
        return f"{info['series']} {info['generator']} series, seed {info['seed']}"
    if "rows" in info:
        start, stop = info["rows"]
        times = f", {info['times'][0]} to {info['times'][1]}" if "times" in info else ""
        return (
            f"rows {start}-{stop - 1} (file lines {start + 2}-{stop + 1}{times}), "
            f"{info['windows']} windows every {info['stride']} row(s), forecasts from row "
            f"{info['forecast_rows'][0]}, inputs from row {info['input_rows_from']} "
            f"({info['protocol']} protocol)"
        )
    return ""


def format_table(results: Mapping, info: Mapping | None = None) -> str:
    """One block per split: a row per forecaster with MSE, MAE, RMSE in the data's units (and
    sMAPE, MASE, and MSE and MAE in the scaled units where the data has them), and the model's
    MSE over each baseline's (below 1: the model wins)."""
    info = info or {}
    model_over = ratios(results)
    width = max(len("forecaster"), *(len(n) for rows in results.values() for n in rows)) + 2
    rows_found = [r for rows in results.values() for r in rows.values()]
    extra = ["mase", *IN_SCALED_UNITS]
    shown = [*METRICS, *(m for m in extra if any(m in r for r in rows_found))]
    header = f"  {'forecaster':<{width}}" + "".join(f"{m:>13}" for m in shown)
    header += f"{'model mse ÷':>14}"
    lines = []
    for split, rows in results.items():
        detail = describe_split(info.get(split, {}))
        lines.append(SPLIT_TITLES.get(split, split) + (f": {detail}" if detail else ""))
        lines.append(header)
        for name, row in rows.items():
            cells = "".join(f"{row.get(m, float('nan')):>13.6g}" for m in shown)
            ratio = "" if name == "model" else f"{model_over[split][name]:>14.4g}"
            lines.append(f"  {name:<{width}}{cells}{ratio}")
    return "\n".join(lines)


def intervals_heading(intervals: Mapping) -> str:
    """What the interval table holds, for the line above it."""
    if intervals.get("method") == "adaptive":
        return ("adaptive conformal intervals on the test windows (calibrated on the validation "
                "windows, adapting to each test truth once it has arrived)")
    return "conformal intervals on the test windows (calibrated on the validation windows)"


def format_intervals(results: Mapping) -> str:
    """The test rows' interval scores, a row per forecaster: CRPS, then coverage, width and
    MSIS of each interval level ("" when the run scored no intervals); a probabilistic model's
    own quantiles (`own_<score>`) get a row of their own below the conformal ones."""
    rows = results.get("test", {})
    first = next(iter(rows.values()), {})
    shown = [k for k in first if is_interval_score(k)]
    if not shown:
        return ""
    table = dict(rows)
    for name, row in rows.items():
        own = {k.removeprefix(OWN): v for k, v in row.items() if k.startswith(OWN)}
        if own:
            table[f"{name} (own quantiles)"] = own
    width = max(len("forecaster"), *(len(n) for n in table)) + 2
    lines = [f"  {'forecaster':<{width}}" + "".join(f"{m:>13}" for m in shown)]
    for name, row in table.items():
        lines.append(f"  {name:<{width}}" + "".join(f"{row.get(m, float('nan')):>13.6g}"
                                                    for m in shown))
    return "\n".join(lines)


def write_metrics(
    path: Path, results: Mapping, run_info: Mapping, splits: Mapping | None = None
) -> None:
    """metrics.json: {split: {forecaster: metrics}} for test, test_curve (synthetic), val;
    the model-over-baseline MSE ratios; what each split holds; and the run's facts."""
    payload = {
        **results,
        "model_over_baseline_mse": ratios(results),
        "splits": dict(splits or {}),
        "run": dict(run_info),
    }
    atomic_write_text(path, json.dumps(payload, indent=2) + "\n")


def write_per_series(path: Path, per_series: Mapping, ids: list[str]) -> None:
    """per_series.csv, long format: one row per (series, forecaster) with the series' test
    windows and its metrics in its own units (MSE, MAE, RMSE) and scale-free (sMAPE, MASE),
    then its interval scores where the run has them (CRPS, coverage, width, MSIS)."""
    first = next(iter(per_series.values()))
    metrics = [m for m in (*METRICS, "mase") if m in first]
    # each series' band scores (a probabilistic model's own_<score> too: left empty for others)
    metrics += [m for m in first if is_interval_score(m)]
    metrics += [m for found in per_series.values() for m in found
                if m.startswith(OWN) and is_interval_score(m.removeprefix(OWN))]
    lines = [",".join(["id", "forecaster", "windows", *metrics])]
    for name, found in per_series.items():
        for i, series_id in enumerate(ids):
            if found["windows"][i] == 0:
                continue  # left out of the test split (too short)
            cells = [f"{found[m][i]:.8g}" if m in found else "" for m in metrics]
            lines.append(",".join([csv_cell(series_id), name, str(found["windows"][i]), *cells]))
    atomic_write_text(path, "\n".join(lines) + "\n")


def csv_cell(text: str) -> str:
    """A CSV cell: quoted (quotes doubled) when it holds a comma, a quote or a newline."""
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text

"""A comparison of groups of runs: every metric summarised over seeds, paired against a reference.

The metrics are read from each run's metrics.json, which the one evaluation path wrote
(`training.evaluation`): the model's MSE and MAE on the compared split, and its MSE over each
baseline's on the same windows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..probabilistic.sums import OWN, is_interval_score
from ..stats import PairedRatio, Summary, paired_ratio, summarize
from .runs import Group, Run

SCALED_MSE = "MSE (scaled)"  # in the units of data.scale (CSV data scaled on its training rows)
# Compared with the reference, seed by seed (ratios of positive scores: CRPS and MSIS too).
PAIRED = ("MSE", "MAE", SCALED_MSE, "MAE (scaled)", "CRPS", "MSIS 80%", "MSIS 95%", "own CRPS",
          "own MSIS 80%", "own MSIS 95%")


@dataclass
class Metric:
    name: str  # "MSE", "MAE", "MSE ÷ nlinear"
    read: Callable[[dict], float]  # metrics.json -> value


@dataclass
class Comparison:
    split: str
    groups: list[Group]
    reference: Group
    metrics: list[Metric]
    excluded: list[Run]
    summaries: dict[tuple[str, str], Summary] = field(default_factory=dict)  # (group, metric)
    paired: dict[tuple[str, str], PairedRatio] = field(default_factory=dict)
    baselines: dict[str, Summary] = field(default_factory=dict)  # baseline MSE over all runs
    baselines_scaled: dict[str, Summary] = field(default_factory=dict)  # the same, scaled units
    seconds: dict[str, Summary] = field(default_factory=dict)  # training seconds per group


def metrics_for(split: str, runs: Sequence[Run]) -> list[Metric]:
    """MSE, MAE, then the MSE ratio to each baseline every run has (in the runs' order)."""
    ratios = [run.metrics["model_over_baseline_mse"][split] for run in runs]
    baselines = [b for b in ratios[0] if all(b in r for r in ratios)]
    metrics = [
        Metric("MSE", lambda m: m[split]["model"]["mse"]),
        Metric("MAE", lambda m: m[split]["model"]["mae"]),
    ]
    if all("mse_scaled" in run.metrics[split]["model"] for run in runs):
        # Scaled CSV data: the same errors in the scaled units (z-scores for data.scale=standard).
        metrics += [
            Metric(SCALED_MSE, lambda m: m[split]["model"]["mse_scaled"]),
            Metric("MAE (scaled)", lambda m: m[split]["model"]["mae_scaled"]),
        ]
    for name in baselines:
        metrics.append(
            Metric(f"MSE ÷ {name}", lambda m, b=name: m["model_over_baseline_mse"][split][b])
        )
    # The conformal intervals' scores (probabilistic/sums.py) where every run has them, then a
    # probabilistic model's scores of its own quantiles (own_<score>) where every run has those.
    rows = [run.metrics[split]["model"] for run in runs]
    interval_keys = [k for k in rows[0] if is_interval_score(k.removeprefix(OWN))]
    for key in interval_keys:  # (an interval unbounded for want of calibration windows: none)
        if all(math.isfinite(row.get(key, math.inf)) for row in rows):
            metrics.append(Metric(_interval_label(key), lambda m, k=key: m[split]["model"][k]))
    return metrics


def _interval_label(key: str) -> str:
    """crps -> CRPS, coverage_80 -> coverage 80%, msis_95 -> MSIS 95%; own_crps -> own CRPS
    (the model's own quantiles)."""
    if key.startswith(OWN):
        return "own " + _interval_label(key.removeprefix(OWN))
    if key == "crps":
        return "CRPS"
    kind, level = key.split("_", 1)
    return f"{'MSIS' if kind == 'msis' else kind} {level}%"


def compare(split: str, groups: list[Group], reference: Group, excluded: list[Run]) -> Comparison:
    runs = [run for group in groups for run in group.runs]
    result = Comparison(split, groups, reference, metrics_for(split, runs), excluded)
    for metric in result.metrics:
        ref = _by_seed(reference.runs, metric.read)
        for group in groups:
            values = [metric.read(run.metrics) for run in group.runs]
            result.summaries[group.label, metric.name] = summarize(values)
            if metric.name in PAIRED and group is not reference:
                result.paired[group.label, metric.name] = paired_ratio(
                    _by_seed(group.runs, metric.read), ref
                )
    for name in runs[0].metrics[split]:
        if name != "model" and all(name in run.metrics[split] for run in runs):
            result.baselines[name] = summarize([run.metrics[split][name]["mse"] for run in runs])
            if all("mse_scaled" in run.metrics[split][name] for run in runs):
                result.baselines_scaled[name] = summarize(
                    [run.metrics[split][name]["mse_scaled"] for run in runs]
                )
    for group in groups:
        seconds = [run.metrics["run"].get("train_seconds", math.nan) for run in group.runs]
        result.seconds[group.label] = summarize(seconds)
    return result


def _by_seed(runs: Sequence[Run], read: Callable[[dict], float]) -> dict[int, float]:
    """{seed: value}; runs sharing a seed (repeats) are averaged."""
    values: dict[int, list[float]] = {}
    for run in runs:
        values.setdefault(run.seed, []).append(read(run.metrics))
    return {seed: math.fsum(v) / len(v) for seed, v in values.items()}

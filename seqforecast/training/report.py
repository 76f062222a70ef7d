"""Evaluation of a trained model next to the baselines, as a table and metrics.json."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from torch import nn

from ..data import ForecastData
from .baselines import Forecaster
from .files import atomic_write_text
from .metrics import METRICS, baseline_metrics, split_metrics


def evaluate(
    model: nn.Module, data: ForecastData, batch_size: int, baselines: Mapping[str, Forecaster]
) -> dict:
    """{split: {forecaster: {mse, mae, rmse}}} for the test split (the test curve for the
    sigmoids) and the validation set, the model first, then every baseline on the same
    windows; in the data's own units."""
    results = {}
    for split_name, split in (("test", data.test), ("val", data.val)):
        results[split_name] = {
            "model": split_metrics(model, split, data, batch_size),
            **baseline_metrics(split, data, baselines),
        }
    return results


def ratios(results: dict) -> dict:
    """Model MSE / baseline MSE per split: below 1 means the model beats that baseline."""
    return {
        split: {
            name: rows["model"]["mse"] / row["mse"] if row["mse"] > 0 else float("inf")
            for name, row in rows.items()
            if name != "model"
        }
        for split, rows in results.items()
    }


def format_table(results: dict) -> str:
    """A fixed-width table: one row per forecaster, MSE/MAE/RMSE per split."""
    splits = list(results)
    width = max(len("forecaster"), *(len(name) for name in results[splits[0]])) + 2
    header = f"{'forecaster':<{width}}" + "".join(
        f"{split + ' ' + metric:>14}" for split in splits for metric in METRICS
    )
    lines = [header, "-" * len(header)]
    for name in results[splits[0]]:
        cells = "".join(
            f"{results[split][name][metric]:>14.6g}" for split in splits for metric in METRICS
        )
        lines.append(f"{name:<{width}}{cells}")
    return "\n".join(lines)


def write_metrics(path: Path, results: dict, run_info: dict) -> None:
    payload = {**results, "model_over_baseline_mse": ratios(results), "run": run_info}
    atomic_write_text(path, json.dumps(payload, indent=2) + "\n")

"""The one evaluation path: model and baseline metrics on a run's splits, in the data's units.

Every number a run reports comes from an `Evaluator`: the validation MSE that early stopping
reads each epoch, the per-epoch TensorBoard scalars, the table and metrics.json at the end of
training, and `seqforecast.evaluate`; `seqforecast.compare` aggregates those metrics.json
files. The splits are the run's `ForecastData.eval_splits()`: `test` (held out), `test_curve`
(synthetic data only) and `val` (the selection set). Baselines are fitted once, on the
training windows, and score exactly the windows the model scores.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from ..data import ForecastData
from .baselines import Forecaster, fit_baselines
from .metrics import forecast_metrics, predict


class Evaluator:
    def __init__(self, data: ForecastData, baselines: Mapping[str, Forecaster], batch_size: int):
        self.data = data
        self.baselines = dict(baselines)
        self.batch_size = batch_size
        self.splits = data.eval_splits()
        self._baseline_results: dict[str, dict] = {}  # baselines never change: computed once

    @classmethod
    def for_run(cls, data: ForecastData, config: Mapping) -> Evaluator:
        """Baselines fitted on the run's training windows (with its `data.season`)."""
        season = config["data"].get("season", 0)
        baselines = fit_baselines(data.train.src, data.train.target, season)
        return cls(data, baselines, config["trainer"]["eval_batch_size"])

    def model_metrics(self, model: nn.Module, split: str) -> dict[str, float]:
        """The model's MSE, MAE and RMSE over every window of `split` (eval mode)."""
        windows = self.splits[split]
        prediction = predict(model, windows.src, self.batch_size)
        return forecast_metrics(self.data.to_raw(prediction), self.data.to_raw(windows.target))

    def baseline_metrics(self, split: str) -> dict[str, dict[str, float]]:
        """{baseline: metrics} on every window of `split`."""
        if split not in self._baseline_results:
            windows = self.splits[split]
            truth = self.data.to_raw(windows.target)
            self._baseline_results[split] = {
                name: forecast_metrics(self.data.to_raw(forecast(windows.src)), truth)
                for name, forecast in self.baselines.items()
            }
        return self._baseline_results[split]

    def evaluate(self, model: nn.Module) -> dict[str, dict[str, dict[str, float]]]:
        """{split: {forecaster: {mse, mae, rmse}}} for every evaluation split, the model first,
        then each baseline on the same windows."""
        return {
            split: {"model": self.model_metrics(model, split), **self.baseline_metrics(split)}
            for split in self.splits
        }


def ratios(results: Mapping) -> dict[str, dict[str, float]]:
    """Model MSE / baseline MSE per split: below 1 means the model beats that baseline."""
    return {
        split: {
            name: rows["model"]["mse"] / row["mse"] if row["mse"] > 0 else float("inf")
            for name, row in rows.items()
            if name != "model"
        }
        for split, rows in results.items()
    }

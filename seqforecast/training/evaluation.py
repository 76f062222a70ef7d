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
from .metrics import MetricSums, evaluation


class Evaluator:
    def __init__(self, data: ForecastData, baselines: Mapping[str, Forecaster], batch_size: int):
        self.data = data
        self.baselines = dict(baselines)
        self.batch_size = batch_size
        self.splits = data.eval_splits()
        self._baseline_sums: dict[str, dict[str, MetricSums]] = {}  # baselines never change
        self.model_sums: dict[str, MetricSums] = {}  # the latest model scores, per split

    @classmethod
    def for_run(cls, data: ForecastData, config: Mapping) -> Evaluator:
        """Baselines fitted on the run's training windows (with its `data.season`)."""
        season = config["data"].get("season", 0)
        baselines = fit_baselines(data.train, season)
        return cls(data, baselines, config["trainer"]["eval_batch_size"])

    def _score(self, split: str, forecasters: Mapping[str, Forecaster]) -> dict[str, MetricSums]:
        """Every forecaster over every window of `split`, batch by batch (a panel's windows
        are gathered per batch, never all at once)."""
        windows, data = self.splits[split], self.data
        n_series = len(data.series_ids) if data.series_ids else 1
        sums = {name: MetricSums(n_series) for name in forecasters}
        for index in windows.chunks(self.batch_size):
            src, target = windows.take(index)
            series = windows.series_of(index)
            truth = data.to_raw(target, series)
            scale = None
            if data.mase_scale is not None:
                # Each window's series scale ([S, T] on the CPU, picked by a CPU index).
                picked = data.mase_scale[0 if series is None else series.cpu()]
                scale = picked.reshape(-1, data.n_targets).expand(len(truth), -1)  # [B, T]
            for name, forecast in forecasters.items():
                sums[name].add(data.to_raw(forecast(src), series), truth, series, scale)
        return sums

    def model_metrics(self, model: nn.Module, split: str) -> dict[str, float]:
        """The model's metrics over every window of `split` (eval mode)."""
        with evaluation(model):
            self.model_sums[split] = self._score(split, {"model": model})["model"]
        return self.model_sums[split].totals()

    def baseline_metrics(self, split: str) -> dict[str, dict[str, float]]:
        """{baseline: metrics} on every window of `split`."""
        if split not in self._baseline_sums:
            self._baseline_sums[split] = self._score(split, self.baselines)
        return {name: sums.totals() for name, sums in self._baseline_sums[split].items()}

    def evaluate(self, model: nn.Module) -> dict[str, dict[str, dict[str, float]]]:
        """{split: {forecaster: metrics}} for every evaluation split, the model first, then
        each baseline on the same windows."""
        return {
            split: {"model": self.model_metrics(model, split), **self.baseline_metrics(split)}
            for split in self.splits
        }

    def per_series(self, split: str = "test") -> dict[str, dict[str, list[float]]]:
        """{forecaster: {metric: [per series]}} from the latest `evaluate` (model first)."""
        self.baseline_metrics(split)
        found = {"model": self.model_sums[split]} if split in self.model_sums else {}
        found.update(self._baseline_sums[split])
        return {name: sums.per_series() for name, sums in found.items()}


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

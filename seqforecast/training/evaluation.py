"""The one evaluation path: model and baseline metrics on a run's splits, in the data's units.

Every number a run reports comes from an `Evaluator`: the validation MSE that early stopping
reads each epoch, the per-epoch TensorBoard scalars, the table and metrics.json at the end of
training, and `seqforecast.evaluate`; `seqforecast.compare` aggregates those metrics.json
files. The splits are the run's `ForecastData.eval_splits()`: `test` (held out), `test_curve`
(synthetic data only) and `val` (the selection set). Baselines are fitted once, on the
training windows, and score exactly the windows the model scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor, nn

from ..data import ForecastData, data_source
from ..probabilistic import AdaptiveConformal, SplitConformal
from ..probabilistic.sums import OWN, IntervalSums
from .baselines import Forecaster, fit_baselines
from .distributed import unwrap
from .metrics import MetricSums, evaluation


class Evaluator:
    def __init__(self, data: ForecastData, baselines: Mapping[str, Forecaster], batch_size: int):
        self.data = data
        self.baselines = dict(baselines)
        self.batch_size = batch_size
        self.splits = data.eval_splits()
        self._baseline_sums: dict[str, dict[str, MetricSums]] = {}  # baselines never change
        self.model_sums: dict[str, MetricSums] = {}  # the latest model scores, per split
        self._blocks: dict[tuple[str, int], Tensor] = {}  # (split, blocks) -> window blocks
        self.calibration: dict[str, SplitConformal] = {}  # the latest interval_metrics' fits
        # with intervals=adaptive, the model's half-width per coverage once every test truth
        # has arrived: [series, out_len, targets] (what predict adds after the data's end)
        self.adaptive_radius: dict[float, Tensor] = {}
        # and its test scores, per series (own_model: a probabilistic model's own quantiles)
        self.interval_sums: dict[str, IntervalSums] = {}

    @classmethod
    def for_run(cls, data: ForecastData, config: Mapping) -> Evaluator:
        """Baselines fitted on the run's training windows (with its `data.season`)."""
        data_cfg = config["data"]
        baselines = fit_baselines(data.train, data_source(data_cfg).season())
        return cls(data, baselines, config["trainer"]["eval_batch_size"])

    @property
    def n_series(self) -> int:
        """A panel's series, else 1: the rows of every per-series sum."""
        return len(self.data.series_ids) if self.data.series_ids else 1

    def _batches(self, split: str):
        """(index, src, target, series, truth, scale) per batch of `split`'s windows: target in
        model units, truth in the data's units, scale [B, T] each window's series' MASE scale
        (None without one). A panel's windows are gathered per batch, never all at once."""
        windows, data = self.splits[split], self.data
        for index in windows.chunks(self.batch_size):
            src, target = windows.take(index)
            series = windows.series_of(index)
            truth = data.to_raw(target, series)
            scale = None
            if data.mase_scale is not None:
                # Each window's series scale ([S, T] on the CPU, picked by a CPU index).
                picked = data.mase_scale[0 if series is None else series.cpu()]
                scale = picked.reshape(-1, data.n_targets).expand(len(truth), -1)  # [B, T]
            yield index, src, target, series, truth, scale

    def _score(
        self, split: str, forecasters: Mapping[str, Forecaster], blocks: int = 0
    ) -> dict[str, MetricSums]:
        """Every forecaster over every window of `split`; with `blocks`, also per block of
        time."""
        data = self.data
        sums = {name: MetricSums(self.n_series, blocks) for name in forecasters}
        block_of = self.time_blocks(split, blocks) if blocks else None
        for index, src, target, series, truth, scale in self._batches(split):
            for name, forecast in forecasters.items():
                predicted, loss = _forecast_and_loss(forecast, src, target)  # model units
                scaled = (predicted, target) if data.scaled_by else None
                block = None if block_of is None else block_of[index]
                sums[name].add(data.to_raw(predicted, series), truth, series, scale, scaled, block,
                               loss)
        return sums

    def interval_metrics(self, model: nn.Module, intervals: Mapping) -> dict[str, dict]:
        """{forecaster: interval and quantile scores} on the test windows (probabilistic/
        sums.py). Each forecaster is calibrated on its own errors over the validation windows,
        per horizon step and target: `split` conformal quantiles, or `adaptive` ones (ACI),
        which also learn, window after window in time order, from the test errors whose truth
        has arrived. The errors are taken in model units (a panel's series on one footing) and
        the quantiles mapped to the data's units like the point forecasts. A probabilistic
        model's own quantiles (`loss`) are scored beside, as `own_<score>` in its row. {} with
        `intervals.method=none`."""
        if intervals["method"] == "none" or not {"val", "test"} <= set(self.splits):
            return {}
        forecasters = {"model": model, **self.baselines}
        levels, coverages = intervals["quantiles"], intervals["levels"]
        self.adaptive_radius = {}
        with evaluation(model):
            sums = {name: IntervalSums(levels, coverages, self.n_series) for name in forecasters}
            if intervals["method"] == "adaptive":
                residuals = {name: self._errors("val", forecast)
                             for name, forecast in forecasters.items()}
                self.calibration = {"model": SplitConformal(residuals["model"])}
                self._adaptive_sums(forecasters, residuals, sums, intervals["gamma"])
            else:
                # One forecaster at a time, calibrated then scored, and only the model's
                # calibration kept (predict's bands): at most one forecaster's errors are held
                # unsorted (validation windows x horizon x targets: 1.8 GB at Electricity-720).
                for name, forecast in forecasters.items():
                    conformal = SplitConformal(self._errors("val", forecast))
                    for _, src, _, series, truth, scale in self._batches("test"):
                        point = forecast(src).cpu()
                        for part in quantile_parts(point, len(levels)):
                            self._add_quantiles(sums[name], conformal.quantiles(
                                point[part], levels), truth, scale, series, part)
                    if name == "model":
                        self.calibration = {"model": conformal}
            self.interval_sums = sums  # per series, for per_series.csv
            found = {name: sums.totals() for name, sums in sums.items()}
            own = self._own_interval_sums(model, levels, coverages)
        if own is not None:
            found["model"].update({OWN + k: v for k, v in own.totals().items()})
            self.interval_sums[OWN + "model"] = own
        return found

    def _errors(self, split: str, forecast: Forecaster) -> Tensor:
        """target - forecast [N, out_len, targets] over `split`'s windows, model units, on the
        CPU: filled batch by batch into one tensor (no list of batches joined afterwards)."""
        windows, filled, out = self.splits[split], 0, None
        for _, src, target, _, _, _ in self._batches(split):
            error = (target - forecast(src)).cpu()
            if out is None:
                out = error.new_empty((len(windows), *error.shape[1:]))
            out[filled : filled + len(error)] = error
            filled += len(error)
        return out

    def _adaptive_sums(self, forecasters: Mapping, residuals: Mapping, sums: Mapping,
                       gamma: float) -> None:
        """Adaptive conformal (ACI) quantiles of every forecaster over the test windows, each
        series' windows in time order (a window every `data.window_stride` rows), added to
        `sums`.
        Each central interval (the levels q and 1 - q) adapts its own miss rate; the median
        is the point."""
        points: dict[str, list[Tensor]] = {name: [] for name in forecasters}
        targets = []
        for _, src, target, _, _, _ in self._batches("test"):
            targets.append(target.cpu())
            for name, forecast in forecasters.items():
                points[name].append(forecast(src).cpu())
        target = torch.cat(targets)  # [M, H, T], model units
        series = self.splits["test"].series_of(slice(None))
        series = torch.zeros(len(target), dtype=torch.long) if series is None else series.cpu()
        stride = self.data.info.get("test", {}).get("stride", 1)
        for name, found in sums.items():
            point = torch.cat(points[name])
            after = self.adaptive_radius if name == "model" else None  # predict's, from bands.json
            quantiles = adaptive_quantiles(residuals[name], point, target, series, stride,
                                           found.quantiles, gamma, after,
                                           self.n_series)
            for index, _, _, window_series, truth, scale in self._batches("test"):
                picked = quantiles[index if isinstance(index, slice) else index.cpu()].to(truth)
                found.add(self._to_raw(picked, window_series), truth, scale, window_series)

    def _own_interval_sums(self, model: nn.Module, levels, coverages) -> IntervalSums | None:
        """A probabilistic model's own quantiles scored on the test windows (None for a point
        model): a quantile loss's levels, a distribution's at the run's levels."""
        output = getattr(unwrap(model), "output", None)
        if output is None or not output.probabilistic:
            return None
        own_levels = output.own_levels(levels)
        sums = IntervalSums(own_levels, coverages, self.n_series)
        for _, src, _, series, truth, scale in self._batches("test"):
            quantiles = output.quantiles(model(src, distribution=True), own_levels)
            sums.add(self._to_raw(quantiles.to(truth), series), truth, scale, series)
        return sums

    def _add_quantiles(self, sums: IntervalSums, quantiles: Tensor, truth: Tensor,
                       scale: Tensor | None, series: Tensor | None, part: slice) -> None:
        """quantiles [b, H, T, Q] (model units) of the windows `part` of a batch, scored."""
        def pick(found: Tensor | None) -> Tensor | None:
            return None if found is None else found[part]

        sums.add(self._to_raw(quantiles.to(truth), pick(series)), truth[part], pick(scale),
                 pick(series))

    def _to_raw(self, quantiles: Tensor, series: Tensor | None) -> Tensor:
        """quantiles [B, H, T, Q] in model units -> the data's units, level by level."""
        return torch.stack([self.data.to_raw(quantiles[..., i], series)
                            for i in range(quantiles.shape[-1])], dim=-1)

    def model_metrics(self, model: nn.Module, split: str, blocks: int = 0) -> dict[str, float]:
        """The model's metrics over every window of `split` (eval mode); with `blocks`, its
        MSE per block of time is kept too (`block_mse`)."""
        with evaluation(model):
            self.model_sums[split] = self._score(split, {"model": model}, blocks)["model"]
        return self.model_sums[split].totals()

    def block_mse(self, split: str, metric: str = "mse") -> list[float]:
        """The latest model's MSE per block of time on `split` (scored with `blocks`)."""
        return self.model_sums[split].block_mse(metric)

    def time_blocks(self, split: str, blocks: int) -> Tensor:
        """[N] the block of each window of `split`: each series' windows, in time order, cut
        into `blocks` contiguous stretches of (nearly) equal length, block k holding the k-th
        stretch of every series (so a block is a stretch of time across a panel)."""
        key = (split, blocks)
        if key not in self._blocks:
            windows = self.splits[split]
            n = len(windows)
            series = windows.series_of(slice(None))
            series = torch.zeros(n, dtype=torch.long) if series is None else series.cpu().long()
            counts = torch.bincount(series)
            first = torch.cumsum(counts, 0) - counts  # windows are grouped by series, in time
            position = torch.arange(n) - first[series]
            self._blocks[key] = position * blocks // counts[series]
        return self._blocks[key]

    def baseline_metrics(self, split: str) -> dict[str, dict[str, float]]:
        """{baseline: metrics} on every window of `split`."""
        if split not in self._baseline_sums:
            self._baseline_sums[split] = self._score(split, self.baselines)
        return {name: sums.totals() for name, sums in self._baseline_sums[split].items()}

    def evaluate(
        self, model: nn.Module, intervals: Mapping | None = None
    ) -> dict[str, dict[str, dict[str, float]]]:
        """{split: {forecaster: metrics}} for every evaluation split, the model first, then
        each baseline on the same windows; with the run's `intervals` config, each test row
        also holds its forecaster's conformal interval scores (`interval_metrics`)."""
        results = {
            split: {"model": self.model_metrics(model, split), **self.baseline_metrics(split)}
            for split in self.splits
        }
        for name, found in (self.interval_metrics(model, intervals) if intervals else {}).items():
            results["test"][name].update(found)
        return results

    def per_series(self, split: str = "test") -> dict[str, dict[str, list[float]]]:
        """{forecaster: {metric: [per series]}} from the latest `evaluate` (model first), with
        each forecaster's interval scores on the test split when it scored them."""
        self.baseline_metrics(split)
        found = {"model": self.model_sums[split]} if split in self.model_sums else {}
        found.update(self._baseline_sums[split])
        table = {name: sums.per_series() for name, sums in found.items()}
        if split == "test":
            for name, sums in self.interval_sums.items():
                if name.startswith(OWN):  # a probabilistic model's own quantiles: own_<score>
                    scores = {OWN + k: v for k, v in sums.per_series().items()}
                    table[name.removeprefix(OWN)].update(scores)
                else:
                    table[name].update(sums.per_series())
        return table


def _forecast_and_loss(forecast: Forecaster, src: Tensor, target: Tensor):
    """(the point forecast, the model's training loss of each value or None for a baseline),
    both [B, out_len, T] in model units, from one forward: a probabilistic model's point is
    its distribution's, as its own forward computes it."""
    output = getattr(unwrap(forecast), "output", None) if isinstance(forecast, nn.Module) else None
    if output is None:
        return forecast(src), None
    if not output.probabilistic:
        point = forecast(src)
        return point, output.loss(point.unsqueeze(-1), target)
    params = forecast(src, distribution=True)  # [B, out_len, T, K]
    return output.point(params), output.loss(params, target)


QUANTILE_VALUES = 2**23  # quantile values scored at once (float64: 64 MiB, a few copies)


def quantile_parts(point: Tensor, levels: int) -> list[slice]:
    """Slices of a batch's windows [B, H, T] whose quantiles at `levels` levels hold at most
    QUANTILE_VALUES values: a batch of the field's large files at every level is gigabytes
    (256 Electricity-720 windows: 256 x 720 x 321 x 13 values, 6 GB in float64, and its
    scoring makes copies of it). Each window's scores are its own, so the sums are those of
    the whole batch, in the same order."""
    step = max(1, QUANTILE_VALUES // max(1, point[0].numel() * levels))
    return [slice(i, min(i + step, len(point))) for i in range(0, len(point), step)]


def adaptive_quantiles(residuals: Tensor, point: Tensor, target: Tensor, series: Tensor,
                       stride: int, levels, gamma: float, radius_after: dict | None = None,
                       n_series: int = 0) -> Tensor:
    """ACI quantiles [M, H, T, Q] around point [M, H, T] (model units) from the calibration
    residuals [N, H, T]: for each central interval (levels q < 1/2 and 1 - q), each series'
    windows (grouped by series, in time order) adapt their own miss rate on the truths that
    have arrived; the level 1/2 is the point. `radius_after`, when given, receives for each
    central interval's coverage the half-width [S, H, T] of each series' interval once all its
    truths have arrived (a forecast from the end of its windows on; NaN for a series of the
    `n_series` without windows)."""
    quantiles = torch.empty(*point.shape, len(levels), dtype=torch.float64)
    pairs = {i: levels.index(next(p for p in levels if abs(p - (1 - q)) < 1e-9))
             for i, q in enumerate(levels) if q < 0.5}
    for i in (i for i, q in enumerate(levels) if abs(q - 0.5) < 1e-9):
        quantiles[..., i] = point.double()
    n_series = max(n_series, int(series.max()) + 1 if len(series) else 0)
    for low, high in pairs.items():
        aci = AdaptiveConformal(residuals, 1.0 - 2.0 * levels[low], gamma)
        after = torch.full((n_series, *point.shape[1:]), math.nan, dtype=torch.float64)
        for s in series.unique():
            rows = torch.nonzero(series == s).flatten()
            origins = torch.arange(len(rows)) * stride
            lower, upper, _ = aci.intervals(point[rows], target[rows], origins)
            quantiles[rows, ..., low], quantiles[rows, ..., high] = lower, upper
            after[s] = aci.radius(aci.rate_after)
        if radius_after is not None:
            radius_after[aci.coverage] = after
    return quantiles


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

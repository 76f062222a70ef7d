"""Forecast error metrics, and running a model in evaluation mode."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor

METRICS = ("mse", "mae", "rmse", "smape")  # every run
# CSV data scaled by data.scale: MSE and MAE in those units too (z-scores of each series'
# training rows for `standard`: the units of the published long-horizon tables).
IN_SCALED_UNITS = ("mse_scaled", "mae_scaled")


class MetricSums:
    """Error sums over windows, per series, accumulated in float64 batch by batch.

    Every aggregate is a mean over all values of all windows (windows have equal length, so
    also the mean over windows): MSE, MAE, RMSE in the data's units; sMAPE in percent
    (M4's: 200 |e| / (|y| + |ŷ|), 0 where both are 0); MASE, each error divided by its
    series' in-sample seasonal-naive MAE (`mase_scale`), over the series where that is > 0;
    `mse_scaled` and `mae_scaled` in the units the data was scaled to (`scaled`).

    With `n_blocks`, the squared errors are also summed per block of windows (each window's
    `block`, e.g. a stretch of time): what a paired test between two models reads.
    """

    FIELDS = ("squares", "absolute", "smape", "mase_errors", "values", "mase_values", "windows",
              "squares_scaled", "absolute_scaled", "loss")
    # what block_mse sums per block for each selection metric (trainer.select_on)
    BLOCK_FIELDS = {"mse": "squares", "mse_scaled": "squares_scaled", "loss": "loss"}

    def __init__(self, n_series: int = 1, n_blocks: int = 0):
        self.n_series = n_series
        self.sums = {name: torch.zeros(n_series, dtype=torch.float64) for name in self.FIELDS}
        self.has_scaled = False  # set once errors in scaled units are added
        self.has_loss = False  # set once a model's training loss is added
        self.block_sums = {
            name: torch.zeros(n_blocks, dtype=torch.float64)
            for name in (*self.BLOCK_FIELDS.values(), "values")
        }

    def add(
        self,
        prediction: Tensor,
        target: Tensor,
        series: Tensor | None = None,
        mase_scale: Tensor | None = None,
        scaled: tuple[Tensor, Tensor] | None = None,
        block: Tensor | None = None,
        loss: Tensor | None = None,
    ) -> None:
        """prediction, target [B, out_len, T] in the data's units; series [B] (None: all 0);
        mase_scale [B, T] (None: no MASE); `scaled`: (prediction, target) in the scaled units
        (None: no metrics in scaled units); block [B]: each window's block (with n_blocks);
        `loss` [B, out_len, T]: the model's training loss of each value (its `loss` group's, in
        model units; None for a baseline)."""
        if prediction.shape != target.shape:
            raise ValueError(
                f"prediction {tuple(prediction.shape)} vs target {tuple(target.shape)}"
            )
        error = prediction.detach().double() - target.detach().double()
        size = error[0].numel()
        denominator = prediction.detach().double().abs() + target.detach().double().abs()
        ratio = torch.where(denominator > 0, 2 * error.abs() / denominator, 0.0)
        per_window = {
            "squares": error.square().flatten(1).sum(1),
            "absolute": error.abs().flatten(1).sum(1),
            "smape": 100 * ratio.flatten(1).sum(1),
            "windows": torch.ones(len(error), dtype=torch.float64),
            "values": torch.full((len(error),), float(size), dtype=torch.float64),
        }
        if mase_scale is not None:
            scale = mase_scale.double().to(error.device)[:, None, :]  # [B, 1, T]
            usable = (scale > 0).expand_as(error)
            over_scale = torch.where(usable, error.abs() / scale.clamp_min(1e-300), 0.0)
            per_window["mase_errors"] = over_scale.flatten(1).sum(1)
            per_window["mase_values"] = usable.flatten(1).sum(1).double()
        if scaled is not None:
            self.has_scaled = True
            error_scaled = scaled[0].detach().double() - scaled[1].detach().double()
            per_window["squares_scaled"] = error_scaled.square().flatten(1).sum(1)
            per_window["absolute_scaled"] = error_scaled.abs().flatten(1).sum(1)
        if loss is not None:
            self.has_loss = True
            per_window["loss"] = loss.detach().double().flatten(1).sum(1)
        index = (
            torch.zeros(len(error), dtype=torch.long)
            if series is None
            else series.detach().long().cpu()
        )
        for name, values in per_window.items():
            self.sums[name].index_add_(0, index, values.cpu())
        if block is not None:
            for name, values in self.block_sums.items():
                if name in per_window:
                    values.index_add_(0, block.cpu(), per_window[name].cpu())

    def block_mse(self, metric: str = "mse") -> list[float]:
        """The mean of a selection metric (`mse`, `mse_scaled` or `loss`) in each block of
        windows; NaN for an empty one."""
        errors = self.block_sums[self.BLOCK_FIELDS[metric]]
        return (errors / self.block_sums["values"]).tolist()

    @staticmethod
    def _metrics(sums: dict, with_mase: bool, with_scaled: bool, with_loss: bool) -> dict:
        """{metric: value} from sums (scalars or per-series arrays alike)."""
        values = sums["values"]
        mse = sums["squares"] / values
        metrics = {"mse": mse, "mae": sums["absolute"] / values, "rmse": mse**0.5,
                   "smape": sums["smape"] / values}
        if with_mase:
            metrics["mase"] = sums["mase_errors"] / sums["mase_values"]
        if with_scaled:
            metrics["mse_scaled"] = sums["squares_scaled"] / values
            metrics["mae_scaled"] = sums["absolute_scaled"] / values
        if with_loss:  # the mean over values, as the training loop averages it
            metrics["loss"] = sums["loss"] / values
        return metrics

    @property
    def has_mase(self) -> bool:
        return bool(self.sums["mase_values"].sum() > 0)

    def totals(self) -> dict[str, float]:
        total = {name: values.sum() for name, values in self.sums.items()}
        found = self._metrics(total, self.has_mase, self.has_scaled, self.has_loss)
        return {k: float(v) for k, v in found.items()}

    def per_series(self) -> dict[str, list[float]]:
        """{metric: [one value per series]} plus `windows`; NaN for a series without windows."""
        with torch.no_grad():
            found = self._metrics(self.sums, self.has_mase, self.has_scaled, self.has_loss)
        found = {k: v.tolist() for k, v in found.items()}
        found["windows"] = self.sums["windows"].long().tolist()
        return found


def forecast_metrics(prediction: Tensor, target: Tensor) -> dict[str, float]:
    """MSE, MAE, RMSE and sMAPE over every value, accumulated in float64."""
    sums = MetricSums()
    sums.add(prediction, target)
    return sums.totals()


@contextmanager
def evaluation(model):
    """Eval mode and no autograd for the block; the model's own mode comes back after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def predict(model, src: Tensor, batch_size: int) -> Tensor:
    """Model forecasts for every window of `src` (eval mode, no window dropped)."""
    return _in_batches(model, model, src, batch_size)


def predict_quantiles(model, src: Tensor, batch_size: int, levels) -> Tensor:
    """A probabilistic model's own quantiles at `levels` for every window of `src`:
    [N, out_len, T, Q] (eval mode; probabilistic/outputs.py)."""
    output = model.output
    return _in_batches(model, lambda x: output.quantiles(model(x, distribution=True), levels),
                       src, batch_size)


def _in_batches(model, forward, src: Tensor, batch_size: int) -> Tensor:
    """forward(batch) over src, `batch_size` windows at a time, with `model` in eval mode."""
    with evaluation(model):
        return torch.cat([forward(src[i : i + batch_size]) for i in range(0, len(src), batch_size)])

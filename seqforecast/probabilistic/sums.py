"""Interval and quantile scores summed batch by batch, as `MetricSums` sums point errors.

For one forecaster on one split: its quantiles [B, out_len, T, Q] at the run's levels and the
truth [B, out_len, T], in the data's units. Every score is a mean over all values of all
windows (scores.py says what each is):

    pinball_<100q>   the pinball loss at level q           crps        CRPS from the quantiles
    coverage_<100c>  share of values inside the c interval  width_<100c> its mean width
    msis_<100c>      its interval score over each series' in-sample seasonal-naive MAE (where
                     the data has that scale, as MASE)

A probabilistic model (`loss=quantile|gaussian`) is scored twice: on its conformal quantiles
like every forecaster, and on its own quantiles, as `own_<score>`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .quantiles import interval_bounds

INTERVAL_SCORES = ("crps", "coverage_", "width_", "msis_")  # the names below (pinball aside)
OWN = "own_"  # prefix of a probabilistic model's scores of its own quantiles (beside conformal)


def is_interval_score(name: str) -> bool:
    """crps, coverage_<c>, width_<c>, msis_<c>: what the interval tables show."""
    return name.startswith(INTERVAL_SCORES)


def level_name(level: float) -> str:
    """0.8 -> '80', 0.025 -> '2.5'."""
    return f"{100 * level:g}"


class IntervalSums:
    def __init__(self, quantiles: Sequence[float], levels: Sequence[float]):
        self.quantiles = tuple(quantiles)
        self.levels = tuple(levels)
        self.bounds = [interval_bounds(self.quantiles, c) for c in self.levels]
        self.q = torch.tensor(self.quantiles, dtype=torch.float64)
        self.pinball = torch.zeros(len(self.quantiles), dtype=torch.float64)
        self.inside = torch.zeros(len(self.levels), dtype=torch.float64)
        self.width = torch.zeros(len(self.levels), dtype=torch.float64)
        self.interval_score = torch.zeros(len(self.levels), dtype=torch.float64)
        self.values = 0
        self.scaled_values = 0

    def add(self, quantiles: Tensor, target: Tensor, scale: Tensor | None = None) -> None:
        """quantiles [B, H, T, Q], target [B, H, T] (data units); scale [B, T] (each window's
        series' seasonal-naive MAE) or None (no MSIS)."""
        quantiles, target = quantiles.double(), target.double()
        error = target.unsqueeze(-1) - quantiles  # [B, H, T, Q]
        q = self.q.to(error.device)
        self.pinball += torch.maximum(q * error, (q - 1.0) * error).sum(dim=(0, 1, 2)).cpu()
        self.values += target.numel()
        usable = None
        if scale is not None:
            usable = (scale > 0)[:, None, :].expand_as(target)  # series with a scale
            self.scaled_values += int(usable.sum())
        for i, (low, high) in enumerate(self.bounds):
            lower, upper = quantiles[..., low], quantiles[..., high]
            self.inside[i] += ((target >= lower) & (target <= upper)).sum().item()
            self.width[i] += (upper - lower).sum().item()
            if usable is not None:
                alpha = 1.0 - self.levels[i]
                miss = (lower - target).clamp(min=0.0) + (target - upper).clamp(min=0.0)
                score = (upper - lower + (2.0 / alpha) * miss) / scale.double()[:, None, :]
                self.interval_score[i] += score[usable].sum().item()

    def totals(self) -> dict[str, float]:
        n = max(self.values, 1)
        found = {f"pinball_{level_name(q)}": (s / n).item()
                 for q, s in zip(self.quantiles, self.pinball, strict=True)}  # fmt: skip
        found["crps"] = 2.0 * (self.pinball.sum() / n).item() / len(self.quantiles)
        for i, level in enumerate(self.levels):
            name = level_name(level)
            found[f"coverage_{name}"] = self.inside[i].item() / n
            found[f"width_{name}"] = self.width[i].item() / n
            if self.scaled_values:
                found[f"msis_{name}"] = self.interval_score[i].item() / self.scaled_values
        return found

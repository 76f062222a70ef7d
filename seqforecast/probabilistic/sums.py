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

import math
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
    """Sums of a forecaster's interval scores on one split, per series (a panel's; one
    otherwise): `totals` over every value, `per_series` each series' own."""

    def __init__(self, quantiles: Sequence[float], levels: Sequence[float], n_series: int = 1):
        self.quantiles = tuple(quantiles)
        self.levels = tuple(levels)
        self.bounds = [interval_bounds(self.quantiles, c) for c in self.levels]
        self.q = torch.tensor(self.quantiles, dtype=torch.float64)
        zeros = lambda *shape: torch.zeros(n_series, *shape, dtype=torch.float64)  # noqa: E731
        self.pinball = zeros(len(self.quantiles))  # [S, Q]
        self.inside = zeros(len(self.levels))  # [S, C]
        self.width = zeros(len(self.levels))
        self.interval_score = zeros(len(self.levels))
        self.values = zeros()  # [S]
        self.scaled_values = zeros()

    def add(self, quantiles: Tensor, target: Tensor, scale: Tensor | None = None,
            series: Tensor | None = None) -> None:
        """quantiles [B, H, T, Q], target [B, H, T] (data units); scale [B, T] (each window's
        series' seasonal-naive MAE) or None (no MSIS); series [B] (each window's, a panel's)
        or None (one series)."""
        quantiles, target = quantiles.double().cpu(), target.double().cpu()
        rows = (torch.zeros(len(target), dtype=torch.long) if series is None
                else series.long().cpu())
        per_window = lambda values: values.flatten(1).sum(dim=1)  # [B, ...] -> [B]  # noqa: E731
        error = target.unsqueeze(-1) - quantiles  # [B, H, T, Q]
        loss = torch.maximum(self.q * error, (self.q - 1.0) * error)
        self.pinball.index_add_(0, rows, loss.flatten(1, 2).sum(dim=1))
        self.values.index_add_(0, rows, torch.full((len(target),), float(target[0].numel()),
                                                   dtype=torch.float64))
        usable = None
        if scale is not None:
            scale = scale.double().cpu()
            usable = (scale > 0)[:, None, :].expand_as(target)  # series with a scale
            self.scaled_values.index_add_(0, rows, per_window(usable.double()))
        for i, (low, high) in enumerate(self.bounds):
            lower, upper = quantiles[..., low], quantiles[..., high]
            inside = ((target >= lower) & (target <= upper)).double()
            self.inside[:, i].index_add_(0, rows, per_window(inside))
            self.width[:, i].index_add_(0, rows, per_window(upper - lower))
            if usable is not None:
                alpha = 1.0 - self.levels[i]
                miss = (lower - target).clamp(min=0.0) + (target - upper).clamp(min=0.0)
                score = (upper - lower + (2.0 / alpha) * miss) / scale[:, None, :]
                score = torch.where(usable, score, 0.0)  # no scale: 0/0, left out
                self.interval_score[:, i].index_add_(0, rows, per_window(score))

    def totals(self) -> dict[str, float]:
        """Every score over all values of all series."""
        return {k: v[0] for k, v in self._scores(lambda t: t.sum(dim=0, keepdim=True)).items()}

    def per_series(self) -> dict[str, list[float]]:
        """crps, coverage_<c>, width_<c>, msis_<c> of each series (nan where one has none)."""
        return {k: v for k, v in self._scores(lambda t: t).items() if is_interval_score(k)}

    def _scores(self, pool) -> dict[str, list[float]]:
        """Each score as a list, over the series rows that `pool` makes of the sums."""
        values, scaled = pool(self.values), pool(self.scaled_values)
        n = values.clamp(min=1.0)
        found = {f"pinball_{level_name(q)}": (pool(self.pinball)[:, j] / n).tolist()
                 for j, q in enumerate(self.quantiles)}
        found["crps"] = (2.0 * pool(self.pinball).sum(dim=1) / n / len(self.quantiles)).tolist()
        for i, level in enumerate(self.levels):
            name = level_name(level)
            found[f"coverage_{name}"] = (pool(self.inside)[:, i] / n).tolist()
            found[f"width_{name}"] = (pool(self.width)[:, i] / n).tolist()
            if self.scaled_values.sum() > 0:
                msis = pool(self.interval_score)[:, i] / scaled
                found[f"msis_{name}"] = torch.where(scaled > 0, msis, math.nan).tolist()
        return found

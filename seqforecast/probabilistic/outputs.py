"""What a model forecasts at each step and target, and the loss it trains on (`loss` group):

    mse        a point, trained on the squared error (every run before this group existed)
    quantile   quantiles at `loss.quantiles`, trained on the mean pinball loss over the levels;
               they never cross (quantiles.monotone_quantiles); the point is the median
    gaussian   a normal distribution (mean, scale), trained on its negative log-likelihood;
               the point is the mean, its quantiles at any level come from the normal's

A model's head gives `n_params` raw outputs per step and target in its normalised units;
`constrain` turns them into parameters there (monotone quantiles, a positive scale). What the
model adds and undoes after its head (the linear path, the window's normalisation) is affine in
the head's output per window, step and target, `y = a f + b`, so `map_back` applies it to the
parameters: to every quantile and to the mean, `|a|` alone to a scale (a scale has no level).
A negative `a` (a RevIN affine weight below zero) reverses the quantiles' order; they are put
back in order, so they still never cross.

Every output's loss is per value ([..., T]); the training loop sums it like the squared error.
Outputs are in the model's units (the data's scaled units), like every point forecast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from .quantiles import check_quantiles, median_index, monotone_quantiles

LOSSES = ("mse", "quantile", "gaussian")
DEFAULT_LEVELS = (0.025, 0.1, 0.5, 0.9, 0.975)  # a distribution's, where the run names none
MIN_SCALE = 1e-3  # the gaussian's smallest scale in normalised units: its NLL stays finite
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class PointOutput:
    """One value per step and target, trained on the squared error."""

    name = "mse"
    n_params = 1
    probabilistic = False

    def constrain(self, raw: Tensor) -> Tensor:
        return raw

    def map_back(self, params: Tensor, a: Tensor, b: Tensor) -> Tensor:
        """params [..., K] in normalised units, a and b [...] -> params in the model's units."""
        return a.unsqueeze(-1) * params + b.unsqueeze(-1)

    def point(self, params: Tensor) -> Tensor:
        """params [..., K] -> the point forecast [...]."""
        return params[..., 0]

    def loss(self, params: Tensor, target: Tensor) -> Tensor:
        """params [..., K], target [...] -> the loss of each value [...]."""
        return (self.point(params) - target).square()

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        raise ValueError(f"loss={self.name} forecasts a point, not quantiles")

    def own_levels(self, levels: Sequence[float]) -> tuple[float, ...]:
        """The quantile levels its own intervals are scored at, given the run's."""
        return tuple(levels)


class QuantileOutput(PointOutput):
    """Quantiles at `levels`, non-decreasing, trained on the pinball loss."""

    name = "quantile"
    probabilistic = True

    def __init__(self, levels: Sequence[float]):
        self.levels = check_quantiles(levels)
        self.n_params = len(self.levels)
        self.median = median_index(self.levels)  # the point, and the anchor of the steps
        self._q = torch.tensor(self.levels)

    def constrain(self, raw: Tensor) -> Tensor:
        return monotone_quantiles(raw, self.median)

    def map_back(self, params: Tensor, a: Tensor, b: Tensor) -> Tensor:
        out = super().map_back(params, a, b)
        return out.sort(dim=-1).values if bool((a < 0).any()) else out

    def point(self, params: Tensor) -> Tensor:
        return params[..., self.median]

    def loss(self, params: Tensor, target: Tensor) -> Tensor:
        q = self._q.to(params)
        error = target.unsqueeze(-1) - params  # [..., Q]
        return torch.maximum(q * error, (q - 1.0) * error).mean(dim=-1)

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        if tuple(levels) != self.levels:
            raise ValueError(f"loss=quantile forecasts the levels {self.levels}, not {levels}")
        return params

    def own_levels(self, levels: Sequence[float]) -> tuple[float, ...]:
        return self.levels


class GaussianOutput(PointOutput):
    """A normal distribution per step and target: params [..., 2] = (mean, scale)."""

    name = "gaussian"
    n_params = 2
    probabilistic = True

    def constrain(self, raw: Tensor) -> Tensor:
        mean, scale = raw.unbind(-1)
        return torch.stack([mean, F.softplus(scale) + MIN_SCALE], dim=-1)

    def map_back(self, params: Tensor, a: Tensor, b: Tensor) -> Tensor:
        mean, scale = params.unbind(-1)
        return torch.stack([a * mean + b, a.abs() * scale], dim=-1)

    def loss(self, params: Tensor, target: Tensor) -> Tensor:
        mean, scale = params.unbind(-1)
        return _HALF_LOG_2PI + scale.log() + 0.5 * ((target - mean) / scale).square()

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        mean, scale = params.unbind(-1)
        z = torch.special.ndtri(torch.tensor(levels, dtype=params.dtype, device=params.device))
        return mean.unsqueeze(-1) + scale.unsqueeze(-1) * z  # [..., Q]

    def own_levels(self, levels: Sequence[float]) -> tuple[float, ...]:
        return tuple(levels) or DEFAULT_LEVELS


def build_output(loss: Mapping | None) -> PointOutput:
    """The output of a `loss` config (None: runs saved before the group existed, mse)."""
    name = "mse" if loss is None else loss["name"]
    if name == "mse":
        return PointOutput()
    if name == "quantile":
        return QuantileOutput(loss["quantiles"])
    if name == "gaussian":
        return GaussianOutput()
    raise ValueError(f"loss={name!r}; allowed: {', '.join(LOSSES)}")

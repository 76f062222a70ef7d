"""What a model forecasts at each step and target, and the loss it trains on (`loss` group):

    mse        a point, trained on the squared error (every run before this group existed)
    quantile   quantiles at `loss.quantiles`, trained on the mean pinball loss over the levels;
               they never cross (quantiles.monotone_quantiles); the point is the median
    gaussian   a normal distribution (mean, scale), trained on its negative log-likelihood;
               the point is the mean, its quantiles at any level come from the normal's
    poisson    a Poisson distribution of counts (its rate), trained on its negative
               log-likelihood; the point is the rate (the mean), its quantiles whole numbers.
               It describes only counts in the data's own units: `cannot_describe` says why
               other data will not do

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
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from omegaconf import MISSING
from torch import Tensor

from ..options import option, refuse
from ..plugins import Registry
from .quantiles import (
    QUANTILES,
    check_quantiles,
    interval_bounds,
    median_index,
    monotone_quantiles,
    quantile_rule,
)

DEFAULT_LEVELS = (0.025, 0.1, 0.5, 0.9, 0.975)  # a distribution's, where the run names none
MIN_SCALE = 1e-3  # the gaussian's smallest scale in normalised units: its NLL stays finite
MIN_RATE = 1e-6  # the Poisson's smallest rate: log(rate) stays finite
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass
class LossOptions:  # loss=mse|gaussian|poisson: nothing to set
    name: str = MISSING


@dataclass
class QuantileLossOptions(LossOptions):  # loss=quantile
    name: str = "quantile"
    quantiles: list[float] = option(QUANTILES, factory=True)


# loss=<name> -> its output class and options; other packages' under the entry-point group
# seqforecast.losses
OUTPUTS = Registry("loss", "seqforecast.losses")


# @register_output(name, Options) on an output class: loss=<name> (Options: LossOptions where
# it has nothing to set)
register_output = OUTPUTS.register
available_outputs = OUTPUTS.names
output_schema = OUTPUTS.schema  # the dataclass of loss=<name>'s options


def build_output(loss: Mapping, intervals: Mapping | None = None) -> PointOutput:
    """The output of a `loss` config; `intervals` (the run's intervals node) for an output whose
    own quantiles must hold its interval levels. ConfigError in one line where it cannot."""
    return OUTPUTS[loss["name"]].cls.from_config(loss, intervals)


@register_output("mse", LossOptions)
class PointOutput:
    """One value per step and target, trained on the squared error."""

    name = "mse"
    n_params = 1
    probabilistic = False

    @classmethod
    def from_config(cls, loss: Mapping, intervals: Mapping | None = None) -> PointOutput:
        """Built from its `loss` node (and the run's `intervals`); ConfigError where the two
        cannot go together."""
        return cls()

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

    def cannot_describe(self, data) -> str | None:
        """Why this output cannot describe a run's data (ForecastData), in one line; None
        when it can (every real value, for all but a count distribution)."""
        return None


@register_output("quantile", QuantileLossOptions)
class QuantileOutput(PointOutput):
    """Quantiles at `levels`, non-decreasing, trained on the pinball loss."""

    name = "quantile"
    probabilistic = True

    def __init__(self, levels: Sequence[float]):
        self.levels = check_quantiles(levels)
        self.n_params = len(self.levels)
        self.median = median_index(self.levels)  # the point, and the anchor of the steps
        self._q = torch.tensor(self.levels)

    @classmethod
    def from_config(cls, loss: Mapping, intervals: Mapping | None = None) -> QuantileOutput:
        """Its levels hold the median (the point forecast) and each interval level the run
        scores (a model's own intervals come from its own quantiles)."""
        levels = quantile_rule("loss.", check_quantiles, loss["quantiles"])
        if 0.5 not in levels:
            raise refuse("loss.quantiles", list(levels),
                         "include 0.5: the median is the point forecast")
        if intervals is not None and intervals["method"] != "none":
            for level in intervals["levels"]:
                quantile_rule("loss.quantiles: ", interval_bounds, levels, level, then=(
                    " (intervals.levels asks for it; add the levels to loss.quantiles or "
                    "change intervals.levels)"))
        return cls(levels)

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


@register_output("gaussian", LossOptions)
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


@register_output("poisson", LossOptions)
class PoissonOutput(PointOutput):
    """A Poisson distribution of counts per step and target: params [..., 1], its rate.

    The head's output is mapped back like a point (the window's normalisation, the linear
    path), then made positive (softplus, at least MIN_RATE): the rate in the data's own units,
    which must be counts (data.scale=none). Its quantile at level q is the smallest count k with
    P(Y <= k) >= q, a whole number."""

    name = "poisson"
    n_params = 1
    probabilistic = True

    def map_back(self, params: Tensor, a: Tensor, b: Tensor) -> Tensor:
        return F.softplus(super().map_back(params, a, b)) + MIN_RATE

    def loss(self, params: Tensor, target: Tensor) -> Tensor:
        rate = params[..., 0]
        return rate - target * rate.log() + torch.lgamma(target + 1.0)

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        rate = params[..., :1].double()  # [..., 1]
        q = torch.tensor(levels, dtype=rate.dtype, device=rate.device)  # [Q]
        # From the normal approximation, stepped to the exact count: P(Y <= k) is the
        # regularised upper incomplete gamma Q(k + 1, rate).
        start = (rate + torch.special.ndtri(q) * rate.sqrt()).floor().clamp_min(0.0)
        k = start.expand(*rate.shape[:-1], len(levels)).clone()
        cdf = lambda counts: torch.special.gammaincc(counts + 1.0, rate)  # noqa: E731
        while bool(((k > 0) & (cdf(k - 1.0) >= q)).any()):  # down while the one below does
            k = torch.where((k > 0) & (cdf(k - 1.0) >= q), k - 1.0, k)
        while bool((cdf(k) < q).any()):  # up until it does
            k = torch.where(cdf(k) < q, k + 1.0, k)
        return k.to(params.dtype)

    def own_levels(self, levels: Sequence[float]) -> tuple[float, ...]:
        return tuple(levels) or DEFAULT_LEVELS

    def cannot_describe(self, data) -> str | None:
        if data.scaled_by:
            return (f"loss=poisson forecasts counts in the data's own units; the data is "
                    f"scaled (data.scale={data.scaled_by}): set data.scale=none")
        for name in ("train", "val", "test"):
            split = getattr(data, name)
            values = (split.values[:, : data.n_targets] if hasattr(split, "values")
                      else torch.cat([split.src[..., : data.n_targets].flatten(),
                                      split.target.flatten()]))
            bad = values[(values < 0) | (values != values.round()) | ~values.isfinite()]
            if len(bad):
                return (f"loss=poisson describes counts (whole numbers >= 0); the {name} "
                        f"targets hold {float(bad[0]):g}: choose loss=gaussian, quantile or mse")
        return None


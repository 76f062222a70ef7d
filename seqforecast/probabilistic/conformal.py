"""Conformal intervals around any point forecaster, from its errors on calibration windows.

Split conformal (Vovk et al. 2005; Lei et al. 2018): the forecaster's signed errors
r = y - point on N calibration windows (the validation split), one set per horizon step and
target, give its quantiles as point + the empirical quantile of r, at a finite-sample rank:

    level q >= 1/2:  the k-th smallest r, k = ceil((N + 1) q)   (k > N: +inf)
    level q <  1/2:  the k-th smallest r, k = floor((N + 1) q)  (k < 1: -inf)

so that, when calibration and test windows are exchangeable, P(y > upper) <= 1 - q and
P(y < lower) <= q on new windows whatever the forecaster, and the central interval between the
(1 - c)/2 and (1 + c)/2 quantiles covers at least c. No retraining, no assumption on the
errors' shape; the guarantee is marginal (over windows), per horizon step.

Adaptive conformal inference (ACI, Gibbs and Candès 2021), for test months unlike the
calibration ones: each horizon step h (and target) keeps its own miss rate a_h, starting at
1 - c, and moves it after every error whose truth has arrived,

    a_h <- a_h + gamma (1 - c - miss)        (miss = 1 if the truth fell outside)

taking the interval at level 1 - a_h of the calibration errors' magnitudes. A window's step h
is known only h + 1 steps after the window's first forecast step, so a window never adapts on
its own truth nor on any truth after its forecast origin. Over a long run the miss rate
approaches 1 - c whatever the drift (a guarantee on the average, not per window).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

INTERVAL_METHODS = ("split", "adaptive", "none")  # intervals.method
SORT_CHUNK_VALUES = 2**24  # the values sorted at once: a sort's int64 indices stay this small


def sorted_errors(errors: Tensor) -> Tensor:
    """errors [N, *shape] sorted along N, in their own dtype, a slice of columns at a time.
    Kept in float32 where the errors are: the order statistics are those values, exactly, and
    each is widened to float64 where it is used, so the bands are the same to the bit at half
    the memory of a float64 copy (the calibration of the field's large files holds validation
    windows x horizon x channels of them per forecaster: 1.8 GB at Electricity-720)."""
    errors = errors.detach()
    flat = errors.reshape(errors.shape[0], -1)  # [N, columns]
    out = torch.empty_like(flat)
    step = max(1, SORT_CHUNK_VALUES // max(1, flat.shape[0]))
    for start in range(0, flat.shape[1], step):
        out[:, start : start + step] = flat[:, start : start + step].sort(dim=0).values
    return out.view_as(errors)


class SplitConformal:
    """Quantiles and intervals around point forecasts from calibration errors.

    residuals [N, *shape] (y - point on N calibration windows; shape e.g. [out_len, targets]).
    """

    def __init__(self, residuals: Tensor):
        if residuals.dim() < 1 or residuals.shape[0] < 1:
            raise ValueError("conformal calibration needs at least one window of errors")
        if not torch.isfinite(residuals).all():
            raise ValueError("conformal calibration errors must be finite")
        self.sorted = sorted_errors(residuals)  # [N, *shape], its dtype
        self.n = residuals.shape[0]

    def offset(self, level: float) -> Tensor:
        """The calibrated error quantile at `level` [*shape] (+-inf where N is too small)."""
        if level >= 0.5:
            k = math.ceil((self.n + 1) * level)
            if k > self.n:
                return torch.full_like(self.sorted[0], math.inf, dtype=torch.float64)
        else:
            k = math.floor((self.n + 1) * level)
            if k < 1:
                return torch.full_like(self.sorted[0], -math.inf, dtype=torch.float64)
        return self.sorted[k - 1].double()

    def quantiles(self, point: Tensor, levels: Sequence[float]) -> Tensor:
        """point [M, *shape] -> its conformal quantiles [M, *shape, Q], non-decreasing."""
        offsets = torch.stack([self.offset(q) for q in levels], dim=-1)  # [*shape, Q]
        return point.double().unsqueeze(-1) + offsets

    def interval(self, point: Tensor, coverage: float) -> tuple[Tensor, Tensor]:
        """(lower, upper) [M, *shape]: the central interval covering at least `coverage`."""
        tail = (1.0 - coverage) / 2.0
        bounds = self.quantiles(point, [tail, 1.0 - tail])
        return bounds[..., 0], bounds[..., 1]


class AdaptiveConformal:
    """ACI intervals over test windows in time order (see the module docstring).

    residuals [N, H, *rest]: calibration errors, H horizon steps; `coverage` the target c;
    `gamma` the step of the miss-rate update (Gibbs and Candès use 0.005).
    """

    def __init__(self, residuals: Tensor, coverage: float, gamma: float = 0.005):
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage {coverage}: must lie strictly between 0 and 1")
        self.magnitudes = sorted_errors(residuals.detach().abs())  # [N, H, ...], its dtype
        self.n = residuals.shape[0]
        self.coverage, self.gamma = coverage, gamma

    def radius(self, miss_rate: Tensor) -> Tensor:
        """The calibration magnitude at level 1 - miss_rate, per element [H, *rest]. A rate
        the N magnitudes cannot bound (below 1 / (N + 1), or negative after a run of misses)
        takes the largest of them: Gibbs and Candès take the whole line there, which would
        make every later width and interval score infinite; the rate itself is not clipped,
        so it still has to earn its way back."""
        k = torch.ceil((self.n + 1) * (1.0 - miss_rate)).long()
        inside = self.magnitudes.gather(0, k.clamp(1, self.n).unsqueeze(0) - 1)[0].double()
        return torch.where(k < 1, torch.zeros_like(inside), inside)  # a miss rate >= 1

    def intervals(
        self, point: Tensor, target: Tensor, origins: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """point, target [M, H, *rest] and origins [M] (the time step of each window's first
        forecast step, increasing) -> (lower, upper, the miss rate used) [M, H, *rest].
        Afterwards `rate_after` [H, *rest] is the miss rate of a window forecast once every one
        of these truths has arrived (from the end of the data on: what `predict` reads).

        The miss rate of window i at step h is 1 - c plus gamma times the sum, over every
        window j whose truth at step h has arrived (origins[j] + h < origins[i]), of
        (1 - c - miss_jh): a prefix sum over the windows in time order, read per step at the
        arrived count, so one pass over the windows serves every step and element at once."""
        m, horizon = point.shape[0], point.shape[1]
        if m and bool((origins[1:] < origins[:-1]).any()):
            raise ValueError("adaptive conformal: windows must come in time order")
        point, target = point.double(), target.double()
        origins = origins.to(torch.long).cpu()
        # [M, H]: how many windows' truths at step h have arrived when window i is forecast
        arrived = torch.searchsorted(origins, origins[:, None] - torch.arange(horizon)[None, :])
        target_miss = 1.0 - self.coverage
        prefix = point.new_zeros(m + 1, *point.shape[1:])  # [M + 1, H, *rest]
        lower, upper = torch.empty_like(point), torch.empty_like(point)
        rates = torch.empty_like(point)
        index = arrived.view(m, horizon, *([1] * (point.dim() - 2))).expand(m, *point.shape[1:])
        for i in range(m):
            rate = target_miss + self.gamma * prefix.gather(0, index[i : i + 1])[0]
            radius = self.radius(rate)
            lower[i], upper[i], rates[i] = point[i] - radius, point[i] + radius, rate
            missed = (target[i] < lower[i]) | (target[i] > upper[i])
            prefix[i + 1] = prefix[i] + (target_miss - missed.double())
        self.rate_after = target_miss + self.gamma * prefix[m]
        return lower, upper, rates

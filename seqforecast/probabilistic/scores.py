"""Scores of probabilistic forecasts, each averaged over every value it is given.

    pinball_q(y, f) = max(q (y - f), (q - 1) (y - f))            (quantile loss at level q)
    CRPS(F, y)      = integral_0^1 2 pinball_q(y, F^-1(q)) dq     (approximated on the levels)
    coverage        = share of values inside [lower, upper]
    MSIS (M4)       = mean(U - L + 2/a (L - y) 1[y < L] + 2/a (y - U) 1[y > U]) / scale

With evenly spaced levels q_i = (i - 1/2) / Q the CRPS approximation is the midpoint rule for
the integral (exact as Q grows); with other levels it is the mean over the levels given, which
is how forecast competitions score quantile forecasts (a weighted interval score up to a
constant). MSIS uses a = 1 - coverage and is divided by the series' in-sample seasonal-naive
MAE, as MASE is.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def pinball(quantiles: Tensor, target: Tensor, levels: Sequence[float]) -> Tensor:
    """quantiles [..., Q], target [...] -> the mean pinball loss at each level [Q]."""
    q = torch.as_tensor(levels, dtype=quantiles.dtype, device=quantiles.device)
    error = target.unsqueeze(-1) - quantiles  # [..., Q]
    loss = torch.maximum(q * error, (q - 1.0) * error)
    return loss.reshape(-1, len(levels)).mean(dim=0)


def crps_from_quantiles(quantiles: Tensor, target: Tensor, levels: Sequence[float]) -> Tensor:
    """The CRPS approximated from forecast quantiles: twice the pinball loss averaged over the
    levels (a scalar)."""
    return 2.0 * pinball(quantiles, target, levels).mean()


def coverage(lower: Tensor, upper: Tensor, target: Tensor) -> Tensor:
    """The share of target values inside [lower, upper]."""
    return ((target >= lower) & (target <= upper)).to(lower.dtype).mean()


def interval_width(lower: Tensor, upper: Tensor) -> Tensor:
    return (upper - lower).mean()


def msis(lower: Tensor, upper: Tensor, target: Tensor, level: float, scale: Tensor | float = 1.0):
    """The mean scaled interval score of the central `level` interval (0.95 in M4). `scale`:
    each value's in-sample seasonal-naive MAE, broadcast against target (1: unscaled)."""
    alpha = 1.0 - level
    below = (lower - target).clamp(min=0.0)
    above = (target - upper).clamp(min=0.0)
    score = (upper - lower) + (2.0 / alpha) * (below + above)
    return (score / scale).mean()

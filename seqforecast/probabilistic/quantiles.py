"""Quantile levels: checked once, the central intervals they hold, and outputs that never cross.

A run forecasts at levels such as (0.025, 0.1, 0.5, 0.9, 0.975). The central interval at level
80% lies between the 0.1 and 0.9 quantiles; it is available only where both levels are
forecast. A model's raw outputs [..., Q] become quantiles that never cross by anchoring one
output and adding non-negative (softplus) steps outward from it, so training cannot produce an
upper quantile below a lower one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import ConfigError

# The quantile levels a run scores (pinball, CRPS) and a quantile loss forecasts by default.
QUANTILES = [0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.975]


class QuantileError(ValueError):
    """Bad quantile levels or interval levels: one line saying what is wrong and what is allowed."""


def check_quantiles(levels: Sequence[float]) -> tuple[float, ...]:
    """The levels as a tuple, or QuantileError: each strictly inside (0, 1), increasing, none
    repeated, at least one."""
    levels = tuple(float(q) for q in levels)
    if not levels:
        raise QuantileError("quantiles: give at least one level in (0, 1), e.g. [0.1, 0.5, 0.9]")
    outside = [q for q in levels if not 0.0 < q < 1.0]
    if outside:
        raise QuantileError(f"quantiles: {outside[0]} is outside (0, 1); each level must lie "
                            f"strictly between 0 and 1")
    for a, b in pairwise(levels):
        if a == b:
            raise QuantileError(f"quantiles: {a} is given twice; list each level once")
        if b < a:
            raise QuantileError(f"quantiles: {a} comes before {b}; list the levels in "
                                f"increasing order")
    return levels


def interval_bounds(levels: Sequence[float], coverage: float) -> tuple[int, int]:
    """Indices (lower, upper) of the quantiles bounding the central interval of `coverage`
    (e.g. 0.8 -> the 0.1 and 0.9 levels), or QuantileError naming the levels it needs."""
    if not 0.0 < coverage < 1.0:
        raise QuantileError(f"interval level {coverage}: must lie strictly between 0 and 1 "
                            f"(0.8 for an 80% interval)")
    tail = (1.0 - coverage) / 2.0
    found = [_index(levels, tail), _index(levels, 1.0 - tail)]
    if None in found:
        raise QuantileError(
            f"interval level {coverage:g} needs the quantiles {tail:g} and {1 - tail:g}; the "
            f"run forecasts {', '.join(f'{q:g}' for q in levels)}"
        )
    return found[0], found[1]


def _index(levels: Sequence[float], level: float) -> int | None:
    for i, q in enumerate(levels):
        if abs(q - level) < 1e-9:
            return i
    return None


def monotone_quantiles(raw: Tensor, anchor: int) -> Tensor:
    """raw [..., Q] -> quantiles [..., Q], non-decreasing along the last dim: output `anchor`
    (the level nearest the median) as it is, each level above it the one below plus
    softplus(raw), each level below it the one above minus softplus(raw)."""
    steps = F.softplus(raw)
    centre = raw[..., anchor : anchor + 1]
    up = centre + torch.cumsum(steps[..., anchor + 1 :], dim=-1)
    down = centre - torch.cumsum(steps[..., :anchor].flip(-1), dim=-1).flip(-1)
    return torch.cat([down, centre, up], dim=-1)


def median_index(levels: Sequence[float]) -> int:
    """The index of the level nearest 0.5 (the point forecast of a quantile run)."""
    return min(range(len(levels)), key=lambda i: abs(levels[i] - 0.5))


def quantile_rule(key: str, check: Callable, *args, then: str = ""):
    """check(*args) (check_quantiles, interval_bounds); its QuantileError as a config's one-line
    ConfigError, `key` before it and `then` after."""
    try:
        return check(*args)
    except QuantileError as err:
        raise ConfigError(f"{key}{err}{then}") from None

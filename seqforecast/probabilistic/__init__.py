"""Forecasts with uncertainty: quantile levels, their scores, conformal intervals.

quantiles.py  the levels a run forecasts (checked), the central intervals they hold, and
              outputs that never cross
scores.py     pinball loss, CRPS from quantiles, interval coverage, width and MSIS
conformal.py  split-conformal intervals around any point forecaster, and the adaptive form
"""

from .conformal import AdaptiveConformal, SplitConformal
from .quantiles import QuantileError, check_quantiles, interval_bounds, monotone_quantiles
from .scores import coverage, crps_from_quantiles, interval_width, msis, pinball

__all__ = [
    "AdaptiveConformal",
    "QuantileError",
    "SplitConformal",
    "check_quantiles",
    "coverage",
    "crps_from_quantiles",
    "interval_bounds",
    "interval_width",
    "monotone_quantiles",
    "msis",
    "pinball",
]

"""Naive forecasts every model is compared with, on the same windows.

- `last_value`: repeat the last observed value.
- `drift`: extend the line through the first and last observed values.
- `nlinear`: NLinear (Zeng et al. 2023): subtract the last value, one linear map from in_len
  inputs to out_len outputs shared by all series, add the last value back. Fit here by
  least squares (closed form, float64, tiny ridge) on the training windows.
- `seasonal_naive` (when a season is configured, `data.season`): repeat the last full season.
  With several periods (`data.season=[48, 336]`), one per period: `seasonal_naive_48`, ...

They forecast the target channels, the first channels of src (`n_targets` = the target's
last dim); covariates are not forecast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch
from torch import Tensor

from ..data.splits import Split
from ..data.windows import seasonal_periods
from ..model.linear_path import normal_equations, solve_normal

Forecaster = Callable[[Tensor], Tensor]  # src [B, in_len, F] -> [B, out_len, F]


def last_value(src: Tensor, out_len: int) -> Tensor:
    return src[:, -1:, :].expand(-1, out_len, -1)


def drift(src: Tensor, out_len: int) -> Tensor:
    in_len = src.shape[1]
    slope = (src[:, -1:] - src[:, :1]) / max(in_len - 1, 1)  # [B, 1, F]
    steps = torch.arange(1, out_len + 1, device=src.device, dtype=src.dtype)[None, :, None]
    return src[:, -1:] + slope * steps


class NLinear:
    def __init__(self, weight: Tensor, bias: Tensor):
        self.weight = weight  # [in_len, out_len]
        self.bias = bias  # [out_len]

    @classmethod
    def fit(cls, src: Tensor, target: Tensor, ridge: float = 1e-6) -> NLinear:
        """Least squares on windows src [N, in_len, F], target [N, out_len, F]."""
        return cls.fit_batches([(src, target)], ridge)

    @classmethod
    def fit_batches(cls, batches: Iterable[tuple[Tensor, Tensor]], ridge: float = 1e-6
                    ) -> NLinear:
        """Least squares on windows given batch by batch ((src, target) as `fit` takes them):
        the normal equations' sums added up, so no more than a batch is held at once."""
        gram = xty = None
        for src, target in batches:
            last = src[:, -1:, :]
            # Channel-independent: every (window, feature) pair is one sample. [N * F, in_len]
            x = (src - last).transpose(1, 2).reshape(-1, src.shape[1])
            y = (target - last).transpose(1, 2).reshape(-1, target.shape[1])
            sums = normal_equations(x, y)
            gram, xty = sums if gram is None else (gram + sums[0], xty + sums[1])
            dtype = src.dtype
        weight, bias = solve_normal(gram, xty, ridge)  # [in_len, out_len], [out_len]
        return cls(weight.to(dtype), bias.to(dtype))

    def __call__(self, src: Tensor) -> Tensor:
        last = src[:, -1:, :]
        centred = (src - last).transpose(1, 2)  # [B, F, in_len]
        return (centred @ self.weight + self.bias).transpose(1, 2) + last


def seasonal_naive(src: Tensor, out_len: int, season: int) -> Tensor:
    """Step h repeats the value one season earlier: src[in_len - season + (h mod season)]."""
    in_len = src.shape[1]
    index = in_len - season + torch.arange(out_len, device=src.device) % season
    return src[:, index]


# Closed-form fits read at most this many training windows, evenly spaced: a panel of 10,000
# series has millions, and 48 x 12 weights are pinned down long before that.
FIT_WINDOWS = 200_000
# A fit whose windows hold more values than this reads them in batches of FIT_BATCH_VALUES
# (the float64 samples of Electricity's 18,317 windows x 321 channels x 96 + 96 steps would be
# 9 GB at once); below it, in one (its sums in one product, as they always were).
FIT_ONCE_VALUES, FIT_BATCH_VALUES = 2**28, 2**25


def fit_batches(train: Split, limit: int) -> Iterator[tuple[Tensor, Tensor]]:
    """(src, target) of at most `limit` training windows evenly spaced (train.sample's), in
    one batch, or in batches where they hold more than FIT_ONCE_VALUES values."""
    index = train.sample_index(limit)
    count = len(train) if isinstance(index, slice) else len(index)
    src, target = train.take(slice(0, 1))
    per_window = src[0].numel() + target[0].numel()
    if count * per_window <= FIT_ONCE_VALUES:
        yield train.take(index)
        return
    positions = torch.arange(len(train)) if isinstance(index, slice) else index
    step = max(1, FIT_BATCH_VALUES // per_window)
    for start in range(0, count, step):
        yield train.take(positions[start : start + step].to(train.device))


def fit_baselines(train: Split, season: int | list[int] = 0) -> dict[str, Forecaster]:
    """The baselines, NLinear fitted on the training windows. On a panel NLinear is one
    global map fit on every series' windows (each in its series' own scaling), like the
    model; the others are per window, so per series by construction."""
    out_len, n_targets = train.out_len, train.take(slice(0, 1))[1].shape[2]
    nlinear = NLinear.fit_batches((src[..., :n_targets], target)
                                  for src, target in fit_batches(train, FIT_WINDOWS))
    baselines = {
        "last_value": lambda src: last_value(src[..., :n_targets], out_len),
        "drift": lambda src: drift(src[..., :n_targets], out_len),
        "nlinear": lambda src: nlinear(src[..., :n_targets]),
    }
    periods = seasonal_periods(season)
    for period in periods:
        name = "seasonal_naive" if len(periods) == 1 else f"seasonal_naive_{period}"
        baselines[name] = lambda src, p=period: seasonal_naive(src[..., :n_targets], out_len, p)
    return baselines

"""A linear path beside the Transformer (`model.linear_path`), as in NLinear and DLinear
(Zeng et al. 2023): the forecast is linear(window) + Transformer(window), so the Transformer
only has to learn what a linear map of the window misses.

Both kinds read the instance-normalised target channels, subtract the window's last value,
map in_len steps to out_len with one map shared by every channel, and add the last value back:

- `nlinear`: one map of the window.
- `dlinear`: a moving-average trend (window `kernel`, the series' ends repeated, as DLinear)
  and the remainder, each with its own map.

`fit_least_squares` sets the maps to the closed-form least-squares fit on training windows
(the fit the NLinear baseline uses), so that training starts from NLinear's forecast. Behind
RevIN the fit is weighted by each window's scale, so it minimises the error the training loss
measures (in the data's units, not in each window's own): unweighted, a nearly flat window
(a tiny std) would blow its normalised target up and pull the whole fit towards it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

LINEAR_PATHS = ("none", "nlinear", "dlinear")
LINEAR_INITS = ("zero", "least_squares")  # where it starts: run.py fits least_squares
LINEAR_PATH_INPUTS = ("normalized", "raw")  # what it reads: forecaster.py


def moving_average(x: Tensor, kernel: int) -> Tensor:
    """x [B, C, L] -> trend [B, C, L]: a centred mean over `kernel` steps, ends repeated."""
    left = (kernel - 1) // 2
    padded = torch.cat(
        [x[..., :1].expand(-1, -1, left), x, x[..., -1:].expand(-1, -1, kernel - 1 - left)],
        dim=-1,
    )
    return F.avg_pool1d(padded, kernel, stride=1)


def least_squares(
    x: Tensor, y: Tensor, ridge: float = 1e-6, weight: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Closed-form fit y ~ x @ w + b in float64 with a tiny ridge: x [N, k], y [N, m] ->
    (w [k, m], b [m]). `weight` [N]: each sample's error counts weight² times."""
    return solve_normal(*normal_equations(x, y, weight), ridge)


def normal_equations(x: Tensor, y: Tensor, weight: Tensor | None = None
                     ) -> tuple[Tensor, Tensor]:
    """(x'x, x'y) of the fit y ~ [x, 1] @ w in float64: [k + 1, k + 1], [k + 1, m]. Sums over
    the samples, so those of several batches of samples add up to the whole's (a fit too large
    to hold at once: `solve_normal(sum of grams, sum of x'y)`)."""
    x = torch.cat([x.double(), torch.ones(len(x), 1, dtype=torch.float64, device=x.device)], 1)
    y = y.double()
    if weight is not None:
        w = weight.double()[:, None]
        x, y = x * w, y * w
    return x.T @ x, x.T @ y


def solve_normal(gram: Tensor, xty: Tensor, ridge: float = 1e-6) -> tuple[Tensor, Tensor]:
    """The least-squares (w [k, m], b [m]) from normal_equations' sums, with a tiny ridge."""
    gram = gram + ridge * torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    solution = torch.linalg.solve(gram, xty)  # [k + 1, m]
    return solution[:-1], solution[-1]


class LinearPath(nn.Module):
    def __init__(self, kind: str, in_len: int, out_len: int, kernel: int):
        super().__init__()
        self.kind = kind
        self.kernel = kernel
        # Zero at the start: the path forecasts the last value until trained or fitted.
        self.maps = nn.ModuleList(
            nn.Linear(in_len, out_len) for _ in range(1 if kind == "nlinear" else 2)
        )
        for linear in self.maps:
            nn.init.zeros_(linear.weight)
            nn.init.zeros_(linear.bias)

    def _parts(self, values: Tensor) -> tuple[Tensor, list[Tensor]]:
        """values [B, in_len, T] -> (last [B, T, 1], the inputs of each map [B, T, in_len])."""
        series = values.transpose(1, 2)  # [B, T, in_len]
        last = series[..., -1:]
        centred = series - last
        if self.kind == "nlinear":
            return last, [centred]
        trend = moving_average(centred, self.kernel)
        return last, [trend, centred - trend]

    def forward(self, values: Tensor) -> Tensor:
        """values [B, in_len, T] -> forecast [B, out_len, T]."""
        last, parts = self._parts(values)
        out = sum(linear(part) for linear, part in zip(self.maps, parts, strict=True))
        return (out + last).transpose(1, 2)

    @torch.no_grad()
    def fit_least_squares(
        self, values: Tensor, target: Tensor, error_scale: Tensor | None = None
    ) -> None:
        """Set the maps to the least-squares fit on windows values [N, in_len, T] ->
        target [N, out_len, T] (every window and channel one sample, as NLinear).
        `error_scale` [N, 1, T]: what an error of each window and channel weighs in the units
        the loss is measured in (None: all alike)."""
        last, parts = self._parts(values)
        x = torch.cat(parts, dim=-1).flatten(0, 1)  # [N * T, n_maps * in_len]
        y = (target.transpose(1, 2) - last).flatten(0, 1)  # [N * T, out_len]
        scale = None if error_scale is None else error_scale.transpose(1, 2).flatten()  # [N * T]
        weight, bias = least_squares(x, y, weight=scale)
        in_len = values.shape[1]
        for i, linear in enumerate(self.maps):
            linear.weight.copy_(weight[i * in_len : (i + 1) * in_len].T)
            # One bias for the sum: carried by the first map.
            linear.bias.copy_(bias if i == 0 else torch.zeros_like(bias))

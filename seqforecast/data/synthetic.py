"""Synthetic sigmoid series, batch-first: src [B, in_len, 1], target [B, out_len, 1].

- `sigmoid_pair`: the original design's training generator, draw for draw: one grid
  linspace(-10, 0,
  in_len + out_len) shifted per series by a random integer in {0, 1}, through a sigmoid; src is
  the first in_len steps, the target the last out_len. Only two distinct curves exist.
- `sigmoid` (default): the test curve's family. Each series is
  amplitude * sigmoid(slope * (t - shift)) + offset (+ Gaussian noise), sampled like the test
  curve: the input on linspace(-5, 0, in_len), the target on linspace(0, 5, out_len). Slope,
  shift, amplitude and offset are drawn per series, so a model must generalise; the test curve
  itself (slope 1, shift 0, amplitude 1, offset 0) lies inside the default ranges.
- `test_curve`: the reference held-out curve: input sigmoid(linspace(-5, 0, in_len)), target
  sigmoid(linspace(0, 5, out_len)).

Everything is generated vectorised on the requested device from a torch.Generator.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def sigmoid_pair(
    batch: int,
    in_len: int,
    out_len: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Two curves: linspace(-10, 0) shifted by 0 or 1, through a sigmoid, batch-first.
    Returns (src [B, in, 1], target [B, out, 1])."""
    grid = torch.linspace(-10, 0, in_len + out_len, device=device)
    shift = torch.zeros(batch, 1, device=device).uniform_(0, 2, generator=generator).int()
    series = torch.sigmoid((grid + shift).float())  # [B, in + out]
    return series[:, :in_len, None], series[:, -out_len:, None]


def _uniform(batch: int, bounds: Sequence[float], generator, device) -> Tensor:
    low, high = bounds
    return torch.empty(batch, 1, device=device).uniform_(low, high, generator=generator)


def sigmoid(
    batch: int,
    in_len: int,
    out_len: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    slope_range: Sequence[float] = (0.5, 2.0),
    shift_range: Sequence[float] = (-3.0, 3.0),
    amplitude_range: Sequence[float] = (0.5, 1.5),
    offset_range: Sequence[float] = (-0.5, 0.5),
    noise: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Random sigmoids on the test curve's grid. Returns (src [B, in, 1], target [B, out, 1])."""
    slope = _uniform(batch, slope_range, generator, device)
    shift = _uniform(batch, shift_range, generator, device)
    amplitude = _uniform(batch, amplitude_range, generator, device)
    offset = _uniform(batch, offset_range, generator, device)
    grid = torch.cat(
        [torch.linspace(-5, 0, in_len, device=device), torch.linspace(0, 5, out_len, device=device)]
    )
    series = amplitude * torch.sigmoid(slope * (grid - shift)) + offset  # [B, in + out]
    if noise > 0:
        series = series + noise * torch.randn(
            series.shape, generator=generator, device=series.device
        )
    return series[:, :in_len, None], series[:, in_len:, None]


def test_curve(
    in_len: int, out_len: int, device: torch.device | str | None = None
) -> tuple[Tensor, Tensor]:
    """The reference test curve, batch-first: (src [1, in_len, 1], target [1, out_len, 1])."""
    src = torch.sigmoid(torch.linspace(-5, 0, in_len, device=device))
    target = torch.sigmoid(torch.linspace(0, 5, out_len, device=device))
    return src[None, :, None], target[None, :, None]


test_curve.__test__ = False  # a library function, not a pytest test, wherever it is imported

GENERATORS = {"sigmoid": sigmoid, "sigmoid_pair": sigmoid_pair}

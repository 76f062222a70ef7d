"""Dropout with a cheaper mask on the CPU (`Dropout`, used by the model's layers).

torch's CPU dropout draws one Bernoulli sample per element from its Mersenne Twister, the
largest single cost of a published-PatchTST training step on one thread here (its 37,632 x 128
FFN activations; `scripts/bench_longhorizon.py --speed` times the whole step). This one draws
16 random bits per element, four to each 64-bit word of numpy's SFC64 generator (2-3x faster
than torch's generator here), seeded by one draw of torch's generator (so `torch.manual_seed`
and the checkpointed RNG state govern it as before); it keeps an element where its bits clear a
threshold, and scales the kept ones so that the expectation is unchanged.

The drop rate is p rounded to a multiple of 1/65536 (0.3 -> 0.300003), and the scale is the
inverse of the rate actually used, so the layer is unbiased. On an accelerator, and outside
training, it is torch's own dropout (fast there).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 1 << 16


class KeepMask(NamedTuple):
    bytes: Tensor  # uint8, 1 where kept (bytes: torch converts them to float 2-3x faster than bool)
    scale: float  # what a kept element is multiplied by: 1 / (1 - p'), p' = p rounded


def keep_mask(shape: tuple[int, ...], p: float) -> KeepMask:
    """Which elements of a tensor of `shape` dropout at rate p (0 < p < 1) keeps."""
    n = math.prod(shape)
    dropped_levels = round(p * _LEVELS)
    if dropped_levels >= _LEVELS:
        return KeepMask(torch.zeros(shape, dtype=torch.uint8), 0.0)
    seed = int(torch.randint(0, 1 << 62, (1,)))  # torch's generator decides the stream
    # Four uniform 16-bit lanes per 64-bit output, read as signed values in [-32768, 32767].
    words = np.random.SFC64(seed).random_raw((n + 3) // 4)
    bits = torch.from_numpy(words.view(np.int16)[:n]).view(shape)
    keep = bits >= dropped_levels - _LEVELS // 2  # P(keep) = 1 - dropped_levels / 65536
    return KeepMask(keep.view(torch.uint8), _LEVELS / (_LEVELS - dropped_levels))


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.dtype.is_floating_point:
        return F.dropout(x, p, training=True)
    if round(p * _LEVELS) >= _LEVELS:
        return torch.zeros_like(x)
    mask = keep_mask(x.shape, p)
    # autograd keeps the float mask (not x) for the backward
    return x * mask.bytes.to(x.dtype).mul_(mask.scale)


class Dropout(nn.Dropout):
    """nn.Dropout (same argument, same state dict: none) with the cheap CPU mask."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

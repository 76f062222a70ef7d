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

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 1 << 16


def _keep_mask(x: Tensor, p: float) -> Tensor:
    """A float mask like x: 0 where dropped, 1 / (1 - p') where kept (p' = p rounded)."""
    n = x.numel()
    dropped_levels = round(p * _LEVELS)
    seed = int(torch.randint(0, 1 << 62, (1,)))  # torch's generator decides the stream
    # Four uniform 16-bit lanes per 64-bit output, read as signed values in [-32768, 32767].
    words = np.random.SFC64(seed).random_raw((n + 3) // 4)
    bits = torch.from_numpy(words.view(np.int16)[:n]).view(x.shape)
    keep = bits >= dropped_levels - _LEVELS // 2  # P(keep) = 1 - dropped_levels / 65536
    # Read as bytes: torch converts uint8 to float 2-3x faster than bool (measured here).
    return keep.view(torch.uint8).to(x.dtype).mul_(_LEVELS / (_LEVELS - dropped_levels))


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.dtype.is_floating_point:
        return F.dropout(x, p, training=True)
    if round(p * _LEVELS) >= _LEVELS:
        return torch.zeros_like(x)
    return x * _keep_mask(x, p)  # autograd keeps the mask (not x) for the backward


class Dropout(nn.Dropout):
    """nn.Dropout (same argument, same state dict: none) with the cheap CPU mask."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

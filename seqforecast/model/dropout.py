"""Dropout with a cheaper mask on the CPU (`Dropout`, used by the model's layers).

torch's CPU dropout draws one Bernoulli sample per element from its Mersenne Twister and then
multiplies by the mask in further passes: the largest single cost of a published-PatchTST
training step on one thread here (its 37,632 x 128 FFN activations;
`scripts/bench_longhorizon.py --speed` times the whole step). Here an element's 16 random bits
are a hash of its index under a key drawn from torch's generator (so `torch.manual_seed`
and the checkpointed RNG state govern every mask), counter-based as Philox is: the C kernel
`seqforecast/native/dropout.c` draws the bits and applies the mask in one pass, and a slice of a
mask is drawn where it is used (the sliced FFN's forward and backward), so no mask is stored.
Where that kernel cannot be built (or SEQFORECAST_NATIVE=0), the bits come from numpy's SFC64
in chunks seeded by (key, chunk), and torch multiplies by the mask: the same properties from
another random stream, so a run's masks depend on which path drew them.

An element is kept where its bits clear a threshold: the drop rate is p rounded to a multiple of
1/65536 (0.3 -> 0.300003), and the kept ones are scaled by the inverse of the rate actually
used, so the layer is unbiased. On an accelerator, and outside training, it is torch's own
dropout (fast there).
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import native

_LEVELS = 1 << 16
CHUNK = 1 << 16  # elements per seed of numpy's generator on the torch path


class KeepMask(NamedTuple):
    """Dropout's mask over a tensor: element i is kept where draw(key, first + i) >= dropped,
    with P = 1 - dropped / 65536; kept elements are multiplied by `scale`."""

    key: int  # 63 bits from torch's generator
    dropped: int  # in [0, 65536]
    scale: float  # 1 / (1 - p'), p' = dropped / 65536
    row: int  # elements per row (the last dim), to slice by rows
    first: int = 0  # index of the first element (a slice of a larger mask)
    kept: Tensor | None = None  # uint8 [rows, row], 1 = kept: drawn once (see `for_reuse`)

    def rows(self, part: slice) -> KeepMask:
        """The mask of rows part (a slice with its start given)."""
        kept = None if self.kept is None else self.kept[part]
        return self._replace(first=self.first + part.start * self.row, kept=kept)

    def for_reuse(self, shape: tuple[int, int]) -> KeepMask:
        """This mask, over a [rows, row] tensor, to be applied many times (the sliced FFN): as
        it is where the kernel draws it on the fly; else with its bytes drawn once."""
        if _library() is not None:
            return self
        return self._replace(kept=torch.from_numpy(_keeps(self, shape[0] * shape[1])
                                                   .view(np.uint8)).view(shape))  # fmt: skip

    def apply_(self, x: Tensor, also: Tensor | None = None) -> Tensor:
        """x with its dropped elements zeroed, in place (the kept ones unscaled: callers fold
        the scale in elsewhere), and `also` the same under the same mask (one draw for both).
        x, also: contiguous, their elements the mask's from `first` on. Returns x."""
        return mask_scale(x, self, 1.0, out=x, also=also)


def keep_mask(shape: tuple[int, ...], p: float) -> KeepMask:
    """Which elements of a tensor of `shape` dropout at rate p (0 < p < 1) keeps."""
    dropped = min(round(p * _LEVELS), _LEVELS)
    key = int(torch.randint(0, (1 << 63) - 1, (1,)))  # 63 bits (an int64: autograd may record it)
    scale = 0.0 if dropped >= _LEVELS else _LEVELS / (_LEVELS - dropped)
    return KeepMask(key, dropped, scale, shape[-1] if shape else 1)


def mask_scale(x: Tensor, mask: KeepMask, scale: float, out: Tensor | None = None,
               also: Tensor | None = None) -> Tensor:  # fmt: skip
    """Kept elements of x times `scale`, dropped ones 0, into `out` (may be x) or a new tensor;
    `also` (optional, of x's shape) the same, in place. x holds the mask's elements from
    `mask.first` on, in order."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
    library = _library() if mask.kept is None else None
    tensors = (x, out) if also is None else (x, out, also)
    if library is not None and all(t.dtype == torch.float32 and t.is_contiguous()
                                   for t in tensors):  # fmt: skip
        library.mask_scale(
            native.pointer(x), native.pointer(also), ctypes.c_uint64(mask.key),
            ctypes.c_int64(mask.first), ctypes.c_uint32(mask.dropped), ctypes.c_float(scale),
            native.pointer(out), native.pointer(also), ctypes.c_int64(x.numel()),
        )  # fmt: skip
        return out
    # bytes, not bools: torch converts them to float 2-3x faster
    kept = mask.kept
    if kept is None:
        kept = torch.from_numpy(_keeps(mask, x.numel()).view(np.uint8))
    kept = kept.view(x.shape).to(x.dtype).mul_(scale)
    if also is not None:
        also.mul_(kept)
    return torch.mul(x, kept, out=out)


def _keeps(mask: KeepMask, n: int) -> np.ndarray:
    """Which of elements first .. first + n - 1 the mask keeps, where the kernel cannot draw
    them: 16 bits an element from numpy's SFC64, four to a 64-bit word, in chunks of CHUNK
    elements each seeded by (key, chunk), so that any slice of a mask is the same bits."""
    first, last = mask.first // CHUNK, (mask.first + n - 1) // CHUNK
    bits = np.concatenate([np.random.SFC64([mask.key, c]).random_raw(CHUNK // 4).view(np.uint16)
                           for c in range(first, last + 1)])  # fmt: skip
    start = mask.first - first * CHUNK
    return bits[start : start + n] >= mask.dropped


def _library():
    return native.load("dropout", (("mask_scale", None),))


class _MaskedScaled(torch.autograd.Function):
    """x -> mask_scale(x): the backward draws the same mask again for the gradient (autograd
    keeps the mask's key, not a float mask)."""

    @staticmethod
    def forward(ctx, x: Tensor, mask: KeepMask) -> Tensor:
        ctx.mask = mask
        return mask_scale(x.contiguous(), mask, mask.scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return mask_scale(grad.contiguous(), ctx.mask, ctx.mask.scale), None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.dtype.is_floating_point:
        return F.dropout(x, p, training=True)
    if round(p * _LEVELS) >= _LEVELS:
        return torch.zeros_like(x)
    return _MaskedScaled.apply(x, keep_mask(x.shape, p))


class Dropout(nn.Dropout):
    """nn.Dropout (same argument, same state dict: none) with the cheap CPU mask."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

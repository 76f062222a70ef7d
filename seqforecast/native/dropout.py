"""Dropout with a counter-based mask drawn by the C kernel `dropout.c` (`HashDropout`, the
native kernel set's dropout, built by __init__.py's NativeParts).

torch's CPU dropout draws one Bernoulli sample per element from its Mersenne Twister and then
multiplies by the mask in further passes: the largest single cost of a published-PatchTST
training step on one thread here (its 37,632 x 128 FFN activations;
`scripts/bench_longhorizon.py --speed` times the whole step). Here an element's 16 random bits
are a hash of its index under a key drawn from torch's generator (so `torch.manual_seed`
and the checkpointed RNG state govern every mask), counter-based as Philox is: the kernel
draws the bits and applies the mask in one pass, and a slice of a mask is drawn where it is
used (the sliced FFN's forward and backward, ffn.py), so no mask is stored. The stream is not
torch's: a run repeats bit for bit under the kernels it was trained with (trainer.kernels).

An element is kept where its bits clear a threshold: the drop rate is p rounded to a multiple of
1/65536 (0.3 -> 0.300003), and the kept ones are scaled by the inverse of the rate actually
used, so the layer is unbiased.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import torch
from torch import Tensor, nn

from . import build
from .build import Signature, pointer

_LEVELS = 1 << 16
_SIGNATURES = {"mask_scale": Signature(None, [
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64, ctypes.c_uint32,
    ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
])}


class KeepMask(NamedTuple):
    """Dropout's mask over a tensor: element i is kept where draw(key, first + i) >= dropped,
    with P = 1 - dropped / 65536; kept elements are multiplied by `scale`."""

    key: int  # 63 bits from torch's generator
    dropped: int  # in [0, 65536]
    scale: float  # 1 / (1 - p'), p' = dropped / 65536
    row: int  # elements per row (the last dim), to slice by rows
    first: int = 0  # index of the first element (a slice of a larger mask)

    def rows(self, part: slice) -> KeepMask:
        """The mask of rows part (a slice with its start given)."""
        return self._replace(first=self.first + part.start * self.row)

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
               also: Tensor | None = None) -> Tensor:
    """Kept elements of x times `scale`, dropped ones 0, into `out` (may be x) or a new tensor;
    `also` (optional, of x's shape) the same, in place. x, out and also: contiguous float32 on
    the CPU, x holding the mask's elements from `mask.first` on, in order."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
    for t in (x, out) if also is None else (x, out, also):
        if t.device.type != "cpu" or t.dtype != torch.float32 or not t.is_contiguous():
            raise ValueError(f"native dropout takes contiguous float32 CPU tensors, got "
                             f"{t.dtype} on {t.device}: build the model with kernels=torch")
    library().mask_scale(pointer(x), pointer(also), mask.key, mask.first, mask.dropped, scale,
                         pointer(out), pointer(also), x.numel())
    return out


def library() -> ctypes.CDLL | None:
    return build.load("dropout", _SIGNATURES)


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
    if round(p * _LEVELS) >= _LEVELS:
        return torch.zeros_like(x)
    return _MaskedScaled.apply(x, keep_mask(x.shape, p))


class HashDropout(nn.Dropout):
    """nn.Dropout (same argument, same state dict: none) with the kernel's mask."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

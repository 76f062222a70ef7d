"""A post-norm residual with BatchNorm over tokens, norm(x + dropout(y)) in training, forward and
backward, by the C kernel `residual_norm.c` (`BatchNormResidual`, the native kernel set's
residual block where it takes one, built by __init__.py's NativeParts).

Op by op (the published PatchTST's residuals: 6 a step), the dropout, the sum and BatchNorm's
statistics, normalisation and backward each stream the [tokens, d_model] tensors through
memory again, with temporaries between them (2.5 ms a residual here, forward and backward, at
37,632 tokens x 16); the kernel makes three passes each way and no temporaries. The function
is the layer-by-layer one with HashDropout to float rounding: the same dropout mask (keyed from
torch's generator where the dropout module would draw it), BatchNorm's biased variance in the
normalisation, its running statistics updated as nn.BatchNorm1d updates them (momentum,
unbiased variance, batches counted). In eval mode the residual runs op by op.
`scripts/bench_cpu_kernels.py` times it beside that.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..model.layers import Residual, TokenBatchNorm, make_norm
from . import build
from .build import Signature, pointer
from .dropout import KeepMask, keep_mask

_SIGNATURES = {
    "residual_norm_forward": Signature(ctypes.c_int, [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_float,
        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float,
        *[ctypes.c_void_p] * 5,
    ]),
    "residual_norm_backward": Signature(ctypes.c_int, [
        *[ctypes.c_void_p] * 5, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_float,
        ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * 4,
    ]),
}


class BatchNormResidual(Residual):
    """A post-norm Residual whose norm is a TokenBatchNorm (affine, tracking running
    statistics with a momentum): the kernel in training, op by op in eval mode."""

    @staticmethod
    def takes(norm_first: bool, norm: str) -> bool:
        """Whether it computes a residual block of these options (post-norm, its norm a
        TokenBatchNorm: affine, tracking running statistics with a momentum, as built)."""
        return not norm_first and make_norm(norm, 1).__class__ is TokenBatchNorm

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if not self.norm.training:
            return super().forward(x, sublayer)
        return residual_norm(x, sublayer(x), self.norm, self.dropout.p)


def residual_norm(x: Tensor, y: Tensor, norm: nn.BatchNorm1d, p: float) -> Tensor:
    """norm(x + dropout_p(y)) over x, y [..., d_model] (the tokens as rows), norm in training;
    updates norm's running statistics."""
    mask = keep_mask(y.shape, p) if p > 0 else KeepMask(0, 0, 1.0, y.shape[-1])
    channels = x.shape[-1]
    out, mean, var = _ResidualNorm.apply(x.reshape(-1, channels).contiguous(),
                                         y.reshape(-1, channels).contiguous(), norm.weight,
                                         norm.bias, mask, norm.eps)
    rows = out.shape[0]
    with torch.no_grad():  # as nn.BatchNorm1d: the unbiased variance in the running estimate
        norm.running_mean.lerp_(mean, norm.momentum)
        norm.running_var.lerp_(var * (rows / max(rows - 1, 1)), norm.momentum)
        norm.num_batches_tracked.add_(1)
    return out.view(x.shape)


def _library():
    return build.load("residual_norm", _SIGNATURES)  # both return 0, or 1: no memory


class _ResidualNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, weight, bias, mask: KeepMask, eps: float):
        rows, channels = x.shape
        z, out = torch.empty_like(x), torch.empty_like(x)
        mean, invstd, var = (x.new_empty(channels) for _ in range(3))
        at = pointer
        failed = _library().residual_norm_forward(
            at(x), at(y), mask.key, mask.dropped, mask.scale, rows, channels,
            at(weight.contiguous()), at(bias.contiguous()), eps, at(z), at(out), at(mean),
            at(invstd), at(var),
        )
        if failed:
            raise MemoryError("residual norm: no memory for the kernel's scratch")
        ctx.save_for_backward(z, mean, invstd, weight)
        ctx.mask = mask
        ctx.mark_non_differentiable(mean, var)
        return out, mean, var

    @staticmethod
    def backward(ctx, grad: Tensor, _mean, _var):
        z, mean, invstd, weight = ctx.saved_tensors
        mask = ctx.mask
        rows, channels = z.shape
        grad = grad.contiguous()
        grad_x, grad_y = torch.empty_like(z), torch.empty_like(z)
        grad_w, grad_b = weight.new_empty(channels), weight.new_empty(channels)
        at = pointer
        failed = _library().residual_norm_backward(
            at(grad), at(z), at(mean), at(invstd), at(weight.contiguous()), mask.key,
            mask.dropped, mask.scale, rows, channels, at(grad_x), at(grad_y), at(grad_w),
            at(grad_b),
        )
        if failed:
            raise MemoryError("residual norm: no memory for the kernel's scratch")
        return grad_x, grad_y, grad_w, grad_b, None, None

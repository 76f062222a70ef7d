"""A post-norm residual with BatchNorm over tokens on the CPU: norm(x + dropout(y)) in training,
forward and backward, by the C kernel `seqforecast/native/residual_norm.c`.

Op by op (the published PatchTST's residuals: 6 a step), the dropout, the sum and BatchNorm's
statistics, normalisation and backward each stream the [tokens, d_model] tensors through
memory again, with temporaries between them (2.5 ms a residual here, forward and backward, at
37,632 tokens x 16); the kernel makes three passes each way and no temporaries. The function
is the layer-by-layer one to float rounding: the same dropout mask (keyed from torch's
generator where the Dropout module would draw it), BatchNorm's biased variance in the
normalisation, its running statistics updated as nn.BatchNorm1d updates them (momentum,
unbiased variance, batches counted). Elsewhere (eval mode, other norms, no kernel,
SEQFORECAST_NATIVE=0, momentum=None) the layers run op by op.
`scripts/bench_cpu_kernels.py` times it beside that.
"""

from __future__ import annotations

import ctypes

import torch
from torch import Tensor, nn

from .. import native
from .dropout import KeepMask, keep_mask


def applies(x: Tensor, norm: nn.Module) -> bool:
    return (
        x.device.type == "cpu" and x.dtype == torch.float32 and norm.training
        and isinstance(norm, nn.BatchNorm1d) and norm.affine and norm.track_running_stats
        and norm.momentum is not None and not torch.is_autocast_enabled("cpu")
        and _library() is not None
    )  # fmt: skip


def residual_norm(x: Tensor, y: Tensor, norm: nn.BatchNorm1d, p: float) -> Tensor:
    """norm(x + dropout_p(y)) over x, y [..., d_model] (the tokens as rows), norm in training;
    updates norm's running statistics."""
    mask = keep_mask(y.shape, p) if p > 0 else KeepMask(0, 0, 1.0, y.shape[-1])
    channels = x.shape[-1]
    out, mean, var = _ResidualNorm.apply(x.reshape(-1, channels).contiguous(),
                                         y.reshape(-1, channels).contiguous(), norm.weight,
                                         norm.bias, mask, norm.eps)  # fmt: skip
    rows = out.shape[0]
    with torch.no_grad():  # as nn.BatchNorm1d: the unbiased variance in the running estimate
        norm.running_mean.lerp_(mean, norm.momentum)
        norm.running_var.lerp_(var * (rows / max(rows - 1, 1)), norm.momentum)
        norm.num_batches_tracked.add_(1)
    return out.view(x.shape)


def _library():
    return native.load("residual_norm")  # both functions return 0, or 1: no memory


class _ResidualNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, weight, bias, mask: KeepMask, eps: float):
        rows, channels = x.shape
        z, out = torch.empty_like(x), torch.empty_like(x)
        mean, invstd, var = (x.new_empty(channels) for _ in range(3))
        at = native.pointer
        failed = _library().residual_norm_forward(
            at(x), at(y), ctypes.c_uint64(mask.key), ctypes.c_uint32(mask.dropped),
            ctypes.c_float(mask.scale), ctypes.c_int64(rows), ctypes.c_int64(channels),
            at(weight.contiguous()), at(bias.contiguous()), ctypes.c_float(eps), at(z), at(out),
            at(mean), at(invstd), at(var),
        )  # fmt: skip
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
        at = native.pointer
        failed = _library().residual_norm_backward(
            at(grad), at(z), at(mean), at(invstd), at(weight.contiguous()),
            ctypes.c_uint64(mask.key), ctypes.c_uint32(mask.dropped), ctypes.c_float(mask.scale),
            ctypes.c_int64(rows), ctypes.c_int64(channels), at(grad_x), at(grad_y), at(grad_w),
            at(grad_b),
        )  # fmt: skip
        if failed:
            raise MemoryError("residual norm: no memory for the kernel's scratch")
        return grad_x, grad_y, grad_w, grad_b, None, None

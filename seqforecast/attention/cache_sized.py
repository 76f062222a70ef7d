"""Attention over short sequences on the CPU, computed a cache-sized slice of the batch at a time.

PatchTST attends over 42 tokens with heads of width 4: a step holds 3,584 score matrices of
42 x 42 (25 MB a layer), and every op of the plain explicit path (two batched matmuls, the
softmax, and their backward) streams that whole tensor through memory for a few flops per
element. torch's fused kernel is tuned for wide heads and long sequences and is slower still here.
This path computes the same function over slices of the batch whose scores fit in the core's
cache (about 1 MB), forward and backward, saving the softmax weights for the backward (none
without a backward). Two layouts make the slices fast (measured on one thread, AVX-512):

- The keys are padded to a multiple of 16 (zero keys whose scores are set to -inf, so their
  weights are exactly 0): torch's softmax over rows of 42 runs a scalar tail, 3x slower than
  over rows of 48.
- Every product writes along the sequence, never along the head width: out^T = v^T P^T
  [N, dv, Lq] rather than P v [N, Lq, dv] (a bmm with 4 output columns is 9x slower), and the
  same for the gradients of q, k and v.

`scripts/bench_longhorizon.py --speed` times the whole training step against the official code.

    out = softmax(q k^T * scale) v       q [N, Lq, w], k [N, Lk, w], v [N, Lk, dv] -> [N, Lq, dv]

An optional mask shared by the whole batch (`blocked` [Lq, Lk], True = may not attend: causal,
block-local windows) is added to each slice's scores as 0 / -inf, with the keys' padding in the
same op; every row must keep a key. No per-window masks (key padding) and no dropout on the
weights: callers use it only where neither applies (and only for short sequences, where the
per-slice ops stay few).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from . import native
from ._common import padded
from .residual import concatenated

CACHE_FLOATS = 1 << 18  # scores per slice: 1 MB of float32
MAX_SCORES = 128 * 128  # longer sequences: torch's fused kernel


def heads_attention(q: Sequence[Tensor], k: Sequence[Tensor], v: Tensor, scale: float,
                    blocked: Tensor | None = None) -> Tensor:  # fmt: skip
    """`attention` over q [B, H, Lq, w], k [B, H, Lk, w], v [B, H, Lk, dv] -> [B, H, Lq, dv],
    q and k given as pieces along w (one each, or residual attention's layers): the C kernel
    (native.py) where it is built, else the sliced path below on the pieces concatenated and
    the heads folded into the batch."""
    if native.applies(q, k, v):
        return native.attention(q, k, v, scale, blocked)
    q, k = concatenated(q), concatenated(k)
    batch, heads, q_len = q.shape[:3]
    # [B, H, L, w] -> [B * H, L, w]
    out = attention(*(t.reshape(batch * heads, *t.shape[2:]) for t in (q, k, v)), scale, blocked)
    return out.reshape(batch, heads, q_len, v.shape[-1])


def applies(q: Tensor, k: Tensor) -> bool:
    """Is this path the one to take for q [..., Lq, w], k [..., Lk, w]?"""
    return (q.device.type == "cpu" and q.shape[-2] * k.shape[-2] <= MAX_SCORES
            and not torch.is_autocast_enabled("cpu"))  # bf16 runs: autocast's own casts


def attention(q: Tensor, k: Tensor, v: Tensor, scale: float, blocked: Tensor | None = None
              ) -> Tensor:  # fmt: skip
    """softmax(q k^T * scale) v over [N, L, *] batches, a cache-sized slice at a time, the
    pairs where `blocked` [Lq, Lk] is True left out. The result may be a transposed view
    (callers that fold heads copy it anyway)."""
    rows = max(1, CACHE_FLOATS // (q.shape[1] * padded(k.shape[1])))
    bias = None if blocked is None else _score_bias(blocked, q.dtype)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _SlicedAttention.apply(q, k, v, scale, rows, bias)
    return _sliced_forward(q, k, v, scale, rows, bias)[0]  # no backward: no weights kept


def _score_bias(blocked: Tensor, dtype: torch.dtype) -> Tensor:
    """bool [Lq, Lk] -> [Lq, Lp]: 0 where a query may attend, -inf where blocked or padding."""
    if not (~blocked).any(dim=-1).all():
        raise ValueError("cache_sized.attention: every query needs at least one key not blocked")
    bias = torch.full((blocked.shape[0], padded(blocked.shape[1])), float("-inf"), dtype=dtype,
                      device=blocked.device)  # fmt: skip
    bias[:, : blocked.shape[1]].masked_fill_(~blocked, 0.0)
    return bias


def _padded_transpose(t: Tensor, buffer: Tensor) -> Tensor:
    """t [r, Lk, w] -> t^T in the first r rows of buffer [rows, w, Lp] (padding columns stay 0)."""
    out = buffer[: t.shape[0]]
    out[:, :, : t.shape[1]].copy_(t.transpose(1, 2))
    return out


def _sliced_forward(q, k, v, scale: float, rows: int, bias=None, keep_weights: bool = False):
    """(out [N, Lq, dv] (a transposed view), the softmax weights [N, Lq, Lp] with Lp the padded
    key length, if `keep_weights`, else None)."""
    n, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
    width = padded(k_len)
    out_t = q.new_empty(n, v.shape[2], q_len)  # out^T
    weights = q.new_empty(n, q_len, width) if keep_weights else None
    keys_t = q.new_zeros(min(rows, n), k.shape[2], width)  # k^T, zero keys in the padding
    values_t = q.new_zeros(min(rows, n), v.shape[2], width)
    for i in range(0, n, rows):
        part = slice(i, i + rows)
        keys = _padded_transpose(k[part], keys_t)
        # [r, Lq, Lp] = scale * q k^T (the product scaled, as the reference rounds it)
        scores = torch.baddbmm(keys.new_empty(()), q[part], keys, beta=0.0, alpha=scale)
        if bias is None:
            scores[:, :, k_len:] = float("-inf")
        else:  # the mask and the padding in one op
            scores.add_(bias)
        p = torch.softmax(scores, dim=-1, out=weights[part]) if keep_weights else \
            scores.softmax(dim=-1)  # fmt: skip
        # out^T [r, dv, Lq] = v^T [r, dv, Lp] @ P^T [r, Lp, Lq]
        torch.bmm(_padded_transpose(v[part], values_t), p.transpose(1, 2), out=out_t[part])
    return out_t.transpose(1, 2), weights


class _SlicedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, scale: float, rows: int,
                bias: Tensor | None = None) -> Tensor:  # fmt: skip
        out, weights = _sliced_forward(q, k, v, scale, rows, bias, keep_weights=True)
        ctx.save_for_backward(q, k, v, out, weights)
        ctx.scale, ctx.rows = scale, rows
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, weights = ctx.saved_tensors
        scale, rows = ctx.scale, ctx.rows
        n, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
        width = weights.shape[2]
        # The gradients transposed ([N, w, L]), each product writing along the sequence.
        grad_q_t = q.new_empty(n, q.shape[2], q_len)
        grad_k_t = q.new_empty(n, k.shape[2], width)
        grad_v_t = q.new_empty(n, v.shape[2], width)
        # Softmax backward: dS = P * (dP - rowsum(dP * P)), and rowsum(dP * P) = rowsum(dO * O).
        row_dot = (grad_out * out).sum(dim=-1, keepdim=True)  # [N, Lq, 1]
        grad_out_t = grad_out.transpose(1, 2)  # [N, dv, Lq]
        values_t = q.new_zeros(min(rows, n), v.shape[2], width)
        keys_t = q.new_zeros(min(rows, n), k.shape[2], width)
        for i in range(0, n, rows):
            part = slice(i, i + rows)
            p = weights[part]  # [r, Lq, Lp], 0 in the padding
            torch.bmm(grad_out_t[part], p, out=grad_v_t[part])  # dV^T = dO^T P
            grad_scores = torch.bmm(grad_out[part], _padded_transpose(v[part], values_t))
            grad_scores.sub_(row_dot[part]).mul_(p)  # [r, Lq, Lp], 0 in the padding and mask
            keys = _padded_transpose(k[part], keys_t)
            torch.bmm(keys, grad_scores.transpose(1, 2), out=grad_q_t[part])  # dQ^T = K^T dS^T
            torch.bmm(q[part].transpose(1, 2), grad_scores, out=grad_k_t[part])  # dK^T = Q^T dS
        return (
            grad_q_t.transpose(1, 2).mul(scale),
            grad_k_t[:, :, :k_len].transpose(1, 2).mul(scale),
            grad_v_t[:, :, :k_len].transpose(1, 2),
            None,
            None,
            None,
        )

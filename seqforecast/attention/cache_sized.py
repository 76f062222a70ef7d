"""Attention over short sequences on the CPU, computed a cache-sized slice of the batch at a time.

PatchTST attends over 42 tokens with heads of width 4: a step holds 3,584 score matrices of
42 x 42 (25 MB a layer), and every op of the plain explicit path (two batched matmuls, the
softmax, and their backward) streams that whole tensor through memory for a few flops per
element. torch's fused kernel is tuned for wide heads and long sequences and is slower still here.
This path computes the same function over slices of the batch whose scores fit in the core's
cache (about 1 MB), forward and backward, saving the softmax weights for the backward (none
without a backward). `scripts/bench_longhorizon.py --speed` times the whole training step
against the official code.

    out = softmax(q k^T * scale) v       q [N, Lq, w], k [N, Lk, w], v [N, Lk, dv] -> [N, Lq, dv]

No masks and no dropout on the weights: callers use it only where neither applies (and only
for short sequences, where the per-slice ops stay few).
"""

from __future__ import annotations

import torch
from torch import Tensor

CACHE_FLOATS = 1 << 18  # scores per slice: 1 MB of float32
MAX_SCORES = 128 * 128  # longer sequences: torch's fused kernel


def applies(q: Tensor, k: Tensor) -> bool:
    """Is this path the one to take for q [..., Lq, w], k [..., Lk, w]?"""
    return q.device.type == "cpu" and q.shape[-2] * k.shape[-2] <= MAX_SCORES


def attention(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    """softmax(q k^T * scale) v over [N, L, *] batches, a cache-sized slice at a time."""
    rows = max(1, CACHE_FLOATS // (q.shape[1] * k.shape[1]))
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _SlicedAttention.apply(q, k, v, scale, rows)
    return _sliced_forward(q, k, v, scale, rows)[0]  # no backward: no weights kept


def _sliced_forward(q, k, v, scale: float, rows: int, keep_weights: bool = False):
    """(out [N, Lq, dv], the softmax weights [N, Lq, Lk] if `keep_weights`, else None)."""
    n, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
    out = q.new_empty(n, q_len, v.shape[2])
    weights = q.new_empty(n, q_len, k_len) if keep_weights else None
    for i in range(0, n, rows):
        part = slice(i, i + rows)
        scores = torch.bmm(q[part], k[part].transpose(1, 2)).mul_(scale)
        p = torch.softmax(scores, dim=-1, out=weights[part]) if keep_weights else \
            scores.softmax(dim=-1)  # fmt: skip
        torch.bmm(p, v[part], out=out[part])
    return out, weights


class _SlicedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, scale: float, rows: int) -> Tensor:
        out, weights = _sliced_forward(q, k, v, scale, rows, keep_weights=True)
        ctx.save_for_backward(q, k, v, out, weights)
        ctx.scale, ctx.rows = scale, rows
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, weights = ctx.saved_tensors
        scale, rows = ctx.scale, ctx.rows
        grad_out = grad_out.contiguous()
        grad_q, grad_k, grad_v = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        # Softmax backward: dS = P * (dP - rowsum(dP * P)), and rowsum(dP * P) = rowsum(dO * O).
        row_dot = (grad_out * out).sum(dim=-1, keepdim=True)  # [N, Lq, 1]
        for i in range(0, q.shape[0], rows):
            part = slice(i, i + rows)
            p = weights[part]
            torch.bmm(p.transpose(1, 2), grad_out[part], out=grad_v[part])
            grad_scores = torch.bmm(grad_out[part], v[part].transpose(1, 2))
            grad_scores.sub_(row_dot[part]).mul_(p).mul_(scale)
            torch.bmm(grad_scores, k[part], out=grad_q[part])
            torch.bmm(grad_scores.transpose(1, 2), q[part], out=grad_k[part])
        return grad_q, grad_k, grad_v, None, None

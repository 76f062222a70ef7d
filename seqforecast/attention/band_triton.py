"""`attention.kernel=triton`: block-local softmax attention as Triton kernels, forward and
backward, for GPUs; on the CPU under Triton's interpreter (`TRITON_INTERPRET=1`), which is how
the suite proves it equal to the explicit path.

The function is the band of block_local.py: query block n (positions [n bs, (n+1) bs)) sees the
keys of blocks n-1, n and (unless causal) n+1, causal ones only up to itself. Over G groups
(kernels.py: a backend's `groups`) of q and k whose values are shared by S consecutive groups
(`Attention.shared_values`: diff's two halves of a head read one v, S = 2):

    out[g] = softmax(q[g] k[g]^T * scale, within the band) v[g // S]

One program takes one query block of one value's S groups: it loads that v window once and
computes the S softmaxes in one pass (diff: both halves' maps, the band, the products), keeping
each row's log-sum-exp for the backward. The backward is FlashAttention-2's split: a program
per key block gathers dk and dv from the 2-3 query blocks that see it (dv summed over the S
groups, no atomics), a program per query block gives dq; both recompute the probabilities from
the log-sum-exp. Dropout on the weights, residual attention and a key padding mask are the
explicit path's (kernels.py refuses the first two; a padded call goes there).
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from .kernels import EXPLICIT, Kernel, KernelFacts, band_refusal

try:
    import triton
    import triton.language as tl
except ImportError:  # an optional extra: kernels.py says so in one line where it is asked for
    triton = tl = None


def interpreted() -> bool:
    """Whether Triton runs kernels on CPU tensors here (its interpreter)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def unavailable() -> str | None:
    """Why the kernels cannot run in this process, or None."""
    if triton is None:
        return "triton is not installed (pip install triton, or the dev extra)"
    if not (torch.cuda.is_available() or interpreted()):
        return "it runs on a CUDA device (or on the CPU under TRITON_INTERPRET=1)"
    return None


def _width(n: int) -> int:
    """A tile side: a power of two, at least 16 (tl.dot's smallest on a GPU)."""
    return max(16, triton.next_power_of_2(n))


if triton is not None:

    @triton.jit
    def _forward(Q, K, V, OUT, LSE, scale, length, block, window, width, value_width,
                 S: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BW: tl.constexpr, BD: tl.constexpr):
        n = tl.program_id(0)
        bv = tl.program_id(1)  # batch * values + value
        rows = tl.arange(0, BM)
        cols = tl.arange(0, BN)
        q_pos = n * block + rows
        k_pos = n * block - block + cols
        q_ok = (rows < block) & (q_pos < length)
        k_ok = (cols < window) & (k_pos >= 0) & (k_pos < length)
        allowed = q_ok[:, None] & k_ok[None, :]
        if CAUSAL:
            allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
        w = tl.arange(0, BW)
        d = tl.arange(0, BD)
        value = V + bv * length * value_width
        v = tl.load(value + k_pos[:, None] * value_width + d[None, :],
                    mask=k_ok[:, None] & (d[None, :] < value_width), other=0.0)
        for s in tl.static_range(S):
            g = bv * S + s  # the group's index over batch x groups
            q = tl.load(Q + g * length * width + q_pos[:, None] * width + w[None, :],
                        mask=q_ok[:, None] & (w[None, :] < width), other=0.0)
            k = tl.load(K + g * length * width + k_pos[:, None] * width + w[None, :],
                        mask=k_ok[:, None] & (w[None, :] < width), other=0.0)
            scores = tl.dot(q, tl.trans(k)) * scale  # [BM, BN], float32
            scores = tl.where(allowed, scores, float("-inf"))
            top = tl.max(scores, 1)
            top = tl.where(q_ok, top, 0.0)  # rows past the end see nothing: no inf - inf
            p = tl.exp(scores - top[:, None])
            total = tl.sum(p, 1)
            total = tl.where(q_ok, total, 1.0)
            p = p / total[:, None]
            out = tl.dot(p.to(v.dtype), v)  # [BM, BD]
            tl.store(OUT + g * length * value_width + q_pos[:, None] * value_width + d[None, :],
                     out.to(OUT.dtype.element_ty),
                     mask=q_ok[:, None] & (d[None, :] < value_width))
            tl.store(LSE + g * length + q_pos, top + tl.log(total), mask=q_ok)

    @triton.jit
    def _backward_keys(Q, K, V, DO, LSE, DELTA, DK, DV, scale, length, block, window, width,
                       value_width,
                       S: tl.constexpr, CAUSAL: tl.constexpr, LOOKAHEAD: tl.constexpr,
                       BM: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr):
        m = tl.program_id(0)  # the key block
        bv = tl.program_id(1)
        rows = tl.arange(0, BM)
        k_pos = m * block + rows
        k_ok = (rows < block) & (k_pos < length)
        w = tl.arange(0, BW)
        d = tl.arange(0, BD)
        value = V + bv * length * value_width
        v = tl.load(value + k_pos[:, None] * value_width + d[None, :],
                    mask=k_ok[:, None] & (d[None, :] < value_width), other=0.0)
        dv = tl.zeros((BM, BD), dtype=tl.float32)
        for s in tl.static_range(S):
            g = bv * S + s
            k = tl.load(K + g * length * width + k_pos[:, None] * width + w[None, :],
                        mask=k_ok[:, None] & (w[None, :] < width), other=0.0)
            dk = tl.zeros((BM, BW), dtype=tl.float32)
            # the query blocks whose window holds key block m: m - LOOKAHEAD .. m + 1
            for i in tl.static_range(2 + LOOKAHEAD):
                n = m - LOOKAHEAD + i
                q_pos = n * block + rows
                q_ok = (rows < block) & (q_pos >= 0) & (q_pos < length)
                q = tl.load(Q + g * length * width + q_pos[:, None] * width + w[None, :],
                            mask=q_ok[:, None] & (w[None, :] < width), other=0.0)
                do = tl.load(DO + g * length * value_width + q_pos[:, None] * value_width
                             + d[None, :], mask=q_ok[:, None] & (d[None, :] < value_width),
                             other=0.0)
                lse = tl.load(LSE + g * length + q_pos, mask=q_ok, other=0.0)
                delta = tl.load(DELTA + g * length + q_pos, mask=q_ok, other=0.0)
                allowed = q_ok[:, None] & k_ok[None, :]
                if CAUSAL:
                    allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
                scores = tl.dot(q, tl.trans(k)) * scale  # [BM queries, BM keys]
                p = tl.where(allowed, tl.exp(scores - lse[:, None]), 0.0)
                dv += tl.dot(tl.trans(p.to(do.dtype)), do)
                dp = tl.dot(do, tl.trans(v))
                ds = p * (dp - delta[:, None])
                dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
            tl.store(DK + g * length * width + k_pos[:, None] * width + w[None, :],
                     (dk * scale).to(DK.dtype.element_ty),
                     mask=k_ok[:, None] & (w[None, :] < width))
        tl.store(DV + bv * length * value_width + k_pos[:, None] * value_width + d[None, :],
                 dv.to(DV.dtype.element_ty), mask=k_ok[:, None] & (d[None, :] < value_width))

    @triton.jit
    def _backward_queries(Q, K, V, DO, LSE, DELTA, DQ, scale, length, block, window, width,
                          value_width,
                          S: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr,
                          BN: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr):
        n = tl.program_id(0)
        bv = tl.program_id(1)
        rows = tl.arange(0, BM)
        cols = tl.arange(0, BN)
        q_pos = n * block + rows
        k_pos = n * block - block + cols
        q_ok = (rows < block) & (q_pos < length)
        k_ok = (cols < window) & (k_pos >= 0) & (k_pos < length)
        allowed = q_ok[:, None] & k_ok[None, :]
        if CAUSAL:
            allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
        w = tl.arange(0, BW)
        d = tl.arange(0, BD)
        value = V + bv * length * value_width
        v = tl.load(value + k_pos[:, None] * value_width + d[None, :],
                    mask=k_ok[:, None] & (d[None, :] < value_width), other=0.0)
        for s in tl.static_range(S):
            g = bv * S + s
            q = tl.load(Q + g * length * width + q_pos[:, None] * width + w[None, :],
                        mask=q_ok[:, None] & (w[None, :] < width), other=0.0)
            k = tl.load(K + g * length * width + k_pos[:, None] * width + w[None, :],
                        mask=k_ok[:, None] & (w[None, :] < width), other=0.0)
            do = tl.load(DO + g * length * value_width + q_pos[:, None] * value_width
                         + d[None, :], mask=q_ok[:, None] & (d[None, :] < value_width),
                         other=0.0)
            lse = tl.load(LSE + g * length + q_pos, mask=q_ok, other=0.0)
            delta = tl.load(DELTA + g * length + q_pos, mask=q_ok, other=0.0)
            scores = tl.dot(q, tl.trans(k)) * scale
            p = tl.where(allowed, tl.exp(scores - lse[:, None]), 0.0)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None])
            dq = tl.dot(ds.to(k.dtype), k) * scale
            tl.store(DQ + g * length * width + q_pos[:, None] * width + w[None, :],
                     dq.to(DQ.dtype.element_ty), mask=q_ok[:, None] & (w[None, :] < width))


class _Band(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale: float, block: int, causal: bool):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, groups, length, width = q.shape
        values, value_width = v.shape[1], v.shape[-1]
        shared = groups // values
        lookahead = 0 if causal else 1
        window = (2 + lookahead) * block
        out = q.new_empty(batch, groups, length, value_width)
        lse = torch.empty(batch, groups, length, device=q.device, dtype=torch.float32)
        grid = (triton.cdiv(length, block), batch * values)
        tiles = dict(BM=_width(block), BW=_width(width), BD=_width(value_width))
        _forward[grid](q, k, v, out, lse, scale, length, block, window, width, value_width,
                       S=shared, CAUSAL=causal, BN=_width(window), **tiles)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.block, ctx.causal = scale, block, causal
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        scale, block, causal = ctx.scale, ctx.block, ctx.causal
        grad_out = grad_out.contiguous()
        batch, groups, length, width = q.shape
        values, value_width = v.shape[1], v.shape[-1]
        shared = groups // values
        lookahead = 0 if causal else 1
        window = (2 + lookahead) * block
        # each row's sum(dO * O): the softmax backward's correction term, float32
        delta = (grad_out.float() * out.float()).sum(-1)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        grid = (triton.cdiv(length, block), batch * values)
        tiles = dict(BM=_width(block), BW=_width(width), BD=_width(value_width))
        _backward_keys[grid](q, k, v, grad_out, lse, delta, dk, dv, scale, length, block,
                             window, width, value_width, S=shared, CAUSAL=causal,
                             LOOKAHEAD=lookahead, **tiles)
        _backward_queries[grid](q, k, v, grad_out, lse, delta, dq, scale, length, block,
                                window, width, value_width, S=shared, CAUSAL=causal,
                                BN=_width(window), **tiles)
        return dq, dk, dv, None, None, None


def band_attention(q: Tensor, k: Tensor, v: Tensor, scale: float, block: int,
                   causal: bool) -> Tensor:
    """q, k [B, G, L, w], v [B, V, L, d] (G a multiple of V: group g reads value g // (G / V))
    -> [B, G, L, d]: each group's softmax(q k^T * scale) v within block-local windows of
    `block` (causal: no key after its query). Differentiable in q, k and v."""
    if unavailable():
        raise RuntimeError(f"the Triton band kernel cannot run here: {unavailable()}")
    if q.shape[1] % v.shape[1]:
        raise ValueError(f"{q.shape[1]} groups cannot share {v.shape[1]} values evenly")
    return _Band.apply(q, k, v, scale, block, causal)


class TritonBand(Kernel):
    """`attention.kernel=triton`: the block-local band above. `auto` leaves it to be named until
    a GPU visit has measured it against the explicit windows and FlexAttention."""

    name = "triton"

    @classmethod
    def cannot_serve(cls, facts: KernelFacts) -> str | None:
        return band_refusal(facts) or unavailable()

    @classmethod
    def favoured(cls, facts: KernelFacts) -> bool:
        return False

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        if key_padding_mask is not None:  # the band has no padding: the explicit path's call
            return EXPLICIT(attn, q, k, v, residual, call, key_padding_mask)
        values, _ = attn.shared_values(v)
        out = band_attention(attn.groups(q), attn.groups(k), values, attn.scale,
                             self.facts.band, call.causal)
        return attn.ungroup(out), None

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
    def _band(n, length, block, window, CAUSAL: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr):
        """Query block n's positions and its window's keys, which exist (`q_ok`, `k_ok`), and
        which pairs may attend: (q_pos [BM], k_pos [BN], q_ok, k_ok, allowed [BM, BN])."""
        rows = tl.arange(0, BM)
        cols = tl.arange(0, BN)
        q_pos = n * block + rows
        k_pos = n * block - block + cols
        q_ok = (rows < block) & (q_pos >= 0) & (q_pos < length)
        k_ok = (cols < window) & (k_pos >= 0) & (k_pos < length)
        allowed = q_ok[:, None] & k_ok[None, :]
        if CAUSAL:
            allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
        return q_pos, k_pos, q_ok, k_ok, allowed

    @triton.jit
    def _dot(a, b, DOT: tl.constexpr):
        """a @ b accumulated in float32; DOT: "ieee" for float32 inputs (a GPU's default, tf32,
        rounds them to 10 bits), "tf32" (unused) for 16-bit ones."""
        return tl.dot(a, b, input_precision=DOT)

    @triton.jit
    def _rows(base, pos, ok, width, B: tl.constexpr):
        """Rows `pos` of a [length, width] matrix at `base` as a [len(pos), B] tile, zero where
        a row is not `ok` or past the width."""
        cols = tl.arange(0, B)
        return tl.load(base + pos[:, None] * width + cols[None, :],
                       mask=ok[:, None] & (cols[None, :] < width), other=0.0)

    @triton.jit
    def _store_rows(base, tile, pos, ok, width, B: tl.constexpr):
        cols = tl.arange(0, B)
        tl.store(base + pos[:, None] * width + cols[None, :], tile.to(base.dtype.element_ty),
                 mask=ok[:, None] & (cols[None, :] < width))

    @triton.jit
    def _forward(Q, K, V, OUT, LSE, scale, length, block, window, width, value_width,
                 S: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BW: tl.constexpr, BD: tl.constexpr, DOT: tl.constexpr):
        n = tl.program_id(0)
        bv = tl.program_id(1)  # batch * values + value
        q_pos, k_pos, q_ok, k_ok, allowed = _band(n, length, block, window, CAUSAL, BM, BN)
        v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
        for s in tl.static_range(S):
            g = (bv * S + s) * length  # the group's first row over batch x groups
            q = _rows(Q + g * width, q_pos, q_ok, width, BW)
            k = _rows(K + g * width, k_pos, k_ok, width, BW)
            scores = tl.where(allowed, _dot(q, tl.trans(k), DOT) * scale, float("-inf"))
            top = tl.where(q_ok, tl.max(scores, 1), 0.0)  # rows past the end: no inf - inf
            p = tl.exp(scores - top[:, None])
            total = tl.where(q_ok, tl.sum(p, 1), 1.0)
            p = p / total[:, None]
            _store_rows(OUT + g * value_width, _dot(p.to(v.dtype), v, DOT), q_pos, q_ok,
                        value_width, BD)
            tl.store(LSE + g + q_pos, top + tl.log(total), mask=q_ok)

    @triton.jit
    def _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT: tl.constexpr):
        """A window's probabilities again (from the log-sum-exp) and the scores' gradient."""
        p = tl.where(allowed, tl.exp(_dot(q, tl.trans(k), DOT) * scale - lse[:, None]), 0.0)
        ds = p * (_dot(do, tl.trans(v), DOT) - delta[:, None])
        return p, ds

    @triton.jit
    def _backward_keys(Q, K, V, DO, LSE, DELTA, DK, DV, scale, length, block, window, width,
                       value_width, S: tl.constexpr, CAUSAL: tl.constexpr,
                       LOOKAHEAD: tl.constexpr, BM: tl.constexpr, BW: tl.constexpr,
                       BD: tl.constexpr, DOT: tl.constexpr):
        m = tl.program_id(0)  # the key block
        bv = tl.program_id(1)
        k_pos, _, k_ok, _, _ = _band(m, length, block, window, CAUSAL, BM, BM)
        v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
        dv = tl.zeros((BM, BD), dtype=tl.float32)
        for s in tl.static_range(S):
            g = (bv * S + s) * length
            k = _rows(K + g * width, k_pos, k_ok, width, BW)
            dk = tl.zeros((BM, BW), dtype=tl.float32)
            # the query blocks whose window holds key block m: m - LOOKAHEAD .. m + 1
            for i in tl.static_range(2 + LOOKAHEAD):
                q_pos, _, q_ok, _, _ = _band(m - LOOKAHEAD + i, length, block, window, CAUSAL,
                                             BM, BM)
                allowed = q_ok[:, None] & k_ok[None, :]
                if CAUSAL:
                    allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
                q = _rows(Q + g * width, q_pos, q_ok, width, BW)
                do = _rows(DO + g * value_width, q_pos, q_ok, value_width, BD)
                lse = tl.load(LSE + g + q_pos, mask=q_ok, other=0.0)
                delta = tl.load(DELTA + g + q_pos, mask=q_ok, other=0.0)
                p, ds = _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT)
                dv += _dot(tl.trans(p.to(do.dtype)), do, DOT)
                dk += _dot(tl.trans(ds.to(q.dtype)), q, DOT)
            _store_rows(DK + g * width, dk * scale, k_pos, k_ok, width, BW)
        _store_rows(DV + bv * length * value_width, dv, k_pos, k_ok, value_width, BD)

    @triton.jit
    def _backward_queries(Q, K, V, DO, LSE, DELTA, DQ, scale, length, block, window, width,
                          value_width, S: tl.constexpr, CAUSAL: tl.constexpr,
                          BM: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr,
                          BD: tl.constexpr, DOT: tl.constexpr):
        n = tl.program_id(0)
        bv = tl.program_id(1)
        q_pos, k_pos, q_ok, k_ok, allowed = _band(n, length, block, window, CAUSAL, BM, BN)
        v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
        for s in tl.static_range(S):
            g = (bv * S + s) * length
            q = _rows(Q + g * width, q_pos, q_ok, width, BW)
            k = _rows(K + g * width, k_pos, k_ok, width, BW)
            do = _rows(DO + g * value_width, q_pos, q_ok, value_width, BD)
            lse = tl.load(LSE + g + q_pos, mask=q_ok, other=0.0)
            delta = tl.load(DELTA + g + q_pos, mask=q_ok, other=0.0)
            _, ds = _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT)
            _store_rows(DQ + g * width, _dot(ds.to(k.dtype), k, DOT) * scale, q_pos, q_ok, width,
                        BW)


def _launch(q: Tensor, v: Tensor, block: int, causal: bool) -> tuple[tuple, tuple, dict]:
    """What every kernel of the band is launched with, for q [B, G, L, w], v [B, V, L, d]: the
    grid (query or key blocks x batch x values), the sizes (length, block, window, w, d) and
    the compile-time tiles (S groups a value, causality, tile sides, product precision)."""
    batch, groups, length, width = q.shape
    values, value_width = v.shape[1], v.shape[-1]
    window = (2 + (0 if causal else 1)) * block
    grid = (triton.cdiv(length, block), batch * values)
    sizes = (length, block, window, width, value_width)
    tiles = dict(S=groups // values, CAUSAL=causal, BM=_width(block), BW=_width(width),
                 BD=_width(value_width), DOT="ieee" if q.dtype == torch.float32 else "tf32")
    return grid, sizes, tiles


class _Band(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale: float, block: int, causal: bool):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        grid, sizes, tiles = _launch(q, v, block, causal)
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        lse = torch.empty(q.shape[:-1], device=q.device, dtype=torch.float32)
        _forward[grid](q, k, v, out, lse, scale, *sizes, BN=_width(sizes[2]), **tiles)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.block, ctx.causal = scale, block, causal
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        scale, block, causal = ctx.scale, ctx.block, ctx.causal
        grad_out = grad_out.contiguous()
        grid, sizes, tiles = _launch(q, v, block, causal)
        # each row's sum(dO * O): the softmax backward's correction term, float32
        delta = (grad_out.float() * out.float()).sum(-1)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _backward_keys[grid](q, k, v, grad_out, lse, delta, dk, dv, scale, *sizes,
                             LOOKAHEAD=0 if causal else 1, **tiles)
        _backward_queries[grid](q, k, v, grad_out, lse, delta, dq, scale, *sizes,
                                BN=_width(sizes[2]), **tiles)
        return dq, dk, dv, None, None, None


def band_attention(q: Tensor, k: Tensor, v: Tensor, scale: float, block: int,
                   causal: bool) -> Tensor:
    """q, k [B, G, L, w], v [B, V, L, d] (G a multiple of V: group g reads value g // (G / V))
    -> [B, G, L, d]: each group's softmax(q k^T * scale) v within block-local windows of
    `block` (causal: no key after its query). Differentiable in q, k and v."""
    why = unavailable()
    if why:
        raise RuntimeError(f"the Triton band kernel cannot run here: {why}")
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

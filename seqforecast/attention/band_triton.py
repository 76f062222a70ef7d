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
the log-sum-exp. Dropout on the weights and residual attention are refused when the layer is
built (kernels.py), a key padding mask at the call.
"""

from __future__ import annotations

import importlib.util
import os

import torch
from torch import Tensor

from .kernels import Kernel, KernelFacts, band_refusal, refuse_padding, register_kernel


def interpreted() -> bool:
    """Whether Triton runs kernels on CPU tensors here (its interpreter)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def unavailable() -> str | None:
    """Why the kernels cannot run in this process, or None."""
    # an optional extra, imported only where the kernels launch (_band_triton_programs.py)
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install triton, or the dev extra)"
    if not (torch.cuda.is_available() or interpreted()):
        return "it runs on a CUDA device (or on the CPU under TRITON_INTERPRET=1)"
    return None


def _width(n: int) -> int:
    """A tile side: a power of two, at least 16 (tl.dot's smallest on a GPU)."""
    return max(16, 1 << (n - 1).bit_length())


def _launch(q: Tensor, v: Tensor, block: int, causal: bool) -> tuple[tuple, tuple, dict]:
    """What every kernel of the band is launched with, for q [B, G, L, w], v [B, V, L, d]: the
    grid (query or key blocks x batch x values), the sizes (length, block, window, w, d) and
    the compile-time tiles (S groups a value, causality, tile sides, product precision)."""
    batch, groups, length, width = q.shape
    values, value_width = v.shape[1], v.shape[-1]
    window = (2 + (0 if causal else 1)) * block
    grid = (-(-length // block), batch * values)  # ceil(length / block) query blocks
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
        from ._band_triton_programs import band_forward

        band_forward[grid](q, k, v, out, lse, scale, *sizes, BN=_width(sizes[2]), **tiles)
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
        from ._band_triton_programs import band_backward_keys, band_backward_queries

        band_backward_keys[grid](q, k, v, grad_out, lse, delta, dk, dv, scale, *sizes,
                                 LOOKAHEAD=0 if causal else 1, **tiles)
        band_backward_queries[grid](q, k, v, grad_out, lse, delta, dq, scale, *sizes,
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


@register_kernel
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
        refuse_padding(self, key_padding_mask)  # the band has no padding
        values, _ = attn.shared_values(v)
        out = band_attention(attn.groups(q), attn.groups(k), values, attn.scale,
                             self.facts.band, call.causal)
        return attn.ungroup(out), None

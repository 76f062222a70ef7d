"""`attention.kernel=flex`: block-local softmax attention through FlexAttention (torch's
compiled attention with a block-sparse mask), the composition a GPU visit compares the Triton
kernel (band_triton.py) against.

The band of block_local.py is the mask `key block in [query block - 1, query block + 1]` (not
the next block when causal, nor a later key). The sequence is padded to a multiple of
FlexAttention's 128-wide blocks, the padded keys masked: torch 2.13's compiled CPU forward gave
wrong rows (errors of 0.3-1.1) at L = 40 unpadded, none padded (tests/attention/test_band.py).
Each group reads its own copy of the values (FlexAttention shares values only where keys are
shared too, and diff's two halves have keys of their own). It trains on a GPU: on the CPU
FlexAttention has no backward, so a machine without CUDA refuses the kernel when the layer is
built (the suite checks its CPU forward by calling the kernel itself).
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import ShapeCache
from .kernels import Kernel, KernelFacts, band_refusal, refuse_padding, register_kernel

FLEX_BLOCK = 128  # FlexAttention's default block: the padded length is a multiple of it

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # torch before 2.5
    create_block_mask = flex_attention = None


@cache
def _compiled():
    """flex_attention compiled once a process (uncompiled, it materialises every score)."""
    return torch.compile(flex_attention, dynamic=False)


def band_mask(length: int, block: int, causal: bool, device: torch.device):
    """The band over a sequence of `length` padded to a multiple of FLEX_BLOCK."""
    padded = -(-length // FLEX_BLOCK) * FLEX_BLOCK
    lookahead = 0 if causal else 1

    def allowed(batch, head, query, key):
        query_block, key_block = query // block, key // block
        inside = (key_block >= query_block - 1) & (key_block <= query_block + lookahead)
        inside = inside & (key < length)
        return inside & (key <= query) if causal else inside

    return create_block_mask(allowed, None, None, padded, padded, device=device)


def flex_band_attention(q: Tensor, k: Tensor, v: Tensor, scale: float, block: int,
                        causal: bool, mask=None) -> Tensor:
    """q, k [B, G, L, w], v [B, G, L, d] -> [B, G, L, d]: softmax(q k^T * scale) v within
    block-local windows of `block`. `mask`: band_mask's for these sizes (built when None)."""
    length = q.shape[-2]
    mask = band_mask(length, block, causal, q.device) if mask is None else mask
    padding = (0, 0, 0, mask.shape[-2] - length)
    out = _compiled()(F.pad(q, padding), F.pad(k, padding), F.pad(v, padding),
                      block_mask=mask, scale=scale)
    return out[..., :length, :]


@register_kernel
class FlexBand(Kernel):
    """`attention.kernel=flex`: the band above; `auto` leaves it to be named (not measured)."""

    name = "flex"

    def __init__(self, facts: KernelFacts | None = None):
        super().__init__(facts)
        self._masks = ShapeCache()

    @classmethod
    def cannot_serve(cls, facts: KernelFacts) -> str | None:
        if flex_attention is None:
            return "this torch has no FlexAttention (torch >= 2.5)"
        return band_refusal(facts) or (
            "on the CPU FlexAttention has no backward, and this run trains there: train on a "
            "GPU (trainer.device=cuda), or use attention.kernel=explicit"
            if facts.trains_on == "cpu" else None)

    @classmethod
    def favoured(cls, facts: KernelFacts) -> bool:
        return False

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        refuse_padding(self, key_padding_mask)
        qs, ks, vs = attn.groups(q), attn.groups(k), attn.group_values(v)
        length, block = qs.shape[-2], self.facts.band
        mask = self._masks.get((length, block, call.causal, qs.device),
                               lambda: band_mask(length, block, call.causal, qs.device))
        out = flex_band_attention(qs, ks, vs.contiguous(), attn.scale, block, call.causal, mask)
        return attn.ungroup(out), None

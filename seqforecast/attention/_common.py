"""Pieces every backend shares: input checks, masks and a softmax that never yields NaN."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def check_inputs(query: Tensor, key_value: Tensor, key_padding_mask: Tensor | None, d_model: int):
    """Raise ValueError with the expected shapes when the call does not fit the interface."""
    if query.dim() != 3 or key_value.dim() != 3:
        raise ValueError(
            f"query and key_value must be [batch, length, {d_model}], got "
            f"{tuple(query.shape)} and {tuple(key_value.shape)}"
        )
    if query.shape[-1] != d_model or key_value.shape[-1] != d_model:
        raise ValueError(
            f"query and key_value need feature size d_model={d_model}, got "
            f"{query.shape[-1]} and {key_value.shape[-1]}"
        )
    if query.shape[0] != key_value.shape[0]:
        raise ValueError(
            f"query and key_value batch sizes differ: {query.shape[0]} vs {key_value.shape[0]}"
        )
    if key_padding_mask is not None:
        batch, key_len = key_value.shape[:2]
        if key_padding_mask.dtype != torch.bool or key_padding_mask.shape != (batch, key_len):
            raise ValueError(
                f"key_padding_mask must be a bool tensor [batch={batch}, key_len={key_len}] "
                f"(True = padding), got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
            )


def masked_softmax_(scores: Tensor, blocked: Tensor | None, rows_may_be_empty: bool) -> Tensor:
    """Softmax over the last dim with `blocked` positions (True) at exactly zero.

    Fills `scores` in place (one score-sized allocation less per call, which matters at long
    lengths), so pass a fresh tensor that no autograd node saved (the output of a matmul,
    einsum, add, mul or div is one); autograd's version check rejects anything else.

    A row whose keys are all blocked gets all-zero weights, not NaN, and passes no gradient:
    such a row is unblocked before the softmax (so every value stays finite, forward and
    backward) and zeroed after it. Only padding can empty a row, so callers say whether
    that can happen and the check costs nothing otherwise.
    """
    if blocked is None:
        return scores.softmax(dim=-1)
    if not rows_may_be_empty:
        return scores.masked_fill_(blocked, float("-inf")).softmax(dim=-1)
    empty = blocked.all(dim=-1, keepdim=True)
    weights = scores.masked_fill_(blocked & ~empty, float("-inf")).softmax(dim=-1)
    return weights.masked_fill(empty, 0.0)


def mha_init(inputs: list[nn.Linear], output: nn.Linear) -> None:
    """nn.MultiheadAttention's initialisation: Xavier-uniform input projections, zero biases."""
    for proj in inputs:
        nn.init.xavier_uniform_(proj.weight)
    for proj in (*inputs, output):
        if proj.bias is not None:
            nn.init.zeros_(proj.bias)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical OR of the given blocked-masks (None = nothing blocked), broadcasting."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out | m
    return out


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    blocked: Tensor | None = None,
    rows_may_be_empty: bool = False,
    dropout: float = 0.0,
    scale: float | None = None,
) -> Tensor:
    """torch's fused scaled_dot_product_attention with this package's mask conventions.

    q [..., Lq, d], k [..., Lk, d] and v [..., Lk, dv] -> [..., Lq, dv]; `scale` defaults to
    1/sqrt(d). Without `blocked` the kernel applies `causal` itself; with it (True = may not
    attend; causal already folded in) it takes the mask. When a row may have no key at all
    (padding), that row attends everywhere (finite) and is zeroed after, as
    `masked_softmax_` does.
    """
    options = {"dropout_p": dropout, "scale": scale}
    if blocked is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **options)
    if not rows_may_be_empty:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked, **options)
    empty = blocked.all(dim=-1, keepdim=True)
    allowed = ~(blocked & ~empty)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, **options)
    return out.masked_fill(empty, 0.0)


class ShapeCache:
    """A small LRU of tensors that depend only on shapes and device (masks, positions).

    Lives on the module that uses it, so nothing is global and nothing enters the state dict.
    """

    def __init__(self, capacity: int = 16):
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, object] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], object]):
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = build()
        self._entries[key] = value
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return value

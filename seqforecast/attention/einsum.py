"""`einsum`: the same multi-head attention, as einsums over [batch, length, heads, head_dim]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import masked_softmax_
from .base import AttentionOptions
from .registry import register_attention
from .scored import ScoredAttention


@register_attention("einsum", AttentionOptions)
class EinsumAttention(ScoredAttention):
    def _attend(self, q, k, v, blocked, rows_may_be_empty, dropout, starts
                ) -> tuple[Tensor, Tensor]:
        # [B, H, L, w] -> [B, L, H, w] (views; w > head_dim with residual attention's q, k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = self._score_terms(torch.einsum("bqhd,bkhd->bhqk", q * self.scale, k), starts)
        weights = masked_softmax_(scores, blocked, rows_may_be_empty)  # [B, H, Lq, Lk]
        dropped = F.dropout(weights, dropout) if dropout else weights
        out = torch.einsum("bhqk,bkhd->bhqd", dropped, v)
        return out, weights

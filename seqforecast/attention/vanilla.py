"""`vanilla`: multi-head attention by batched matmul, heads folded into the bmm batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import masked_softmax_
from .base import AttentionOptions
from .registry import register_attention
from .scored import ScoredAttention


@register_attention("vanilla", AttentionOptions)
class VanillaAttention(ScoredAttention):
    def _attend(self, q, k, v, blocked, rows_may_be_empty, dropout, starts
                ) -> tuple[Tensor, Tensor]:
        batch, heads, q_len, _ = q.shape
        k_len = k.shape[2]
        # [B, H, L, w] -> [B * H, L, w]: heads into the batch of a bmm
        scores = torch.bmm(q.flatten(0, 1) * self.scale, k.flatten(0, 1).transpose(1, 2))
        scores = self._score_terms(scores.view(batch, heads, q_len, k_len), starts)
        weights = masked_softmax_(scores, blocked, rows_may_be_empty)  # [B, H, Lq, Lk]
        dropped = F.dropout(weights, dropout) if dropout else weights
        out = torch.bmm(dropped.reshape(batch * heads, q_len, k_len), v.flatten(0, 1))
        return out.view(batch, heads, q_len, -1), weights  # [B, H, Lq, head_dim]

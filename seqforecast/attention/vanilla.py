"""`vanilla`: multi-head attention by batched matmul, heads folded into the bmm batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import masked_softmax_
from .base import AttentionOptions, ProjectedAttention
from .registry import register_attention


@register_attention("vanilla", AttentionOptions)
class VanillaAttention(ProjectedAttention):
    def _attend(
        self, q, k, v, blocked, rows_may_be_empty, dropout, starts=(0, 0)
    ) -> tuple[Tensor, Tensor]:
        batch, q_len, _ = q.shape
        k_len = k.shape[1]
        heads, fold = self.n_heads, self._fold_heads  # [B, L, H * w] -> [B * H, L, w]
        scores = torch.bmm(fold(q) * self.scale, fold(k).transpose(1, 2))
        scores = self._score_terms(scores.view(batch, heads, q_len, k_len), starts)
        weights = masked_softmax_(scores, blocked, rows_may_be_empty)  # [B, H, Lq, Lk]
        dropped = F.dropout(weights, dropout) if dropout else weights
        out = torch.bmm(dropped.reshape(batch * heads, q_len, k_len), fold(v))
        return self._unfold_heads(out, batch), weights  # [B, Lq, E]

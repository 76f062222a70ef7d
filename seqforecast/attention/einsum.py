"""`einsum`: the same multi-head attention, as einsums over [batch, length, heads, head_dim]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import masked_softmax_
from .base import AttentionOptions, ProjectedAttention
from .registry import register_attention


@register_attention("einsum", AttentionOptions)
class EinsumAttention(ProjectedAttention):
    def _attend(
        self, q, k, v, blocked, rows_may_be_empty, dropout, starts=(0, 0)
    ) -> tuple[Tensor, Tensor]:
        batch, q_len, _ = q.shape
        k_len = k.shape[1]
        # [B, L, H * w] -> [B, L, H, w] (w > head_dim with residual attention's carried q, k)
        q = q.view(batch, q_len, self.n_heads, -1)
        k = k.view(batch, k_len, self.n_heads, -1)
        v = v.view(batch, k_len, self.n_heads, self.head_dim)
        scores = self._score_terms(torch.einsum("bqhd,bkhd->bhqk", q * self.scale, k), starts)
        weights = masked_softmax_(scores, blocked, rows_may_be_empty)  # [B, H, Lq, Lk]
        dropped = F.dropout(weights, dropout) if dropout else weights
        out = torch.einsum("bhqk,bkhd->bqhd", dropped, v)
        return out.reshape(batch, q_len, self.d_model), weights

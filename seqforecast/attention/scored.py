"""Shared body of the `vanilla` and `einsum` backends: softmax(q k^T / sqrt(head_dim)) v per head.

Both hold their projections as `q_proj`, `k_proj`, `v_proj`, `out_proj` (the names and layout of
`torch.nn.MultiheadAttention`, so copied weights give the same function). A subclass writes only
its explicit score path, `_attend`, which also returns the per-head weights; the fused kernels
(kernels.py) compute the same function without materialising the scores wherever nothing acts
between the scores and the softmax.

An optional `position` (see position.py) rotates q and k, or adds its terms to the scores, at
the absolute time steps the call gives (`query_start`, `key_start`). Residual attention
(residual.py) joins the stack's carried q and k on the explicit path, and the native kernel
reads them in pieces.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import ShapeCache, combine_masks
from .base import AttentionOptions
from .core import Attention, AttentionCall
from .kernels import KernelFacts, causal_mask
from .position import AttentionPosition, relative_geometry
from .site import ALONE, Site


class ScoredAttention(Attention):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        options: AttentionOptions,
        site: Site = ALONE,
        position: AttentionPosition | None = None,
    ):
        """`position`: rotary or relative terms inside it (`pos_encoding=rope|relative`)."""
        super().__init__(d_model, n_heads, options, site)
        if position is not None:
            position.bind(self.head_dim, f"model.d_model/model.n_heads = {d_model}/{n_heads}",
                          d_model)
            if position.acts_on_scores:
                site.refuse(options.name, residual=(
                    f"pos_encoding={position.label} adds its terms to the scores, which "
                    f"residual attention cannot carry; use sinusoidal, learned, rope or none"))
        self.position = position
        self._masks = ShapeCache()

    def kernel_facts(self) -> KernelFacts:
        terms = self.position is not None and self.position.acts_on_scores
        return KernelFacts(softmax=True, dropout=self.dropout,
                           between="a position term on the scores" if terms else None)

    def heads(self, query, key_value, call: AttentionCall):
        q, k, v = self.q_proj(query), self.k_proj(key_value), self.v_proj(key_value)  # [B, L, E]
        if self.position is not None:  # rotated per head: [B, L, E] -> [B, L, H, head_dim]
            batch, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
            q = self.position.rotate(q.view(batch, q_len, self.n_heads, -1), call.query_start)
            k = self.position.rotate(k.view(batch, k_len, self.n_heads, -1), call.key_start)
            q, k = q.flatten(2), k.flatten(2)
        return self.split(q), self.split(k), self.split(v)  # [B, H, L, head_dim] views

    def groups(self, t: Tensor) -> Tensor:
        return t  # one softmax per head

    def blocked(self, q_len, k_len, causal, device):
        if not causal:
            return None
        return self._masks.get(("causal", q_len, k_len, device),
                               lambda: causal_mask(q_len, k_len, device))

    def explicit(self, q, k, v, residual, call, key_padding_mask):
        if residual is not None:  # the carried heads grow: [B, H, L, l * head_dim]
            q, k = residual.joined()
        padding = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
        blocked = combine_masks(  # True = may not attend; broadcasts to [B, H, Lq, Lk]
            self.blocked(q.shape[2], k.shape[2], call.causal, q.device), padding)
        dropout = self.dropout if self.training else 0.0
        out, weights = self._attend(q, k, v, blocked, padding is not None, dropout,
                                    (call.query_start, call.key_start))
        return self.merge(out), weights

    def _score_terms(self, scores: Tensor, starts: tuple[int, int]) -> Tensor:
        """The position module's terms on raw scores [B, H, Lq, Lk] (identity without one), at
        the time steps starts[0] + i (queries) and starts[1] + j (keys)."""
        if self.position is None or not self.position.acts_on_scores:
            return scores
        q_len, k_len = scores.shape[-2:]
        (q_start, k_start), device = starts, scores.device
        distance, past = self._masks.get(
            ("geometry", q_len, k_len, q_start, k_start, device, scores.dtype),
            lambda: relative_geometry(
                torch.arange(q_start, q_start + q_len, device=device)[:, None],
                torch.arange(k_start, k_start + k_len, device=device)[None, :],
                scores.dtype,
            ),
        )
        return self.position.score_terms(scores, distance, past)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None,
                rows_may_be_empty: bool, dropout: float, starts: tuple[int, int]
                ) -> tuple[Tensor, Tensor]:
        """The explicit path: q [B, H, Lq, w], k [B, H, Lk, w] (w = head_dim, or more when
        residual attention carries earlier layers' q and k), v [B, H, Lk, head_dim] ->
        (out [B, H, Lq, head_dim], weights [B, H, Lq, Lk]), the scores scaled by
        1/sqrt(head_dim). `starts`: the time steps of the first query and key, for the
        position terms on the scores."""
        raise NotImplementedError

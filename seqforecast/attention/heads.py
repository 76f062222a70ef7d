"""Shared body of the forecasting literature's mechanisms (flow, probsparse, autocorrelation,
fourier): the projections and the one attention call, around a mechanism that is not a
softmax over q.k scores.

The projections carry `nn.MultiheadAttention`'s names and initialisation (`q_proj`, `k_proj`,
`v_proj`, `out_proj`; a mechanism that reads fewer of q, k, v builds only those), so the
builder's `model.attention_init=linear` and weight copies work as for every backend. A
subclass writes `_attend(q, k, v, causal, need_weights)` on heads [B, H, L, head_dim]. What the
call cannot mean for a mechanism (a padding mask, residual attention, the future masked where it
cannot be) is refused here in one line; the config refuses it before a model is built
(AttentionOptions' TIME_AXIS, CAUSAL, SCORES, config/rules.py).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from ._common import check_inputs, mha_init
from .base import AttentionOptions


class HeadsAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, options: AttentionOptions,
                 reads: tuple[str, ...] = ("q", "k", "v")):
        """`reads`: the projections the mechanism reads (of q, k, v)."""
        super().__init__()
        self.reads = reads
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.dropout = options.dropout
        self.options = options
        for name in self.reads:
            setattr(self, f"{name}_proj", nn.Linear(d_model, d_model, bias=options.bias))
        self.out_proj = nn.Linear(d_model, d_model, bias=options.bias)
        mha_init([getattr(self, f"{name}_proj") for name in self.reads], self.out_proj)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        query_start: int = 0,
        key_start: int = 0,
        residual=None,
    ) -> tuple[Tensor, Tensor | None]:
        """query [B, Lq, E], key_value [B, Lk, E] -> (out [B, Lq, E], weights [B, H, Lq, Lk]
        or None). The time steps (`query_start`, `key_start`) place no terms here."""
        check_inputs(query, key_value, key_padding_mask, self.d_model)
        name = self.options.name
        if key_padding_mask is not None:
            raise ValueError(f"{name} attention takes no key padding mask")
        if residual is not None:
            raise ValueError(f"{name} attention cannot carry residual scores: "
                             f"{type(self.options).SCORES}")
        why = self.cannot_be_causal() if causal else None
        if why:
            raise ValueError(f"{name} attention cannot be causal: {why}")
        q, k, v = (self._heads(getattr(self, f"{n}_proj")(x)) if n in self.reads else None
                   for n, x in (("q", query), ("k", key_value), ("v", key_value)))
        out, weights = self._attend(q, k, v, causal, need_weights)
        return self.out_proj(out), (weights if need_weights else None)

    def cannot_be_causal(self) -> str | None:
        """Why a causal call is refused, or None."""
        return type(self.options).CAUSAL

    def _heads(self, x: Tensor) -> Tensor:
        """[B, L, E] -> [B, H, L, head_dim]."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)

    def _merge(self, out: Tensor) -> Tensor:
        """[B, H, L, head_dim] -> [B, L, E]."""
        batch, _, length, _ = out.shape
        return out.transpose(1, 2).reshape(batch, length, self.d_model)

    def _attend(self, q: Tensor | None, k: Tensor | None, v: Tensor | None, causal: bool,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Heads [B, H, L, head_dim] (None for what the mechanism does not read) ->
        (out [B, Lq, E], the weights each output row puts on each value row [B, H, Lq, Lk],
        when asked and the mechanism has them)."""
        raise NotImplementedError

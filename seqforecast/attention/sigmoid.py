"""`sigmoid`: sigmoid attention (Ramapuram et al., "Theory, Analysis, and Best Practices for
Sigmoid Self-Attention", ICLR 2025; apple/ml-sigmoid-attention).

Each weight is a sigmoid of its own score, not a share of a softmax over the row:

    w_ij = sigmoid(q_i . k_j / sqrt(head_dim) + b)        out_i = sum_j w_ij v_j

so the weights of a row need not sum to 1, and no key competes with another. The bias `b`
(`attention.logit_bias`) keeps the row's total weight near 1 at the start: the paper's b =
-log(n), n the sequence length (null, the default: -log of the keys the layer's site reads,
fixed when the layer is built, so a decoder generating step by step over a prefix of its keys
computes the function it was trained with by teacher forcing; a number fixes it to that value,
as the authors' code does from its config). Masked keys (the future, padding) get weight 0.
Positions inside attention (rope, relative terms) and residual attention act on the scores as
for vanilla (scored.py); no fused kernel computes it (they are softmax kernels), so its own
path runs.

The paper's recommendations for stable training, beside the bias: a norm on the hidden
states before attention (pre-norm, or their hybrid norm), QK norm at large scales, and LayerScale
on the residual branches; its analysis shows the output's norm grows with the sequence length
without the bias, which is the instability it removes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import Check, ConfigError, option
from .base import AttentionOptions
from .kernels import KernelFacts
from .position import AttentionPosition
from .registry import register_attention
from .scored import ScoredAttention
from .site import ALONE, Site

finite = Check(lambda v: math.isfinite(v), "must be a finite number (or null: -log(keys))")


@dataclass
class SigmoidOptions(AttentionOptions):
    logit_bias: float | None = option(None, finite)  # b in sigmoid(q.k/sqrt(d) + b): null
    # = -log(n), n the keys of the layer's site (the paper's -log(sequence length)), fixed
    # when built; a number fixes it


@register_attention("sigmoid", SigmoidOptions)
class SigmoidAttention(ScoredAttention):
    def __init__(self, d_model: int, n_heads: int, options: SigmoidOptions,
                 site: Site = ALONE, position: AttentionPosition | None = None):
        super().__init__(d_model, n_heads, options, site, position)
        bias = options.logit_bias
        if bias is None:
            if not site.k_len:
                raise ConfigError(
                    f"{site.option('logit_bias')}=null sets b = -log(keys) from the keys the "
                    f"layer reads, which a layer built alone is not told: build it with "
                    f"lengths=(queries, keys), or set {site.option('logit_bias')}")
            bias = -math.log(site.k_len)
        self.logit_bias = float(bias)  # b, fixed: every call adds the same

    def kernel_facts(self) -> KernelFacts:
        return KernelFacts(dropout=self.dropout)  # no softmax: its own path only

    def _attend(self, q, k, v, blocked, rows_may_be_empty, dropout, starts
                ) -> tuple[Tensor, Tensor]:
        batch, heads, q_len, _ = q.shape
        k_len = k.shape[2]
        # [B, H, L, w] -> [B * H, L, w]: heads into the batch of a bmm
        scores = torch.bmm(q.flatten(0, 1) * self.scale, k.flatten(0, 1).transpose(1, 2))
        scores = self._score_terms(scores.view(batch, heads, q_len, k_len), starts)
        weights = torch.sigmoid(scores + self.logit_bias)  # [B, H, Lq, Lk]
        if blocked is not None:  # a masked key weighs nothing (an all-masked row: zeros)
            weights = weights.masked_fill(blocked, 0.0)
        dropped = F.dropout(weights, dropout) if dropout else weights
        out = torch.bmm(dropped.reshape(batch * heads, q_len, k_len), v.flatten(0, 1))
        return out.view(batch, heads, q_len, -1), weights  # [B, H, Lq, head_dim]

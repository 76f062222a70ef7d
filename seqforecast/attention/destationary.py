"""`destationary`: De-stationary Attention (Non-stationary Transformer, Liu et al., NeurIPS 2022;
the Time-Series-Library's `DSAttention`).

A model normalises each window before it reaches attention, which makes attention see every
window alike ("over-stationarisation"); de-stationary attention gives back what the norm took,
through two factors the model learns from the window before its norm (model/destationary.py):

    weights = softmax((tau q.k + delta_j) / sqrt(head width))

tau [B] scales every score of a window, delta [B, S] shifts the scores of each encoder token
(the published model: in every encoder layer and in the decoder's cross-attention; the
decoder's self-attention takes tau alone). Without factors (a call from outside a model) it is
vanilla attention. The model's factors are learned by MLPs of widths `projector_hidden`
(the published `--p_hidden_dims 128 128`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..options import Check, option
from .base import AttentionOptions
from .heads import HeadsAttention
from .registry import register_attention

widths = Check(lambda v: len(v) >= 1 and all(isinstance(w, int) and w >= 1 for w in v),
               "a list of one or more positive widths, e.g. [128, 128]")


@dataclass
class DestationaryOptions(AttentionOptions):
    projector_hidden: list[int] = option([128, 128], widths, factory=True)  # the factors' MLP

    def model_parts(self) -> dict:
        return {"destationary_hidden": list(self.projector_hidden)}

    INSIDE_POSITIONS = False
    SCORES = "its scores are rescaled by each window's tau, which residual attention would add"


@register_attention("destationary", DestationaryOptions)
class DestationaryAttention(HeadsAttention):
    def forward(self, query, key_value, causal=False, key_padding_mask=None,
                need_weights=False, query_start=0, key_start=0, residual=None, factors=None):
        self._factors = factors  # this call's (model/destationary.py Factors), or None
        try:
            return super().forward(query, key_value, causal, key_padding_mask, need_weights,
                                   query_start, key_start, residual)
        finally:
            self._factors = None

    def _attend(self, q, k, v, causal, need_weights):
        scores = q @ k.transpose(-2, -1)  # [B, H, Lq, Lk]
        factors = self._factors
        if factors is not None:
            scores = scores * factors.tau[:, None, None, None]
            if factors.delta is not None:
                scores = scores + factors.delta[:, None, None, :]
        if causal:
            later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(later, float("-inf"))
        weights = torch.softmax(scores * self.scale, dim=-1)
        dropped = F.dropout(weights, self.dropout, self.training) if self.dropout else weights
        return self._merge(dropped @ v), (weights if need_weights else None)

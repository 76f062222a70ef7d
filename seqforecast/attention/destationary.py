"""`destationary`: De-stationary Attention (Non-stationary Transformer, Liu et al., NeurIPS 2022;
the Time-Series-Library's `DSAttention`).

A model normalises each window before it reaches attention, which makes attention see every
window alike ("over-stationarisation"); de-stationary attention gives back what the norm took,
through two factors the model learns from the window before its norm (`DestationaryFactors`,
below, which a model builds for this backend: Attention.side_inputs):

    weights = softmax((tau q.k + delta_j) / sqrt(head width))

tau [B] scales every score of a window, delta [B, S] shifts the scores of each encoder token
(the published model: in every encoder layer and in the decoder's cross-attention; the
decoder's self-attention, whose keys are not the encoder's tokens, takes tau alone). Without
factors (a call from outside a model) it is vanilla attention. The factors:

    tau   = exp(min(MLP_tau(conv(x), sigma), 80))     [B]       a positive scale of the scores
    delta = MLP_delta(conv(x), mu)                    [B, S]    a shift per encoder token

x is the window [B, L, C] as the model receives it (its calendar features aside), mu and sigma
its per-channel mean and standard deviation over time (no gradient), conv a circular
convolution of kernel 3 over the channels with the L steps as its input channels (the paper's
"Projector"), and each MLP is Linear(2C, h1), ReLU, ..., Linear(h_last, out) without a bias, of
widths `projector_hidden` (the published `--p_hidden_dims 128 128`; the Time-Series-Library's
`models/Nonstationary_Transformer.py`). S is the encoder's token count (the published model's
tokens are its L steps). The convolution mixes the channels, so under variate tokens
(iTransformer) permuting the channels does not permute the forecast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..options import Check, option
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site

widths = Check(lambda v: len(v) >= 1 and all(isinstance(w, int) and w >= 1 for w in v),
               "a list of one or more positive widths, e.g. [128, 128]")


@dataclass
class DestationaryOptions(AttentionOptions):
    projector_hidden: list[int] = option([128, 128], widths, factory=True)  # the factors' MLP


class Factors(NamedTuple):
    tau: Tensor  # [B]
    delta: Tensor | None  # [B, S] (None: no layer's keys are the window's tokens)


class FactorLearner(nn.Module):
    """The paper's Projector: (window [B, L, C], a statistic [B, 1, C]) -> [B, out]."""

    def __init__(self, channels: int, in_len: int, hidden: list[int], out: int):
        super().__init__()
        self.series_conv = nn.Conv1d(in_len, 1, kernel_size=3, padding=1,
                                     padding_mode="circular", bias=False)
        layers: list[nn.Module] = [nn.Linear(2 * channels, hidden[0]), nn.ReLU()]
        for width, following in zip(hidden, hidden[1:], strict=False):
            layers += [nn.Linear(width, following), nn.ReLU()]
        self.backbone = nn.Sequential(*layers, nn.Linear(hidden[-1], out, bias=False))

    def forward(self, window: Tensor, statistic: Tensor) -> Tensor:
        mixed = self.series_conv(window)  # [B, L, C] (L as channels) -> [B, 1, C]
        return self.backbone(torch.cat([mixed, statistic], dim=1).flatten(1))  # [B, 2C] -> out


class DestationaryFactors(nn.Module):
    def __init__(self, channels: int, in_len: int, tokens: int, hidden: list[int]):
        """`tokens`: the keys delta shifts, 0 where no layer's keys are the window's own (a
        variate position alone: tau only)."""
        super().__init__()
        self.tau_learner = FactorLearner(channels, in_len, hidden, 1)
        self.delta_learner = FactorLearner(channels, in_len, hidden, tokens) if tokens else None

    def forward(self, window: Tensor) -> Factors:
        """window [B, L, C] -> tau [B], delta [B, S]."""
        mean = window.mean(dim=1, keepdim=True).detach()  # [B, 1, C]
        std = torch.sqrt(window.var(dim=1, keepdim=True, unbiased=False) + 1e-5).detach()
        tau = self.tau_learner(window, std).clamp(max=80.0).exp()  # [B, 1]
        delta = None if self.delta_learner is None else self.delta_learner(window, mean)
        return Factors(tau=tau.squeeze(-1), delta=delta)


@register_attention("destationary", DestationaryOptions)
class DestationaryAttention(MechanismAttention):
    CHANNEL_ORDER = "its factors' convolution runs across the channels in their order"

    def __init__(self, d_model: int, n_heads: int, options: DestationaryOptions,
                 site: Site = ALONE):
        """`site.window_keys`: whether the keys are the window's own (encoder) tokens, which
        delta shifts; the decoder's self-attention's are not."""
        site.refuse("destationary", residual=no_scores(
            "its scores are rescaled by each window's tau, which residual attention would add"))
        super().__init__(d_model, n_heads, options, site)
        self.window_keys = site.window_keys

    def side_inputs(self, channels: int, in_len: int, tokens: int
                    ) -> tuple[str, nn.Module] | None:
        return "destationary", DestationaryFactors(channels, in_len, tokens,
                                                   list(self.options.projector_hidden))

    def explicit(self, q, k, v, residual, call, key_padding_mask):
        factors: Factors | None = call.side  # this window's, or None: vanilla attention
        scores = q @ k.transpose(-2, -1)  # [B, H, Lq, Lk]
        if factors is not None:
            scores = scores * factors.tau[:, None, None, None]
            if self.window_keys:
                scores = scores + factors.delta[:, None, None, :]
        if call.causal:
            later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(later, float("-inf"))
        weights = torch.softmax(scores * self.scale, dim=-1)
        dropped = F.dropout(weights, self.dropout, self.training) if self.dropout else weights
        return self.merge(dropped @ v), (weights if call.need_weights else None)

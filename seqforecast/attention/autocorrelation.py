"""`autocorrelation`: the Auto-Correlation mechanism (Autoformer, Wu et al., NeurIPS 2021;
`thuml/Autoformer` `layers/AutoCorrelation.py`), O(L log L).

Period-based dependencies instead of point-wise scores: for each head and channel the
correlation of q with k at every lag tau, by FFT,

    R(tau) = irfft(rfft(q) * conj(rfft(k)))(tau),   averaged over heads and channels,

then the k = floor(factor ln L) lags with the largest R, their R softmaxed into weights, and
the output is V rolled by each of those lags, weighted (time-delay aggregation):

    out_t = sum_i w_i v_{(t + tau_i) mod L}.

In training the lags are shared by the batch (those of the batch's mean R; each row keeps its
own weights on them), in evaluation each row has its own, as the paper and its code do. Keys
and values longer than the queries are cut to the queries' length, shorter ones padded with
zeros (the decoder's cross-attention). The lags wrap around the window, so the mechanism reads
the whole window at every step: never causal, and only along time. `dropout` drops the lag
weights (the published module builds a dropout it never applies: 0 gives its function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import above, option, probability, refuse
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site


@dataclass
class AutoCorrelationOptions(AttentionOptions):
    dropout: float = option(0.0, probability)  # on the lag weights, in training
    factor: float = option(1.0, above(0))  # floor(factor ln L) lags (Autoformer's: 1)


def lag_count(factor: float, length: int) -> int:
    """floor(factor ln L): the lags aggregated over a window of L tokens."""
    return int(factor * math.log(length))


@register_attention("autocorrelation", AutoCorrelationOptions)
class AutoCorrelation(MechanismAttention):
    def __init__(self, d_model: int, n_heads: int, options: AutoCorrelationOptions,
                 site: Site = ALONE):
        why_causal = "its lags wrap around the whole window"
        site.refuse("autocorrelation", time_axis="its lags roll the tokens along time",
                    causal=why_causal, residual=no_scores(
                        "auto-correlation has no q.k scores (lag correlations replace them)"))
        tokens = site.fewest_tokens()
        if tokens is not None and lag_count(options.factor, tokens) < 1:
            raise refuse(site.option("factor"), options.factor, (
                "a layer reads 1 token, which has no lags" if tokens < 2 else
                f"floor(factor ln {tokens} tokens) = {lag_count(options.factor, tokens)} lags; "
                f"its {site.stack} layers read {tokens} tokens: a factor >= "
                f"{1 / math.log(tokens):.3g} gives them one (a stack of fewer tokens needs "
                f"more)"))
        super().__init__(d_model, n_heads, options, site, causal=why_causal)

    def _attend(self, q, k, v, causal, need_weights):
        length, k_len = q.shape[2], k.shape[2]
        k, v = (_fit(t, length) for t in (k, v))  # [B, H, L, d]
        # correlation at each lag, per head and channel, then their mean: [B, L]
        spectrum = torch.fft.rfft(q, dim=2) * torch.conj(torch.fft.rfft(k, dim=2))
        corr = torch.fft.irfft(spectrum, n=length, dim=2).mean(dim=(1, 3))
        lags = lag_count(self.options.factor, length)
        if lags < 1:
            raise ValueError(f"autocorrelation over {length} tokens aggregates "
                             f"floor({self.options.factor} ln {length}) = 0 lags")
        if self.training:  # the batch's lags, each row's own weights on them
            delay = corr.mean(dim=0).topk(lags).indices.expand(len(corr), -1)  # [B, k]
            weight = corr.gather(1, delay)
        else:
            weight, delay = corr.topk(lags, dim=-1)  # [B, k] each
        weight = torch.softmax(weight, dim=-1)
        if self.dropout:
            weight = F.dropout(weight, self.dropout, self.training)
        steps = torch.arange(length, device=q.device)
        rolled = (steps[None, None, :] + delay[:, :, None]) % length  # [B, k, L]: source steps
        out = torch.zeros_like(v)
        for i in range(lags):  # v at each step t + tau_i, weighted
            source = rolled[:, i][:, None, :, None].expand_as(v)
            out = out + v.gather(2, source) * weight[:, i, None, None, None]
        weights = None
        if need_weights:  # on the keys as given: cut ones get none, padded ones are dropped
            weights = _fit(self._weights(weight, rolled, k.shape[1], length).transpose(2, 3),
                           k_len).transpose(2, 3)
        return self.merge(out), weights

    @staticmethod
    def _weights(weight: Tensor, rolled: Tensor, heads: int, length: int) -> Tensor:
        """[B, H, L, L]: step t's weight on value row s, the weights of the lags reaching it."""
        batch, lags = weight.shape
        found = torch.zeros(batch, length, length, dtype=weight.dtype, device=weight.device)
        rows = torch.arange(length, device=weight.device).expand(batch, -1)
        for i in range(lags):
            found[torch.arange(batch)[:, None], rows, rolled[:, i]] += weight[:, i, None]
        return found[:, None].expand(-1, heads, -1, -1)


def _fit(t: Tensor, length: int) -> Tensor:
    """Keys or values [B, H, S, d] cut or zero-padded to the queries' length L."""
    if t.shape[2] >= length:
        return t[:, :, :length]
    return F.pad(t, (0, 0, 0, length - t.shape[2]))

"""`probsparse`: ProbSparse self-attention (Informer, Zhou et al., AAAI 2021;
`zhouhaoyi/Informer2020` `models/attn.py`), O(L log L).

Only the u = c ceil(ln Lq) "active" queries attend; the others get the mean of V. The active
queries are those with the largest sparsity measure

    M(q_i) = max_j s_ij - (1 / Lk) sum_j s_ij,   s_ij = q_i . k_j,

taken over U = c ceil(ln Lk) keys sampled at random for each query (the same keys for every
batch row and head, as the published code draws them), and the active queries' scores are
scaled by 1 / sqrt(head width) and softmaxed over every key (causal: up to their step).

Not causal. The published decoder masks it (the active queries see the keys up to their step,
the others get the cumulative sum of V up to theirs), but which queries are active is decided
by every query's measure, over keys sampled from the whole window: a masked output still moves
when the future does (tests/attention/test_literature.py shows it). `leaky_mask=true` lets a
causal call compute that published masked form (self-attention only), to check a published
number; the config never asks it of a model (autoregressive decoding is refused).

The sampled keys: in training, drawn from torch's global generator, which the run seeds and
its checkpoints keep (so a seed repeats and a resume continues the stream); in evaluation,
from a generator seeded with `eval_seed` at each call, so a trained model is one function and
evaluating it twice gives one number (the published code draws at test time too).

`layout`: `paper` returns each query's output where it belongs; `tslib` reproduces thuml's
Time-Series-Library ProbAttention, whose [B, H, L, D] output its AttentionLayer `.view`s as
[B, L, H, D] without a transpose (mixing queries and heads; fixed in Informer2020, its issue
100), to check a number published with that code. `dropout` drops the active queries' weights
(the published ProbAttention builds a dropout it never applies: 0 gives its function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import choice, count, option, positive
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site

Layout = choice("Layout", ("paper", "tslib"))


@dataclass
class ProbSparseOptions(AttentionOptions):
    factor: int = option(5, positive)  # c: c ceil(ln L) active queries and sampled keys
    layout: Layout = Layout.paper  # paper | tslib (its output reshaped without a transpose)
    eval_seed: int = option(0, count)  # the sampled keys in evaluation
    leaky_mask: bool = False  # a causal call computes the published masked form (not causal)


def active_count(factor: int, length: int) -> int:
    """c ceil(ln L), at most L: the active queries (of L queries) or sampled keys (of L)."""
    return min(factor * math.ceil(math.log(length)), length) if length > 1 else 1


@register_attention("probsparse", ProbSparseOptions)
class ProbSparseAttention(MechanismAttention):
    CHANNEL_ORDER = ("each query's sampled keys are positions, not tokens, so which queries are "
                     "active moves with the order (where c ceil(ln L) < L tokens)")

    def __init__(self, d_model: int, n_heads: int, options: ProbSparseOptions,
                 site: Site = ALONE):
        why_causal = None if options.leaky_mask else (
            "its active queries are chosen by every query's measure over keys from the whole "
            "window, so a masked output still moves with the future")
        site.refuse("probsparse", causal=why_causal,
                    mixes_queries="its active queries are the top u of all queries",
                    residual=no_scores("probsparse scores only its active queries, so the "
                                       "layers' scores do not add up"))
        super().__init__(d_model, n_heads, options, site, causal=why_causal)

    def _attend(self, q, k, v, causal, need_weights):
        batch, heads, q_len, _ = q.shape
        k_len = k.shape[2]
        if causal and q_len != k_len:
            raise ValueError("masked probsparse attention is self-attention: queries and keys "
                             f"must have one length, got {q_len} and {k_len}")
        factor = self.options.factor
        sampled = self.sample_keys(q_len, k_len, active_count(factor, k_len), q.device)
        # each query's sampled keys' scores: [B, H, Lq, U]
        sample_scores = torch.einsum("bhld,bhlud->bhlu", q, k[:, :, sampled])
        measure = sample_scores.max(-1).values - sample_scores.sum(-1) / k_len  # [B, H, Lq]
        top = measure.topk(active_count(factor, q_len), dim=-1, sorted=False).indices
        active_q = q.gather(2, top[..., None].expand(-1, -1, -1, q.shape[-1]))  # [B, H, u, d]
        scores = (active_q @ k.transpose(-2, -1)) * self.scale  # [B, H, u, Lk]
        if causal:  # an active query sees the keys up to its own step
            later = torch.arange(k_len, device=q.device) > top[..., None]  # [B, H, u, Lk]
            scores = scores.masked_fill(later, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        dropped = F.dropout(attn, self.dropout, self.training) if self.dropout else attn
        # The lazy queries' output: mean of V, or its running sum under the causal mask.
        out = v.cumsum(dim=2) if causal else v.mean(dim=2, keepdim=True).expand(
            -1, -1, q_len, -1)
        out = out.scatter(2, top[..., None].expand(-1, -1, -1, v.shape[-1]), dropped @ v)
        weights = self._weights(attn, top, q_len, k_len, causal) if need_weights else None
        if self.options.layout == "tslib":  # [B, H, Lq, d] read as [B, Lq, H * d]
            return out.reshape(batch, q_len, self.d_model), weights
        return self.merge(out), weights

    def sample_keys(self, q_len: int, k_len: int, count: int, device) -> Tensor:
        """[Lq, U] key indices for each query's sparsity measure."""
        generator = None
        if not self.training:
            generator = torch.Generator().manual_seed(self.options.eval_seed)
        return torch.randint(k_len, (q_len, count), generator=generator).to(device)

    @staticmethod
    def _weights(attn: Tensor, top: Tensor, q_len: int, k_len: int, causal: bool) -> Tensor:
        """[B, H, Lq, Lk]: the active queries' softmax; a lazy query's 1 / Lk on every key
        (the mean), or 1 on every key up to its step (the running sum)."""
        batch, heads = attn.shape[:2]
        if causal:
            lazy = torch.ones(q_len, k_len, dtype=attn.dtype, device=attn.device).tril()
        else:
            lazy = torch.full((q_len, k_len), 1.0 / k_len, dtype=attn.dtype, device=attn.device)
        weights = lazy.expand(batch, heads, q_len, k_len)
        return weights.scatter(2, top[..., None].expand(-1, -1, -1, k_len), attn)

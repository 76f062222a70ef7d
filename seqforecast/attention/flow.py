"""`flow`: Flow-Attention (Flowformer, Wu et al., ICML 2022; `thuml/Flowformer`
`Flow_Attention.py`), linear in the length.

Each head's q and k pass through a non-negative map, phi = sigmoid; attention is read as a
flow network from the keys (sources) to the queries (sinks), and conservation of that flow
replaces the softmax. With S keys and L queries (eps = 1e-6 inside every product):

    incoming_i   = 1 / (phi(q_i) . sum_j phi(k_j))          what sink i receives
    outgoing_j   = 1 / (phi(k_j) . sum_i phi(q_i))          what source j sends
    sink_i       = phi(q_i) . sum_j phi(k_j) outgoing_j     conserved incoming flow
    source_j     = phi(k_j) . sum_i phi(q_i) incoming_i     conserved outgoing flow
    allocation_i = sigmoid(sink_i * L / S)                  (sinks are gated)
    competition  = softmax_j(source_j) * S                  (sources compete)
    out_i        = allocation_i * incoming_i * phi(q_i) . sum_j phi(k_j) (v_j competition_j)

so the cost is O((L + S) d^2), never an L x S matrix. The causal form (the repository's
`Flow_Attention_Causal`) takes every sum over the keys up to i only, with the counts i + 1
normalising them, and competition as a running softmax; self-attention only. Every query's
output depends on the other queries (the flow is conserved over all of them), so the decoder's
cross-attention would read later steps: autoregressive decoding is refused in the config.

`source_clamp` (Flowformer's code: conserved source clamped to [-1, 1] "for stability"; the
copy in `thuml/iTransformer` `FlowAttention`, non-causal only, has no clamp: false gives that
function). `dropout` drops the output, after its projection, as Flowformer's code does
(iTransformer's copy builds a dropout it never applies: 0 gives its function).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import above, option, probability
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site


@dataclass
class FlowOptions(AttentionOptions):
    dropout: float = option(0.0, probability)  # on the output, after its projection
    eps: float = option(1e-6, above(0))  # added inside every flow product (the published 1e-6)
    source_clamp: bool = True  # the conserved source clamped to [-1, 1] (Flowformer's code)


@register_attention("flow", FlowOptions)
class FlowAttention(MechanismAttention):
    def __init__(self, d_model: int, n_heads: int, options: FlowOptions, site: Site = ALONE):
        site.refuse("flow", mixes_queries=(
            "its flow is conserved over every query, so in the decoder's cross-attention a "
            "step would read the later steps"), residual=no_scores(
            "flow attention has no q.k scores (flow conservation replaces the softmax)"))
        super().__init__(d_model, n_heads, options, site)

    def attend(self, query, key_value, call, key_padding_mask=None):
        attended = super().attend(query, key_value, call, key_padding_mask)
        return attended._replace(out=F.dropout(attended.out, self.dropout, self.training))

    def _attend(self, q, k, v, causal, need_weights):
        if causal and q.shape[2] != k.shape[2]:
            raise ValueError("causal flow attention is self-attention: queries and keys must "
                             f"have one length, got {q.shape[2]} and {k.shape[2]}")
        q, k = torch.sigmoid(q), torch.sigmoid(k)  # [B, H, L, d], [B, H, S, d]
        incoming, allocation, competition, scale = (self._causal_flow if causal else
                                                    self._flow)(q, k)
        q_in = q * (incoming * scale)[..., None]  # [B, H, L, d]
        v_out = v * competition[..., None]  # [B, H, S, d]
        if causal:  # the running sum of k_j v_j^T up to each i: [B, H, L, d, d]
            kv = torch.einsum("bhsd,bhsm->bhsdm", k, v_out).cumsum(dim=2)
            out = torch.einsum("bhld,bhldm->bhlm", q_in, kv)
        else:
            out = q_in @ (k.transpose(-2, -1) @ v_out)  # [B, H, L, d] @ [B, H, d, d]
        out = out * allocation[..., None]
        weights = None
        if need_weights:  # what each output row takes of each value row: [B, H, L, S]
            weights = (q_in @ k.transpose(-2, -1)) * competition[..., None, :]
            weights = weights * allocation[..., None]
            if causal:
                weights = weights.tril()
        return self.merge(out), weights

    def _flow(self, q: Tensor, k: Tensor):
        """Incoming [B, H, L], allocation [B, H, L], competition [B, H, S], and 1."""
        eps, queries, keys = self.options.eps, q.shape[2], k.shape[2]
        incoming = 1.0 / torch.einsum("bhld,bhd->bhl", q + eps, k.sum(dim=2) + eps)
        outgoing = 1.0 / torch.einsum("bhsd,bhd->bhs", k + eps, q.sum(dim=2) + eps)
        sink = torch.einsum("bhld,bhd->bhl", q + eps,
                            (k * outgoing[..., None]).sum(dim=2) + eps)
        source = torch.einsum("bhsd,bhd->bhs", k + eps,
                              (q * incoming[..., None]).sum(dim=2) + eps)
        if self.options.source_clamp:
            source = source.clamp(-1.0, 1.0)
        allocation = torch.sigmoid(sink * (queries / keys))
        competition = torch.softmax(source, dim=-1) * keys
        return incoming, allocation, competition, 1.0

    def _causal_flow(self, q: Tensor, k: Tensor):
        """As _flow, each sum over the keys (queries) up to i, normalised by the count i + 1;
        the last value scales incoming by 1 / (i + 1) for the output."""
        eps = self.options.eps
        count = torch.arange(1, q.shape[2] + 1, dtype=q.dtype, device=q.device)  # [L]
        incoming = count / torch.einsum("bhld,bhld->bhl", q + eps, k.cumsum(dim=2) + eps)
        outgoing = count / torch.einsum("bhld,bhld->bhl", k + eps, q.cumsum(dim=2) + eps)
        sink = torch.einsum("bhld,bhld->bhl", q + eps,
                            (k * outgoing[..., None]).cumsum(dim=2) + eps) / count
        source = torch.einsum("bhld,bhld->bhl", k + eps,
                              (q * incoming[..., None]).cumsum(dim=2) + eps) / count
        if self.options.source_clamp:
            source = source.clamp(-1.0, 1.0)
        allocation = torch.sigmoid(sink)
        source = torch.exp(source)
        competition = source / source.cumsum(dim=-1) * count  # a running softmax, times i + 1
        return incoming, allocation, competition, 1.0 / count

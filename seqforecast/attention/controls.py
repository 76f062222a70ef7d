"""Control arms at the attention position: token mixings that are not attention, so that "the
same model without attention" is one override (`attention=normlin|learned_mixing|no_mixing`).

Each keeps the position's value and output projections (v_proj, out_proj) and replaces what
queries and keys compute (no q or k is projected):

- `normlin`: OLinear's NormLin (Yue et al. 2025, arXiv 2505.08550; `jackyue1994/OLinear`,
  `LinearEncoder`): a learned matrix W [Lq, Lk] over the tokens, softplus'd and its rows
  L1-normalised, `out = out_proj(dropout(A) v_proj(x))`, A = normalize_l1(softplus(W)); W starts
  at I + N(0, 1), as the authors'. One matrix for all channels of a token (no heads). It
  mixes every token with every other, the later ones too: it cannot be causal.
- `learned_mixing`: a fixed learned token mixing, `out = out_proj(W v_proj(x))` with W [Lq, Lk]
  a parameter (MLP-Mixer's token mixing, one matrix a head), not computed from queries and
  keys; causal, W's entries above the diagonal are left out (a query reads its past only).
  W starts at 1/Lk everywhere (the average over all keys; causal, its lower triangle of it).
- `no_mixing`: each token alone, `out = out_proj(v_proj(x))`: no token reads another.
  Self-attention only (a cross position's queries have no tokens of their own among the keys).
  It is "Why Attention Fails"' identity arm, A = I.
- `uniform`: "Why Attention Fails"' mean arm (Liang et al. 2025, arXiv 2509.20942;
  Greek-Guardian/TST-Degeneration, `_ScaledDotProductAttention`, AttentionType=mean): A = 1/Lk
  in `A @ v`, every query the mean of the values over the keys, no softmax, no dropout on A. At
  a causal position, the mean over the keys a query may read (its past and itself).
- `zero`: the same paper's zero arm: A = 0, so the sublayer gives out_proj's bias alone.

The paper's arms keep W_Q and W_K unused (their gradient is zero); these read no q or k, so they
hold fewer parameters and compute the same function. Its "fix" arm is an untrained zero matrix
(a plain tensor, the zero arm again); `learned_mixing` is the fixed matrix that is trained.

The matrices are sized when the layer is built, from the tokens its position reads (the
`lengths` context, as fourier's modes); a call may read fewer queries (a decoder generating
step by step reads its prefix: each query's row is its own) but its keys must be those it
was built for, except causal learned mixing, whose rows stop at the query anyway.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..options import ConfigError
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site, conflict


def _no_qk(name: str) -> str:
    return no_scores(f"attention={name} computes no q.k scores")


class _Mixing(MechanismAttention):
    """A control arm over v heads [B, H, Lk, head_dim]: a fixed [Lq, Lk] matrix, no q or k."""

    CHANNEL_ORDER = ("its learned weights belong to token places, so permuting the tokens "
                     "changes the function")

    def __init__(self, d_model: int, n_heads: int, options: AttentionOptions, site: Site,
                 causal: str | None = None):
        """The matrix is sized from the tokens (queries, keys) its site reads."""
        name = options.name
        site.refuse(name, causal=causal, residual=_no_qk(name))
        if site.q_len is None:
            raise ConfigError(f"{name} sizes its matrix from the tokens its layer reads: build "
                              f"it with lengths=(queries, keys)")
        super().__init__(d_model, n_heads, options, site, causal=causal, reads=("v",))
        self.q_len, self.k_len = site.q_len, site.k_len

    def heads(self, query, key_value, call):
        """No q or k: the queries' count travels as an empty q, [B, 1, Lq, 0]."""
        return query[:, None, :, :0], None, self.split(self.v_proj(key_value))

    def _rows(self, weights: Tensor, q_len: int, k_len: int, causal: bool) -> Tensor:
        """The matrix's first q_len rows over the keys the call reads (see the module)."""
        name = self.options.name
        if q_len > self.q_len or (k_len != self.k_len and not (causal and k_len <= self.k_len)):
            raise ValueError(
                f"{name} was built for {self.q_len} queries over {self.k_len} keys (the tokens "
                f"its position reads) and got {q_len} over {k_len}; its learned matrix fits "
                f"that size only")
        return weights[:q_len, :k_len]


@register_attention("normlin", AttentionOptions)
class NormLinMixing(_Mixing):
    def __init__(self, d_model, n_heads, options, site=ALONE):
        if options.gate != "none":
            raise conflict(site.option("gate"), options.gate, site.key, "normlin",
                           "the gate scales each head's output, and it mixes whole tokens with "
                           "one matrix (no heads to gate)")
        super().__init__(d_model, n_heads, options, site, causal=(
            "its normalised matrix mixes every token with every other, the later ones too"))
        q_len, k_len = site.q_len, site.k_len
        self.weight = nn.Parameter(torch.eye(q_len, k_len) + torch.randn(q_len, k_len))

    def _attend(self, q, k, v, causal, need_weights):
        batch, _, k_len, _ = v.shape
        weights = F.normalize(F.softplus(self.weight), p=1, dim=-1)  # [Lq, Lk], rows sum to 1
        weights = self._rows(weights, q.shape[2], k_len, False)
        dropped = F.dropout(weights, self.dropout, self.training)
        out = dropped @ self.merge(v)  # [Lq, Lk] @ [B, Lk, E] -> [B, Lq, E]
        shown = weights.expand(batch, self.n_heads, -1, -1) if need_weights else None
        return out, shown


@register_attention("learned_mixing", AttentionOptions)
class LearnedMixing(_Mixing):
    def __init__(self, d_model, n_heads, options, site=ALONE):
        super().__init__(d_model, n_heads, options, site)
        q_len, k_len = site.q_len, site.k_len
        self.weight = nn.Parameter(torch.full((n_heads, q_len, k_len), 1.0 / k_len))

    def _attend(self, q, k, v, causal, need_weights):
        batch, heads, k_len, _ = v.shape
        self._rows(self.weight[0], q.shape[2], k_len, causal)
        weights = self.weight[:, : q.shape[2], :k_len]  # [H, Lq, Lk]
        if causal:  # a query reads its past only
            weights = weights.tril()
        dropped = F.dropout(weights, self.dropout, self.training)
        out = dropped @ v  # [H, Lq, Lk] @ [B, H, Lk, d] -> [B, H, Lq, d]
        return self.merge(out), weights.expand(batch, -1, -1, -1) if need_weights else None


@register_attention("no_mixing", AttentionOptions)
class NoMixing(MechanismAttention):
    def __init__(self, d_model: int, n_heads: int, options: AttentionOptions,
                 site: Site = ALONE):
        site.refuse("no_mixing", residual=_no_qk("no_mixing"), cross=(
            "each token reads only itself, and a cross position's queries have no own tokens "
            "among its keys"))
        super().__init__(d_model, n_heads, options, site, reads=("v",))

    def _attend(self, q, k, v, causal, need_weights):
        batch, heads, length, _ = v.shape
        weights = None
        if need_weights:  # each token on itself
            weights = torch.eye(length, device=v.device).expand(batch, heads, -1, -1)
        return self.merge(v), weights


class _FixedMatrix(MechanismAttention):
    """A fixed attention matrix A in `A @ v` (no q or k): only the queries' count is read."""

    def __init__(self, d_model: int, n_heads: int, options: AttentionOptions,
                 site: Site = ALONE):
        site.refuse(options.name, residual=_no_qk(options.name))
        super().__init__(d_model, n_heads, options, site, reads=("v",))

    def heads(self, query, key_value, call):
        """No q or k: the queries' count travels as an empty q, [B, 1, Lq, 0]."""
        return query[:, None, :, :0], None, self.split(self.v_proj(key_value))

    def _attend(self, q, k, v, causal, need_weights):
        batch, heads, k_len, _ = v.shape
        weights = self._matrix(q.shape[2], k_len, causal, v)  # [Lq, Lk]
        out = torch.matmul(weights, v)  # [Lq, Lk] @ [B, H, Lk, d] -> [B, H, Lq, d]
        shown = weights.expand(batch, heads, -1, -1) if need_weights else None
        return self.merge(out), shown

    def _matrix(self, q_len: int, k_len: int, causal: bool, like: Tensor) -> Tensor:
        raise NotImplementedError


@register_attention("uniform", AttentionOptions)
class UniformMixing(_FixedMatrix):
    def _matrix(self, q_len, k_len, causal, like):
        blocked = self.blocked(q_len, k_len, causal, like.device)
        if blocked is None:  # the authors': ones / Lk
            return torch.ones(q_len, k_len, dtype=like.dtype, device=like.device) / k_len
        readable = (~blocked).to(like.dtype)
        return readable / readable.sum(dim=-1, keepdim=True)


@register_attention("zero", AttentionOptions)
class ZeroMixing(_FixedMatrix):
    def _matrix(self, q_len, k_len, causal, like):
        return torch.zeros(q_len, k_len, dtype=like.dtype, device=like.device)

"""Shared body of the `vanilla` and `einsum` backends.

Both hold their projections as `q_proj`, `k_proj`, `v_proj`, `out_proj` (the names and layout of
`torch.nn.MultiheadAttention`, so copied weights give the same function). A subclass writes only
the explicit score path, `_attend`, which also returns the per-head weights. When no weights are
asked for and no position term acts on the scores, torch's fused `scaled_dot_product_attention`
computes the same function without materialising the score matrix.

An optional `position` (see position.py) rotates q and k, or adds its terms to the scores, at
the absolute time steps the call gives (`query_start`, `key_start`). An optional `residual`
(residual.py) carries a stack's q and k from layer to layer: residual attention, on the explicit
path, or on `short_attention` where the model was built with one (trainer.kernels:
seqforecast/native sets the C kernel for short sequences) and the call needs nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from ..options import option, probability
from ._common import ShapeCache, check_inputs, combine_masks, fused_attention, mha_init
from .position import AttentionPosition, relative_geometry
from .residual import ResidualQK


@dataclass
class AttentionOptions:
    """What every backend takes (`attention=vanilla|einsum`); a backend with more subclasses
    it. `name` is the backend's (the config group's option); build_attention sets it."""

    name: str = ""
    dropout: float = option(0.0, probability)  # on the attention weights, in training
    bias: bool = True  # in the q, k, v and output projections

    # What the mechanism itself can do, whatever its options (config/rules.py refuses the
    # combinations it cannot serve, in one line, naming the backend and the reason):
    TIME_AXIS: ClassVar[str | None] = None  # why its tokens must lie along time (lags,
    # frequencies), or None: any tokens, variate tokens too
    CAUSAL: ClassVar[str | None] = None  # why it cannot mask the future, or None: it can
    MIXES_QUERIES: ClassVar[str | None] = None  # why one query's output depends on the other
    # queries (so a decoder step would read later steps through cross-attention), or None
    SCORES: ClassVar[str | None] = None  # why it has no pre-softmax q.k scores for residual
    # attention to carry, or None: it has
    INSIDE_POSITIONS: ClassVar[bool] = True  # rope / relative terms act inside it

    # What a backend says of itself, for the rules between its options and the model's
    # (config/rules.py, residual.carries_residual): a backend whose options change these
    # overrides them, so no rule elsewhere names a backend.

    def model_parts(self) -> dict:
        """What the model must build for this backend, as the forecaster's keywords
        (de-stationary attention's factors); nothing for most."""
        return {}

    def token_conflict(self, tokens: int) -> tuple[str, str] | None:
        """(the option, what it allows) if these options cannot serve a layer of this many
        tokens (the fewest any layer of the model reads), else None."""
        return None

    def shape_conflict(self, d_model: int, n_heads: int) -> tuple[str, str] | None:
        """(the option, why) if these options cannot build at this width, else None."""
        return None

    def qk_width(self, head_dim: int) -> tuple[int, str]:
        """Each head's q/k width (rope rotates its pairs), and how it follows from the head
        width, a phrase in which `{head}` stands for how the head width is set."""
        return head_dim, "{head}"

    def position_terms(self) -> list[str]:
        """The options set that put the backend's own position terms in its scores."""
        return []

    def time_axis(self) -> list[tuple[str, object]]:
        """(option, value) of the options set that assume tokens along time (windows, distance
        terms); variate tokens (embedding=variate) have none."""
        return [(key, True) for key in self.position_terms()]

    def score_terms(self) -> list[str]:
        """The options set that add to or mix the pre-softmax scores (residual attention
        cannot carry them)."""
        return self.position_terms()


class ProjectedAttention(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        options: AttentionOptions,
        position: AttentionPosition | None = None,
    ):
        super().__init__()
        bias = options.bias
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.dropout = options.dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.position = position
        # Residual attention over the stack's q/k pieces ([B, H, L, w] each) and v: a fast
        # kernel (f(q_pieces, k_pieces, v, scale) with f.applies(q_pieces, k_pieces, v)),
        # set once when the model is built (seqforecast/native), or None: the explicit path.
        self.short_attention = None
        self._masks = ShapeCache()
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        mha_init([self.q_proj, self.k_proj, self.v_proj], self.out_proj)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        query_start: int = 0,
        key_start: int = 0,
        residual: ResidualQK | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """`query_start`, `key_start`: the time steps of the first query and key (position
        modules read them; masks do not). `residual`: the stack's carried scores (residual
        attention), extended by this layer's."""
        check_inputs(query, key_value, key_padding_mask, self.d_model)
        q = self.q_proj(query)  # [B, Lq, E]
        k = self.k_proj(key_value)  # [B, Lk, E]
        v = self.v_proj(key_value)  # [B, Lk, E]
        batch, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
        starts = (query_start, key_start)
        if self.position is not None:
            # [B, L, E] -> [B, L, H, head_dim] -> rotated -> [B, L, E]
            q = self.position.rotate(q.view(batch, q_len, self.n_heads, -1), query_start)
            k = self.position.rotate(k.view(batch, k_len, self.n_heads, -1), key_start)
            q, k = q.flatten(2), k.flatten(2)
        if residual is not None:
            if self.position is not None and self.position.acts_on_scores:
                raise ValueError("residual attention cannot carry position terms on the scores")
            # [B, L, E] -> [B, L, H, head_dim]: this layer's piece of the stack's q and k
            residual.add(
                q.view(batch, q_len, self.n_heads, -1), k.view(batch, k_len, self.n_heads, -1)
            )
        padding = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
        blocked = combine_masks(  # True = may not attend; broadcasts to [B, H, Lq, Lk]
            self._causal_mask(q_len, k_len, q.device) if causal else None, padding
        )
        dropout = self.dropout if self.training else 0.0
        weights = None
        plain = not (need_weights or blocked is not None or dropout)
        out = self._short(residual, v) if residual is not None and plain else None
        if out is None and (
            residual is not None
            or need_weights
            or (self.position is not None and self.position.acts_on_scores)
        ):
            if residual is not None:  # the carried heads grow: [B, L, H * l * head_dim]
                q, k = (t.flatten(2) for t in residual.joined())
            out, weights = self._attend(q, k, v, blocked, padding is not None, dropout, starts)
        elif out is None:
            out = self._fused(q, k, v, causal, blocked, padding is not None, dropout)
        return self.out_proj(out), (weights if need_weights else None)

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

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        blocked: Tensor | None,
        rows_may_be_empty: bool,
        dropout: float,
        starts: tuple[int, int] = (0, 0),
    ) -> tuple[Tensor, Tensor]:
        """Explicit path, also returning the per-head weights.

        q [B, Lq, H * w], k [B, Lk, H * w] (w = head_dim, or more when residual attention
        carries earlier layers' q and k) and v [B, Lk, E] -> (out [B, Lq, E], weights
        [B, H, Lq, Lk]), the scores scaled by 1/sqrt(head_dim). `starts`:
        the time steps of the first query and key, for the position terms on the scores.
        """
        raise NotImplementedError

    def _fused(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        causal: bool,
        blocked: Tensor | None,
        has_padding: bool,
        dropout: float,
    ) -> Tensor:
        batch, q_len, _ = q.shape
        # [B, L, H * w] -> [B, H, L, w] (q and k may be wider than v: residual.py)
        qh, kh, vh = (
            t.view(batch, t.shape[1], self.n_heads, -1).transpose(1, 2) for t in (q, k, v)
        )
        out = fused_attention(
            qh,
            kh,
            vh,
            causal=causal,
            blocked=blocked if has_padding else None,  # no padding: the kernel's own causal
            rows_may_be_empty=has_padding,
            dropout=dropout,
            scale=self.scale,
        )
        # [B, H, Lq, head_dim] -> [B, Lq, E]
        return out.transpose(1, 2).reshape(batch, q_len, self.d_model)

    def _fold_heads(self, t: Tensor) -> Tensor:
        """[B, L, H * w] -> [B * H, L, w]: heads into the batch of a bmm."""
        batch, length, _ = t.shape
        return t.view(batch, length, self.n_heads, -1).transpose(1, 2).flatten(0, 1)

    def _unfold_heads(self, out: Tensor, batch: int) -> Tensor:
        """[B * H, Lq, head_dim] -> [B, Lq, E]."""
        q_len = out.shape[1]
        return out.view(batch, self.n_heads, q_len, -1).transpose(1, 2).reshape(
            batch, q_len, self.d_model
        )

    def _short(self, residual: ResidualQK, v: Tensor) -> Tensor | None:
        """Residual attention by `short_attention` over the stack's q and k pieces and v
        [B, Lk, E] -> [B, Lq, E]; None where there is none or it does not take these shapes."""
        if self.short_attention is None:
            return None
        batch, q_len = residual.q_pieces[0].shape[:2]
        # [B, L, H, w] -> [B, H, L, w] (views)
        q = [t.transpose(1, 2) for t in residual.q_pieces]
        k = [t.transpose(1, 2) for t in residual.k_pieces]
        v = v.view(batch, v.shape[1], self.n_heads, -1).transpose(1, 2)
        if not self.short_attention.applies(q, k, v):
            return None
        out = self.short_attention(q, k, v, self.scale)  # [B, H, Lq, head_dim]
        return out.transpose(1, 2).reshape(batch, q_len, self.d_model)

    def _causal_mask(self, q_len: int, k_len: int, device: torch.device) -> Tensor:
        """[Lq, Lk], True where key j lies after query i (j > i)."""
        return self._masks.get(
            ("causal", q_len, k_len, device),
            lambda: torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(1),
        )

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, dropout={self.dropout}"

"""Positional encodings, by name.

Two kinds:
- added to the embeddings before the first layer: `sinusoidal` (the original transformer's table),
  `learned` (one trained vector per position), `none`;
- acting inside every attention: `relative` (a per-head additive distance decay, ALiBi-style,
  or the reciprocal one, and the past bias) and `rope` (rotary q/k). These give
  the attention backends an `AttentionPosition` and add nothing to the embeddings.

Both kinds read one time axis: encoder steps 0..in_len-1, decoder steps from
in_len - label_len (the added encodings through `offset`, attention through its starts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

from ..attention.position import AttentionPosition, RelativePositionTerms, RotaryEmbedding

ADDED_TO_EMBEDDINGS = ("sinusoidal", "learned", "none")
PLACES_NOTHING = ("none",)  # no positional information at all
INSIDE_ATTENTION = ("relative", "rope")
POSITIONAL_ENCODINGS = ADDED_TO_EMBEDDINGS + INSIDE_ATTENTION


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """[max_len, d_model]: sin on even channels, cos on odd, frequencies 10000^(-2i/d)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = position * torch.exp(two_i * -(math.log(10000.0) / d_model))  # [max_len, ceil(d/2)]
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


class _AddedEncoding(nn.Module):
    """x [B, L, d_model] -> x + table[offset : offset + L], then dropout.

    `offset` places a sequence on the shared time axis: the decoder's first step is
    `in_len - label_len`, so encoder and decoder positions of one time step match.
    """

    def __init__(self, max_len: int, dropout: float):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def table(self, start: int, stop: int) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        stop = offset + x.shape[1]
        if stop > self.max_len:
            raise ValueError(f"position {stop - 1} exceeds pos_encoding.max_len={self.max_len}")
        return self.dropout(x + self.table(offset, stop))


class SinusoidalEncoding(_AddedEncoding):
    def __init__(self, d_model: int, max_len: int, dropout: float):
        super().__init__(max_len, dropout)
        self.register_buffer("encodings", sinusoidal_table(max_len, d_model), persistent=False)

    def table(self, start: int, stop: int) -> Tensor:
        return self.encodings[start:stop]


LEARNED_INITS = ("normal", "uniform")


class LearnedEncoding(_AddedEncoding):
    """A trained table, initialised N(0, 0.02²) (`normal`) or U(-0.02, 0.02) (`uniform`: the
    published PatchTST's `pe='zeros'` table)."""

    def __init__(self, d_model: int, max_len: int, dropout: float, init: str):
        super().__init__(max_len, dropout)
        if init == "normal":
            self.embedding = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        else:
            self.embedding = nn.Parameter(torch.empty(max_len, d_model).uniform_(-0.02, 0.02))

    def table(self, start: int, stop: int) -> Tensor:
        return self.embedding[start:stop]


class NoEncoding(nn.Module):
    """Nothing added (the inside-attention kinds and `none`); dropout only."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.dropout(x)


def build_input_encoding(pos_cfg: Mapping, d_model: int) -> nn.Module:
    """The module applied to the embeddings: `forward(x, offset=0)`."""
    name = pos_cfg["name"]
    dropout = pos_cfg["dropout"]
    if name == "sinusoidal":
        return SinusoidalEncoding(d_model, pos_cfg["max_len"], dropout)
    if name == "learned":
        return LearnedEncoding(d_model, pos_cfg["max_len"], dropout, pos_cfg["init"])
    return NoEncoding(dropout)  # none, or positions inside attention


def attention_position_factory(
    pos_cfg: Mapping, n_heads: int
) -> Callable[[], AttentionPosition | None]:
    """A factory giving each attention module its own position module (or None). Rotary
    embeddings take their width from the q/k chunks the backend hands them."""
    name = pos_cfg["name"]
    if name == "relative":
        return lambda: RelativePositionTerms(
            pos_cfg["distance_decay"], pos_cfg["past_bias"], pos_cfg["decay_form"], n_heads
        )
    if name == "rope":
        return lambda: RotaryEmbedding(base=pos_cfg["base"])
    return lambda: None

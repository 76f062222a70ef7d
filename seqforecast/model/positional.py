"""Positional encodings, registered by name (`pos_encoding=<name>`): each one its options (the
config's node) and what it puts in a model.

Two kinds:
- added to the embeddings before the first layer: `sinusoidal` (the original transformer's table),
  `learned` (one trained vector per position), `none` (nothing);
- acting inside every attention: `relative` (a per-head additive distance decay, ALiBi-style,
  or the reciprocal one, and the past bias) and `rope` (rotary q/k). These give each attention
  backend an `AttentionPosition` (a backend that takes none refuses it when built) and add
  nothing to the embeddings.

Both kinds read one time axis: encoder steps 0..in_len-1, decoder steps from
in_len - label_len (the added encodings through `offset`, attention through its starts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from ..attention.position import (
    AttentionPosition,
    DecayForm,
    RelativePositionTerms,
    RotaryEmbedding,
)
from ..options import ConfigError, above, choice, option, positive, probability, refuse
from ..plugins import Registry
from .parts import Parts

LEARNED_INITS = ("normal", "uniform")
LearnedInit = choice("LearnedInit", LEARNED_INITS)


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

    def __init__(self, max_len: int, dropout: float | nn.Module):
        super().__init__()
        self.max_len = max_len
        self.dropout = dropout if isinstance(dropout, nn.Module) else nn.Dropout(dropout)

    def table(self, start: int, stop: int) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        stop = offset + x.shape[1]
        if stop > self.max_len:
            raise ValueError(f"position {stop - 1} exceeds pos_encoding.max_len={self.max_len}")
        return self.dropout(x + self.table(offset, stop))


class SinusoidalEncoding(_AddedEncoding):
    def __init__(self, d_model: int, max_len: int, dropout: float | nn.Module):
        super().__init__(max_len, dropout)
        self.register_buffer("encodings", sinusoidal_table(max_len, d_model), persistent=False)

    def table(self, start: int, stop: int) -> Tensor:
        return self.encodings[start:stop]


class LearnedEncoding(_AddedEncoding):
    """A trained table, initialised N(0, 0.02²) (`normal`) or U(-0.02, 0.02) (`uniform`: the
    published PatchTST's `pe='zeros'` table)."""

    def __init__(self, d_model: int, max_len: int, dropout: float | nn.Module, init: str):
        super().__init__(max_len, dropout)
        if init == "normal":
            self.embedding = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        else:
            self.embedding = nn.Parameter(torch.empty(max_len, d_model).uniform_(-0.02, 0.02))

    def table(self, start: int, stop: int) -> Tensor:
        return self.embedding[start:stop]


class NoEncoding(nn.Module):
    """Nothing added (the inside-attention kinds and `none`); dropout only."""

    def __init__(self, dropout: float | nn.Module):
        super().__init__()
        self.dropout = dropout if isinstance(dropout, nn.Module) else nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.dropout(x)


# ---------------------------------------------------------------- the registered options


@dataclass
class NoneOptions:  # pos_encoding=none: no positional information (attention is then
    # permutation-equivariant)
    name: str = "none"
    dropout: float = option(0.0, probability)  # on the embeddings, after the encoding


@dataclass
class SinusoidalOptions(NoneOptions):  # sine/cosine table added to the embeddings
    name: str = "sinusoidal"
    max_len: int = option(5000, positive)  # positions the table holds


@dataclass
class LearnedOptions(SinusoidalOptions):  # one trained vector per position
    name: str = "learned"
    max_len: int = option(512, positive)
    init: LearnedInit = LearnedInit.normal  # normal: N(0, 0.02^2) | uniform: U(-0.02, 0.02)
    # (the published PatchTST's: pos_encoding=learned_uniform)


@dataclass
class RelativeOptions(NoneOptions):  # terms inside every attention, on one axis
    name: str = "relative"
    distance_decay: bool = True  # see decay_form
    decay_form: DecayForm = DecayForm.alibi  # alibi: scores - m_h |i-j|, a learnable slope
    # m_h >= 0 per head (from ALiBi's 2^(-8h/H)): a farther key never gains weight.
    # reciprocal: scores / (1 + a|i-j|), which for a negative score raises distant keys
    past_bias: bool = True  # scores - b where the key is before the query, b learnable (1)


@dataclass
class RopeOptions(NoneOptions):  # rotary embeddings on every attention's q and k
    name: str = "rope"
    base: float = option(10000.0, above(1))


class Positions:
    """What a pos_encoding option puts in a model: `none`'s nothing (the embeddings' dropout
    only). A registered kind overrides what it places."""

    places: ClassVar[str] = "nothing"  # embeddings (an added table) | attention (a module
    # inside every attention) | nothing

    def __init__(self, options):
        self.options = options

    @property
    def name(self) -> str:
        return self.options.name

    def input_encoding(self, d_model: int, positions: int, what: str, parts: Parts
                       ) -> nn.Module:
        """The module applied to the embeddings, `forward(x, offset=0)`, for a model whose
        tokens take `positions` positions (`what`: how that count is made, for the message)."""
        return NoEncoding(parts.dropout(self.options.dropout))

    def inside(self, n_heads: int) -> AttentionPosition | None:
        """A new module for one attention layer, or None."""
        return None


POSITIONS = Registry("pos_encoding", "seqforecast.positions")


# @register_position(name, Options) on a Positions subclass: pos_encoding=<name>
register_position = POSITIONS.register
available_positions = POSITIONS.names
position_schema = POSITIONS.schema  # the dataclass of pos_encoding=<name>'s options


def build_positions(node: Mapping) -> Positions:
    """A pos_encoding node (plain values) as what it places."""
    cls, options = POSITIONS[node["name"]]
    return cls(options(**node))


register_position("none", NoneOptions)(Positions)


class _Table(Positions):
    places = "embeddings"

    def _checked(self, positions: int, what: str) -> int:
        max_len = self.options.max_len
        if max_len < positions:
            raise refuse("pos_encoding.max_len", max_len, f"must be >= {what} = {positions}")
        return max_len


@register_position("sinusoidal", SinusoidalOptions)
class Sinusoidal(_Table):
    def input_encoding(self, d_model, positions, what, parts):
        return SinusoidalEncoding(d_model, self._checked(positions, what),
                                  parts.dropout(self.options.dropout))


@register_position("learned", LearnedOptions)
class Learned(_Table):
    def input_encoding(self, d_model, positions, what, parts):
        return LearnedEncoding(d_model, self._checked(positions, what),
                               parts.dropout(self.options.dropout), str(self.options.init))


@register_position("relative", RelativeOptions)
class Relative(Positions):
    places = "attention"

    def inside(self, n_heads):
        o = self.options
        if not (o.distance_decay or o.past_bias):
            raise ConfigError("pos_encoding=relative with distance_decay=false and "
                              "past_bias=false places nothing: set one true, or "
                              "pos_encoding=none")
        return RelativePositionTerms(o.distance_decay, o.past_bias, str(o.decay_form), n_heads)


@register_position("rope", RopeOptions)
class Rope(Positions):
    places = "attention"

    def inside(self, n_heads):
        return RotaryEmbedding(base=self.options.base)

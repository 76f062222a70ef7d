"""Encoder and decoder layers: attention and FFN sublayers with residuals and LayerNorm.

Pre-norm (`norm_first=True`):  x + dropout(f(norm(x)))
Post-norm:                     norm(x + dropout(f(x)))
The norm is LayerNorm over each token's features, or (`model.norm=batch`, as PatchTST) a
BatchNorm over the batch's tokens, feature by feature.
`attention_output_dropout` drops the attention's output before the residual's own dropout
(PatchTST has both: its projection's dropout, then the residual's).
Attention modules come from the registry and share one call; layers pass their weights up
when asked (`need_weights`), for attention maps, and tell each attention where its queries and
keys sit on the time axis (the time step of the first one), so that position modules inside
attention count self- and cross-attention on one axis.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from ..attention import ResidualQK

NORMS = ("layer", "batch")


class TokenBatchNorm(nn.BatchNorm1d):
    """BatchNorm1d over every token of the batch, for x [B, L, d_model]: the statistics of
    BatchNorm1d on [B, d_model, L], computed on the tokens as rows [B * L, d_model] (contiguous,
    no transposes: measured faster here)."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.reshape(-1, x.shape[-1])).view(x.shape)


def make_norm(kind: str, d_model: int) -> nn.Module:
    """kind: one of NORMS."""
    return nn.LayerNorm(d_model) if kind == "layer" else TokenBatchNorm(d_model)


class Residual(nn.Module):
    def __init__(self, d_model: int, dropout: float, norm_first: bool, norm: str):
        super().__init__()
        self.norm = make_norm(norm, d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: nn.Module,
        ffn: nn.Module,
        d_model: int,
        dropout: float,
        norm_first: bool,
        norm: str,
        attention_output_dropout: float,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.ffn = ffn
        self.attn_output_dropout = nn.Dropout(attention_output_dropout)
        self.attn_residual = Residual(d_model, dropout, norm_first, norm)
        self.ffn_residual = Residual(d_model, dropout, norm_first, norm)

    def forward(
        self,
        x: Tensor,
        need_weights: bool = False,
        start: int = 0,
        residual: ResidualQK | None = None,
        factors=None,
    ) -> tuple[Tensor, Tensor | None]:
        """x [B, L, d_model] at time steps start.. -> (x, self-attention weights [B, H, L, L]
        or None). `residual`: the stack's carried scores (residual attention), or None;
        `factors`: de-stationary attention's tau and delta (model/destationary.py), or None."""
        maps = {}
        carry = {k: v for k, v in (("residual", residual), ("factors", factors))
                 if v is not None}

        def attend(h: Tensor) -> Tensor:
            out, maps["self"] = self.self_attn(
                h, h, need_weights=need_weights, query_start=start, key_start=start, **carry
            )
            return self.attn_output_dropout(out)

        x = self.attn_residual(x, attend)
        return self.ffn_residual(x, self.ffn), maps["self"]


class DecoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: nn.Module,
        cross_attn: nn.Module,
        ffn: nn.Module,
        d_model: int,
        dropout: float,
        norm_first: bool,
        norm: str,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.cross_attn = cross_attn
        self.ffn = ffn
        self.self_residual = Residual(d_model, dropout, norm_first, norm)
        self.cross_residual = Residual(d_model, dropout, norm_first, norm)
        self.ffn_residual = Residual(d_model, dropout, norm_first, norm)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        causal: bool,
        need_weights: bool = False,
        start: int = 0,
        memory_start: int = 0,
        factors=None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x [B, Lt, d_model] at time steps start.., memory [B, Ls, d_model] at steps
        memory_start.. -> (x, self weights, cross weights). `factors`: de-stationary
        attention's; the self-attention reads tau only (delta is per encoder token)."""
        maps = {}
        own = {} if factors is None else {"factors": factors._replace(delta=None)}
        cross = {} if factors is None else {"factors": factors}

        def attend_self(h: Tensor) -> Tensor:
            out, maps["self"] = self.self_attn(
                h, h, causal=causal, need_weights=need_weights, query_start=start,
                key_start=start, **own,
            )
            return out

        def attend_memory(h: Tensor) -> Tensor:
            # Cross-attention: the decoder's steps for queries, the encoder's for keys.
            out, maps["cross"] = self.cross_attn(
                h, memory, need_weights=need_weights, query_start=start, key_start=memory_start,
                **cross,
            )
            return out

        x = self.self_residual(x, attend_self)
        x = self.cross_residual(x, attend_memory)
        return self.ffn_residual(x, self.ffn), maps["self"], maps["cross"]

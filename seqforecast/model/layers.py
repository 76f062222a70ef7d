"""Encoder and decoder layers: attention and FFN sublayers with residuals and LayerNorm.

Pre-norm (`norm_first=True`):  x + dropout(f(norm(x)))
Post-norm:                     norm(x + dropout(f(x)))
The norm is LayerNorm over each token's features, or (`model.norm=batch`, as PatchTST) a
BatchNorm over the batch's tokens, feature by feature.
`attention_output_dropout` drops the attention's output before the residual's own dropout
(PatchTST has both: its projection's dropout, then the residual's).
Attention modules come from the registry and share one call (attention/core.py): a layer hands
each its `AttentionCall` (masking, where its queries and keys sit on the time axis, residual
attention's carried q and k, what the model computed for the backend from the window) and gives
back what it answered (`Attended`: the weights when asked, the carried q and k), so a stack
passes records from layer to layer and the layers hold nothing backend-specific.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from ..attention import Attended, Attention, AttentionCall

NORMS = ("layer", "batch")
PLAIN = AttentionCall()  # a call with nothing but its inputs


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
    def __init__(self, d_model: int, dropout: float | nn.Module, norm_first: bool, norm: str):
        """`dropout` on the branch: a rate, or the module its kernel set built (parts.py)."""
        super().__init__()
        self.norm = make_norm(norm, d_model)
        self.dropout = dropout if isinstance(dropout, nn.Module) else nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: Attention,
        ffn: nn.Module,
        d_model: int,
        dropout: float,
        norm_first: bool,
        norm: str,
        attention_output_dropout: float = 0.0,
        *,
        parts,
    ):
        """`parts`: the kernel set that builds its dropout and residual blocks (parts.py)."""
        super().__init__()
        self.self_attn = self_attn
        self.ffn = ffn
        self.attn_output_dropout = parts.dropout(attention_output_dropout)
        self.attn_residual = parts.residual(d_model, dropout, norm_first, norm)
        self.ffn_residual = parts.residual(d_model, dropout, norm_first, norm)

    def forward(self, x: Tensor, call: AttentionCall = PLAIN) -> tuple[Tensor, Attended]:
        """x [B, L, d_model] -> (x, what its self-attention gave back: the weights when
        `call.need_weights`, residual attention's carried q and k)."""
        attended = []

        def attend(h: Tensor) -> Tensor:
            attended.append(self.self_attn.attend(h, h, call))
            return self.attn_output_dropout(attended[0].out)

        x = self.attn_residual(x, attend)
        return self.ffn_residual(x, self.ffn), attended[0]


class DecoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: Attention,
        cross_attn: Attention,
        ffn: nn.Module,
        d_model: int,
        dropout: float,
        norm_first: bool,
        norm: str,
        *,
        parts,
    ):
        """`parts`: the kernel set that builds its residual blocks (parts.py)."""
        super().__init__()
        self.self_attn = self_attn
        self.cross_attn = cross_attn
        self.ffn = ffn
        self.self_residual = parts.residual(d_model, dropout, norm_first, norm)
        self.cross_residual = parts.residual(d_model, dropout, norm_first, norm)
        self.ffn_residual = parts.residual(d_model, dropout, norm_first, norm)

    def forward(self, x: Tensor, memory: Tensor, self_call: AttentionCall,
                cross_call: AttentionCall) -> tuple[Tensor, Attended, Attended]:
        """x [B, Lt, d_model], memory [B, Ls, d_model] -> (x, what the self-attention and the
        cross-attention gave back). The calls place the queries and keys on the time axis
        (cross-attention: the decoder's steps for queries, the encoder's for keys)."""
        attended = []

        def attend_self(h: Tensor) -> Tensor:
            attended.append(self.self_attn.attend(h, h, self_call))
            return attended[-1].out

        def attend_memory(h: Tensor) -> Tensor:
            attended.append(self.cross_attn.attend(h, memory, cross_call))
            return attended[-1].out

        x = self.self_residual(x, attend_self)
        x = self.cross_residual(x, attend_memory)
        return self.ffn_residual(x, self.ffn), attended[0], attended[1]

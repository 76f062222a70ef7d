"""iTransformer (Liu et al., ICLR 2024, "iTransformer: Inverted Transformers Are Effective for
Time Series Forecasting"; thuml/iTransformer): `model=itransformer`, the published model.

Each input channel's whole window, and each calendar feature's (`data.time_features`), is one
token (VariateTokens: its in_len values through one linear map), so the encoder's attention
mixes channels, not time steps; a head shared by the channels maps each target channel's token
to its horizon (the published projector). The channels have no order: no positional encoding,
no patches, no time-axis options of a backend (each refused in one line); every backend that
serves tokens in no order can attend across them. The options default to the published model's
(its encoder, norms and initialisation); `experiment=itransformer` adds its recipe and a
dataset's published sizes (docs/itransformer.md). Official checkpoints load
(seqforecast/published/itransformer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from ...attention import VARIATE
from ...attention.site import conflict
from ...options import ConfigError, option, positive, probability
from ..embedding import VariateTokens, patch_shape
from ..kit import Kit
from ..options import AttentionInit, FinalNorm, InstanceNorm, Norm
from .encoder import EncoderForecaster, FlattenOptions
from .registry import register_family


@dataclass
class ItransformerOptions(FlattenOptions):
    """`model=itransformer`; the defaults are the published model's."""

    encoder_layers: int = option(2, positive)
    dropout: float = option(0.1, probability)  # residual branches (the published 0.1)
    norm: Norm = Norm.layer  # post-norm, LayerNorm, in both sublayers
    norm_first: bool = False
    final_norm: FinalNorm = FinalNorm.always  # and one more LayerNorm after the stack
    instance_norm: InstanceNorm = InstanceNorm.revin  # each window's mean and standard
    # deviation (use_norm), no affine
    revin_affine: bool = False
    attention_init: AttentionInit = AttentionInit.linear  # the projections keep nn.Linear's
    # own initialisation


@register_family("itransformer", ItransformerOptions)
class Itransformer(EncoderForecaster):
    TOKEN_AXIS = VARIATE

    @staticmethod
    def tokenizer(options: ItransformerOptions, kit: Kit, channels: int) -> VariateTokens:
        """A token per channel: refused, in one line, with what would order them."""
        positions = kit.positions
        if positions.places != "nothing":
            raise conflict("model", "itransformer", "pos_encoding", positions.name,
                           "its tokens are the channels, whose order means nothing; use "
                           "pos_encoding=none")
        if patch_shape(kit.cfg) != (1, 1):
            raise conflict("model", "itransformer", "embedding", kit.cfg["embedding"]["name"],
                           "its tokens are the channels' whole windows; use embedding=point")
        if options.channel_independent:
            raise ConfigError("model=itransformer conflicts with model.channel_independent="
                              "true: channel tokens mix the channels")
        return VariateTokens(kit.in_len, channels)

    def _make_head(self, d_model: int) -> nn.Linear:
        # each target channel's token -> its horizon (K values a step for a probabilistic
        # output): one map shared by the channels, as iTransformer's projector
        return nn.Linear(d_model, self.out_len * self.output.n_params)

    def _read_out(self, memory: Tensor) -> Tensor:
        # the target channels' tokens, the first T: [B, T, d_model] -> [B, T, out_len * K]
        out = self.head(memory[:, : self.inner_targets])
        out = out.unflatten(-1, (self.out_len, self.output.n_params))  # [B, T, out_len, K]
        return out.transpose(1, 2).flatten(2)  # [B, out_len, T * K]

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
(official/itransformer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from ...options import ConfigError, option, positive, probability
from ..embedding import VariateTokens, patch_shape
from ..forecaster import ENCODER
from ..options import VARIATE, AttentionInit, FinalNorm, InstanceNorm, Norm, Site
from ..positional import PLACES_NOTHING
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

    TOKEN_AXIS = VARIATE

    def tokenizer(self, cfg, n_features: int) -> VariateTokens:
        return VariateTokens(cfg["data"]["in_len"], n_features)

    def sites(self, cfg, n_features):
        return [Site(ENCODER, VARIATE, n_features, n_features, self.encoder_layers,
                     residual=self.res_attention)]

    def check(self, cfg) -> None:
        pos = cfg["pos_encoding"]["name"]
        if pos not in PLACES_NOTHING:
            raise ConfigError(
                f"model=itransformer conflicts with pos_encoding={pos}: its tokens are the "
                f"channels, whose order means nothing; use pos_encoding=none")
        if patch_shape(cfg) != (1, 1):
            raise ConfigError(
                f"model=itransformer conflicts with embedding={cfg['embedding']['name']}: "
                f"its tokens are the channels' whole windows; use embedding=point")
        if self.channel_independent:
            raise ConfigError("model=itransformer conflicts with model.channel_independent="
                              "true: channel tokens mix the channels")

    def position_tokens(self, cfg) -> tuple[int, str]:
        return 0, "no positions"  # refused by `check`

    def head_flops(self, tokens: int, inner_t: int, out_len: int) -> int:
        """Each target channel's token to its horizon."""
        return 2 * inner_t * self.d_model * out_len


@register_family("itransformer", ItransformerOptions)
class Itransformer(EncoderForecaster):
    PUBLISHED = "iTransformer"

    def _make_head(self, d_model: int) -> nn.Linear:
        # each target channel's token -> its horizon (K values a step for a probabilistic
        # output): one map shared by the channels, as iTransformer's projector
        return nn.Linear(d_model, self.out_len * self.output.n_params)

    def _read_out(self, memory: Tensor) -> Tensor:
        # the target channels' tokens, the first T: [B, T, d_model] -> [B, T, out_len * K]
        out = self.head(memory[:, : self.inner_targets])
        out = out.unflatten(-1, (self.out_len, self.output.n_params))  # [B, T, out_len, K]
        return out.transpose(1, 2).flatten(2)  # [B, out_len, T * K]

    def load_official(self, state_dict) -> None:
        """An official iTransformer state dict into this model, or OfficialWeightsError."""
        from ..official.itransformer import load_itransformer_weights

        load_itransformer_weights(self, state_dict)

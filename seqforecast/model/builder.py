"""`build_model(cfg)`: a composed config in, a forecaster out: the encoder-decoder
`ForecastTransformer` (`model=transformer`) or the `EncoderForecaster` (`model=encoder`),
forecasting a point, quantiles or a distribution (`loss`: probabilistic/outputs.py).

The builder reads the config groups and hands each building block only what it needs, so the
blocks' constructors stay simple. It supplies two context values to attention backends that
accept them: `layer` (1-based depth within its stack, for diff's lambda_init) and
`cross_attention` (True for encoder-decoder attention).
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf
from torch import nn

from .. import native
from ..attention import attention_context, attention_schema, build_attention
from ..data.time_features import calendar_features
from ..probabilistic.outputs import build_output
from .embedding import patch_shape, token_lengths
from .encoder import EncoderForecaster
from .ffn import FeedForward
from .forecaster import WindowForecaster
from .layers import DecoderLayer, EncoderLayer
from .positional import attention_position_factory, build_input_encoding
from .transformer import ForecastTransformer

MODELS = ("transformer", "encoder")
# model.final_norm: a norm after the encoder stack; auto: after a pre-norm stack only
FINAL_NORM = {"auto": None, "always": True, "never": False}
# mha: xavier q/k/v, zero biases (nn.MultiheadAttention's) | linear: nn.Linear's own
ATTENTION_INITS = ("mha", "linear")


def _plain(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    return dict(cfg)


def build_model(cfg: Mapping, n_features: int = 1, n_targets: int = 1, kernels: str = "torch"
                ) -> WindowForecaster:
    """Build the forecaster from a composed, checked config (groups model, attention,
    pos_encoding, ffn, embedding, data, loss: config/check.py). `n_features`: input
    channels (targets first, then covariates); `n_targets`: channels forecast (1 and 1 for the
    sigmoids). `kernels`: the set it runs, `torch` (stock PyTorch) or `native` (the CPU's C
    kernels: `native.resolve` picks a run's)."""
    cfg = _plain(cfg)
    model, attention, ffn_cfg = cfg["model"], cfg["attention"], cfg["ffn"]
    kind = model["name"]
    patch_len, stride = patch_shape(cfg)
    d_model, n_heads = model["d_model"], model["n_heads"]
    dropout, norm_first, norm = model["dropout"], model["norm_first"], model["norm"]
    # PatchTST's published options (the encoder-decoder has neither).
    encoder_only = kind == "encoder"
    res_attention = encoder_only and model["res_attention"]
    attention_output_dropout = model["attention_output_dropout"] if encoder_only else 0.0
    # `linear`: every attention projection keeps nn.Linear's own initialisation, as the
    # published PatchTST's do (the backends' default is nn.MultiheadAttention's).
    linear_init = encoder_only and model["attention_init"] == "linear"

    attn_name = attention["name"]
    accepted = set(attention_context(attn_name))
    attn_options = {k: v for k, v in attention.items() if k != "name"}
    new_position = attention_position_factory(cfg["pos_encoding"], n_heads)
    encoder_tokens, decoder_tokens = token_lengths(
        cfg, 1 if model["channel_independent"] else n_features)

    def make_attention(layer: int, cross: bool, lengths: tuple[int, int]) -> nn.Module:
        """`lengths`: the tokens (queries, keys) the layer attends over."""
        context = {"layer": layer, "cross_attention": cross, "position": new_position(),
                   "lengths": lengths}
        context = {k: v for k, v in context.items() if k in accepted and v is not None}
        attn = build_attention(attn_name, d_model, n_heads, **attn_options, **context)
        if linear_init:
            for module in attn.modules():
                if isinstance(module, nn.Linear):
                    module.reset_parameters()
        return attn

    def make_ffn() -> FeedForward:
        return FeedForward(d_model, ffn_cfg["d_ff"] or 4 * d_model,
                           activation=ffn_cfg["activation"], gated=ffn_cfg["gated"],
                           bias=ffn_cfg["bias"], bias_gate=ffn_cfg["bias_gate"],
                           dropout=ffn_cfg["dropout"])

    encoder = [
        EncoderLayer(make_attention(i, False, (encoder_tokens, encoder_tokens)), make_ffn(),
                     d_model, dropout, norm_first, norm, attention_output_dropout)
        for i in range(1, model["encoder_layers"] + 1)
    ]
    # The decoder's layers are drawn before the input encoding (a learned one draws too): a
    # seed gives the weights it gave before the encoder-only model shared this builder.
    decoder = [] if encoder_only else [
        DecoderLayer(make_attention(i, False, (decoder_tokens, decoder_tokens)),
                     make_attention(i, True, (decoder_tokens, encoder_tokens)), make_ffn(),
                     d_model, dropout, norm_first, norm)
        for i in range(1, model["decoder_layers"] + 1)
    ]
    shared = dict(
        n_features=n_features,
        n_targets=n_targets,
        d_model=d_model,
        in_len=cfg["data"]["in_len"],
        out_len=cfg["data"]["out_len"],
        instance_norm=model["instance_norm"],
        encoder_layers=encoder,
        input_encoding=build_input_encoding(cfg["pos_encoding"], d_model),
        norm_first=norm_first,
        norm=norm,
        patch_len=patch_len,
        stride=stride,
        linear_path=model["linear_path"],
        linear_path_input=model["linear_path_input"],
        linear_path_trainable=model["linear_path_trainable"],
        decomposition_kernel=model["decomposition_kernel"],
        channel_independent=model["channel_independent"],
        padding=cfg["embedding"]["padding"],
        res_attention=res_attention,
        revin_affine=model["revin_affine"],
        output=build_output(cfg["loss"]),  # loss=mse|quantile|gaussian|poisson
        variate_tokens=cfg["embedding"]["name"] == "variate",
        n_marks=len(calendar_features(cfg["data"])),
        final_norm=FINAL_NORM[model["final_norm"]] if encoder_only else None,
        # what the backend needs the model to build for it (de-stationary factors)
        **attention_schema(attn_name)(**attention).model_parts(),
    )
    if encoder_only:
        forecaster = EncoderForecaster(head_dropout=model["head_dropout"], **shared)
    else:
        forecaster = ForecastTransformer(label_len=model["label_len"], decoding=model["decoding"],
                                         decoder_layers=decoder, **shared)
    return native.install(forecaster) if kernels == "native" else forecaster

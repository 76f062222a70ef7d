"""`build_model(cfg)`: a composed config in, a ForecastTransformer out.

The builder reads the config groups and hands each building block only what it needs, so the
blocks' constructors stay simple. It supplies two context values to attention backends that
accept them: `layer` (1-based depth within its stack, for diff's lambda_init) and
`cross_attention` (True for encoder-decoder attention).
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf
from torch import nn

from ..attention import attention_options, build_attention
from .embedding import patch_shape
from .ffn import FeedForward
from .layers import DecoderLayer, EncoderLayer
from .positional import attention_position_factory, build_input_encoding
from .transformer import ForecastTransformer


def _plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)


def build_model(cfg: Mapping, n_features: int = 1, n_targets: int = 1) -> ForecastTransformer:
    """Build the forecaster from a composed config (groups model, attention, pos_encoding,
    ffn, embedding, data). `n_features`: input channels (targets first, then covariates);
    `n_targets`: channels forecast (1 and 1 for the sigmoids)."""
    cfg = _plain(cfg)
    model, attention, ffn_cfg = cfg["model"], cfg["attention"], cfg["ffn"]
    patch_len, stride = patch_shape(cfg)
    d_model, n_heads = model["d_model"], model["n_heads"]
    dropout, norm_first = model["dropout"], model["norm_first"]

    attn_name = attention["name"]
    accepted = set(attention_options(attn_name))
    attn_options = {k: v for k, v in attention.items() if k != "name"}
    new_position = attention_position_factory(cfg["pos_encoding"], n_heads)

    def make_attention(layer: int, cross: bool) -> nn.Module:
        options = dict(attn_options)
        context = {"layer": layer, "cross_attention": cross, "position": new_position()}
        options.update({k: v for k, v in context.items() if k in accepted and v is not None})
        return build_attention(attn_name, d_model, n_heads, **options)

    def make_ffn() -> FeedForward:
        return FeedForward(
            d_model,
            ffn_cfg["d_ff"] or 4 * d_model,
            activation=ffn_cfg["activation"],
            gated=ffn_cfg["gated"],
            bias=ffn_cfg["bias"],
            bias_gate=ffn_cfg["bias_gate"],
            dropout=ffn_cfg["dropout"],
        )

    encoder = [
        EncoderLayer(make_attention(i, False), make_ffn(), d_model, dropout, norm_first)
        for i in range(1, model["encoder_layers"] + 1)
    ]
    decoder = [
        DecoderLayer(
            make_attention(i, False),
            make_attention(i, True),
            make_ffn(),
            d_model,
            dropout,
            norm_first,
        )
        for i in range(1, model["decoder_layers"] + 1)
    ]
    return ForecastTransformer(
        n_features=n_features,
        n_targets=n_targets,
        d_model=d_model,
        in_len=cfg["data"]["in_len"],
        out_len=cfg["data"]["out_len"],
        label_len=model["label_len"],
        decoding=model["decoding"],
        instance_norm=model["instance_norm"],
        encoder_layers=encoder,
        decoder_layers=decoder,
        input_encoding=build_input_encoding(cfg["pos_encoding"], d_model),
        norm_first=norm_first,
        patch_len=patch_len,
        stride=stride,
        linear_path=model.get("linear_path", "none"),
        decomposition_kernel=model.get("decomposition_kernel", 25),
        channel_independent=model.get("channel_independent", False),
    )

"""`build_model(cfg)`: a composed config in, a forecaster out: the encoder-decoder
`ForecastTransformer` (`model=transformer`) or the encoder-only `PatchTST` (`model=patchtst`),
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
from ..attention import attention_options, build_attention, carries_residual
from ..probabilistic.outputs import build_output
from .embedding import patch_padding, patch_shape
from .ffn import FeedForward
from .forecaster import WindowForecaster
from .layers import DecoderLayer, EncoderLayer
from .patchtst import PatchTST
from .positional import attention_position_factory, build_input_encoding
from .transformer import ForecastTransformer

MODELS = ("transformer", "patchtst")


def _plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)


def build_model(cfg: Mapping, n_features: int = 1, n_targets: int = 1, kernels: str = "torch"
                ) -> WindowForecaster:
    """Build the forecaster from a composed config (groups model, attention, pos_encoding,
    ffn, embedding, data). `n_features`: input channels (targets first, then covariates);
    `n_targets`: channels forecast (1 and 1 for the sigmoids). `kernels`: the set it runs,
    `torch` (stock PyTorch) or `native` (the CPU's C kernels: `native.resolve` picks a run's)."""
    cfg = _plain(cfg)
    model, attention, ffn_cfg = cfg["model"], cfg["attention"], cfg["ffn"]
    kind = model.get("name", "transformer")  # configs saved before model= had a name
    if kind not in MODELS:
        raise ValueError(f"model={kind!r}; allowed: {', '.join(MODELS)}")
    patch_len, stride = patch_shape(cfg)
    d_model, n_heads = model["d_model"], model["n_heads"]
    dropout, norm_first = model["dropout"], model["norm_first"]
    norm = model.get("norm", "layer")
    padding = patch_padding(cfg)
    if padding == "end" and kind != "patchtst":
        raise ValueError(
            "embedding.padding=end (patches past the window's end) is for model=patchtst: the "
            "encoder-decoder's time axis needs patches ending at in_len (padding=start)"
        )
    # PatchTST's published options (the encoder-decoder has neither).
    res_attention = kind == "patchtst" and model.get("res_attention", False)
    attention_dropout = model.get("attention_dropout", 0.0) if kind == "patchtst" else 0.0
    # `linear`: every attention projection keeps nn.Linear's own initialisation, as the
    # published PatchTST's do (the backends' default is nn.MultiheadAttention's).
    linear_init = kind == "patchtst" and model.get("attention_init", "mha") == "linear"

    attn_name = attention["name"]
    accepted = set(attention_options(attn_name))
    attn_options = {k: v for k, v in attention.items() if k != "name"}
    if res_attention and (why := carries_residual(attn_name, cfg["pos_encoding"]["name"],
                                                  attn_options)):  # fmt: skip
        raise ValueError(f"model.res_attention=true: {why}")
    new_position = attention_position_factory(cfg["pos_encoding"], n_heads)

    def make_attention(layer: int, cross: bool) -> nn.Module:
        options = dict(attn_options)
        context = {"layer": layer, "cross_attention": cross, "position": new_position()}
        options.update({k: v for k, v in context.items() if k in accepted and v is not None})
        attn = build_attention(attn_name, d_model, n_heads, **options)
        if linear_init:
            for module in attn.modules():
                if isinstance(module, nn.Linear):
                    module.reset_parameters()
        return attn

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
        EncoderLayer(make_attention(i, False), make_ffn(), d_model, dropout, norm_first, norm,
                     attention_dropout)  # fmt: skip
        for i in range(1, model["encoder_layers"] + 1)
    ]
    # The decoder's layers are drawn before the input encoding (a learned one draws too): a
    # seed gives the weights it gave before PatchTST shared this builder.
    decoder = [
        DecoderLayer(
            make_attention(i, False),
            make_attention(i, True),
            make_ffn(),
            d_model,
            dropout,
            norm_first,
            norm,
        )
        for i in range(1, model["decoder_layers"] + 1)
    ] if kind == "transformer" else []  # fmt: skip
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
        linear_path=model.get("linear_path", "none"),
        linear_path_input=model.get("linear_path_input", "normalized"),
        linear_path_trainable=model.get("linear_path_trainable", True),
        decomposition_kernel=model.get("decomposition_kernel", 25),
        channel_independent=model.get("channel_independent", False),
        padding=padding,
        res_attention=res_attention,
        revin_affine=model.get("revin_affine", True),
        output=build_output(cfg.get("loss")),  # loss=mse|quantile|gaussian (None: saved runs)
    )
    if kind == "patchtst":
        forecaster = PatchTST(head_dropout=model["head_dropout"], **shared)
    else:
        forecaster = ForecastTransformer(label_len=model["label_len"], decoding=model["decoding"],
                                         decoder_layers=decoder, **shared)
    if kernels not in native.SETS:
        raise ValueError(f"kernels={kernels!r}; allowed: {', '.join(native.SETS)}")
    return native.install(forecaster) if kernels == "native" else forecaster

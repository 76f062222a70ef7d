"""The official iTransformer's weights in this package's model (Liu et al. 2024; the authors'
`model/iTransformer.py`, `use_norm=1`, `class_strategy=projection`, calendar features on).

    model = load_official_itransformer(torch.load("checkpoint.pth", weights_only=True), cfg, 7)

`cfg` is the project config the checkpoint corresponds to (`model=itransformer`, as
`experiment=itransformer` composes it, and the
checkpoint's in_len, out_len and sizes). Every official tensor has its counterpart here in the
same layout but the FFN's: the official kernel-1 convolutions' weights [out, in, 1] are this
model's linear maps [out, in]. A state dict from another model or another setting is refused
with one line naming the first key that is missing, unexpected or of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from ..data import data_source
from ..model.builder import build_model
from ..model.embedding import VariateTokens
from ..model.families.encoder import EncoderForecaster
from .common import (
    OfficialWeightsError,
    Plan,
    copy_weights,
    tslib_attention,
    tslib_conv_ffn,
    weight_and_bias,
)
from .registry import HORIZONS, Published, register_published


def load_official_itransformer(
    state_dict: Mapping[str, Tensor], cfg, n_channels: int
) -> EncoderForecaster:
    """The iTransformer built from `cfg` (experiment=itransformer) for `n_channels` series (all
    forecast, then cfg's calendar features), holding the official `state_dict`'s weights."""
    marks = len(data_source(cfg["data"]).calendar_features())
    model = build_model(cfg, n_features=n_channels + marks, n_targets=n_channels)
    load_itransformer_weights(model, state_dict)
    return model


def load_itransformer_weights(model: EncoderForecaster, state_dict: Mapping[str, Tensor]
                              ) -> None:
    copy_weights(state_dict, itransformer_plan(model), model="iTransformer",
                 settings="in_len, out_len, d_model, ffn.d_ff and encoder_layers",
                 unexpected="only the iTransformer model's checkpoints load")


def itransformer_plan(model: EncoderForecaster) -> Plan:
    """Official key -> (this model's tensor, rearrangement or None), in the official order."""
    if not isinstance(model, EncoderForecaster) or not isinstance(model.tokens, VariateTokens):
        raise OfficialWeightsError(
            "official iTransformer weights load into model=itransformer "
            "(experiment=itransformer)")
    if (model.instance_norm != "revin" or getattr(model.norm, "affine", False)
            or model.linear_path is not None or isinstance(model.encoder_norm, nn.Identity)):
        raise OfficialWeightsError(
            "official iTransformer weights need model.instance_norm=revin "
            "model.revin_affine=false model.final_norm=always model.linear_path=none "
            "(experiment=itransformer)")
    plan: Plan = {}
    weight_and_bias(plan, "enc_embedding.value_embedding", model.src_embed)
    for i, layer in enumerate(model.encoder):
        prefix = f"encoder.attn_layers.{i}."
        tslib_attention(plan, f"{prefix}attention", layer.self_attn, "iTransformer")
        ffn = layer.ffn
        if ffn.gate is not None or not isinstance(layer.attn_residual.norm, nn.LayerNorm):
            raise OfficialWeightsError(
                "official iTransformer weights need a plain FFN and LayerNorm (ffn=gelu "
                "model.norm=layer)")
        tslib_conv_ffn(plan, prefix, ffn)
        weight_and_bias(plan, f"{prefix}norm1", layer.attn_residual.norm)
        weight_and_bias(plan, f"{prefix}norm2", layer.ffn_residual.norm)
    weight_and_bias(plan, "encoder.norm", model.encoder_norm)
    weight_and_bias(plan, "projector", model.head)
    return plan


# iTransformer (thuml/iTransformer, scripts/multivariate_forecasting/, input 96): dataset ->
# horizon -> overrides; the preset (experiment=itransformer) is ETTh1's setting at 96 and 192.
_D128 = ("d_model=128", "ffn.d_ff=128")
_D512 = ("d_model=512", "ffn.d_ff=512")
SETTINGS: dict[str, dict[int, tuple[str, ...]]] = {
    "etth1": {96: (), 192: (), 336: _D512, 720: _D512},
    **{name: dict.fromkeys(HORIZONS, _D128) for name in ("etth2", "ettm1", "ettm2")},
    # Exchange/iTransformer.sh trains its 336 for one epoch
    "exchange": {**dict.fromkeys(HORIZONS, _D128), 336: (*_D128, "epochs=1")},
    "weather": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=3")),
    "electricity": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=3", "batch_size=16",
                                            "lr=0.0005")),
    "traffic": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=4", "batch_size=16",
                                        "lr=0.001")),
}


register_published(Published("itransformer", "iTransformer", "itransformer", SETTINGS,
                             lambda model, state: load_itransformer_weights(model, state),
                             "etth1-96"))

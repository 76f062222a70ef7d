"""The official TimeXer's weights in this package's model (Wang et al. 2024; the authors'
`models/TimeXer.py`, `use_norm=1`, calendar features by `--embed timeF`).

    model = load_official_timexer(torch.load("checkpoint.pth", weights_only=True), cfg, 7, 7)

`cfg` is the project config the checkpoint corresponds to (`model=timexer`, as
`experiment=timexer` composes it, with the checkpoint's in_len, out_len, patch length and
sizes). Every official tensor has its counterpart here; the layouts differ in four: the global
tokens ([1, n_vars, 1, d] there, [n_vars, d] here), the FFN's kernel-1 convolutions ([out, in, 1]
there, linear maps here), the head's flattened input (d-major there, token-major here), and the
sinusoidal table (a buffer of the checkpoint there, checked against this model's table rather
than copied). A state dict from another model or another setting is refused with one line naming
the first key that is missing, unexpected or of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from ..builder import build_model
from ..families.timexer import Timexer
from ..positional import SinusoidalEncoding, sinusoidal_table
from .common import (
    OfficialWeightsError,
    Plan,
    Reshaped,
    copy_weights,
    stripped,
    tslib_attention,
    tslib_conv_ffn,
    weight_and_bias,
)

POSITIONS = "en_embedding.position_embedding.pe"


def load_official_timexer(state_dict: Mapping[str, Tensor], cfg, n_series: int,
                          n_targets: int, n_marks: int = 4) -> Timexer:
    """The TimeXer built from `cfg` for `n_series` series (the first `n_targets` forecast),
    then cfg's calendar features (`n_marks`: 4 at --freq h), holding the official weights."""
    model = build_model(cfg, n_features=n_series + n_marks, n_targets=n_targets)
    load_timexer_weights(model, state_dict)
    return model


def load_timexer_weights(model: Timexer, state_dict: Mapping[str, Tensor]) -> None:
    state = stripped(state_dict)
    copy_weights(state, timexer_plan(model, state), model="TimeXer",
                 settings="in_len, out_len, embedding.patch_len, d_model, ffn.d_ff, "
                          "encoder_layers and the targets (features M or MS)",
                 unexpected="only the TimeXer model's checkpoints load")


def timexer_plan(model: Timexer, state: Mapping[str, Tensor]) -> Plan:
    """Official key -> (this model's tensor, rearrangement or None), in the official order."""
    if not isinstance(model, Timexer):
        raise OfficialWeightsError("official TimeXer weights load into model=timexer "
                                   "(experiment=timexer)")
    if (model.instance_norm != "revin" or getattr(model.norm, "affine", False)
            or model.linear_path is not None):
        raise OfficialWeightsError(
            "official TimeXer weights need model.instance_norm=revin model.revin_affine=false "
            "model.linear_path=none (experiment=timexer)")
    if not isinstance(model.input_encoding, SinusoidalEncoding):
        raise OfficialWeightsError("official TimeXer weights add a sinusoidal table to the "
                                   "patches: pos_encoding=sinusoidal")
    d_model = model.src_embed.out_features
    if POSITIONS in state:
        table = state[POSITIONS]
        patches = model.tokens.encoder_tokens
        if table.dim() != 3 or table.shape[-1] != d_model or not torch.allclose(
                table[0, :patches].float(), sinusoidal_table(patches, d_model), atol=1e-6):
            raise OfficialWeightsError(f"{POSITIONS} is not the sinusoidal table of width "
                                       f"{d_model} this model adds (check d_model)")
    plan: Plan = {}
    plan["en_embedding.value_embedding.weight"] = (model.src_embed.weight, None)
    targets = model.global_tokens.shape[0]
    plan["en_embedding.glb_token"] = (
        model.global_tokens, Reshaped((1, targets, 1, d_model), lambda t: t[0, :, 0]))
    plan[POSITIONS] = None  # checked above, not copied: this model computes the same table
    weight_and_bias(plan, "ex_embedding.value_embedding", model.exogenous_embed)
    for i, layer in enumerate(model.encoder):
        prefix = f"encoder.layers.{i}."
        tslib_attention(plan, f"{prefix}self_attention", layer.self_attn, "TimeXer")
        tslib_attention(plan, f"{prefix}cross_attention", layer.cross_attn, "TimeXer")
        ffn = layer.ffn
        if ffn.gate is not None or not isinstance(layer.ffn_residual.norm, nn.LayerNorm):
            raise OfficialWeightsError("official TimeXer weights need a plain FFN and LayerNorm "
                                       "(ffn=gelu model.norm=layer)")
        tslib_conv_ffn(plan, prefix, ffn)
        for theirs, residual in (("norm1", layer.self_residual), ("norm2", layer.cross_residual),
                                 ("norm3", layer.ffn_residual)):
            weight_and_bias(plan, f"{prefix}{theirs}", residual.norm)
    weight_and_bias(plan, "encoder.norm", model.encoder_norm)
    horizon, tokens = model.head.out_features, model.tokens.encoder_tokens + 1
    # Theirs: [horizon, d_model * (N + 1)] (d-major); ours: [horizon, (N + 1) * d_model].
    plan["head.linear.weight"] = (
        model.head.weight,
        Reshaped((horizon, d_model * tokens),
                 lambda w: w.view(horizon, d_model, tokens).transpose(1, 2)
                 .reshape(horizon, tokens * d_model)))
    plan["head.linear.bias"] = (model.head.bias, None)
    return plan

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

from ..data import data_source
from ..model.builder import build_model
from ..model.families.timexer import Timexer
from ..model.positional import SinusoidalEncoding, sinusoidal_table
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
from .registry import Published, register_published

POSITIONS = "en_embedding.position_embedding.pe"


def load_official_timexer(state_dict: Mapping[str, Tensor], cfg, n_series: int,
                          n_targets: int, n_marks: int | None = None) -> Timexer:
    """The TimeXer built from `cfg` for `n_series` series (the first `n_targets` forecast),
    then cfg's calendar features (`data.time_features`: 4 at --freq h), holding the official
    weights. `n_marks`, if given, must be the calendar features cfg gives (refused in one line
    otherwise: a model built for features its data will not have)."""
    marks = len(data_source(cfg["data"]).calendar_features())
    if n_marks is not None and n_marks != marks:
        raise OfficialWeightsError(
            f"{n_marks} calendar features asked for, and the config's data gives {marks} "
            f"(data.time_features, data.time_freq): a TimeXer loaded so would be built for "
            f"features its windows do not have")
    model = build_model(cfg, n_features=n_series + marks, n_targets=n_targets)
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


def _timexer(d_model=512, d_ff=2048, layers=2, batch=32, lr=0.0001, patch=16) -> tuple[str, ...]:
    """A TimeXer script's arguments (run.py's defaults where it gives none) as the overrides of
    experiment=timexer, whose preset is ETTh1-96's: d_model 256, layers 1, batches of 4."""
    found = {"d_model": (d_model, 256), "ffn.d_ff": (d_ff, 2048),
             "model.encoder_layers": (layers, 1), "batch_size": (batch, 4), "lr": (lr, 0.0001),
             "embedding.patch_len": (patch, 16), "embedding.stride": (patch, 16)}
    return tuple(f"{key}={value}" for key, (value, preset) in found.items() if value != preset)


# TimeXer (thuml/TimeXer, scripts/multivariate/, features M, input 96): dataset -> horizon ->
# overrides; the preset (experiment=timexer) is ETTh1's setting at 96.
SETTINGS: dict[str, dict[int, tuple[str, ...]]] = {
    "etth1": {96: _timexer(256, layers=1, batch=4), 192: _timexer(128, batch=4),
              336: _timexer(512, 1024, 1, 16), 720: _timexer(256, 1024, 1, 16)},
    "etth2": {96: _timexer(256, 1024, 1, 16), 192: _timexer(256, 1024, 1),
              336: _timexer(512, 1024, 2, 4), 720: _timexer(256, 1024, 2, 16)},
    "ettm1": {96: _timexer(256, layers=1, batch=4), 192: _timexer(256, 256, 1, 4),
              336: _timexer(256, 1024, 1, 4), 720: _timexer(256, 512, 1, 4)},
    "ettm2": {96: _timexer(256, layers=1), 192: _timexer(256, 1024, 1, 16),
              336: _timexer(512, 1024, 1), 720: _timexer(512, layers=1)},
    "weather": {96: _timexer(256, 512, 1, 4), 192: _timexer(128, 1024, 3, 4),
                336: _timexer(256, layers=1, batch=4), 720: _timexer(128, layers=1, batch=4)},
    "electricity": {96: _timexer(d_ff=512, layers=4, batch=4), 192: _timexer(layers=3, batch=4),
                    336: _timexer(layers=4, batch=4), 720: _timexer(layers=3, batch=4)},
    "traffic": {96: _timexer(512, 512, 3, 16, 0.001), 192: _timexer(512, 512, 3, 16, 0.001),
                336: _timexer(512, 512, 2, 16, 0.001), 720: _timexer(512, 512, 2, 16, 0.001)},
}


def _epf(d_ff: int, layers: int, batch: int) -> tuple[str, ...]:
    """TimeXer's EPF script (scripts/forecast_exogenous/EPF/TimeXer.sh: features MS, input
    168, horizon 24, patches of 24, d_model 512) for one market."""
    return ("in_len=168", *_timexer(512, d_ff, layers, batch, patch=24))


# The EPF markets (dataset=np|pjm|be|fr|de: the price OT from its own past and the market's
# two exogenous series, features MS), at their one horizon: the next day.
SETTINGS.update({"np": {24: _epf(512, 3, 4)}, "pjm": {24: _epf(2048, 3, 16)},
                "be": {24: _epf(512, 2, 16)}, "fr": {24: _epf(2048, 2, 16)},
                "de": {24: _epf(2048, 1, 4)}})


register_published(Published("timexer", "TimeXer", "timexer", SETTINGS,
                             lambda model, state: load_timexer_weights(model, state),
                             "etth1-96"))

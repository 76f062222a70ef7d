"""The official PatchTST's weights in this package's model (Nie et al. 2023; the authors'
`PatchTST_supervised/models/PatchTST.py`, `individual=False`, `decomposition=False`).

    model = load_official_patchtst(torch.load("checkpoint.pth", weights_only=True), cfg, 7)

`cfg` is the project config the checkpoint corresponds to (`experiment=patchtst` and the
checkpoint's in_len, out_len, patch length, stride, sizes); the model returned holds exactly
the official weights, so its forward equals the official forward on the same input (the
official model reads [B, in_len, C] and forecasts [B, out_len, C]; so does this one, channel
independent). From the command line, `model.official_weights=checkpoint.pth` starts a run from
them (`trainer.epochs=0` evaluates them as they are).

Where the two differ in layout only, the weights are rearranged: the official flatten head reads
the encoder's output [C, d_model, N] flattened d_model-major, this one [N, d_model] patch-major,
so the head's columns are permuted. The official `sdp_attn.scale` (a frozen 1/sqrt(head_dim)) is
checked, not copied. A state dict from another model or another setting is refused with one line
naming the first key that is missing, unexpected or of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ..attention.scored import ScoredAttention
from ..model.builder import build_model
from ..model.families.encoder import EncoderForecaster
from ..model.positional import LearnedEncoding
from .common import OfficialWeightsError, Plan, Reshaped, copy_weights, stripped, weight_and_bias
from .registry import HORIZONS, Published, register_published


def load_official_patchtst(
    state_dict: Mapping[str, Tensor], cfg, n_channels: int
) -> EncoderForecaster:
    """The encoder-only model (model=encoder) built from `cfg` for `n_channels` channels (all
    forecast), holding the official `state_dict`'s weights."""
    model = build_model(cfg, n_features=n_channels, n_targets=n_channels)
    load_patchtst_weights(model, state_dict)
    return model


def load_patchtst_weights(model: EncoderForecaster, state_dict: Mapping[str, Tensor]) -> None:
    """Copy an official PatchTST state dict into `model` in place (refused whole, nothing
    copied, if any key does not fit)."""
    copy_weights(state_dict, patchtst_plan(model, stripped(state_dict)), model="PatchTST",
                 settings="in_len, out_len, patch_len, stride, d_model, n_heads, ffn.d_ff, "
                          "encoder_layers and model.norm",
                 unexpected="only individual=False, decomposition=False checkpoints load")


def patchtst_plan(model: EncoderForecaster, state: Mapping[str, Tensor]) -> Plan:
    """Official key -> this model's tensor (and rearrangement); the official sdp_attn.scale
    entries are checked here, then left out of the copy."""
    plan = _plan(model)
    head_dim = model.encoder[0].self_attn.head_dim
    for key, value in state.items():
        if key.endswith("sdp_attn.scale"):  # frozen 1/sqrt(head_dim): a check, not a weight
            if abs(float(value) - head_dim**-0.5) > 1e-6:
                raise OfficialWeightsError(
                    f"{key} = {float(value):.6g}, but this config's heads score at "
                    f"1/sqrt({head_dim}) = {head_dim**-0.5:.6g} (model.n_heads, d_model)"
                )
            plan[key] = None
    return plan


def _plan(model: EncoderForecaster) -> Plan:
    """Official key -> (this model's tensor, rearrangement or None), in the official order."""
    if not isinstance(model, EncoderForecaster) or not model.channel_independent:
        raise OfficialWeightsError(
            "official PatchTST weights load into model=encoder with "
            "model.channel_independent=true (experiment=patchtst)"
        )
    if model.tokens.padding != "end" or model.linear_path is not None:
        raise OfficialWeightsError(
            "official PatchTST weights need embedding.padding=end and model.linear_path=none "
            "(experiment=patchtst)"
        )
    encoding = model.input_encoding
    if not isinstance(encoding, LearnedEncoding):
        raise OfficialWeightsError(
            "official PatchTST weights carry a learned position table: pos_encoding=learned"
        )
    n_tokens, d_model = model.tokens.encoder_tokens, model.src_embed.out_features
    if getattr(model.norm, "affine", False) or model.instance_norm != "revin":
        # The official RevIN's affine is per channel, applied before the channels are folded;
        # this model's is shared by the folded channels: only the published --affine 0 loads.
        raise OfficialWeightsError(
            "official PatchTST weights load with model.instance_norm=revin "
            "model.revin_affine=false (the published --revin 1 --affine 0)"
        )
    plan: Plan = {}
    plan["model.backbone.W_P.weight"] = (model.src_embed.weight, None)
    plan["model.backbone.W_P.bias"] = (model.src_embed.bias, None)
    plan["model.backbone.W_pos"] = (encoding.embedding[:n_tokens], None)
    for i, layer in enumerate(model.encoder):
        attn, prefix = layer.self_attn, f"model.backbone.encoder.layers.{i}."
        if not isinstance(attn, ScoredAttention):
            raise OfficialWeightsError(
                "official PatchTST weights load into attention=vanilla or einsum (the "
                "published attention), not this backend"
            )
        for theirs, ours in (("W_Q", attn.q_proj), ("W_K", attn.k_proj),
                             ("W_V", attn.v_proj), ("to_out.0", attn.out_proj)):
            weight_and_bias(plan, f"{prefix}self_attn.{theirs}", ours)
        for theirs, norm in (("norm_attn", layer.attn_residual.norm),
                             ("norm_ffn", layer.ffn_residual.norm)):
            # BatchNorm sits inside nn.Sequential(Transpose, BatchNorm1d, Transpose)
            inner = f"{prefix}{theirs}.1" if isinstance(norm, torch.nn.BatchNorm1d) else \
                f"{prefix}{theirs}"
            for name, tensor in norm.state_dict(keep_vars=True).items():
                plan[f"{inner}.{name}"] = (tensor, None)
        ffn = layer.ffn
        if ffn.gate is not None:
            raise OfficialWeightsError("official PatchTST weights need a plain FFN (ffn=gelu)")
        weight_and_bias(plan, f"{prefix}ff.0", ffn.up)
        weight_and_bias(plan, f"{prefix}ff.3", ffn.down)
    horizon = model.head.out_features
    # Theirs: [horizon, d_model * N] (d_model-major); ours: [horizon, N * d_model].
    plan["model.head.linear.weight"] = (
        model.head.weight,
        Reshaped((horizon, d_model * n_tokens),
                 lambda w: w.view(horizon, d_model, n_tokens).transpose(1, 2)
                 .reshape(horizon, n_tokens * d_model)),
    )
    plan["model.head.linear.bias"] = (model.head.bias, None)
    return plan


# PatchTST (yuqinie98/PatchTST, PatchTST_supervised/scripts/PatchTST/<dataset>.sh, input 336;
# docs/patchtst.md): dataset -> overrides at every horizon (illness: its weekly horizons); the
# preset is ETTh1's and ETTh2's.
_WIDE = ("d_model=128", "n_heads=16", "ffn.d_ff=256", "model.dropout=0.2")
_BY_DATASET: dict[str, tuple[str, ...]] = {
    "etth1": (),
    "etth2": (),
    **dict.fromkeys(("ettm1", "ettm2"), (
        *_WIDE, "trainer.schedule=onecycle", "trainer.pct_start=0.4", "trainer.patience=20")),
    "weather": (*_WIDE, "trainer.patience=20"),
    "electricity": (*_WIDE, "batch_size=32", "trainer.schedule=onecycle",
                    "trainer.pct_start=0.2", "trainer.patience=10"),
    "traffic": (*_WIDE, "batch_size=24", "trainer.schedule=onecycle", "trainer.pct_start=0.2",
                "trainer.patience=10"),
    "illness": ("in_len=104", "embedding.patch_len=24", "embedding.stride=2", "batch_size=16",
                "lr=0.0025", "trainer.schedule=constant"),
}
HORIZONS_WEEKLY = (24, 36, 48, 60)  # illness: weekly rows, input 104
SETTINGS = {dataset: dict.fromkeys(HORIZONS_WEEKLY if dataset == "illness" else HORIZONS, found)
            for dataset, found in _BY_DATASET.items()}


register_published(Published("patchtst", "PatchTST", "encoder", SETTINGS,
                             lambda model, state: load_patchtst_weights(model, state),
                             "etth1-96"))

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

from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from ..attention.base import ProjectedAttention
from .builder import build_model
from .encoder import EncoderForecaster
from .positional import LearnedEncoding

Rearrange = Callable[[Tensor], Tensor]


class OfficialWeightsError(ValueError):
    """str(err) is one line naming the first key that does not fit."""


def load_official_patchtst(
    state_dict: Mapping[str, Tensor], cfg, n_channels: int
) -> EncoderForecaster:
    """The encoder-only model (model=encoder) built from `cfg` for `n_channels` channels (all
    forecast), holding the official `state_dict`'s weights."""
    model = build_model(cfg, n_features=n_channels, n_targets=n_channels)
    load_official_weights(model, state_dict)
    return model


def load_official_weights(model: EncoderForecaster, state_dict: Mapping[str, Tensor]) -> None:
    """Copy an official PatchTST state dict into `model` in place (refused whole, nothing
    copied, if any key does not fit)."""
    state = {_strip(k): v for k, v in state_dict.items()}
    plan = _plan(model)
    copies = []
    for key, (target, rearrange) in plan.items():
        if key not in state:
            raise OfficialWeightsError(
                f"not an official PatchTST state dict for this config: key {key!r} is missing "
                f"(is in_len, out_len, patch_len, stride, d_model, encoder_layers or "
                f"model.norm the checkpoint's?)"
            )
        value = state[key]
        if rearrange is not None:
            if value.shape != rearrange.shape:
                raise _misshapen(key, value, rearrange.shape)
            value = rearrange(value)
        if value.shape != target.shape:
            raise _misshapen(key, state[key], target.shape)
        copies.append((target, value))
    for key, value in state.items():
        if key in plan:
            continue
        if key.endswith("sdp_attn.scale"):  # frozen 1/sqrt(head_dim): a check, not a weight
            head_dim = model.encoder[0].self_attn.head_dim
            if abs(float(value) - head_dim**-0.5) > 1e-6:
                raise OfficialWeightsError(
                    f"{key} = {float(value):.6g}, but this config's heads score at "
                    f"1/sqrt({head_dim}) = {head_dim**-0.5:.6g} (model.n_heads, d_model)"
                )
            continue
        raise OfficialWeightsError(
            f"not an official PatchTST state dict for this config: unexpected key {key!r} "
            f"(only individual=False, decomposition=False checkpoints load)"
        )
    with torch.no_grad():
        for target, value in copies:
            target.copy_(value)


class _Reshaped:
    """A rearrangement with the official shape it expects."""

    def __init__(self, shape: tuple[int, ...], fn: Rearrange):
        self.shape, self.fn = torch.Size(shape), fn

    def __call__(self, value: Tensor) -> Tensor:
        return self.fn(value)


def _plan(model: EncoderForecaster) -> dict[str, tuple[Tensor, _Reshaped | None]]:
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
    plan: dict[str, tuple[Tensor, _Reshaped | None]] = {}
    plan["model.backbone.W_P.weight"] = (model.src_embed.weight, None)
    plan["model.backbone.W_P.bias"] = (model.src_embed.bias, None)
    plan["model.backbone.W_pos"] = (encoding.embedding[:n_tokens], None)
    for i, layer in enumerate(model.encoder):
        attn, prefix = layer.self_attn, f"model.backbone.encoder.layers.{i}."
        if not isinstance(attn, ProjectedAttention):
            raise OfficialWeightsError(
                "official PatchTST weights load into attention=vanilla or einsum (the "
                "published attention), not this backend"
            )
        for theirs, ours in (("W_Q", attn.q_proj), ("W_K", attn.k_proj),
                             ("W_V", attn.v_proj), ("to_out.0", attn.out_proj)):
            _linear(plan, f"{prefix}self_attn.{theirs}", ours)
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
        _linear(plan, f"{prefix}ff.0", ffn.up)
        _linear(plan, f"{prefix}ff.3", ffn.down)
    horizon = model.head.out_features
    # Theirs: [horizon, d_model * N] (d_model-major); ours: [horizon, N * d_model].
    plan["model.head.linear.weight"] = (
        model.head.weight,
        _Reshaped((horizon, d_model * n_tokens),
                  lambda w: w.view(horizon, d_model, n_tokens).transpose(1, 2)
                  .reshape(horizon, n_tokens * d_model)),
    )
    plan["model.head.linear.bias"] = (model.head.bias, None)
    return plan


def _linear(plan: dict, prefix: str, linear: torch.nn.Linear) -> None:
    plan[f"{prefix}.weight"] = (linear.weight, None)
    if linear.bias is not None:
        plan[f"{prefix}.bias"] = (linear.bias, None)


def _strip(key: str) -> str:
    """Checkpoints saved from nn.DataParallel prefix every key with `module.`."""
    return key.removeprefix("module.")


def _misshapen(key: str, value: Tensor, expected) -> OfficialWeightsError:
    return OfficialWeightsError(
        f"not an official PatchTST state dict for this config: key {key!r} has shape "
        f"{tuple(value.shape)}, this config needs {tuple(expected)} (check in_len, out_len, "
        f"patch_len, stride, d_model, n_heads, ffn.d_ff)"
    )

"""What the official-weights loaders share: a plan (each official key -> this model's tensor,
with a rearrangement where the layouts differ), copied whole or not at all, and one line naming
the first key that does not fit."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

from ..attention.scored import ScoredAttention

Rearrange = Callable[[Tensor], Tensor]


class OfficialWeightsError(ValueError):
    """str(err) is one line naming the first key that does not fit."""


class Reshaped:
    """A rearrangement with the official shape it expects."""

    def __init__(self, shape: tuple[int, ...], fn: Rearrange):
        self.shape, self.fn = torch.Size(shape), fn

    def __call__(self, value: Tensor) -> Tensor:
        return self.fn(value)


# official key -> (this model's tensor, rearrangement or None), or None for a key that is
# checked, not copied
Plan = dict[str, "tuple[Tensor, Reshaped | None] | None"]


def weight_and_bias(plan: Plan, prefix: str, layer: nn.Module) -> None:
    """A linear map's or a norm's weight and bias (if it has one) under `prefix`."""
    plan[f"{prefix}.weight"] = (layer.weight, None)
    if layer.bias is not None:
        plan[f"{prefix}.bias"] = (layer.bias, None)


def tslib_attention(plan: Plan, prefix: str, attn, model: str) -> None:
    """The Time-Series-Library's `AttentionLayer` (query/key/value/out_projection, with biases)
    under `prefix`, into a vanilla or einsum backend's projections."""
    if not isinstance(attn, ScoredAttention):
        raise OfficialWeightsError(f"official {model} weights load into attention=vanilla or "
                                   f"einsum (the published attention), not this backend")
    for theirs, ours in (("query_projection", attn.q_proj), ("key_projection", attn.k_proj),
                         ("value_projection", attn.v_proj), ("out_projection", attn.out_proj)):
        weight_and_bias(plan, f"{prefix}.{theirs}", ours)


def tslib_conv_ffn(plan: Plan, prefix: str, ffn) -> None:
    """The Time-Series-Library's FFN of two kernel-1 convolutions (`conv1`, `conv2`: weights
    [out, in, 1]) under `prefix`, into a plain FeedForward's linear maps."""
    for theirs, ours in (("conv1", ffn.up), ("conv2", ffn.down)):
        out_width, in_width = ours.weight.shape
        plan[f"{prefix}{theirs}.weight"] = (
            ours.weight, Reshaped((out_width, in_width, 1), lambda w: w.squeeze(-1)))
        plan[f"{prefix}{theirs}.bias"] = (ours.bias, None)


def stripped(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Checkpoints saved from nn.DataParallel prefix every key with `module.`."""
    return {key.removeprefix("module."): value for key, value in state_dict.items()}


def copy_weights(state_dict: Mapping[str, Tensor], plan: Plan, *, model: str, settings: str,
                 unexpected: str) -> None:
    """Copy `state_dict` into the plan's tensors in place: every planned key present and of
    its shape, no other key, or nothing is copied. `settings` names the config keys whose
    values the checkpoint must share; `unexpected` says which checkpoints load."""
    state, copies = stripped(state_dict), []
    for key, entry in plan.items():
        if entry is None:
            continue
        target, rearrange = entry
        if key not in state:
            raise OfficialWeightsError(
                f"not an official {model} state dict for this config: key {key!r} is missing "
                f"(are {settings} the checkpoint's?)")
        value = state[key]
        if rearrange is not None:
            if value.shape != rearrange.shape:
                raise _misshapen(model, key, value, rearrange.shape, settings)
            value = rearrange(value)
        if value.shape != target.shape:
            raise _misshapen(model, key, state[key], target.shape, settings)
        copies.append((target, value))
    for key in state:
        if key not in plan:
            raise OfficialWeightsError(
                f"not an official {model} state dict for this config: unexpected key {key!r} "
                f"({unexpected})")
    with torch.no_grad():
        for target, value in copies:
            target.copy_(value)


def _misshapen(model: str, key: str, value: Tensor, expected, settings: str):
    return OfficialWeightsError(
        f"not an official {model} state dict for this config: key {key!r} has shape "
        f"{tuple(value.shape)}, this config needs {tuple(expected)} (check {settings})")

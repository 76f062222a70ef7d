"""What a model does on a fixed probe (the test curve): its forecast and every attention map."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor, nn

from .metrics import evaluation

STACKS = ("encoder", "decoder_self", "cross")


@dataclass
class AttentionMap:
    stack: str  # encoder | decoder_self | cross
    layer: int  # 1-based
    weights: np.ndarray  # [H, Lq, Lk] for the probe's single series
    query_steps: list[int]  # time step of each query row
    key_steps: list[int]  # time step of each key column

    @property
    def name(self) -> str:
        return f"{self.stack}_layer{self.layer}"


def probe(model: nn.Module, src: Tensor) -> tuple[Tensor, list[AttentionMap]]:
    """Forecast and attention maps for src [1, in_len, F], in eval mode.

    Time steps: the encoder reads steps 0..in_len-1; the decoder's first position is step
    in_len - label_len. (Autoregressive maps are those of the last generation step.)
    """
    with evaluation(model):
        forecast, maps = model(src, return_attention=True)
    in_len = src.shape[1]
    encoder_steps = list(range(in_len))
    result = []
    for stack in STACKS:
        for i, weights in enumerate(maps[stack], start=1):
            array = weights[0].float().cpu().numpy()  # [H, Lq, Lk]
            start = in_len - model.label_len
            decoder_steps = list(range(start, start + array.shape[1]))
            query_steps = encoder_steps if stack == "encoder" else decoder_steps
            key_steps = decoder_steps if stack == "decoder_self" else encoder_steps
            result.append(AttentionMap(stack, i, array, query_steps, key_steps[: array.shape[2]]))
    return forecast, result


def save_maps_npz(path, maps: list[AttentionMap]) -> None:
    """One array [H, Lq, Lk] per map, named <stack>_layer<i>."""
    np.savez_compressed(path, **{m.name: m.weights for m in maps})

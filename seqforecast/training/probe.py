"""What a model does on a fixed probe (the test curve): its forecast and every attention map."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor, nn

from .metrics import evaluation


@dataclass
class AttentionMap:
    stack: str  # the family's name for it (encoder; the encoder-decoder's decoder_self, cross)
    layer: int  # 1-based
    weights: np.ndarray  # [H, Lq, Lk] for the probe's single series
    query_spans: list[tuple[int, int]]  # [first, last] time step of each query token
    key_spans: list[tuple[int, int]]  # [first, last] time step of each key token

    @property
    def name(self) -> str:
        return f"{self.stack}_layer{self.layer}"

    @property
    def query_steps(self) -> list[int]:
        """First time step of each query token (its only step for point tokens)."""
        return [first for first, _ in self.query_spans]

    @property
    def key_steps(self) -> list[int]:
        return [first for first, _ in self.key_spans]


def probe(model: nn.Module, src: Tensor) -> tuple[Tensor, list[AttentionMap]]:
    """Forecast and attention maps for src [1, in_len, F], in eval mode.

    Each token is labelled by the time steps it covers: point tokens one step each (the
    encoder's 0..in_len-1, the decoder's from in_len - label_len), patches their spans.
    (Autoregressive maps are those of the last generation step.)
    """
    with evaluation(model):
        forecast, maps = model(src, return_attention=True)
    result = []
    for stack, layers in maps.items():  # the family's stacks, in its order
        for i, weights in enumerate(layers, start=1):
            if weights is None:  # a mechanism without weights on its inputs (fourier)
                continue
            # detached: a fixed mixing's map is a view of its parameter, which a view
            # taken under no_grad still marks as requiring grad
            array = weights[0].detach().float().cpu().numpy()  # [H, Lq, Lk]
            query_spans, key_spans = model.map_spans(stack, *array.shape[1:])
            result.append(AttentionMap(stack, i, array, query_spans, key_spans))
    return forecast, result


def save_maps_npz(path, maps: list[AttentionMap]) -> None:
    """One array [H, Lq, Lk] per map, named <stack>_layer<i>."""
    np.savez_compressed(path, **{m.name: m.weights for m in maps})

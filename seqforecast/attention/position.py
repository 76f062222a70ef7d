"""Position terms that act inside attention, on the raw scores (the seed's "mask" type).

Both terms take the query-key geometry as two tensors that broadcast against the last two dims
of the scores, so one module serves any layout (a dense [Lq, Lk] map or block windows):
`distance` = |i - j| and `past` = 1.0 where the key lies before the query (j < i).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RelativePositionTerms(nn.Module):
    """scores * 1 / (1 + a * |i - j|)  (distance decay), then  scores - b * [j < i]  (past bias).

    `a` (init 0.1) and `b` (init 1.0) are learnable scalars, as in the seed. `a` is clamped at
    zero when used, so the decay can never divide by zero or flip the sign of a score.
    """

    def __init__(
        self,
        distance_decay: bool = True,
        past_bias: bool = True,
        decay_init: float = 0.1,
        bias_init: float = 1.0,
    ):
        super().__init__()
        if not (distance_decay or past_bias):
            raise ValueError("RelativePositionTerms needs distance_decay or past_bias")
        self.decay = nn.Parameter(torch.tensor(float(decay_init))) if distance_decay else None
        self.bias = nn.Parameter(torch.tensor(float(bias_init))) if past_bias else None

    def forward(self, scores: Tensor, distance: Tensor, past: Tensor) -> Tensor:
        if self.decay is not None:
            scores = scores / (1.0 + self.decay.clamp(min=0.0) * distance)
        if self.bias is not None:
            scores = scores - self.bias * past
        return scores

    def extra_repr(self) -> str:
        return f"distance_decay={self.decay is not None}, past_bias={self.bias is not None}"

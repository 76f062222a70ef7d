"""Position information that acts inside attention: one small interface for every backend.

A backend holds an optional `AttentionPosition` and calls two hooks:

- `rotate(x)` on its projected queries and keys, viewed per head as `[B, L, chunks, head_dim]`
  (rotary embeddings act here);
- `score_terms(scores, distance, past)` on its raw scores, when `acts_on_scores` is True
  (the seed's distance decay and past bias act here). `distance` = |i - j| and `past` = 1.0
  where the key lies before the query (j < i); both broadcast against the scores' last two
  dims, so the same module serves a dense [Lq, Lk] map and block windows alike.

Positions count from 0 in each sequence (queries and keys alike), as in the seed.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._common import ShapeCache


class AttentionPosition(nn.Module):
    """Base: both hooks are the identity. Subclasses override the one they need."""

    acts_on_scores = False

    def rotate(self, x: Tensor) -> Tensor:
        return x

    def score_terms(self, scores: Tensor, distance: Tensor, past: Tensor) -> Tensor:
        return scores


def relative_geometry(q_pos: Tensor, k_pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(distance |i - j|, past [j < i]) as `dtype`, broadcast from query and key positions."""
    return (q_pos - k_pos).abs().to(dtype), (k_pos < q_pos).to(dtype)


class RelativePositionTerms(AttentionPosition):
    """scores * 1 / (1 + a * |i - j|)  (distance decay), then  scores - b * [j < i]  (past bias).

    The seed's "mask" position type. `a` (init 0.1) and `b` (init 1.0) are learnable scalars.
    `a` is clamped at zero when used, so the decay can never divide by zero or flip a sign.
    """

    acts_on_scores = True

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

    def score_terms(self, scores: Tensor, distance: Tensor, past: Tensor) -> Tensor:
        if self.decay is not None:
            scores = scores / (1.0 + self.decay.clamp(min=0.0) * distance)
        if self.bias is not None:
            scores = scores - self.bias * past
        return scores

    def extra_repr(self) -> str:
        return f"distance_decay={self.decay is not None}, past_bias={self.bias is not None}"


class RotaryEmbedding(AttentionPosition):
    """Rotary position embedding (Su et al. 2021) on queries and keys, half-split pairing.

    Channel c of the first half and c + d/2 of the second form a pair rotated by the angle
    position * base^(-2c/d), so q_i . k_j depends on i - j only. No parameters.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rope needs an even head_dim, got {head_dim}")
        if base <= 1.0:
            raise ValueError(f"rope base={base!r} must be > 1")
        self.head_dim = head_dim
        self.base = float(base)
        self._tables = ShapeCache()

    def _cos_sin(self, length: int, device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        def build():
            half = self.head_dim // 2
            inv_freq = self.base ** (-torch.arange(half, device=device, dtype=torch.float64) / half)
            positions = torch.arange(length, device=device, dtype=torch.float64)
            angles = positions[:, None] * inv_freq  # [L, d/2]
            angles = torch.cat([angles, angles], dim=-1)[:, None, :]  # [L, 1, d]
            return angles.cos().to(dtype), angles.sin().to(dtype)

        return self._tables.get((length, device, dtype), build)

    def rotate(self, x: Tensor) -> Tensor:
        """x [B, L, chunks, d] at positions 0..L-1 -> rotated x, same shape."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"rope built for head_dim={self.head_dim}, got {x.shape[-1]}")
        cos, sin = self._cos_sin(x.shape[1], x.device, x.dtype)
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"

"""Position information that acts inside attention: one small interface for every backend.

Every position is an absolute time step. A backend's call says where its queries and keys sit
on the time axis (`query_start`, `key_start`: the step of the first one; the rest follow one
step apart), so cross-attention between a decoder that starts at step in_len - label_len and
an encoder that starts at step 0 agrees with self-attention on what "past" and "near" mean.

A backend holds an optional `AttentionPosition` and calls two hooks:

- `rotate(x, start)` on its projected queries and keys, viewed per head as
  `[B, L, chunks, width]`, the first at time step `start` (rotary embeddings act here);
- `score_terms(scores, distance, past)` on its raw scores, when `acts_on_scores` is True
  (the relative terms act here). `distance` = |t_q - t_k| and `past` = 1.0 where the key's
  step lies before the query's; both broadcast against the scores' last two dims, so the same
  module serves a dense [Lq, Lk] map and block windows alike. Scores hold heads on dim 1.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..options import choice
from ._common import ShapeCache
from .site import conflict

DecayForm = choice("DecayForm", ("alibi", "reciprocal"))


class AttentionPosition(nn.Module):
    """Base: both hooks are the identity. Subclasses override the one they need."""

    acts_on_scores = False
    label = ""  # the pos_encoding option that made it (its messages name it)

    def bind(self, width: int, how: str, d_model: int) -> None:
        """Told by the backend that takes it, when built: each head's q/k `width` (`how`: how
        that width follows from the model's, for the message) at model width `d_model`.
        ConfigError in one line where it cannot act on such heads."""

    def rotate(self, x: Tensor, start: int = 0) -> Tensor:
        return x

    def score_terms(self, scores: Tensor, distance: Tensor, past: Tensor) -> Tensor:
        return scores


def relative_geometry(q_pos: Tensor, k_pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(distance |i - j|, past [j < i]) as `dtype`, broadcast from query and key time steps."""
    return (q_pos - k_pos).abs().to(dtype), (k_pos < q_pos).to(dtype)


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's geometric schedule (Press et al. 2022): head h (from 1) gets 2^(-8h / H)."""
    return torch.tensor([2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)])


class RelativePositionTerms(AttentionPosition):
    """Terms on the raw scores from the time distance |i - j| and the side of the key.

    - `distance_decay`, `decay_form="alibi"` (default): scores - m_h * |i - j|, one learnable
      slope per head, m_h = softplus(raw_h) >= 0, starting at ALiBi's 2^(-8h/H). Additive: a
      farther key never gains weight from it, whatever the sign of its score. (`n_heads=1`:
      one slope shared by all heads.)
    - `distance_decay`, `decay_form="reciprocal"`: scores * 1 / (1 + a * |i - j|), one
      learnable scalar a >= 0 (init 0.1). Caveat: it shrinks scores towards 0, so for a
      negative score a farther key *gains* weight (a raw -2 gives weights 0.148 / 0.289 / 0.563
      at distances 0 / 5 / 20).
    - `past_bias`: scores - b * [key before query], b a learnable scalar (init 1.0).
    """

    acts_on_scores = True
    label = "relative"

    def __init__(
        self,
        distance_decay: bool,
        past_bias: bool,
        decay_form: str,
        n_heads: int,
        decay_init: float = 0.1,
        bias_init: float = 1.0,
    ):
        """The options are pos_encoding=relative's (or diff's own terms): their defaults are
        the config's (config/schema.py)."""
        super().__init__()
        if not (distance_decay or past_bias):
            raise ValueError("RelativePositionTerms needs distance_decay or past_bias")
        self.decay_form = decay_form
        self.slope_raw = self.decay = None
        if distance_decay and decay_form == "alibi":
            # softplus^-1(m) = log(exp(m) - 1): the slopes start at ALiBi's schedule.
            self.slope_raw = nn.Parameter(torch.log(torch.expm1(alibi_slopes(n_heads))))
        elif distance_decay:
            self.decay = nn.Parameter(torch.tensor(float(decay_init)))
        self.bias = nn.Parameter(torch.tensor(float(bias_init))) if past_bias else None

    def slopes(self) -> Tensor:
        """The per-head decay slopes m_h >= 0 (alibi form)."""
        return nn.functional.softplus(self.slope_raw)

    def score_terms(self, scores: Tensor, distance: Tensor, past: Tensor) -> Tensor:
        if self.slope_raw is not None:
            if self.slope_raw.numel() not in (1, scores.shape[1]):
                raise ValueError(
                    f"relative terms built for {self.slope_raw.numel()} heads, scores have "
                    f"{scores.shape[1]} on dim 1"
                )
            # [H] -> [H, 1, ..., 1]: heads on dim 1 of the scores, whatever follows them.
            slope = self.slopes().view(-1, *([1] * (scores.dim() - 2)))
            scores = scores - slope * distance
        elif self.decay is not None:
            scores = scores / (1.0 + self.decay.clamp(min=0.0) * distance)
        if self.bias is not None:
            scores = scores - self.bias * past
        return scores

    def extra_repr(self) -> str:
        decay = "none" if self.slope_raw is None and self.decay is None else self.decay_form
        return f"distance_decay={decay}, past_bias={self.bias is not None}"


class RotaryEmbedding(AttentionPosition):
    """Rotary position embedding (Su et al. 2021) on queries and keys, half-split pairing.

    Channel c of the first half and c + w/2 of the second form a pair rotated by the angle
    t * base^(-2c/w) at time step t, so q_i . k_j depends on t_i - t_j only. The width w is the
    chunk's (a backend's per-head q/k width); it must be even. No parameters.
    """

    label = "rope"

    def __init__(self, head_dim: int | None = None, *, base: float):
        """`base`: pos_encoding=rope's (its default is the config's, config/schema.py)."""
        super().__init__()
        if head_dim is not None and head_dim % 2:
            raise ValueError(f"rope needs an even head_dim, got {head_dim}")
        self.head_dim = head_dim
        self.base = float(base)
        self._tables = ShapeCache()

    def bind(self, width: int, how: str, d_model: int) -> None:
        if width % 2:
            raise conflict("pos_encoding", "rope", "model.d_model", d_model,
                           f"rope rotates pairs of q/k channels, and the q/k width per head, "
                           f"{how} = {width}, is odd")

    def _cos_sin(self, start: int, length: int, width: int, device, dtype):
        def build():
            half = width // 2
            inv_freq = self.base ** (-torch.arange(half, device=device, dtype=torch.float64) / half)
            steps = torch.arange(start, start + length, device=device, dtype=torch.float64)
            angles = steps[:, None] * inv_freq  # [L, w/2]
            angles = torch.cat([angles, angles], dim=-1)[:, None, :]  # [L, 1, w]
            return angles.cos().to(dtype), angles.sin().to(dtype)

        return self._tables.get((start, length, width, device, dtype), build)

    def rotate(self, x: Tensor, start: int = 0) -> Tensor:
        """x [B, L, chunks, w] at time steps start..start+L-1 -> rotated x, same shape."""
        width = x.shape[-1]
        if width % 2 or (self.head_dim is not None and width != self.head_dim):
            expected = "an even width" if self.head_dim is None else f"width {self.head_dim}"
            raise ValueError(f"rope needs {expected}, got {width}")
        cos, sin = self._cos_sin(start, x.shape[1], width, x.device, x.dtype)
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"

"""`diff`: differential attention (Ye et al. 2024), optionally block-local.

Per head h, q and k are projected to two halves (q1, k1) and (q2, k2) of width w, and

    weights = softmax(q1 k1^T / sqrt(w)) - lambda * softmax(q2 k2^T / sqrt(w))
    out     = head_norm(weights @ v_h) * (1 - lambda_init)

with v_h of width d_model / n_heads. Options (`DiffOptions`, each a config value):
- head_layout: "paper" (default, the paper and its official code): w = d_model / (2 n_heads),
  the q and k projections d_model -> d_model, so a layer has the projection weights and the
  attention FLOPs of a standard one; the 2 n_heads half-heads pair up as (2h, 2h + 1). "wide":
  w = d_model / n_heads, q and k projected to 2 d_model (a layer then holds
  6 d_model^2 projection weights against a standard layer's 4 d_model^2). λ's vectors and the
  score scale follow w in both.
- lambda_mode: "scalar" (one learnable scalar, initialised at lambda_init) or
  "reparam" (the paper's: exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init).
- lambda_init: None = 0.8 - 0.6 * exp(-0.3 * (layer - 1)), from the 1-based `layer` index.
- head_norm: per-head RMSNorm of the output, scaled by (1 - lambda_init).
- block_size: 0 = full attention. Otherwise, in self-attention, query block [i, i+bs) sees keys
  [i-bs, i+2bs) (see block_local.py). Cross-attention (a cross site: `site.cross`) processes its
  queries against all keys: the same function as full attention, computed in one matmul.
- talking_heads: learned head-to-head mixing of the scores before the softmax and of the
  weights after it (Shazeer et al. 2020), both initialised to the identity.
- distance_decay, past_bias, decay_form: position terms on the scores (position.py; the
  additive per-head `alibi` decay, or the `reciprocal` multiplicative form); a shorthand for
  `position=RelativePositionTerms(distance_decay, past_bias, decay_form, n_heads)`.
- position: any AttentionPosition (rotary, relative terms), as for every backend.
- residual attention (AttentionCall.residual, residual.py): each half's scores carrying the
  same half's scores of the earlier layers, dense or block-local.

Kernels (kernels.py): dense, with nothing between the scores and the softmax and no dropout,
both halves run as 2H heads of torch's fused kernel (1.6-4x faster here, forward and backward);
block windows stay on the explicit path (an A/B on this machine, L = 1024 to 16384, found the
kernel on 16 x 48 tiles no faster than the batched matmuls, often slower) unless a GPU kernel is
named (`attention.kernel=triton`: both halves' softmaxes over the band in one pass, v read once;
`flex`: FlexAttention with the band as its block mask); residual attention
takes the native C kernel where the run has it (windows and causality as a dense mask).

Positions are absolute time steps: a call's `query_start` and `key_start` place its queries
and keys on the time axis (position.py); masks and block windows read the sequence index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..options import choice, count, option
from . import block_local
from ._common import ShapeCache, combine_masks, masked_softmax_
from .base import AttentionOptions
from .core import Attention
from .kernels import KernelFacts
from .position import AttentionPosition, DecayForm, RelativePositionTerms, relative_geometry
from .registry import register_attention
from .site import ALONE, Site, conflict

LambdaMode = choice("LambdaMode", ("scalar", "reparam"))
HeadLayout = choice("HeadLayout", ("paper", "wide"))


@dataclass
class DiffOptions(AttentionOptions):
    """`attention=diff`: the options above."""

    bias: bool = False
    block_size: int = option(0, count)  # 0 = full; else query block [i, i+bs) sees keys
    # [i-bs, i+2bs); the `block_size` shorthand at the config's root sets it
    head_layout: HeadLayout = HeadLayout.paper  # paper: each q/k half d_model/(2 n_heads)
    # wide, vanilla's size | wide: each half d_model/n_heads wide (1.5x the projection weights)
    lambda_mode: LambdaMode = LambdaMode.reparam  # reparam (paper) | scalar (one scalar)
    lambda_init: float | None = None  # None = 0.8 - 0.6 * exp(-0.3 * (layer - 1))
    head_norm: bool = True  # per-head RMSNorm scaled by (1 - lambda_init)
    talking_heads: bool = False  # head mixing before and after the softmax
    distance_decay: bool = False  # diff's own position terms (pos_encoding=relative: all)
    past_bias: bool = False  # scores - b for past keys
    decay_form: DecayForm = DecayForm.alibi  # alibi: scores - m_h|i-j|, m_h >= 0 per head |
    # reciprocal: scores / (1 + a|i-j|)


def default_lambda_init(layer: int) -> float:
    """The paper's depth schedule, `layer` counted from 1."""
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


class _Geometry(NamedTuple):
    """Shape-only tensors of one layout, broadcasting against the scores' last two dims."""

    blocked: Tensor | None  # bool, True = outside the sequence/window, or in the future
    distance: Tensor  # |i - j|
    past: Tensor  # 1.0 where j < i


def _mix_heads(x: Tensor, mixing: Tensor) -> Tensor:
    """Talking heads: x [B, H, ...] -> [B, H, ...], out[:, g] = sum_h mixing[g, h] * x[:, h]."""
    return torch.einsum("gh,bh...->bg...", mixing, x)


@register_attention("diff", DiffOptions)
class DifferentialAttention(Attention):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        options: DiffOptions,
        site: Site = ALONE,
        position: AttentionPosition | None = None,
    ):
        """`site.layer`: the 1-based depth within its stack (for lambda_init's schedule);
        `site.cross`: whether the layer attends to another sequence (no block windows)."""
        head_dim = d_model // n_heads  # v and the output, per head
        paper = options.head_layout == "paper"
        if paper and head_dim % 2:
            raise conflict(site.option("head_layout"), "paper", "model.d_model", d_model,
                           f"the paper layout halves each head's q/k, and d_model/n_heads = "
                           f"{d_model}/{n_heads} = {head_dim} is odd; use an even head width or "
                           f"{site.option('head_layout')}=wide")
        # Width of each q/k half: the paper halves the head; the wide layout gives each a head.
        half_dim = head_dim // 2 if paper else head_dim
        own_terms = [key for key in ("distance_decay", "past_bias") if getattr(options, key)]
        if own_terms and position is not None:
            raise conflict(site.option(own_terms[0]), "true", "pos_encoding", position.label,
                           f"both would put a position module inside diff attention; use "
                           f"pos_encoding=relative alone (it has distance_decay and past_bias) "
                           f"or set {site.option(own_terms[0])}=false")
        if position is not None:
            position.bind(half_dim, ("half of " if paper else "") +
                          f"model.d_model/model.n_heads = {d_model}/{n_heads}" +
                          (f" ({site.option('head_layout')}=paper)" if paper else ""), d_model)
        on_scores = own_terms + (["talking_heads"] if options.talking_heads else [])
        residual = None
        if on_scores:
            residual = (f"{site.option(on_scores[0])}=true acts on the scores, which residual "
                        f"attention cannot carry; set it false or model.res_attention=false")
        elif position is not None and position.acts_on_scores:
            residual = (f"pos_encoding={position.label} adds its terms to the scores, which "
                        f"residual attention cannot carry; use sinusoidal, learned, rope or none")
        windows = (("block_size", options.block_size),) if options.block_size else ()
        site.refuse("diff", residual=residual,
                    along_time=windows + tuple((key, True) for key in own_terms))
        # q and k carry two halves per head: [E] -> [H, 2, half_dim] (paper: d_model wide;
        # wide: 2 d_model)
        super().__init__(d_model, n_heads, options, site, qk_width=2 * n_heads * half_dim)
        self.signed_weights = True  # p1 - lambda p2
        self.head_layout = options.head_layout
        self.half_dim = half_dim
        self.scale = 1.0 / math.sqrt(self.half_dim)
        self.block_size = options.block_size
        # Block windows are self-attention's; cross-attention processes its queries against all
        # keys: the same function as full attention, computed in one matmul.
        self.windowed = self.block_size > 0 and not site.cross
        self.lambda_mode = options.lambda_mode
        lambda_init = options.lambda_init
        self.lambda_init = (default_lambda_init(site.layer) if lambda_init is None
                            else float(lambda_init))

        if self.lambda_mode == "scalar":
            self.lambda_scalar = nn.Parameter(torch.tensor(self.lambda_init))
        else:
            self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
                nn.Parameter(torch.randn(self.half_dim) * 0.1) for _ in range(4)
            )
        self.head_norm = nn.RMSNorm(self.head_dim, eps=1e-5) if options.head_norm else None
        if options.talking_heads:
            self.talk_before = nn.Parameter(torch.eye(n_heads))
            self.talk_after = nn.Parameter(torch.eye(n_heads))
        else:
            self.talk_before = self.talk_after = None
        if own_terms:
            position = RelativePositionTerms(options.distance_decay, options.past_bias,
                                             options.decay_form, n_heads)
        self.position = position
        self._geometry_cache = ShapeCache()

    def reset_parameters(self) -> None:
        """The projections keep nn.Linear's own initialisation (the paper's code)."""

    def lambda_value(self) -> Tensor:
        """The current lambda, a 0-dim tensor."""
        if self.lambda_mode == "scalar":
            return self.lambda_scalar
        return (
            torch.exp(torch.dot(self.lambda_q1, self.lambda_k1))
            - torch.exp(torch.dot(self.lambda_q2, self.lambda_k2))
            + self.lambda_init
        )

    def logged_scalars(self) -> dict[str, float]:
        return {"lambda": self.lambda_value().item()}

    def _acts_on_scores(self) -> str | None:
        """What acts between the scores and the softmax, or None."""
        if self.talk_before is not None:
            return "talking heads' mixing"
        if self.position is not None and self.position.acts_on_scores:
            return "a position term on the scores"
        return None

    def group_width(self) -> int:
        return self.half_dim

    def kernel_facts(self) -> KernelFacts:
        return KernelFacts(softmax=True, between=self._acts_on_scores(),
                           band=self.block_size if self.windowed else 0,
                           group_dropout=False, dropout=self.dropout)

    def heads(self, query, key_value, call):
        """-> q, k [B, H, 2, L, half] (the two halves of each head), v [B, H, Lk, head_dim]."""
        batch, q_len, _ = query.shape
        k_len = key_value.shape[1]
        if self.windowed and q_len != k_len:
            raise ValueError(
                f"block-local self-attention needs query and key_value of one length, got "
                f"{q_len} and {k_len}; build it at a cross site (cross_attention=True) for "
                f"cross-attention"
            )
        heads, half = self.n_heads, self.half_dim
        # [B, L, 2 H half] -> [B, L, H * 2, half]: the two halves of head h are chunks 2h, 2h+1
        q = self.q_proj(query).view(batch, q_len, heads * 2, half)
        k = self.k_proj(key_value).view(batch, k_len, heads * 2, half)
        if self.position is not None:
            q = self.position.rotate(q, call.query_start)
            k = self.position.rotate(k, call.key_start)
        # [B, L, H * 2, half] -> [B, H, 2, L, half]
        q = q.view(batch, q_len, heads, 2, half).permute(0, 2, 3, 1, 4)
        k = k.view(batch, k_len, heads, 2, half).permute(0, 2, 3, 1, 4)
        return q, k, self.split(self.v_proj(key_value))  # v: [B, H, Lk, head_dim]

    def merge(self, out: Tensor) -> Tensor:
        """[B, H, Lq, d] -> the head norm (scaled by 1 - lambda_init) -> [B, Lq, E]."""
        if self.head_norm is not None:
            out = self.head_norm(out) * (1.0 - self.lambda_init)
        return super().merge(out)

    # A fused kernel runs both halves as 2H heads, v serving both; the output is the difference
    # of the two softmaxes applied to v: exactly the difference of the weights applied to v.
    def groups(self, t: Tensor) -> Tensor:
        """[B, H, 2, L, w] -> [B, 2H, L, w]."""
        batch, heads, _, length, width = t.shape
        return t.reshape(batch, 2 * heads, length, width)

    def group_values(self, v: Tensor) -> Tensor:
        """[B, H, Lk, d] -> [B, 2H, Lk, d]: each head's v for both its halves."""
        batch, heads, k_len, d = v.shape
        return v[:, :, None].expand(-1, -1, 2, -1, -1).reshape(batch, 2 * heads, k_len, d)

    def shared_values(self, v: Tensor) -> tuple[Tensor, int]:
        """v [B, H, Lk, d] as it is: both halves of head h (groups 2h, 2h + 1) read it."""
        return v, 2

    def ungroup(self, out: Tensor) -> Tensor:
        """[B, 2H, Lq, d] -> softmax(q1 k1^T) v - lambda softmax(q2 k2^T) v -> [B, Lq, E]."""
        batch, groups, q_len, d = out.shape
        first, second = out.view(batch, groups // 2, 2, q_len, d).unbind(2)
        return self.merge(first - self.lambda_value() * second)

    def blocked(self, q_len, k_len, causal, device):
        """bool [Lq, Lk], True where a query may not attend (outside its window, or in the
        future); None when every pair may."""

        def build() -> Tensor | None:
            future = self._geometry(q_len, k_len, False, causal, (0, 0), device,
                                    torch.float32).blocked
            if not self.windowed:
                return future
            return combine_masks(block_local.outside_windows(q_len, self.block_size, 1, device),
                                 future)

        return self._geometry_cache.get(("dense", q_len, k_len, causal, device), build)

    def explicit(self, q, k, v, residual, call, key_padding_mask):
        if residual is not None:  # [B, H, 2, L, l * half]: the layers' halves so far
            q, k = residual.joined()
        out, weights = self._explicit(q, k, v, self.windowed, call.causal, key_padding_mask,
                                      (call.query_start, call.key_start))
        if call.need_weights and self.windowed:
            weights = block_local.windows_to_dense(weights, q.shape[-2])
        return self.merge(out), weights

    def _explicit(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        windowed: bool,
        causal: bool,
        key_padding_mask: Tensor | None,
        starts: tuple[int, int] = (0, 0),
    ) -> tuple[Tensor, Tensor]:
        """Scores, masks, both softmaxes, the difference: -> (out [B, H, Lq, d], weights).

        q, k [B, H, 2, L, w]; v [B, H, Lk, d]. Weights are [B, H, Lq, Lk] (dense) or
        [B, H, nb, bs, width] (windows). `starts`: time steps of the first query and key.
        """
        q = q * self.scale  # on q, the smallest tensor it can go on
        q_len, k_len = q.shape[-2], k.shape[-2]
        lookahead = 0 if causal else 1  # a causal window never needs the next block
        if windowed:
            bs = self.block_size
            # [B, H, 2, nb, bs, d] @ [B, H, 2, nb, d, width] -> [B, H, 2, nb, bs, width]
            scores = block_local.query_blocks(q, bs) @ block_local.key_windows_transposed(
                k, bs, lookahead
            )
            v = block_local.key_windows(v, bs, lookahead)  # [B, H, nb, width, d]
            padding = (
                None
                if key_padding_mask is None  # [B, nb, width] -> [B, 1, 1, nb, 1, width]
                else block_local.mask_windows(key_padding_mask, bs, lookahead)[
                    :, None, None, :, None, :
                ]
            )
        else:
            scores = q @ k.transpose(-1, -2)  # [B, H, 2, Lq, Lk]
            padding = None if key_padding_mask is None else key_padding_mask[:, None, None, None, :]

        geometry = self._geometry(
            q_len, k_len, windowed, causal, starts, scores.device, scores.dtype
        )
        if self.position is not None and self.position.acts_on_scores:
            scores = self.position.score_terms(scores, geometry.distance, geometry.past)
        if self.talk_before is not None:
            # Mixing happens before masking: every mask is shared by all heads, so masked
            # positions stay masked and no -inf ever enters the mix (no NaN).
            scores = _mix_heads(scores, self.talk_before)
        probs = masked_softmax_(
            scores, combine_masks(geometry.blocked, padding), key_padding_mask is not None
        )
        # p1 - lambda * p2 in one op: [B, H, *, Lq', Lk']. unbind, not indexing: its backward
        # stacks the two gradients instead of zero-filling a full-size tensor for each.
        p1, p2 = probs.unbind(2)
        weights = torch.addcmul(p1, p2, -self.lambda_value())
        if self.talk_after is not None:
            weights = _mix_heads(weights, self.talk_after)
        dropped = F.dropout(weights, self.dropout) if self.dropout and self.training else weights
        out = dropped @ v  # [B, H, *, Lq', d]
        if windowed:
            out = block_local.blocks_to_sequence(out, q_len)  # [B, H, nb, bs, d] -> [B, H, Lq, d]
        return out, weights

    def _geometry(
        self,
        q_len: int,
        k_len: int,
        windowed: bool,
        causal: bool,
        starts: tuple[int, int],
        device,
        dtype,
    ) -> _Geometry:
        """Masks from sequence indices; distance and side from time steps (index + start)."""

        def build() -> _Geometry:
            if windowed:
                q_pos, k_pos = block_local.window_positions(
                    q_len, self.block_size, 0 if causal else 1, device
                )
                blocked = (k_pos < 0) | (k_pos >= k_len)  # [nb, 1, width]
            else:
                q_pos = torch.arange(q_len, device=device)[:, None]  # [Lq, 1]
                k_pos = torch.arange(k_len, device=device)[None, :]  # [1, Lk]
                blocked = None
            if causal:
                blocked = combine_masks(blocked, k_pos > q_pos)
            q_steps, k_steps = q_pos + starts[0], k_pos + starts[1]
            return _Geometry(blocked, *relative_geometry(q_steps, k_steps, dtype))

        key = (q_len, k_len, windowed, causal, starts, device, dtype)
        return self._geometry_cache.get(key, build)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, head_layout={self.head_layout}, "
            f"block_size={self.block_size}, "
            f"cross_attention={self.site.cross}, lambda_mode={self.lambda_mode}, "
            f"lambda_init={self.lambda_init:.3f}, dropout={self.dropout}, "
            f"kernel={self.kernel.name}"
        )

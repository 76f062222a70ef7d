"""`fourier`: the frequency-enhanced block and cross-attention (FEDformer-f, Zhou et al., ICML
2022; `MAZiqing/FEDformer` and the Time-Series-Library's `layers/FourierCorrelation.py`).

A fixed set of M Fourier modes of the token axis, chosen once when the model is built (at
random with the run's seed, the published default, or the lowest), with learned complex
weights per head, R [H, d, d, M]:

    self:   out = irfft(pad(select(rfft(q)) . R))          (reads q only)
    cross:  A = act(select(rfft(q)) . select(rfft(k))^T)   (tanh of real and imaginary parts,
            out = irfft(place(A . select(rfft(k)) . R))     or softmax of |.|; reads q and k)

with M = min(`modes`, L // 2) for a layer of L tokens (as the published code lowers it). The
self form puts the M products in the M lowest frequencies ("padding", as the paper and its code
do), the cross form back at the queries' chosen ones, divided by d_model^2 as its code does.
Every mode mixes the whole window: never causal, and only along time. The modes are kept as
buffers, so a checkpoint computes what was trained.

`layout`: `paper` returns each step's output where it belongs; `code` reproduces the published
modules' [B, H, d, L] output `.view`-ed as [B, L, H d] by the layer around it, without a
permute (MAZiqing/FEDformer issue 16), to check a number published with that code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..options import choice, option, positive
from .base import AttentionOptions
from .mechanism import MechanismAttention
from .registry import register_attention

ModeSelect = choice("ModeSelect", ("random", "lowest"))
FourierLayout = choice("FourierLayout", ("paper", "code"))
CrossActivation = choice("CrossActivation", ("tanh", "softmax"))


@dataclass
class FourierOptions(AttentionOptions):
    modes: int = option(32, positive)  # the most modes a layer keeps, of half its tokens
    # (FEDformer's: 32)
    mode_select: ModeSelect = ModeSelect.random  # random (with the run's seed) | lowest
    activation: CrossActivation = CrossActivation.tanh  # the cross form's
    layout: FourierLayout = FourierLayout.paper  # paper | code (the output viewed unpermuted)

    def token_conflict(self, tokens: int) -> tuple[str, str] | None:
        if tokens >= 2:
            return None
        return "modes", "a layer reading one token has no Fourier mode to keep"

    def _projections(self, q_len, k_len, d_model, n_heads, cross=False) -> int:
        """q (and in the cross form k) and the output; no v."""
        return 2 * d_model * (2 * q_len * d_model + (k_len * d_model if cross else 0))

    def core_flops(self, q_len, k_len, head_dim, causal, carried=1, pairs="seen",
                   cross=False) -> int:
        """The real FFTs of q (and k) and the inverse (2.5 L log2 L each, per channel), and
        the M kept modes' complex d x d products (4 real multiply-adds each); the cross form
        also scores the M x Mk modes and mixes k's."""
        modes_q = min(self.modes, q_len // 2)
        ffts = 2.5 * q_len * math.log2(q_len) * 2 * head_dim
        flops = 8 * modes_q * head_dim * head_dim
        if cross:
            modes_k = min(self.modes, k_len // 2)
            ffts += 2.5 * k_len * math.log2(k_len) * head_dim
            flops += 2 * 8 * modes_q * modes_k * head_dim
        return int(ffts) + flops

    def gate_conflict(self) -> str | None:
        if self.layout == "code":
            return "layout=code reads its [B, H, d, L] output as [B, L, E]: no block per head"
        return None

    TIME_AXIS = "its modes are frequencies along time"
    CAUSAL = "every Fourier mode mixes the whole window"
    INSIDE_POSITIONS = False
    SCORES = "the frequency-enhanced block has no q.k scores"


def choose_modes(length: int, modes: int, how: str) -> Tensor:
    """M sorted frequencies of range(length // 2): random (torch's generator, which the run
    seeds) or the lowest."""
    count = min(modes, length // 2)
    if how == "random":
        return torch.randperm(length // 2)[:count].sort().values
    return torch.arange(count)


@register_attention("fourier", FourierOptions)
class FourierAttention(MechanismAttention):
    def __init__(self, d_model: int, n_heads: int, options: FourierOptions,
                 lengths: tuple[int, int], cross_attention: bool = False):
        """`lengths`: the tokens (queries, keys) the layer reads, fixed when it is built."""
        super().__init__(d_model, n_heads, options,
                         reads=("q", "k") if cross_attention else ("q",))
        self.cross = cross_attention
        q_len, k_len = lengths
        self.register_buffer("modes_q", choose_modes(q_len, options.modes, options.mode_select))
        if cross_attention:
            self.register_buffer("modes_k",
                                 choose_modes(k_len, options.modes, options.mode_select))
        shape = (n_heads, self.head_dim, self.head_dim, len(self.modes_q))
        scale = 1.0 / (d_model * d_model)
        self.weight_real = nn.Parameter(scale * torch.rand(shape))
        self.weight_imag = nn.Parameter(scale * torch.rand(shape))

    def _attend(self, q, k, v, causal, need_weights):
        batch, heads, length, width = q.shape
        weight = torch.complex(self.weight_real, self.weight_imag)  # [H, d, d, M]
        q_ft = torch.fft.rfft(q, dim=2)[:, :, self.modes_q]  # [B, H, M, d]
        out_ft = torch.zeros(batch, heads, length // 2 + 1, width, dtype=q_ft.dtype,
                             device=q.device)
        if self.cross:
            k_ft = torch.fft.rfft(k, dim=2)[:, :, self.modes_k]  # [B, H, Mk, d]
            scores = torch.einsum("bhxe,bhye->bhxy", q_ft, k_ft)  # [B, H, M, Mk]
            if self.options.activation == "tanh":
                scores = torch.complex(scores.real.tanh(), scores.imag.tanh())
            else:
                scores = torch.softmax(scores.abs(), dim=-1).to(scores.dtype)
            mixed = torch.einsum("bhxy,bhye->bhxe", scores, k_ft)  # [B, H, M, d]
            out_ft[:, :, self.modes_q] = torch.einsum("bhxe,heox->bhxo", mixed, weight)
            out_ft = out_ft / (self.d_model * self.d_model)
        else:  # the products in the M lowest frequencies
            out_ft[:, :, : len(self.modes_q)] = torch.einsum("bhmi,hiom->bhmo", q_ft, weight)
        out = torch.fft.irfft(out_ft, n=length, dim=2)  # [B, H, L, d]
        if self.options.layout == "code":  # [B, H, d, L] read as [B, L, H * d]
            return out.transpose(2, 3).reshape(batch, length, self.d_model), None
        return self.merge(out), None

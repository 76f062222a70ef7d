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

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..options import ConfigError, choice, option, positive, refuse
from .base import AttentionOptions
from .mechanism import MechanismAttention, no_scores
from .registry import register_attention
from .site import ALONE, Site, conflict

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
                 site: Site = ALONE):
        """The modes are chosen from the tokens (queries, keys) its site reads, when built."""
        why_causal = "every Fourier mode mixes the whole window"
        site.refuse("fourier", time_axis="its modes are frequencies along time",
                    causal=why_causal,
                    residual=no_scores("the frequency-enhanced block has no q.k scores"))
        if options.layout == "code" and options.gate != "none":
            raise conflict(site.option("gate"), options.gate, site.key, "fourier",
                           "the gate scales each head's output, and layout=code reads its "
                           "[B, H, d, L] output as [B, L, E]: no block per head")
        tokens = site.fewest_tokens()
        if tokens is None:
            raise ConfigError("fourier attention chooses its modes from the tokens its layer "
                              "reads: build it with lengths=(queries, keys)")
        if tokens < 2:
            raise refuse(site.option("modes"), options.modes,
                         "a layer reading one token has no Fourier mode to keep")
        super().__init__(d_model, n_heads, options, site, causal=why_causal,
                         reads=("q", "k") if site.cross else ("q",))
        self.cross = site.cross
        q_len, k_len = site.q_len, site.k_len
        self.register_buffer("modes_q", choose_modes(q_len, options.modes, options.mode_select))
        if site.cross:
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

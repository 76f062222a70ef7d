"""The de-stationary factors of the Non-stationary Transformer (Liu et al., NeurIPS 2022; the
Time-Series-Library's `models/Nonstationary_Transformer.py`), which `attention=destationary`
reads: what normalising each window took away from attention, learned back from the window
before its norm.

    tau   = exp(min(MLP_tau(conv(x), sigma), 80))     [B]       a positive scale of the scores
    delta = MLP_delta(conv(x), mu)                    [B, S]    a shift per encoder token

x is the window [B, L, C] as the model receives it (its calendar features aside), mu and sigma
its per-channel mean and standard deviation over time (no gradient), conv a circular
convolution of kernel 3 over the channels with the L steps as its input channels (the paper's
"Projector"), and each MLP is Linear(2C, h1), ReLU, ..., Linear(h_last, out) without a bias.
S is the encoder's token count (the published model's tokens are its L steps).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn


class Factors(NamedTuple):
    tau: Tensor  # [B]
    delta: Tensor | None  # [B, S], or None where the keys are not the encoder's tokens


class FactorLearner(nn.Module):
    """The paper's Projector: (window [B, L, C], a statistic [B, 1, C]) -> [B, out]."""

    def __init__(self, channels: int, in_len: int, hidden: list[int], out: int):
        super().__init__()
        self.series_conv = nn.Conv1d(in_len, 1, kernel_size=3, padding=1,
                                     padding_mode="circular", bias=False)
        layers: list[nn.Module] = [nn.Linear(2 * channels, hidden[0]), nn.ReLU()]
        for width, following in zip(hidden, hidden[1:], strict=False):
            layers += [nn.Linear(width, following), nn.ReLU()]
        self.backbone = nn.Sequential(*layers, nn.Linear(hidden[-1], out, bias=False))

    def forward(self, window: Tensor, statistic: Tensor) -> Tensor:
        mixed = self.series_conv(window)  # [B, L, C] (L as channels) -> [B, 1, C]
        return self.backbone(torch.cat([mixed, statistic], dim=1).flatten(1))  # [B, 2C] -> out


class DestationaryFactors(nn.Module):
    def __init__(self, channels: int, in_len: int, tokens: int, hidden: list[int]):
        super().__init__()
        self.tau_learner = FactorLearner(channels, in_len, hidden, 1)
        self.delta_learner = FactorLearner(channels, in_len, hidden, tokens)

    def forward(self, window: Tensor) -> Factors:
        """window [B, L, C] -> tau [B], delta [B, S]."""
        mean = window.mean(dim=1, keepdim=True).detach()  # [B, 1, C]
        std = torch.sqrt(window.var(dim=1, keepdim=True, unbiased=False) + 1e-5).detach()
        tau = self.tau_learner(window, std).clamp(max=80.0).exp()  # [B, 1]
        return Factors(tau=tau.squeeze(-1), delta=self.delta_learner(window, mean))

"""Per-window instance normalisation inside the model (`model.instance_norm`).

The model reads each input window in normalised units and its forecast is mapped back, so
a window's level (and with RevIN its scale) costs the network nothing:

- `none`: identity.
- `last`: subtract each channel's last observed value, add it back to the forecast (NLinear).
- `revin`: RevIN (Kim et al. 2022): each channel's window mean and standard deviation,
  then a learnable per-channel affine; inverted, affine first, on the forecast. Without the
  affine (`model.revin_affine=false`, the published PatchTST's default) it is the window's
  standardisation alone.

The forecast channels (targets) are the first `n_targets` channels of the input.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

INSTANCE_NORMS = ("none", "last", "revin")


class NoNorm(nn.Module):
    def normalize(self, src: Tensor) -> tuple[Tensor, object]:
        return src, None

    def error_scale(self, stats, n_targets: int) -> Tensor | None:
        """[B, 1, T]: how much an error in normalised units weighs in the data's (scaled)
        units, per window and target channel; None where the two are the same."""
        return None

    def normalize_targets(self, values: Tensor, stats) -> Tensor:
        return values

    def denormalize_targets(self, values: Tensor, stats) -> Tensor:
        return values

    def denormalize_scale(self, values: Tensor, stats) -> Tensor:
        """values [B, L, T] in normalised units -> the data's units without the window's
        level: what a correction added to a forecast that carries the level needs."""
        return values


class LastValueNorm(NoNorm):
    def normalize(self, src: Tensor) -> tuple[Tensor, Tensor]:
        level = src[:, -1:, :]  # [B, 1, F]
        return src - level, level

    def normalize_targets(self, values: Tensor, level: Tensor) -> Tensor:
        return values - level[..., : values.shape[-1]]

    def denormalize_targets(self, values: Tensor, level: Tensor) -> Tensor:
        return values + level[..., : values.shape[-1]]


class RevIN(NoNorm):
    def __init__(self, n_features: int, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = nn.Parameter(torch.ones(n_features))
            self.bias = nn.Parameter(torch.zeros(n_features))

    def normalize(self, src: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        mean = src.mean(dim=1, keepdim=True)  # [B, 1, F]
        std = torch.sqrt(src.var(dim=1, keepdim=True, unbiased=False) + self.eps)
        normalized = (src - mean) / std
        if self.affine:
            normalized = normalized * self.weight + self.bias
        return normalized, (mean, std)

    def normalize_targets(self, values: Tensor, stats) -> Tensor:
        mean, std = stats
        t = values.shape[-1]
        normalized = (values - mean[..., :t]) / std[..., :t]
        return normalized * self.weight[:t] + self.bias[:t] if self.affine else normalized

    def error_scale(self, stats, n_targets: int) -> Tensor:
        # denormalize divides by the affine weight and multiplies by the window's std
        if not self.affine:
            return stats[1][..., :n_targets]
        return stats[1][..., :n_targets] / self.weight[:n_targets].abs().clamp_min(self.eps)

    def denormalize_targets(self, values: Tensor, stats) -> Tensor:
        mean, _ = stats
        return self.denormalize_scale(values, stats) + mean[..., : values.shape[-1]]

    def denormalize_scale(self, values: Tensor, stats) -> Tensor:
        _, std = stats
        t = values.shape[-1]
        if not self.affine:
            return values * std[..., :t]
        # A weight at exactly zero would divide by zero: keep it eps away, sign intact.
        weight = self.weight[:t]
        weight = torch.where(weight.abs() < self.eps, torch.full_like(weight, self.eps), weight)
        return (values - self.bias[:t]) / weight * std[..., :t]


def build_instance_norm(name: str, n_features: int, revin_affine: bool) -> NoNorm:
    if name == "none":
        return NoNorm()
    if name == "last":
        return LastValueNorm()
    if name == "revin":
        return RevIN(n_features, affine=revin_affine)
    raise ValueError(f"instance_norm={name!r}; allowed: {', '.join(INSTANCE_NORMS)}")

"""Learning-rate schedule: linear warm-up, then cosine decay to a floor."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def warmup_cosine_factor(step: int, total: int, warmup: int, floor: float) -> float:
    """Multiplier of the base LR at optimizer step `step` (0-based)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


class WarmupCosine:
    """A picklable LambdaLR factor (its settings are plain attributes)."""

    def __init__(self, total_steps: int, warmup_frac: float, min_lr_frac: float):
        self.total = total_steps
        self.warmup = round(warmup_frac * total_steps)
        self.floor = min_lr_frac

    def __call__(self, step: int) -> float:
        return warmup_cosine_factor(step, self.total, self.warmup, self.floor)


def warmup_cosine(
    optimizer: Optimizer, total_steps: int, warmup_frac: float, min_lr_frac: float
) -> LambdaLR:
    return LambdaLR(optimizer, WarmupCosine(total_steps, warmup_frac, min_lr_frac))

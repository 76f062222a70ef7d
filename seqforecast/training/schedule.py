"""Learning-rate schedules (`trainer.schedule`), each stepped once per optimizer step:

- `warmup_cosine`: linear warm-up over `warmup_frac` of the steps, then cosine decay to
  `min_lr_frac` of the rate.
- `type3`, `constant`: the published PatchTST code's epoch-wise schedules (its
  `adjust_learning_rate`), as that code runs them. `type3`: the rate for epochs 2-4, then
  times 0.9 at every further epoch; `constant`: the rate. In both, epoch 1 runs at lr / 25:
  the published training loop builds a OneCycleLR scheduler whatever the schedule, and its
  constructor sets the optimizer's rate to max_lr / div_factor; the epoch-wise adjustment
  only sets a rate at the end of each epoch.
- `type1`: the Time-Series-Library's (iTransformer's) halving: the rate for epochs 1 and 2,
  then half of it at every further epoch (its `adjust_learning_rate(epoch + 1)` at the end of
  each epoch sets lr * 0.5^(e - 1) for epoch e + 1); that loop has no OneCycleLR, so no lr / 25.
- `onecycle`: torch's OneCycleLR (the published code's `TST`): up to the rate over
  `pct_start` of the steps, cosine annealing down after, momentum (Adam's beta1) cycled
  between 0.85 and 0.95.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, OneCycleLR

SCHEDULES = ("warmup_cosine", "type3", "type1", "constant", "onecycle")  # build_schedule


ONECYCLE_DIV = 25.0  # OneCycleLR's default div_factor: its first rate is lr / 25


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


def published_epoch_factor(kind: str, epoch: int) -> float:
    """The published code's multiplier of the rate in `epoch` (1-based): PatchTST's type3 and
    constant, the Time-Series-Library's type1."""
    if kind == "type1":
        return 0.5 ** max(0, epoch - 2)
    if epoch == 1:
        return 1.0 / ONECYCLE_DIV
    if kind == "constant" or epoch <= 4:
        return 1.0
    return 0.9 ** (epoch - 4)  # type3: adjust(e) = lr * 0.9^(e - 3) serves epoch e + 1


class EpochWise:
    """A picklable LambdaLR factor for the epoch-wise schedules."""

    def __init__(self, kind: str, steps_per_epoch: int):
        self.kind, self.steps_per_epoch = kind, max(1, steps_per_epoch)

    def __call__(self, step: int) -> float:
        return published_epoch_factor(self.kind, step // self.steps_per_epoch + 1)


def warmup_cosine(
    optimizer: Optimizer, total_steps: int, warmup_frac: float, min_lr_frac: float
) -> LambdaLR:
    return LambdaLR(optimizer, WarmupCosine(total_steps, warmup_frac, min_lr_frac))


def build_schedule(optimizer: Optimizer, cfg: dict, steps_per_epoch: int) -> LRScheduler:
    """The scheduler `cfg["schedule"]` names (trainer config), over cfg["epochs"] epochs."""
    kind = cfg["schedule"]
    total = cfg["epochs"] * steps_per_epoch
    if kind == "warmup_cosine":
        return warmup_cosine(optimizer, total, cfg["warmup_frac"], cfg["min_lr_frac"])
    if kind in ("type3", "type1", "constant"):
        return LambdaLR(optimizer, EpochWise(kind, steps_per_epoch))
    if kind == "onecycle":
        return OneCycleLR(optimizer, max_lr=cfg["lr"], total_steps=max(1, total),
                          pct_start=cfg["pct_start"])
    raise ValueError(f"trainer.schedule={kind!r}; allowed: {', '.join(SCHEDULES)}")

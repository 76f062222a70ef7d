"""The training step's numbers, kept on the device between host syncs.

A `.item()` per step stalls a GPU's queue each step (nanoGPT syncs once per log interval).
The loop adds each step's squared error, gradient norm and a non-finite marker to device
tensors here, and `flush` reads them back once per `trainer.log_every` steps (and at an
epoch's end, a signal or a checkpoint): one device-to-host copy, and under DDP one
collective that carries everything the ranks must agree on (the error sum, a stop request,
each rank's first non-finite step).

The first non-finite step is found on the device (no sync): its step number, value and kind
are recorded, so the error still names the exact epoch and step. The steps after it in the
interval run on NaN weights, which are never saved: the loop raises at the flush, before
any checkpoint is written.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from .distributed import Distributed

KINDS = ("loss", "gradient norm")


@dataclass
class Interval:
    """What one flush says, identical on every rank."""

    steps: int
    windows: int  # global windows trained on
    mse: float  # mean squared error over those windows' values, in the data's units
    grad_norm: float  # mean gradient norm (before clipping) over the steps
    seconds: float
    fetch_seconds: float  # time spent getting batches
    stop: bool  # some rank got a signal
    bad: tuple[int, float, str] | None  # (step, value, kind) of the first non-finite step


class StepTally:
    def __init__(self, device: torch.device, ctx: Distributed):
        self.device, self.ctx = device, ctx
        self.start(0)

    def start(self, step: int) -> None:
        """A new interval after optimizer step `step`."""
        zero = torch.zeros((), dtype=torch.float64, device=self.device)
        self.squared_error, self.grad_norms = zero.clone(), zero.clone()
        # [step, value, kind] of the first non-finite step; step 0 = none yet
        self.bad = torch.zeros(3, dtype=torch.float64, device=self.device)
        self.step = torch.full((), float(step), dtype=torch.float64, device=self.device)
        self.first_step = step
        self.steps, self.windows, self.values, self.fetch_seconds = 0, 0, 0, 0.0
        self.started = time.perf_counter()

    def add(self, data_sse: Tensor, grad_norm: Tensor, windows: int, values: int,
            fetch_seconds: float) -> None:
        """One step: its squared error in data units (this rank's share), the gradient norm,
        the global windows and values it trained on."""
        self.step += 1
        sse, norm = data_sse.detach().double(), grad_norm.detach().double()
        self.squared_error += sse
        self.grad_norms += norm
        loss_bad, norm_bad = ~torch.isfinite(sse), ~torch.isfinite(norm)
        value = torch.where(loss_bad, sse / values, norm)
        kind = torch.where(loss_bad, 0.0, 1.0).double()
        found = torch.stack([self.step, value, kind])
        first = (self.bad[0] == 0) & (loss_bad | norm_bad)
        self.bad = torch.where(first, found, self.bad)
        self.steps += 1
        self.windows += windows
        self.values += values
        self.fetch_seconds += fetch_seconds

    def flush(self, stop: bool) -> Interval:
        """The interval's numbers on the host: the one sync (and, under DDP, the one
        collective) of the interval. Starts the next interval."""
        world, rank = self.ctx.world_size, self.ctx.rank
        # This rank's [squared error, gradient norm sum, first bad (step, value, kind)]: the
        # one device-to-host copy.
        local = torch.cat([self.squared_error[None], self.grad_norms[None], self.bad]).cpu()
        # [squared error, stop, then (step, value, kind) for each rank at its own slot]
        shared = torch.zeros(2 + 3 * world, dtype=torch.float64)
        shared[0], shared[1] = local[0], float(stop)
        shared[2 + 3 * rank : 5 + 3 * rank] = local[2:]
        shared = self.ctx.sum(shared).tolist()
        firsts = [shared[2 + 3 * r : 5 + 3 * r] for r in range(world)]
        bad = [f for f in firsts if f[0] > 0]
        worst = min(bad, key=lambda f: f[0]) if bad else None
        interval = Interval(
            steps=self.steps,
            windows=self.windows,
            mse=shared[0] / self.values if self.values else math.nan,
            grad_norm=local[1].item() / self.steps if self.steps else math.nan,
            seconds=time.perf_counter() - self.started,
            fetch_seconds=self.fetch_seconds,
            stop=shared[1] > 0,
            bad=None if worst is None else (int(worst[0]), worst[1], KINDS[int(worst[2])]),
        )
        self.start(self.first_step + self.steps)
        return interval

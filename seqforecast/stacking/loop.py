"""The training loop for a stack of members (model.py): one batched optimizer step for all of
them, every member's own bookkeeping.

Each member keeps the solo loop's own object (`training.loop.RunLoop`): its data, batch order
(its seed's generator), step tally, validation, early stopping, best weights, checkpoints and
monitor, exactly as a solo run keeps them. Only the step is shared: each member's next batch of
its own order from its own windows, stacked, one forward over the stack (`StackedModel`), the
sum of the members' losses backward, each member's gradients clipped by its own norm, one
optimizer step over the stacked parameters, one LR schedule (the members share a config, so
the same schedule). Before a member is scored or written, its module gets its weights from the
stack and its optimizer and schedule their state (`_export`), so best.pt and last.pt are the
checkpoints its solo run would write: `resume`, `evaluate` and `predict` read them as any.

A member that stops early (or fails) is done: its files are written as it stops, and at the
end of that epoch the stack drops it (`_shrink`: its slice of every stacked tensor and of the
optimizer's state), so the members still training pay for themselves only. A member that fails
inside an epoch is fed its windows in order, unread, until the epoch's end.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from tqdm import tqdm

from ..training.interrupts import TrainingInterrupted, stop_on_signals
from ..training.loop import LAST, NonFiniteLoss, RunLoop, make_optimizer, training_loss
from ..training.schedule import build_schedule
from .model import StackedModel, clip_member_gradients

log = logging.getLogger(__name__)


class _NoBar:
    """What a member's end_epoch updates in place of the solo run's epoch bar."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **values) -> None:
        pass


class StackedLoop:
    """`loops[k]`: member k's solo loop (its model is stack.members[k])."""

    def __init__(self, stack: StackedModel, loops: list[RunLoop], cfg: dict,
                 member_context: Callable[[int], AbstractContextManager] | None = None):
        self.stack, self.loops, self.cfg = stack, loops, cfg
        self.context = member_context or (lambda k: nullcontext())
        first = loops[0]
        sizes = {len(loop.data.train) for loop in loops}
        if len(sizes) != 1:
            raise ValueError(f"stacked members need as many training windows each: {sizes}")
        self.steps_per_epoch, self.global_batch = first.steps_per_epoch, first.global_batch
        self._build_optimizer()
        self.output, self.bf16 = first.output, first.bf16
        self.done: dict[int, BaseException | None] = {}  # member -> None (finished) or error
        self.slots = list(range(len(loops)))  # stack position -> member (loops' index)
        self.epoch = 0

    def _build_optimizer(self) -> None:
        """One optimizer over the stack's parameters as they are now, and its schedule."""
        self.optimizer = make_optimizer(self.stack.members[0], self.cfg["lr"],
                                        self.cfg["weight_decay"], self.cfg["optimizer"],
                                        stacked=self.stack.parameters())
        self.scheduler = build_schedule(self.optimizer, self.cfg, self.steps_per_epoch)

    @property
    def active(self) -> list[int]:
        return [k for k in range(len(self.loops)) if k not in self.done]

    # -- the members' files --------------------------------------------------------------

    def _export(self, k: int) -> None:
        """Member k's module, optimizer and schedule as its solo run would hold them now."""
        loop, slot = self.loops[k], self.slots.index(k)
        self.stack.sync(slot)
        loop.scheduler.load_state_dict(self.scheduler.state_dict())
        for own, stacked in zip(loop.optimizer.param_groups, self.optimizer.param_groups,
                                strict=True):
            own["lr"] = stacked["lr"]
            for p, s in zip(own["params"], stacked["params"], strict=True):
                found = self.optimizer.state.get(s)
                if found:
                    loop.optimizer.state[p] = {
                        key: value.clone() if key == "step" else value[slot].clone()
                        for key, value in found.items()}

    # -- training ------------------------------------------------------------------------

    def run(self, epochs: int, validate_initial: bool, progress: bool) -> dict[int, object]:
        """Train every member to its end; member -> TrainResult, or the exception that ended
        it (NonFiniteLoss). TrainingInterrupted (a signal) after every unfinished member
        wrote its last.pt."""
        if validate_initial:
            for k in self.active:
                with self.context(k):
                    self.loops[k].score_start()
        for loop in self.loops:
            loop.start_clock()
        bar = tqdm(total=epochs, desc=f"epochs ({len(self.loops)} stacked)", file=sys.stderr,
                   disable=None if progress else True)
        with stop_on_signals() as stop, bar:
            while self.active and self.epoch < epochs:
                self.train_epoch(stop, progress)
                self.end_epoch(stop)
                bar.update(1)
                bar.set_postfix(training=len(self.active))
        results: dict[int, object] = {}
        for k, loop in enumerate(self.loops):
            error = self.done.get(k)
            results[k] = error if error is not None else loop.result()
        return results

    def train_epoch(self, stop, progress: bool) -> None:
        self.epoch += 1
        for k in self.active:
            self.loops[k].draw_order()
        # a member that failed inside an epoch is fed its windows in order until the epoch
        # ends (then _shrink drops it); its state is left as it was
        idle = torch.arange(len(self.loops[0].data.train))
        self.orders = [self.loops[k].state.order if k not in self.done else idle
                       for k in self.slots]
        self.stack.train()
        started = time.perf_counter()
        steps = tqdm(range(self.steps_per_epoch), desc=f"epoch {self.epoch}", leave=False,
                     file=sys.stderr, disable=None if progress else True)
        for batch in steps:
            self.step(batch)
            last = batch == self.steps_per_epoch - 1
            first = self.loops[self.active[0]] if self.active else self.loops[0]
            if first.tally.steps >= first.log_every or last or stop:
                self._flush(stop)
                if stop:
                    self._interrupt(stop)
        for k in self.active:
            self.loops[k].epoch_train_seconds = time.perf_counter() - started

    def step(self, batch: int) -> None:
        """One optimizer step of every member on batch `batch` of its own order."""
        started = time.perf_counter()
        sources, targets, weights = [], [], []
        for k, order in zip(self.slots, self.orders, strict=True):
            loop = self.loops[k]
            index = order[batch * self.global_batch:(batch + 1) * self.global_batch]
            index = index.to(loop.device)
            src, target = loop.data.train.take(index)
            series = loop.data.train.series_of(index)
            sources.append(src)
            targets.append(target)
            weights.append(loop.unit_weights if series is None else loop.unit_weights[series])
        src, target = torch.stack(sources), torch.stack(targets)  # [K, b, ...]
        fetched = time.perf_counter()
        windows = src.shape[1]
        global_values = windows * self.loops[0].values_per_window
        output = self.output
        with torch.autocast(src.device.type, torch.bfloat16, enabled=self.bf16):
            prediction = (self.stack(src, target, distribution=True) if output.probabilistic
                          else self.stack(src, target))
        # the sum of each member's mean: each member's gradient is its own
        loss, squares = training_loss(output, prediction, target, 1.0 / global_values)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms = clip_member_gradients(self.stack.parameters(), self.cfg["grad_clip"])
        self.optimizer.step()
        self.scheduler.step()
        per_member = squares.detach().sum(dim=2)  # [K, b, out_len, n_targets] -> [K, b, n_targets]
        for slot, k in enumerate(self.slots):
            if k in self.done:
                continue
            loop = self.loops[k]
            data_sse = (per_member[slot] * weights[slot]).sum()
            loop.tally.add(data_sse, norms[slot], windows, global_values, fetched - started)
            loop.state.step += 1
            loop.state.next_batch += 1

    def _flush(self, stop) -> None:
        for k in self.active:
            loop = self.loops[k]
            with self.context(k):
                loop.scheduler.load_state_dict(self.scheduler.state_dict())  # the logged lr
                try:
                    loop.flush(self.epoch, stop)
                except NonFiniteLoss as err:
                    self._finish(k, err)

    def _interrupt(self, stop) -> None:
        """Every unfinished member's last.pt at this step, then the stop."""
        for k in self.active:
            loop = self.loops[k]
            with self.context(k):
                self._export(k)
                loop._clock()
                loop.save(LAST)
        raise TrainingInterrupted(stop.signum or signal.SIGTERM, self.epoch,
                                  self.loops[self.active[0]].state.step if self.active else 0)

    def end_epoch(self, stop) -> None:
        interrupted = None
        for k in self.active:
            loop = self.loops[k]
            with self.context(k):
                self._export(k)
                try:
                    loop.end_epoch(stop, _NoBar())
                except TrainingInterrupted as err:  # every member saves before the stop
                    interrupted = err
                except NonFiniteLoss as err:
                    self._finish(k, err)
                    continue
            if loop.state.stopped_early or loop.state.epoch >= self.cfg["epochs"]:
                self._finish(k, None)
        if interrupted is not None:
            raise interrupted
        if self.active and len(self.active) < len(self.slots):
            self._shrink()

    def _shrink(self) -> None:
        """Drop the finished members from the stack: the parameters, buffers and optimizer
        state keep the slices of the members still training; the schedule goes on where it
        was. The same update as before for every kept member (Adam's is elementwise)."""
        keep = [slot for slot, k in enumerate(self.slots) if k not in self.done]
        log.info("after epoch %d, %d of the stack's %d members train on: the stack drops the "
                 "rest", self.epoch, len(keep), len(self.slots))
        optimizer_state = self.optimizer.state_dict()
        schedule_state = self.scheduler.state_dict()
        index = torch.tensor(keep, dtype=torch.long)
        for state in optimizer_state["state"].values():
            for key, value in state.items():
                if key != "step" and torch.is_tensor(value) and value.dim() > 0:
                    state[key] = value.index_select(0, index.to(value.device))
        self.stack.keep(keep)
        self.slots = [self.slots[slot] for slot in keep]
        # the schedule first: building it sets the groups' lr, which the state then restores
        self._build_optimizer()
        self.scheduler.load_state_dict(schedule_state)
        self.optimizer.load_state_dict(optimizer_state)

    def _finish(self, k: int, error: BaseException | None) -> None:
        self.done[k] = error
        if error is not None:
            with self.context(k):
                log.error("%s", error)


"""The training loop: AdamW (or Adam), an LR schedule (schedule.py), gradient clipping, early
stopping on validation MSE, best and last checkpoints in the run dir, exact resume.

Everything the loop needs to continue is in `last.pt`: weights, optimizer, LR schedule, the
loop counters and early-stopping state (`LoopState`), the batch-order generator and every
global RNG (of every rank). It is written at each epoch end and, on SIGINT/SIGTERM, at the
step boundary where the run stops (then also with the epoch's batch order and the next batch).
Resuming from it on CPU reproduces the uninterrupted run bit for bit.

Under DDP (distributed.py) every rank runs this loop on its share of each global batch; the
decisions that must agree (stop on a signal, stop on a non-finite loss, early stopping) are
taken on values all ranks share, and only rank 0 writes checkpoints.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm import tqdm

from ..data import ForecastData
from ..probabilistic.outputs import PointOutput
from ..stats import paired_ratio
from .checkpoint import RunError, load_checkpoint, save_checkpoint
from .distributed import SINGLE, Distributed, unwrap
from .evaluation import Evaluator
from .interrupts import TrainingInterrupted, stop_on_signals
from .monitor import Monitor
from .rng import capture_rng, restore_rng
from .schedule import build_schedule
from .tally import Interval, StepTally

log = logging.getLogger(__name__)

BEST, LAST = "best.pt", "last.pt"
OPTIMIZERS = ("adamw", "adam")  # make_optimizer
SELECT_ON = ("mse", "mse_scaled", "loss")  # the validation number that picks the best epoch
PRECISIONS = ("fp32", "bf16")  # bf16: autocast on training forward passes


class NonFiniteLoss(RuntimeError):
    """Training diverged; str(err) names the epoch and step."""


@dataclass
class TrainResult:
    steps: int
    best_val_mse: float
    best_epoch: int
    epochs_run: int
    stopped_early: bool
    seconds: float


@dataclass
class LoopState:
    """The loop's counters and early-stopping state; what `last.pt` carries besides weights."""

    epoch: int = 0  # epochs completed
    step: int = 0  # optimizer steps taken
    best_mse: float = math.inf
    best_epoch: int = 0  # 0: no best checkpoint yet
    best_blocks: list[float] | None = None  # the best epoch's validation MSE per block of time
    since_best: int = 0
    stopped_early: bool = False
    seconds: float = 0.0  # training time over all sessions
    history: list[dict] = field(default_factory=list)
    # Inside an epoch (after an interrupt): its batch order, the next batch, and the training
    # MSE so far (data units): the sum of batch MSE x batch windows, over `seen` windows.
    order: Tensor | None = None
    next_batch: int = 0
    mse_sum: float = 0.0
    seen: int = 0


def make_optimizer(model: nn.Module, lr: float, weight_decay: float, kind: str,
                   stacked: list[Tensor] | None = None) -> torch.optim.Optimizer:
    """AdamW with decay on matrices only: biases, norms and scalars (lambda, position terms)
    are not pulled towards zero. `adam`: plain Adam, no decay (the published PatchTST's).
    `stacked`: tensors to step in place of model's parameters, one for each in order (a
    stack's [K, ...], seqforecast/stacking): grouped by the model's own shapes.

    The update runs fused (one kernel over every parameter) where torch has that kernel for
    the parameters' device: the same update to float rounding, and on the CPU several times
    faster than the per-parameter loop torch picks there by default (3 ms against 15 for
    TimeXer's 1.8M weights, one thread; docs/timexer.md#speed)."""
    own = list(model.parameters())
    stepped = own if stacked is None else stacked
    pairs = [(p, s) for p, s in zip(own, stepped, strict=True) if p.requires_grad]
    params = [s for _, s in pairs]
    fused = _fused_supported(params)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, fused=fused)
    groups = [
        {"params": [s for p, s in pairs if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [s for p, s in pairs if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, fused=fused)


def _fused_supported(params: list[Tensor]) -> bool | None:
    """True where every parameter is a floating tensor on a device with torch's fused Adam
    (the CPU and CUDA); None (torch's own choice) elsewhere."""
    devices = {p.device.type for p in params}
    if params and devices <= {"cpu", "cuda"} and all(p.is_floating_point() for p in params):
        return True
    return None


def training_loss(output, prediction: Tensor, target: Tensor, scale: float
                  ) -> tuple[Tensor, Tensor]:
    """(the loss to backpropagate: the summed squared error, or a probabilistic output's own
    loss, times `scale`; the squared error of the point forecast, for the logs' MSE).
    prediction [..., out_len, n_targets] (a probabilistic output's: [..., K] more), target
    [..., out_len, n_targets]; any leading axes (a batch, a stack's members and its batch)."""
    if output.probabilistic:  # trained on its own loss
        params = prediction.float()
        loss = output.loss(params, target).sum() * scale
        squares = (output.point(params).detach() - target).square()
    else:
        squares = (prediction.float() - target).square()
        loss = squares.sum() * scale
    return loss, squares


def clip_gradients(params, max_norm: float) -> Tensor:
    """The gradients' total 2-norm before clipping (a tensor: no host sync), the gradients
    scaled down to `max_norm` where it is > 0. With no clipping (0) only the norm is computed:
    clip_grad_norm_ at an infinite max_norm would still multiply every gradient by 1, a
    pass over all of them each step (0.6 ms of TimeXer's 42 ms here)."""
    if max_norm:
        return nn.utils.clip_grad_norm_(params, max_norm)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    # torch._foreach_norm is clip_grad_norm_'s own per-tensor norm (one kernel launch per device)
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)


def train_model(
    model: nn.Module,
    data: ForecastData,
    trainer_cfg: dict,
    checkpoint_dir: Path,
    seed: int,
    config_yaml: str,
    monitor: Monitor | None = None,
    resume: dict | None = None,
    ctx: Distributed = SINGLE,
    progress: bool = True,
    data_state: dict | None = None,
    evaluator: Evaluator | None = None,
    kernels: str = "torch",
) -> TrainResult:
    """Train `model` (possibly DDP-wrapped) in place, from `resume` (a loaded last.pt) when
    given; on return it holds the best validation weights. `progress`: tqdm bars on stderr
    (when it is a terminal). `data_state` (columns, rows, scaler) goes into every checkpoint,
    for evaluating and predicting later. `evaluator` scores the validation set each epoch (by
    default one with no seasonal baseline). `kernels`: the set the model runs (seqforecast/native),
    recorded in every checkpoint. Raises NonFiniteLoss or TrainingInterrupted.

    The training error is logged as `train/mse` in the data's own units, like every
    validation and test metric: the squared error of each target channel times its scale²."""
    loop = RunLoop(model, data, trainer_cfg, Path(checkpoint_dir), seed, config_yaml,
                   monitor or Monitor(), ctx, data_state,
                   evaluator or Evaluator(data, {}, trainer_cfg["eval_batch_size"]), kernels)
    if resume is not None:
        loop.restore(resume)
    elif trainer_cfg["validate_initial"]:
        loop.score_start()
    hide_bars = None if progress else True  # tqdm's disable=None: bars only on a terminal
    epochs = trainer_cfg["epochs"]
    bar = tqdm(total=epochs, initial=loop.state.epoch, desc="epochs", file=sys.stderr,
               disable=hide_bars)
    loop.start_clock()  # training time: epoch 0's validation is not part of it
    with stop_on_signals() as stop, bar:
        while loop.state.epoch < epochs and not loop.state.stopped_early:
            loop.train_epoch(stop, hide_bars)
            loop.end_epoch(stop, bar)
    return loop.result()


class RunLoop:
    """The loop's pieces: one optimizer step, an epoch of them, the epoch's end (validation,
    early stopping, checkpoints), and what makes a run resumable."""

    def __init__(self, model, data, cfg, checkpoint_dir, seed, config_yaml, monitor, ctx,
                 data_state, evaluator, kernels="torch"):
        self.model, self.net, self.data, self.cfg = model, unwrap(model), data, cfg
        self.checkpoint_dir, self.config_yaml, self.data_state = (
            checkpoint_dir,
            config_yaml,
            data_state,
        )
        self.monitor, self.ctx, self.evaluator = monitor, ctx, evaluator
        self.kernels = kernels
        self.device = data.train.device
        # Series steps one window feeds the model (input + forecast), for tokens/s.
        self.window_tokens = data.train.in_len + data.train.out_len
        self.values_per_window = data.train.out_len * data.n_targets
        # What the model forecasts (probabilistic/outputs.py): a point unless `loss` says
        self.output = getattr(self.net, "output", None) or PointOutput()
        # Squared error in model units -> data units: [n_targets], or [S, n_targets] for a
        # panel (each step picks its windows' rows).
        self.unit_weights = data.squared_error_weights(self.device)
        self.global_batch = cfg["batch_size"] * ctx.world_size
        # drop_last: the last incomplete batch of each epoch's order is left out (as the
        # published PatchTST's loader; BatchNorm then never sees a batch of a few windows).
        rounding = math.floor if cfg["drop_last"] else math.ceil
        self.steps_per_epoch = rounding(len(data.train) / self.global_batch)
        if self.steps_per_epoch == 0:
            raise RunError(
                f"trainer.drop_last=true with a batch of {self.global_batch} windows and "
                f"{len(data.train)} training windows leaves no batch: lower trainer.batch_size "
                f"or set trainer.drop_last=false"
            )
        self.log_every = cfg["log_every"]
        self.optimizer = make_optimizer(model, cfg["lr"], cfg["weight_decay"], cfg["optimizer"])
        self.scheduler = build_schedule(self.optimizer, cfg, self.steps_per_epoch)
        self.bf16 = cfg["precision"] == "bf16"
        # The validation metric that picks the best epoch and stops early: MSE in the data's
        # units, or in the scaled units (CSV data; the long-horizon tables' units), or the
        # model's own training loss (`loss`: a probabilistic model's proper score).
        self.select_on = cfg["select_on"]
        # the validation loss is logged where it says more than the MSE does
        self.log_loss = self.output.probabilistic or self.select_on == "loss"
        # > 0: an epoch counts as better only if it is lower beyond noise, block by block.
        self.blocks = cfg["selection_blocks"]
        self.shuffle = torch.Generator().manual_seed(seed)  # batch order: CPU, any device
        self.state, self.best_weights = LoopState(), None
        self.tally = StepTally(self.device, ctx)
        self.session_start, self.seconds_before = time.perf_counter(), 0.0
        self.epoch_train_seconds = 0.0

    # -- resuming and checkpoints ----------------------------------------------------------

    def restore(self, resume: dict) -> None:
        ctx = self.ctx
        if len(resume["rng"]) != ctx.world_size:
            raise RunError(
                f"last.pt comes from a run on {len(resume['rng'])} process(es); resume it on "
                f"as many (torchrun --nproc_per_node), not {ctx.world_size}"
            )
        self.net.load_state_dict(resume["model"])
        self.optimizer.load_state_dict(resume["optimizer"])
        self.scheduler.load_state_dict(resume["scheduler"])
        self.shuffle.set_state(resume["shuffle"])
        self.state = LoopState(**resume["loop"])
        self.seconds_before = self.state.seconds
        self.tally.start(self.state.step)
        if math.isfinite(self.state.best_mse):  # rank 0 reads it: others need not see the dir
            self.best_weights = ctx.broadcast(
                load_checkpoint(self.checkpoint_dir / BEST)["model"] if ctx.is_main else None
            )
        restore_rng(resume["rng"][ctx.rank])  # last: nothing above may draw from them
        log.info("resuming after epoch %d, step %d", self.state.epoch, self.state.step)

    def save(self, name: str) -> None:
        rng = self.ctx.gather(capture_rng())  # collective: every rank calls save
        if not self.ctx.is_main:
            return
        state = self.state
        save_checkpoint(
            self.checkpoint_dir / name,
            {
                "model": self.net.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "shuffle": self.shuffle.get_state(),
                "rng": rng,  # one state per rank
                "loop": asdict(state),
                "epoch": state.epoch,
                "step": state.step,
                "world_size": self.ctx.world_size,
                "config": self.config_yaml,
                "data_state": self.data_state,
                "kernels": self.kernels,
            },
        )

    def start_clock(self) -> None:
        self.session_start = time.perf_counter()

    def _clock(self) -> None:
        self.state.seconds = self.seconds_before + time.perf_counter() - self.session_start

    # -- epoch 0 ----------------------------------------------------------------------------

    def score_start(self) -> None:
        """Epoch 0: the weights training starts from compete for "best" like any epoch's, so
        a start that is already good (the linear path's least-squares fit) is kept unless
        training improves on it on validation."""
        val = self.evaluator.model_metrics(self.net, "val", self.blocks)
        self.state.best_mse = val[self.select_on]
        self.state.best_blocks = self._block_mse()
        self.best_weights = _snapshot(self.net)
        self.state.history.append({"epoch": 0, "step": 0, **_val_record(val, self.log_loss)})
        self.monitor.on_epoch_end(0, 0, self.net, val)
        log.info("epoch 0 (before training)  %s", _val_text(val, self.log_loss))
        self.save(BEST)

    # -- training ---------------------------------------------------------------------------

    def train_epoch(self, stop, hide_bars) -> None:
        state = self.state
        epoch = state.epoch + 1
        if state.order is None:  # else a resumed epoch goes on in its own order
            self.draw_order()
        self.model.train()
        bar = tqdm(range(state.next_batch, self.steps_per_epoch), total=self.steps_per_epoch,
                   initial=state.next_batch, desc=f"epoch {epoch}", leave=False,
                   file=sys.stderr, disable=hide_bars)
        started = time.perf_counter()
        for batch in bar:
            self.step(batch)
            last = batch == self.steps_per_epoch - 1
            # One host sync per interval; a signal in one process is seen at once (it
            # needs no collective), under DDP at the interval's end.
            signal_now = bool(stop) and not self.ctx.enabled
            if self.tally.steps >= self.log_every or last or signal_now:
                interval = self.flush(epoch, stop)
                bar.set_postfix(train_mse=f"{interval.mse:.4g}")
                if interval.stop:
                    self._clock()
                    self.save(LAST)
                    raise TrainingInterrupted(stop.signum or signal.SIGTERM, epoch, state.step)
        self.epoch_train_seconds = time.perf_counter() - started

    def draw_order(self) -> None:
        """A new epoch's batch order from the run's shuffle stream, its tallies at zero."""
        state = self.state
        state.order = torch.randperm(len(self.data.train), generator=self.shuffle)
        state.next_batch, state.mse_sum, state.seen = 0, 0.0, 0

    def step(self, batch: int) -> None:
        """One optimizer step on global batch `batch` of the epoch's order. No host sync:
        its numbers stay on the device (`StepTally`)."""
        started = time.perf_counter()
        state, ctx = self.state, self.ctx
        index = state.order[batch * self.global_batch : (batch + 1) * self.global_batch]
        local = ctx.shard(index).to(self.device)
        src, target = self.data.train.take(local)  # a panel gathers its windows here
        series = self.data.train.series_of(local)
        weights = self.unit_weights if series is None else self.unit_weights[series]
        fetched = time.perf_counter()
        # The summed loss (the squared error, or a probabilistic output's: `loss` group)
        # scaled so that the ranks' average gradient is the global batch's mean (world size
        # 1: the plain mean).
        global_values = len(index) * self.values_per_window
        output = self.output
        with torch.autocast(src.device.type, torch.bfloat16, enabled=self.bf16):
            prediction = (self.model(src, target, distribution=True) if output.probabilistic
                          else self.model(src, target))
        loss, squares = training_loss(output, prediction, target,
                                      ctx.world_size / global_values)
        # The same error in the data's units, for the logs: [b, n_targets] x weights -> scalar
        data_sse = (squares.detach().sum(dim=1) * weights).sum()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clip_gradients(self.model.parameters(), self.cfg["grad_clip"])
        self.optimizer.step()
        self.scheduler.step()
        self.tally.add(data_sse, grad_norm, len(index), global_values, fetched - started)
        state.step += 1
        state.next_batch += 1

    def flush(self, epoch: int, stop) -> Interval:
        """The interval's numbers on the host (the sync); stops on a non-finite step, naming
        it; logs the train/* scalars."""
        interval = self.tally.flush(bool(stop))
        if interval.bad is not None:
            step, value, kind = interval.bad
            raise _diverged(f"{kind} {value}", epoch, self.state, step)
        state = self.state
        state.mse_sum += interval.mse * interval.windows
        state.seen += interval.windows
        self.monitor.on_step(
            state.step,
            {
                "mse": interval.mse,
                "lr": self.scheduler.get_last_lr()[0],
                "grad_norm": interval.grad_norm,
                "tokens_per_s": interval.windows * self.window_tokens / interval.seconds,
                "data_fraction": interval.fetch_seconds / interval.seconds,
            },
        )
        return interval

    # -- an epoch's end ---------------------------------------------------------------------

    def end_epoch(self, stop, bar) -> None:
        """Validate, keep the best weights, stop early, write checkpoints. Every rank
        evaluates the same weights on the same windows: equal numbers, so early stopping
        agrees without a message."""
        state, cfg = self.state, self.cfg
        epoch = state.epoch + 1
        started = time.perf_counter()
        val = self.evaluator.model_metrics(self.net, "val", self.blocks)
        val_seconds = time.perf_counter() - started
        value = val[self.select_on]  # what selection reads (trainer.select_on)
        if not math.isfinite(value):
            raise _diverged(f"validation {self.select_on} {value}", epoch, state)
        self.monitor.on_epoch_end(epoch, state.step, self.net, val)
        record = {
            "epoch": epoch,
            "step": state.step,
            "train_mse": state.mse_sum / state.seen,
            **_val_record(val, self.log_loss),
            "lr": self.scheduler.get_last_lr()[0],
            # The epoch's optimizer steps (with their batches' gathering) and its validation.
            "train_seconds": round(self.epoch_train_seconds, 3),
            "val_seconds": round(val_seconds, 3),
        }
        state.history.append(record)
        state.epoch, state.order = epoch, None
        # An epoch counts as better only by a margin (trainer.min_improvement, relative):
        # on a small validation set, a 0.1% dip is noise, and "best" should not be luck.
        improved = value < state.best_mse * (1.0 - cfg["min_improvement"])
        blocks = self._block_mse()
        if improved and blocks and state.best_blocks:
            # Lower overall is not enough: lower beyond noise over stretches of time.
            improved = beyond_noise(blocks, state.best_blocks)
        if improved:
            state.best_mse, state.best_epoch, state.since_best = value, epoch, 0
            state.best_blocks = blocks
            self.best_weights = _snapshot(self.net)
        else:
            state.since_best += 1
        patience = cfg["patience"]
        state.stopped_early = bool(patience) and state.since_best >= patience
        self._clock()
        bar.update(1)
        bar.set_postfix(train_mse=f"{record['train_mse']:.4g}", val=f"{value:.4g}")
        log.info(
            "epoch %d/%d  train_mse %.6g  %s  lr %.3g%s",
            epoch, cfg["epochs"], record["train_mse"], _val_text(val, self.log_loss), record["lr"],
            "  (best)" if improved else "",
        )
        if improved:
            self.save(BEST)
        self.save(LAST)
        if state.stopped_early:
            log.info("early stop: no val_%s improvement for %d epochs", self.select_on, patience)
        if self._agreed_stop(stop):
            raise TrainingInterrupted(stop.signum or signal.SIGTERM, epoch, state.step)

    def _block_mse(self) -> list[float] | None:
        return self.evaluator.block_mse("val", self.select_on) if self.blocks else None

    def _agreed_stop(self, stop) -> bool:
        """A signal counts once any rank got it, so every rank stops at the same step."""
        flag = torch.tensor([float(bool(stop))], dtype=torch.float64)
        return self.ctx.sum(flag).item() > 0

    def result(self) -> TrainResult:
        if self.best_weights is not None:  # None: no epoch trained or scored (epochs=0)
            self.net.load_state_dict(self.best_weights)
        state = self.state
        return TrainResult(
            steps=state.step,
            best_val_mse=state.best_mse,
            best_epoch=state.best_epoch,
            epochs_run=state.epoch,
            stopped_early=state.stopped_early,
            seconds=state.seconds,
        )


def beyond_noise(candidate: list[float], best: list[float]) -> bool:
    """Is `candidate` lower than `best` beyond noise? Their paired MSE ratio over the blocks
    both have (geometric mean, 95% Student-t interval on the log ratios, as compare's) lies
    wholly below 1."""
    pairs = [(c, b) for c, b in zip(candidate, best, strict=True) if c > 0 and b > 0]
    found = paired_ratio({k: c for k, (c, _) in enumerate(pairs)},
                         {k: b for k, (_, b) in enumerate(pairs)})
    return found.n >= 2 and found.high < 1.0


def _val_record(val: dict, with_loss: bool) -> dict:
    """The validation errors an epoch's history keeps: val_mse (data units), val_mse_scaled
    where the data has scaled units, and val_loss (the model's training loss) `with_loss`."""
    keys = ("mse", "mse_scaled", "loss") if with_loss else ("mse", "mse_scaled")
    return {f"val_{k}": val[k] for k in keys if k in val}


def _val_text(val: dict, with_loss: bool) -> str:
    scaled = f"  val_mse_scaled {val['mse_scaled']:.6g}" if "mse_scaled" in val else ""
    loss = f"  val_loss {val['loss']:.6g}" if with_loss and "loss" in val else ""
    return f"val_mse {val['mse']:.6g} (data units){scaled}{loss}"


def _snapshot(net: nn.Module) -> dict[str, Tensor]:
    """A copy of the weights, kept as the best while training goes on."""
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _diverged(what: str, epoch: int, state: LoopState, step: int | None = None) -> NonFiniteLoss:
    kept = (
        f"best.pt (epoch {state.best_epoch}) and last.pt (epoch {state.epoch}) are untouched"
        if state.best_epoch
        else "no checkpoint was written"
    )
    return NonFiniteLoss(
        f"non-finite {what} at epoch {epoch}, step {step or state.step + 1}: training stopped; "
        f"{kept}"
    )

"""The training loop: AdamW, warm-up + cosine LR, gradient clipping, early stopping on
validation MSE, best and last checkpoints in the run dir, exact resume.

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
from .checkpoint import load_checkpoint, save_checkpoint
from .distributed import SINGLE, Distributed, unwrap
from .evaluation import Evaluator
from .interrupts import TrainingInterrupted, stop_on_signals
from .monitor import Monitor
from .restore import RunError
from .rng import capture_rng, restore_rng
from .schedule import warmup_cosine

log = logging.getLogger(__name__)

BEST, LAST = "best.pt", "last.pt"


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
    history: list[dict] = field(default_factory=list)


@dataclass
class LoopState:
    """The loop's counters and early-stopping state; what `last.pt` carries besides weights."""

    epoch: int = 0  # epochs completed
    step: int = 0  # optimizer steps taken
    best_mse: float = math.inf
    best_epoch: int = 0  # 0: no best checkpoint yet
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


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with decay on matrices only: biases, norms and scalars (lambda, position terms)
    are not pulled towards zero."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


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
) -> TrainResult:
    """Train `model` (possibly DDP-wrapped) in place, from `resume` (a loaded last.pt) when
    given; on return it holds the best validation weights. `progress`: tqdm bars on stderr
    (when it is a terminal). `data_state` (columns, rows, scaler) goes into every checkpoint,
    for evaluating and predicting later. `evaluator` scores the validation set each epoch (by
    default one with no seasonal baseline). Raises NonFiniteLoss or TrainingInterrupted.

    The training error is logged as `train/mse` in the data's own units, like every
    validation and test metric: the squared error of each target channel times its scale²."""
    monitor = monitor or Monitor()
    evaluator = evaluator or Evaluator(data, {}, trainer_cfg["eval_batch_size"])
    checkpoint_dir = Path(checkpoint_dir)
    net = unwrap(model)  # the plain model: evaluation, state dicts
    # Series steps one window feeds the model (input + forecast), for tokens/s.
    window_tokens = data.train.in_len + data.train.out_len
    values_per_window = data.train.out_len * data.n_targets
    epochs, batch_size = trainer_cfg["epochs"], trainer_cfg["batch_size"]
    global_batch = batch_size * ctx.world_size
    steps_per_epoch = math.ceil(len(data.train) / global_batch)
    optimizer = make_optimizer(model, trainer_cfg["lr"], trainer_cfg["weight_decay"])
    scheduler = warmup_cosine(
        optimizer, epochs * steps_per_epoch, trainer_cfg["warmup_frac"], trainer_cfg["min_lr_frac"]
    )
    bf16 = trainer_cfg["precision"] == "bf16"
    shuffle = torch.Generator().manual_seed(seed)  # batch order: on the CPU, device-independent
    state, best_weights = LoopState(), None
    if resume is not None:
        if len(resume["rng"]) != ctx.world_size:
            raise RunError(
                f"last.pt comes from a run on {len(resume['rng'])} process(es); resume it on "
                f"as many (torchrun --nproc_per_node), not {ctx.world_size}"
            )
        net.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        shuffle.set_state(resume["shuffle"])
        state = LoopState(**resume["loop"])
        if math.isfinite(state.best_mse):  # rank 0 reads it: others need not see the run dir
            best_weights = ctx.broadcast(
                load_checkpoint(checkpoint_dir / BEST)["model"] if ctx.is_main else None
            )
        restore_rng(resume["rng"][ctx.rank])  # last: nothing above may draw from them
        log.info("resuming after epoch %d, step %d", state.epoch, state.step)

    def save(name: str) -> None:
        rng = ctx.gather(capture_rng())  # collective: every rank calls save
        if not ctx.is_main:
            return
        save_checkpoint(
            checkpoint_dir / name,
            {
                "model": net.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "shuffle": shuffle.get_state(),
                "rng": rng,  # one state per rank
                "loop": asdict(state),
                "epoch": state.epoch,
                "step": state.step,
                "world_size": ctx.world_size,
                "config": config_yaml,
                "data_state": data_state,
            },
        )

    def agreed_stop() -> bool:
        """A signal counts once any rank got it, so every rank stops at the same step."""
        return ctx.sum(torch.tensor([float(bool(stop))], dtype=torch.float64)).item() > 0

    if resume is None and trainer_cfg.get("validate_initial", False):
        # Epoch 0: the weights training starts from compete for "best" like any epoch's, so a
        # start that is already good (the linear path's least-squares fit) is kept unless
        # training improves on it on validation.
        val = evaluator.model_metrics(net, "val")
        state.best_mse = val["mse"]
        best_weights = _snapshot(net)
        state.history.append({"epoch": 0, "step": 0, "val_mse": val["mse"]})
        monitor.on_epoch_end(0, 0, net, val)
        log.info("epoch 0 (before training)  val_mse %.6g (data units)", val["mse"])
        save(BEST)

    session_start = time.perf_counter()
    seconds_before = state.seconds
    hide_bars = None if progress else True  # tqdm's disable=None: bars only on a terminal
    epoch_bar = tqdm(
        total=epochs, initial=state.epoch, desc="epochs", file=sys.stderr, disable=hide_bars
    )
    with stop_on_signals() as stop, epoch_bar:
        while state.epoch < epochs and not state.stopped_early:
            epoch = state.epoch + 1
            if state.order is None:
                state.order = torch.randperm(len(data.train), generator=shuffle)
                state.next_batch, state.mse_sum, state.seen = 0, 0.0, 0
            model.train()
            step_bar = tqdm(
                range(state.next_batch, steps_per_epoch),
                total=steps_per_epoch,
                initial=state.next_batch,
                desc=f"epoch {epoch}",
                leave=False,
                file=sys.stderr,
                disable=hide_bars,
            )
            for batch in step_bar:
                started = time.perf_counter()
                index = state.order[batch * global_batch : (batch + 1) * global_batch]
                local = ctx.shard(index).to(data.train.device)
                src, target = data.train.take(local)  # a panel gathers its windows here
                # [n_targets], or [b, n_targets] for a panel (each series its own scale)
                unit_weights = data.squared_error_weights(src.device, data.train.series_of(local))
                fetched = time.perf_counter()
                # Summed squared error scaled so that the ranks' average gradient is the
                # global batch's mean (world size 1: the plain MSE).
                global_values = len(index) * values_per_window
                with torch.autocast(src.device.type, torch.bfloat16, enabled=bf16):
                    prediction = model(src, target)
                squares = (prediction.float() - target).square()  # [b, out_len, n_targets]
                loss = squares.sum() * (ctx.world_size / global_values)
                # The same error in the data's units, for the logs: [n_targets] -> scalar
                data_sse = (squares.detach().sum(dim=1) * unit_weights).sum()
                shared = ctx.sum(  # [global squared error (data units), ranks with a signal]
                    torch.tensor([data_sse.item(), float(bool(stop))], dtype=torch.float64)
                )
                mse_value = shared[0].item() / global_values
                if not math.isfinite(mse_value):
                    raise _diverged(f"loss {mse_value}", epoch, state)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                # The norm before clipping; max_norm=inf only measures it.
                max_norm = trainer_cfg["grad_clip"] or math.inf
                grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
                if not math.isfinite(grad_norm):
                    raise _diverged(f"gradient norm {grad_norm}", epoch, state)
                lr = scheduler.get_last_lr()[0]
                optimizer.step()
                scheduler.step()
                state.step += 1
                state.next_batch += 1
                state.mse_sum += mse_value * len(index)
                state.seen += len(index)
                step_bar.set_postfix(train_mse=f"{mse_value:.4g}")
                seconds = time.perf_counter() - started
                monitor.on_step(
                    state.step,
                    {
                        "mse": mse_value,
                        "lr": lr,
                        "grad_norm": grad_norm,
                        "tokens_per_s": len(index) * window_tokens / seconds,
                        "data_fraction": (fetched - started) / seconds,
                    },
                )
                if shared[1].item() > 0:
                    state.seconds = seconds_before + time.perf_counter() - session_start
                    save(LAST)
                    raise TrainingInterrupted(stop.signum or signal.SIGTERM, epoch, state.step)

            # Every rank evaluates the same weights on the same windows: equal numbers, so
            # early stopping agrees without a message.
            val = evaluator.model_metrics(net, "val")
            if not math.isfinite(val["mse"]):
                raise _diverged(f"validation MSE {val['mse']}", epoch, state)
            monitor.on_epoch_end(epoch, state.step, net, val)
            record = {
                "epoch": epoch,
                "step": state.step,
                "train_mse": state.mse_sum / state.seen,
                "val_mse": val["mse"],
                "lr": scheduler.get_last_lr()[0],
            }
            state.history.append(record)
            state.epoch, state.order = epoch, None
            # An epoch counts as better only by a margin (trainer.min_improvement, relative):
            # on a small validation set, a 0.1% dip is noise, and "best" should not be luck.
            margin = 1.0 - trainer_cfg.get("min_improvement", 0.0)
            improved = val["mse"] < state.best_mse * margin
            if improved:
                state.best_mse, state.best_epoch, state.since_best = val["mse"], epoch, 0
                best_weights = _snapshot(net)
            else:
                state.since_best += 1
            patience = trainer_cfg["patience"]
            state.stopped_early = bool(patience) and state.since_best >= patience
            state.seconds = seconds_before + time.perf_counter() - session_start
            epoch_bar.update(1)
            epoch_bar.set_postfix(
                train_mse=f"{record['train_mse']:.4g}", val_mse=f"{val['mse']:.4g}"
            )
            log.info(
                "epoch %d/%d  train_mse %.6g  val_mse %.6g (data units)  lr %.3g%s",
                epoch, epochs, record["train_mse"], val["mse"], record["lr"],
                "  (best)" if improved else "",
            )  # fmt: skip
            if improved:
                save(BEST)
            save(LAST)
            if state.stopped_early:
                log.info("early stop: no val_mse improvement for %d epochs", patience)
            if agreed_stop():
                raise TrainingInterrupted(stop.signum or signal.SIGTERM, epoch, state.step)

    net.load_state_dict(best_weights)
    return TrainResult(
        steps=state.step,
        best_val_mse=state.best_mse,
        best_epoch=state.best_epoch,
        epochs_run=state.epoch,
        stopped_early=state.stopped_early,
        seconds=state.seconds,
        history=state.history,
    )


def _snapshot(net: nn.Module) -> dict[str, Tensor]:
    """A copy of the weights, kept as the best while training goes on."""
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _diverged(what: str, epoch: int, state: LoopState) -> NonFiniteLoss:
    kept = (
        f"best.pt (epoch {state.best_epoch}) and last.pt (epoch {state.epoch}) are untouched"
        if state.best_epoch
        else "no checkpoint was written"
    )
    return NonFiniteLoss(
        f"non-finite {what} at epoch {epoch}, step {state.step + 1}: training stopped; {kept}"
    )

"""The training loop: AdamW, warm-up + cosine LR, gradient clipping, early stopping on
validation MSE, best and last checkpoints in the run dir."""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..data import ForecastData
from .checkpoint import save_checkpoint
from .metrics import forecast_metrics, predict
from .monitor import Monitor
from .schedule import warmup_cosine

log = logging.getLogger(__name__)

BEST, LAST = "best.pt", "last.pt"


@dataclass
class TrainResult:
    steps: int
    best_val_mse: float
    best_epoch: int
    epochs_run: int
    stopped_early: bool
    seconds: float
    history: list[dict] = field(default_factory=list)


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
) -> TrainResult:
    """Train `model` in place; on return it holds the best validation weights."""
    monitor = monitor or Monitor()
    # Series steps one window feeds the model (input + forecast), for tokens/s.
    window_tokens = data.train.src.shape[1] + data.train.target.shape[1]
    epochs, batch_size = trainer_cfg["epochs"], trainer_cfg["batch_size"]
    steps_per_epoch = math.ceil(len(data.train) / batch_size)
    optimizer = make_optimizer(model, trainer_cfg["lr"], trainer_cfg["weight_decay"])
    scheduler = warmup_cosine(
        optimizer, epochs * steps_per_epoch, trainer_cfg["warmup_frac"], trainer_cfg["min_lr_frac"]
    )
    shuffle = torch.Generator().manual_seed(seed)  # batch order: on the CPU, device-independent
    best = {"mse": math.inf, "epoch": 0, "state": None}
    history: list[dict] = []
    patience, since_best, step = trainer_cfg["patience"], 0, 0
    start = time.perf_counter()

    epoch_bar = tqdm(range(1, epochs + 1), desc="epochs", file=sys.stderr, disable=None)
    for epoch in epoch_bar:
        model.train()
        total, count = 0.0, 0
        step_bar = tqdm(
            data.train.batches(batch_size, shuffle),
            total=steps_per_epoch,
            desc=f"epoch {epoch}",
            leave=False,
            file=sys.stderr,
            disable=None,
        )
        for src, target in step_bar:
            started = time.perf_counter()
            loss = F.mse_loss(model(src, target), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # The norm before clipping; max_norm=inf only measures it.
            max_norm = trainer_cfg["grad_clip"] or math.inf
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            step += 1
            loss_value = loss.item()
            total += loss_value * len(src)
            count += len(src)
            step_bar.set_postfix(loss=f"{loss_value:.4g}")
            seconds = time.perf_counter() - started
            monitor.on_step(
                step,
                {
                    "loss": loss_value,
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens_per_s": len(src) * window_tokens / seconds,
                },
            )

        val = forecast_metrics(
            predict(model, data.val.src, trainer_cfg["eval_batch_size"]), data.val.target
        )
        monitor.on_epoch_end(epoch, step, model, val)
        record = {
            "epoch": epoch,
            "step": step,
            "train_loss": total / count,
            "val_mse": val["mse"],
            "lr": scheduler.get_last_lr()[0],
        }
        history.append(record)
        improved = val["mse"] < best["mse"]
        if improved:
            best.update(mse=val["mse"], epoch=epoch)
            best["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            since_best = 0
        else:
            since_best += 1
        epoch_bar.set_postfix(loss=f"{record['train_loss']:.4g}", val_mse=f"{val['mse']:.4g}")
        log.info(
            "epoch %d/%d  train_loss %.6g  val_mse %.6g  lr %.3g%s",
            epoch, epochs, record["train_loss"], val["mse"], record["lr"],
            "  (best)" if improved else "",
        )  # fmt: skip

        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "epoch": epoch,
            "step": step,
            "best_val_mse": best["mse"],
            "best_epoch": best["epoch"],
            "config": config_yaml,
        }
        if improved:
            save_checkpoint(checkpoint_dir / BEST, state)
        save_checkpoint(checkpoint_dir / LAST, state)
        if patience and since_best >= patience:
            log.info("early stop: no val_mse improvement for %d epochs", patience)
            break

    model.load_state_dict(best["state"])
    return TrainResult(
        steps=step,
        best_val_mse=best["mse"],
        best_epoch=best["epoch"],
        epochs_run=len(history),
        stopped_early=len(history) < epochs,
        seconds=time.perf_counter() - start,
        history=history,
    )

"""A run's loop ready at its first step, without training it: what a study's plan times
(studies/plan.py) and scripts/profile_step.py profiles."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig

from ..training.distributed import SINGLE
from ..training.loop import RunLoop
from ..training.monitor import Monitor
from .training import prepare_run


def build_loop(cfg: DictConfig, run_dir: Path) -> RunLoop:
    """The run's loop as `seqforecast.train` builds it (its data, model, kernels, optimizer
    and schedule), with a monitor that writes nothing, ready at the first batch of epoch 1."""
    run = prepare_run(cfg, run_dir)
    run.monitor.close()  # the run's own (its start written): the steps here log nothing
    trainer = run.plain["trainer"]
    loop = RunLoop(run.model, run.data, trainer, run_dir, cfg.seed, run.config_yaml,
                   Monitor(), SINGLE, None, run.evaluator, run.kernels)
    loop.draw_order()
    run.model.train()
    return loop


def time_epoch(loop: RunLoop, steps: int = 3, warmup: int = 1) -> dict:
    """Seconds an epoch of `loop` takes, estimated: `steps` training steps timed after
    `warmup` (times the epoch's steps), plus one validation pass, timed whole."""
    total = loop.steps_per_epoch
    steps = max(1, min(steps, total - warmup))
    for batch in range(min(warmup, total - 1)):
        loop.step(batch)
    started = time.perf_counter()
    for batch in range(warmup, warmup + steps):
        loop.step(batch % total)
    step_seconds = (time.perf_counter() - started) / steps
    started = time.perf_counter()
    loop.evaluator.model_metrics(loop.net, "val")  # in eval mode, as after every epoch
    val_seconds = time.perf_counter() - started
    return {"steps_per_epoch": total, "step_seconds": step_seconds,
            "val_seconds": val_seconds, "epoch_seconds": total * step_seconds + val_seconds}

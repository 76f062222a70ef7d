"""A group of sweep jobs trained as one stack: what `seqforecast.train`'s task does for one
job (skip a completed run, check the config, record status.json, say how a stop resumes),
done for each member, with the training shared (loop.py).

`group_key` says which jobs may share a stack: their composed configs equal but for the seed.
`stack_refusal` says why a config cannot stack at all; such jobs run one by one as today.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..cli_args import BAD_INPUT
from ..config import validate_config
from ..config.rundir import interrupted_message
from ..model.parts import TORCH
from ..runs.training import PreparedRun, finish_run, prepare_run, run_training
from ..training.interrupts import TrainingInterrupted
from ..training.loop import NonFiniteLoss, RunLoop
from ..training.status import write_status
from . import logs
from .loop import StackedLoop
from .model import StackedModel

log = logging.getLogger("seqforecast.stacking")

STACK_KERNELS = TORCH.name  # vmap batches torch's own operations, not a set's C kernels


def stack_refusal(cfg: DictConfig) -> str | None:
    """Why a job with this composed config cannot train in a stack, or None."""
    trainer = cfg.trainer
    if cfg.get("resume") is not None:
        return "resume= continues one run"
    if trainer.strategy == "ddp":
        return "trainer.strategy=ddp spreads one run over processes"
    if trainer.compile:
        return "trainer.compile=true compiles one model"
    if trainer.kernels != "auto" and trainer.kernels != STACK_KERNELS:
        return (f"trainer.kernels={trainer.kernels} asks for kernels a stack does not run "
                f"(it runs {STACK_KERNELS}'s: use trainer.kernels=auto)")
    return None


def group_key(cfg: DictConfig) -> str:
    """Jobs stack when this is equal: the config but for its seed (and skip_completed)."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    for key in ("seed", "skip_completed"):
        plain.pop(key, None)
    return OmegaConf.to_yaml(OmegaConf.create(plain))


@dataclass
class Job:
    """One sweep job of a group: its composed task config, run dir, overrides and choices."""

    cfg: DictConfig
    run_dir: Path
    overrides: list[str]
    choices: dict = field(default_factory=dict)
    tag: str = ""


@dataclass
class Outcome:
    status: str  # completed | failed | interrupted
    value: float | None = None  # completed: the best validation MSE
    reason: str | None = None


def run_group(jobs: list[Job], progress: bool = False) -> list[Outcome]:
    """Train `jobs` (one config, several seeds) as one stack; each job's run dir ends as its
    solo run's would. A TrainingInterrupted (SIGINT/SIGTERM) exits after every unfinished
    member saved its last.pt and status.json, as a solo job does."""
    from ..train import completed_there  # the task's own rule (train.py imports Hydra's app)

    outcomes: list[Outcome | None] = [None] * len(jobs)

    def status(k: int, state: str, reason: str | None = None, **extra) -> None:
        write_status(jobs[k].run_dir, state, reason, overrides=jobs[k].overrides, **extra)
        outcomes[k] = Outcome(state, extra.get("best_val_mse"), reason)

    prepared: dict[int, PreparedRun] = {}
    with logs.routed([job.run_dir for job in jobs], [job.tag for job in jobs]):
        try:
            for k, job in enumerate(jobs):
                with logs.member(k):
                    done, refusal = completed_there(job.run_dir, job.overrides,
                                                    job.cfg.skip_completed)
                    if done is not None:
                        log.info("%s holds a completed run with these overrides: skipped "
                                 "(skip_completed=true)", job.run_dir)
                        outcomes[k] = Outcome("completed", done)
                        continue
                    if refusal is not None:  # nothing written there
                        log.error("%s", refusal)
                        outcomes[k] = Outcome("failed", None, refusal)
                        continue
                    try:
                        validate_config(job.cfg)
                        prepared[k] = prepare_run(job.cfg, job.run_dir, job.choices,
                                                  kernels=STACK_KERNELS)
                    except BAD_INPUT as err:
                        log.error("%s", err)
                        status(k, "failed", str(err))
            if prepared:
                _train(jobs, prepared, status, progress)
        except Exception as err:  # a bug: recorded for every member left, traceback kept
            for k, outcome in enumerate(outcomes):
                if outcome is None:
                    status(k, "failed", f"{type(err).__name__}: {err}")
            raise
        finally:
            for run in prepared.values():
                run.monitor.close()
    return outcomes


def _train(jobs: list[Job], prepared: dict[int, PreparedRun], status, progress: bool) -> None:
    members = sorted(prepared)
    runs = [prepared[k] for k in members]
    sizes = {len(run.data.train) for run in runs}
    if len(members) == 1 or len(sizes) > 1:  # nothing to share: each its solo loop
        if len(sizes) > 1:
            log.warning("the members' data differ in size (%s training windows): trained one "
                        "after another", sorted(sizes))
        for k in members:
            prepared[k].monitor.close()
            with logs.member(k):
                _solo(jobs[k], k, status, progress)
        prepared.clear()
        return
    log.info("training %d runs as one stack (%s kernels): %s", len(members), STACK_KERNELS,
             ", ".join(jobs[k].tag for k in members))
    if runs[0].device.type == "cpu":  # measured: docs/operations.md#stacked-sweeps-...
        log.warning("on the CPU a stack trains no faster than its runs one after another (its "
                    "products already run at the core's rate; 0.87x measured for 5 default "
                    "runs): it pays where kernel launches bound a step, on a GPU")
    stack = StackedModel([run.model for run in runs])
    trainer_cfg = runs[0].plain["trainer"]
    loops = [RunLoop(run.model, run.data, run.plain["trainer"], run.run_dir / "checkpoints",
                     run.cfg.seed, run.config_yaml, run.monitor, run.ctx, run.data.state,
                     run.evaluator, run.kernels) for run in runs]
    stacked = StackedLoop(stack, loops, trainer_cfg, lambda i: logs.member(members[i]))
    interrupted = None
    try:
        results = stacked.run(trainer_cfg["epochs"], trainer_cfg["validate_initial"], progress)
    except TrainingInterrupted as err:  # the members that had finished are still scored
        interrupted = err
        results = {i: stacked.done[i] or loops[i].result() for i in stacked.done}
    for i, k in enumerate(members):
        with logs.member(k):
            if i not in results:  # stopped by the signal: its last.pt is saved
                message = interrupted_message(interrupted, jobs[k].run_dir)
                status(k, "interrupted", str(interrupted))
                log.warning("%s", message)
                print(message, file=sys.stderr)
                continue
            result = results[i]
            if isinstance(result, NonFiniteLoss):
                status(k, "failed", str(result))
                continue
            try:
                finish_run(runs[i], result, {"world_size": 1,
                                             "ranks_hold_identical_weights": True,
                                             "stacked_members": len(members)})
            except BAD_INPUT as err:
                log.error("%s", err)
                status(k, "failed", str(err))
                continue
            status(k, "completed", best_val_mse=result.best_val_mse)
    if interrupted is not None:
        sys.exit(interrupted.exit_code)


def _solo(job: Job, k: int, status, progress: bool) -> None:
    try:
        value = run_training(job.cfg, job.run_dir, job.choices, progress=progress)
    except (*BAD_INPUT, NonFiniteLoss) as err:
        log.error("%s", err)
        status(k, "failed", str(err))
        return
    status(k, "completed", best_val_mse=value)

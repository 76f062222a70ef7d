"""python -m seqforecast.train [group=option ...] [key=value ...]

Thin: Hydra composes the config; the config is checked; `run_training` does the rest. This
module decides only how a run ends:

- completed: status.json says so; the Hydra task returns the best validation MSE;
- bad input (config values, checkpoints, run dirs): one line on stderr, exit 2;
- non-finite loss: one line naming epoch and step, exit 3;
- SIGINT/SIGTERM: a checkpoint, a line saying how to resume, exit 130/143.

In --multirun a failing job raises instead of exiting, so Hydra records it as failed and runs
the other jobs; the sweep's summary.json lists every job's status (seqforecast/callbacks.py).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .config import ConfigError, register_schemas, validate_config
from .config.resume import register_resolvers, resume_target
from .training.checkpoint import CheckpointError, load_checkpoint
from .training.interrupts import TrainingInterrupted
from .training.loop import LAST, NonFiniteLoss
from .training.restore import RunError, saved_choices, saved_config
from .training.run import run_training
from .training.status import write_status

log = logging.getLogger("seqforecast.train")

register_schemas()
register_resolvers()

BAD_INPUT = (ConfigError, RunError, CheckpointError)


class JobFailed(RuntimeError):
    """A sweep job's expected failure, re-raised for Hydra to record; str() is the reason."""


def fail(message: str, code: int) -> None:
    """One line on stderr (and in the job log), a non-zero exit, no traceback."""
    log.error(message)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> float:
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    overrides = list(hydra_cfg.overrides.task)
    try:
        value = _train(cfg, run_dir, hydra_cfg, overrides, multirun)
    except TrainingInterrupted as err:
        write_status(run_dir, "interrupted", str(err), overrides=overrides)
        message = (
            f"{err}; checkpoint saved. Resume with: python -m seqforecast.train resume={run_dir}"
        )
        log.warning(message)
        print(message, file=sys.stderr)
        sys.exit(err.exit_code)
    except (*BAD_INPUT, NonFiniteLoss) as err:
        write_status(run_dir, "failed", str(err), overrides=overrides)
        if multirun:
            raise JobFailed(str(err)) from None
        fail(str(err), 3 if isinstance(err, NonFiniteLoss) else 2)
    except Exception as err:  # a bug: record it, keep the traceback
        write_status(run_dir, "failed", f"{type(err).__name__}: {err}", overrides=overrides)
        raise
    write_status(run_dir, "completed", overrides=overrides, best_val_mse=value)
    return value


def _train(cfg: DictConfig, run_dir: Path, hydra_cfg, overrides: list[str], multirun: bool):
    resume_state = None
    choices = {
        group: str(option)
        for group, option in hydra_cfg.runtime.choices.items()
        if not group.startswith(("hydra", "schema"))
    }
    if cfg.resume is not None:
        if multirun:
            raise ConfigError(f"resume={cfg.resume} continues one run; it cannot be swept")
        extra = [o for o in overrides if not o.startswith("resume=")]
        if extra:
            raise ConfigError(
                f"resume={cfg.resume} continues a run with its saved config; "
                f"drop the other overrides: {' '.join(extra)}"
            )
        cfg, choices = saved_config(run_dir), saved_choices(run_dir)
        resume_state = load_checkpoint(run_dir / "checkpoints" / LAST)
        log.info("resuming %s from its last checkpoint (epoch %d, step %d)", run_dir,
                 resume_state["epoch"], resume_state["step"])  # fmt: skip
    validate_config(cfg)
    if cfg.attention.name != "diff" and cfg.block_size:
        log.warning("block_size=%s has no effect with attention=%s", cfg.block_size,
                    cfg.attention.name)  # fmt: skip
    return run_training(cfg, run_dir, choices, resume_state)


def check_resume_argument(argv: list[str]) -> None:
    """Hydra resolves the run dir (and so `resume`) before the task runs, where an error
    would surface as a traceback: check a resume=... argument first, in one line."""
    for arg in argv:
        if arg.startswith("resume=") and arg.partition("=")[2] not in ("", "null"):
            try:
                resume_target(arg.partition("=")[2])
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                sys.exit(2)


def cli() -> None:
    check_resume_argument(sys.argv[1:])
    main()


if __name__ == "__main__":
    cli()

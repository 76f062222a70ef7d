"""python -m seqforecast.train [group=option ...] [key=value ...]
torchrun --nproc_per_node=N -m seqforecast.train trainer.strategy=ddp [...]

Thin: Hydra composes the config; the config is checked; `run_training` does the rest. This
module decides only where a run goes and how it ends:

- completed: status.json says so; the Hydra task returns the best validation MSE;
- skip_completed=true and the run dir holds a completed run with the same overrides: its
  result, returned without training (a study's rerun); a completed run there otherwise (made
  with other overrides, or skip_completed not given) is refused in one line, exit 2, the run and
  its saved config untouched (training again would overwrite them);
- skip_completed=true and the run dir holds a run of this very config that stopped before
  completing (killed, interrupted, its machine gone): continued from its last checkpoint, as
  resume=<run_dir> would, instead of training its epochs again;
- bad input (config values, data files, checkpoints, run dirs): one line on stderr, exit 2;
- non-finite loss: one line naming epoch and step, exit 3;
- SIGINT/SIGTERM: a checkpoint, a line saying how to resume, exit 130/143;
- a sweep whose launcher submitted no job (sbatch refused or missing: a SLURM controller that
  does not answer): one line, exit 4 (seqforecast/launcher_errors.py); a scheduler's job that
  ended without a result (scancel, out of time): one line, exit 2, like a failed job.

In --multirun a failing job raises instead of exiting, so Hydra records it as failed and runs
the other jobs; the sweep's summary.json lists every job's status (seqforecast/callbacks.py).
Under torchrun, rank 0 picks the run dir for all ranks before Hydra starts, and only rank 0
writes to it.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .cli_args import BAD_INPUT
from .config import CONFIG_DIR, ConfigError, register_schemas, validate_config
from .config.compose import override_error, settle_dataset
from .config.rundir import (
    LAST_CHECKPOINT,
    completed_record,
    interrupted_message,
    new_run_dir,
    register_resolvers,
    resume_target,
    unquoted,
)
from .config.runmode import mode_by_flags
from .config.saved import run_choices, saved_choices, saved_config, saved_overrides
from .launcher_errors import NOT_SUBMITTED, job_lost, submission_failure
from .runs.training import current_config, run_training
from .training.checkpoint import CheckpointError, load_checkpoint
from .training.distributed import Distributed, from_env, init_from_env, shutdown
from .training.interrupts import TrainingInterrupted
from .training.loop import NonFiniteLoss
from .training.status import read_status, write_status

log = logging.getLogger("seqforecast.train")

register_schemas()
register_resolvers()

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class JobFailed(RuntimeError):
    """A sweep job's expected failure, re-raised for Hydra to record; str() is the reason."""


def log_to_file(level: int, message: str) -> None:
    """Into the job log (train.log) only: the console gets the line once, on stderr, instead of
    a second time through Hydra's console handler."""
    record = log.makeRecord(log.name, level, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def fail(message: str, code: int, ctx: Distributed) -> None:
    """One line on stderr (and in the job log), a non-zero exit, no traceback."""
    if ctx.is_main:
        log_to_file(logging.ERROR, message)
        print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


# The package's own configs, by absolute path: found the same from a clone or an installed wheel.
@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="train")
def main(cfg: DictConfig) -> float:
    ctx = from_env()
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    overrides = list(hydra_cfg.overrides.task)
    # What status.json records: a resumed run is the run it continues, made with that run's
    # overrides, so that skip_completed=true with them recognises it once it has completed.
    recorded = overrides
    if cfg.resume is not None and ctx.is_main:
        recorded = saved_overrides(run_dir) or overrides

    def status(state: str, reason: str | None = None, **extra) -> None:
        if ctx.is_main:
            write_status(run_dir, state, reason, overrides=recorded, **extra)

    # rank 0 reads the run dir; every rank then skips, refuses, or neither
    found = completed_there(run_dir, overrides, cfg.skip_completed) if ctx.is_main else None
    done, refusal = ctx.broadcast(found)
    if done is not None:
        log.info("%s holds a completed run with these overrides: skipped (skip_completed=true)",
                 run_dir)
        return done
    if refusal is not None and cfg.resume is None:
        # nothing written: status.json, checkpoints and .hydra/ stay the completed run's
        if multirun:
            raise JobFailed(refusal)
        fail(refusal, 2, ctx)
    unfinished = None
    if cfg.skip_completed and cfg.resume is None:
        unfinished = ctx.broadcast(unfinished_state(run_dir, cfg) if ctx.is_main else None)
    try:
        value = _train(cfg, run_dir, hydra_cfg, overrides, multirun, ctx, unfinished)
    except TrainingInterrupted as err:
        status("interrupted", str(err))
        if ctx.is_main:
            message = interrupted_message(err, run_dir)
            log_to_file(logging.WARNING, message)
            print(message, file=sys.stderr)
        sys.exit(err.exit_code)
    except (*BAD_INPUT, NonFiniteLoss) as err:
        status("failed", str(err))
        if multirun:
            raise JobFailed(str(err)) from None
        fail(str(err), 3 if isinstance(err, NonFiniteLoss) else 2, ctx)
    except Exception as err:  # a bug: record it, keep the traceback
        status("failed", f"{type(err).__name__}: {err}")
        raise
    status("completed", best_val_mse=value)
    return value


def completed_there(run_dir: Path, overrides: list[str], skip: bool
                    ) -> tuple[float | None, str | None]:
    """What a completed run in `run_dir` means for a run with `overrides`: (its best validation
    MSE, None) where skip_completed reuses it (made with the same overrides, skip_completed
    aside); (None, why training there is refused, and what would do) where it is there
    otherwise; (None, None) where none is (nothing, failed, interrupted)."""
    record = completed_record(run_dir)
    if record is None:
        return None, None
    made, given = _run_overrides(record.get("overrides", [])), _run_overrides(overrides)
    if skip and made == given:
        return record["best_val_mse"], None
    if skip:
        return None, (
            f"{run_dir} holds a completed run made with other overrides (only there: "
            f"{' '.join(sorted(made - given)) or '-'}; only here: "
            f"{' '.join(sorted(given - made)) or '-'}); skip_completed=true reuses a run "
            f"made with the same ones: choose another run dir (hydra.run.dir, hydra.sweep.dir), "
            f"or remove that one to train there again")
    return None, (f"{run_dir} holds a completed run; training there would overwrite it: "
                  f"skip_completed=true reuses it (when made with the same overrides), or choose "
                  f"another run dir (hydra.run.dir, hydra.sweep.dir), or remove that one")


def unfinished_state(run_dir: Path, cfg: DictConfig) -> dict | None:
    """The last checkpoint of a run in `run_dir` that stopped before completing after saving an
    epoch (SIGKILL or a machine gone: no status; SIGINT/SIGTERM: interrupted), written with this
    very config: skip_completed=true continues it. None where there is none: nothing there, a
    completed or failed run (trained again from the start, as before), a checkpoint the kill
    left unreadable, or one of another config (by the checkpoint's own record, as Hydra has
    already rewritten .hydra/ for this job)."""
    path = Path(run_dir) / LAST_CHECKPOINT
    record = read_status(Path(run_dir))
    if not path.is_file() or (record is not None and record["status"] != "interrupted"):
        return None
    try:
        state = load_checkpoint(path)
    except CheckpointError:
        return None
    if current_config(state["config"]) != OmegaConf.to_yaml(cfg, resolve=True):
        return None
    return state


def _run_overrides(items: list[str]) -> set[str]:
    """The overrides that make a run what it is: all but skip_completed."""
    return {o for o in items if not o.lstrip("+~").startswith("skip_completed=")}


def _train(cfg, run_dir: Path, hydra_cfg, overrides: list[str], multirun: bool, ctx,
           unfinished: dict | None = None):
    resume_state = unfinished
    choices = run_choices(hydra_cfg.runtime.choices)
    if unfinished is not None:
        log.info("%s holds this run, stopped before completing: continued from its last "
                 "checkpoint (epoch %d, step %d; skip_completed=true)", run_dir,
                 unfinished["epoch"], unfinished["step"])
    if cfg.resume is not None:
        if multirun:
            raise ConfigError(f"resume={cfg.resume} continues one run; it cannot be swept")
        extra = [o for o in overrides if not o.startswith("resume=")]
        if extra:
            raise ConfigError(
                f"resume={cfg.resume} continues a run with its saved config; "
                f"drop the other overrides: {' '.join(extra)}"
            )
        # Rank 0 reads the run dir; the other ranks (maybe on other machines) get it sent.
        saved = None
        if ctx.is_main:
            state = load_checkpoint(run_dir / LAST_CHECKPOINT)
            saved = (OmegaConf.to_yaml(saved_config(run_dir)), saved_choices(run_dir), state)
        config_yaml, choices, resume_state = ctx.broadcast(saved)
        cfg = OmegaConf.create(config_yaml)
        log.info("resuming %s from its last checkpoint (epoch %d, step %d)", run_dir,
                 resume_state["epoch"], resume_state["step"])
    validate_config(cfg)
    if "block_size" not in cfg.attention and cfg.block_size:  # only a windowed backend reads it
        log.warning("block_size=%s has no effect with attention=%s", cfg.block_size,
                    cfg.attention.name)
    # Parallel launchers run several jobs at once: their bars would garble each other, so
    # jobs show none and the sweep prints a line per finished job instead.
    progress = hydra_cfg.launcher.get("_target_") == BASIC_LAUNCHER
    return run_training(cfg, run_dir, choices, resume_state, ctx, progress)


def check_resume_argument(argv: list[str]) -> None:
    """Hydra resolves the run dir (and so `resume`) before the task runs, where an error
    would surface as a traceback: check a resume=... argument first, in one line."""
    for arg in argv:
        if arg.startswith("resume=") and arg.partition("=")[2] not in ("", "null"):
            try:
                resume_target(unquoted(arg.partition("=")[2]))
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                sys.exit(2)


def distributed_argv(argv: list[str], ctx: Distributed) -> list[str]:
    """Under torchrun: rank 0 chooses the one run dir (a resumed run's, the user's
    hydra.run.dir, or a new outputs/<date>/<time>) and tells the others; ranks > 0 write
    nothing there (no .hydra/, no log file)."""
    if {"-m", "--multirun"} & set(argv):
        fail("torchrun runs one job; sweep with a Hydra launcher instead", 2, ctx)
    chosen: str | None = None
    if ctx.is_main:
        check_resume_argument(argv)
        given = [a.partition("=")[2] for a in argv if a.startswith("hydra.run.dir=")]
        resumed = [unquoted(a.partition("=")[2]) for a in argv if a.startswith("resume=")]
        if given:
            chosen = given[-1]
        elif resumed and resumed[-1] not in ("", "null"):
            chosen = str(resume_target(resumed[-1]))
        else:
            chosen = str(new_run_dir())
    chosen = ctx.broadcast(chosen)
    argv = [a for a in argv if not a.startswith("hydra.run.dir=")]
    argv.append(f"hydra.run.dir={chosen}")
    if not ctx.is_main:
        argv += ["hydra.output_subdir=null", "hydra/job_logging=disabled"]
        argv += ["hydra/hydra_logging=disabled"]
    return argv


def cli() -> None:
    ctx = init_from_env()
    sys.argv[1:] = settle_dataset(sys.argv[1:])  # dataset=null, or data= without dataset=
    try:
        if ctx.enabled:
            sys.argv[1:] = distributed_argv(sys.argv[1:], ctx)
        else:
            check_resume_argument(sys.argv[1:])
        _compose_and_run(ctx)
    finally:
        shutdown(ctx)
    if ctx.enabled and not ctx.is_main:
        # A finished rank other than the first (which wrote every file) leaves without the
        # interpreter's teardown: under load, a thread of the torch runtime could still be
        # joinable when its objects were destroyed at exit, and the rank aborted ("terminate
        # called without an active exception") after its run had finished.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _compose_and_run(ctx: Distributed) -> None:
    """main(), with what composition refuses (a value's type or Choice, a key or group option
    that does not exist) as one line and exit 2 like every other bad input: Hydra then lets
    its errors through (HYDRA_FULL_ERROR) instead of printing them over several lines."""
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        with mode_by_flags(sys.argv[1:]):
            main()
    except (HydraException, OmegaConfBaseException) as err:
        fail(override_error(err), 2, ctx)
    except JobFailed as err:  # a sweep's failed job, recorded in its summary.json
        fail(f"a sweep job failed: {err} (every job's status: summary.json in the sweep dir)",
             2, ctx)
    except Exception as err:  # a launcher's own error (a scheduler's), or a bug: re-raised
        refused = submission_failure(err)
        if refused is not None:
            fail(f"{refused}; no job of this sweep was submitted and no run dir changed: the "
                 f"same command again (skip_completed=true) runs what is missing once it can",
                 NOT_SUBMITTED, ctx)
        lost = job_lost(err)
        if lost is None:
            raise
        fail(f"a sweep job failed: {lost}; the same command again with skip_completed=true "
             f"continues a run it stopped part-way from its last checkpoint (once the sweep's "
             f"other jobs have left squeue)", 2, ctx)


if __name__ == "__main__":
    cli()

"""Where a run goes: a new dir, or, with resume=<run_dir>|last, the dir of the run it continues;
and what a sweep job's dir is called.

Hydra resolves `hydra.run.dir` before the task starts, so the choice is made by resolvers the
run dir settings call (configs/hydra/default.yaml). When resuming, Hydra must not rewrite the
run's saved .hydra/ config, so `hydra.output_subdir` becomes null; nor where the run dir holds a
completed run (which the task then reuses, skip_completed=true, or refuses to train over).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from omegaconf import OmegaConf

from ..training.status import read_status

OUTPUTS = Path("outputs")
LAST_CHECKPOINT = Path("checkpoints") / "last.pt"


def new_run_dir(now: datetime | None = None) -> Path:
    """outputs/<date>/<time>, as hydra.run.dir makes it (for a run whose dir is chosen before
    Hydra starts: rank 0 of a torchrun job)."""
    return OUTPUTS / (now or datetime.now()).strftime("%Y-%m-%d/%H-%M-%S")


def newest_run(outputs: Path = OUTPUTS) -> Path | None:
    """The run dir under `outputs` whose last checkpoint was written most recently."""
    candidates = list(outputs.glob(f"**/{LAST_CHECKPOINT}"))
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime).parents[1]


def resume_target(resume: str) -> Path:
    """The run dir `resume` names; ValueError (one line) when there is nothing to resume."""
    if resume == "last":
        path = newest_run()
        if path is None:
            raise ValueError(f"resume=last: no run under {OUTPUTS}/ has {LAST_CHECKPOINT}")
        return path
    path = Path(resume)
    if not (path / LAST_CHECKPOINT).is_file():
        raise ValueError(f"resume={resume}: {path / LAST_CHECKPOINT} does not exist")
    return path


def resume_command(run_dir: Path | str) -> str:
    """The command that resumes `run_dir`, ready to paste into a shell: a sweep job's dir
    (`3_lr=0.01,seed=1`) holds characters Hydra's override grammar reads, so it is quoted
    for Hydra, and the quotes for the shell."""
    path = str(run_dir)
    argument = f"resume={path}"
    if any(c in path for c in "=,[]{}()'\" :*?$<>|&;!#~@%^"):
        argument = "'resume=\"" + path + "\"'"
    return f"python -m seqforecast.train {argument}"


def interrupted_message(reason: object, run_dir: Path | str) -> str:
    """The line a run stopped by a signal leaves: why, and the command that resumes it."""
    return f"{reason}; checkpoint saved. Resume with: {resume_command(run_dir)}"


def unquoted(value: str) -> str:
    """An override's value as Hydra reads it: without the quotes around it."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _run_dir(resume: str | None, default: str) -> str:
    return default if resume is None else str(resume_target(resume))


def completed_record(run_dir: Path | str) -> dict | None:
    """The status.json record of the run `run_dir` holds when it completed (its metrics.json
    there too): training there again would overwrite it. None for anything else."""
    record = read_status(Path(run_dir))
    if record and record["status"] == "completed" and (Path(run_dir) / "metrics.json").is_file():
        return record
    return None


def _output_subdir(resume: str | None, run_dir: str) -> str | None:
    return ".hydra" if resume is None and completed_record(run_dir) is None else None


MAX_JOB_DIRNAME = 120  # a sweep over many keys (Optuna) must stay under 255-byte names


def _job_dirname(num: int, override_dirname: str) -> str:
    """<job number>_<its overrides>, the overrides cut to a length any filesystem takes, one
    folder: a path among them (data_dir=/data/ett) has its slashes as `_`, or the job would
    land folders deeper than its sweep's other jobs (and its summary)."""
    name = f"{num}_{override_dirname}" if override_dirname else str(num)
    return name.replace("/", "_")[:MAX_JOB_DIRNAME]


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("seqforecast_run_dir", _run_dir, replace=True)
    OmegaConf.register_new_resolver("seqforecast_output_subdir", _output_subdir, replace=True)
    OmegaConf.register_new_resolver("seqforecast_job_dirname", _job_dirname, replace=True)

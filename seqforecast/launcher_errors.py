"""What a sweep's Hydra launcher raises when the scheduler, not a run, fails, as one line.

A launcher that submits jobs to a scheduler (submitit's SLURM launcher: `hydra/launcher=slurm`)
raises its own errors from inside Hydra: a submission sbatch refused (the controller
unreachable, a partition or a request the cluster does not have) or could not make (no sbatch),
and a job that ended without a result (cancelled, out of time or memory, its node gone). Each
becomes one line here, for seqforecast.train to print instead of a traceback; anything else is
None and keeps its traceback (a bug). submitit is an extra (`.[slurm]`): nothing here needs it.
"""

from __future__ import annotations

import re
import subprocess

NOT_SUBMITTED = 4  # seqforecast.train's exit code where the launcher submitted no job
SUBMITTERS = ("sbatch",)  # the commands through which a launcher submits


def _submitit_error(err: BaseException, name: str) -> bool:
    return any(cls.__name__ == name and cls.__module__.startswith("submitit")
               for cls in type(err).__mro__)


def _raised_in(err: BaseException, package: str) -> bool:
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and f"/{package}/" in tb.tb_frame.f_code.co_filename.replace("\\", "/")


def submission_failure(err: BaseException) -> str | None:
    """Why the launcher submitted no job (one line), or None where `err` is not that."""
    cause = err.__cause__
    if (_submitit_error(err, "FailedJobError") and isinstance(cause, subprocess.CalledProcessError)
            and cause.cmd and str(cause.cmd[0]) in SUBMITTERS):
        command = str(cause.cmd[0])
        said = " ".join(line.strip().removeprefix(f"{command}: ").removeprefix("error: ")
                        for line in str(err).splitlines() if line.strip())
        return f"{command} refused the sweep's jobs: {said or f'exit {cause.returncode}'}"
    if isinstance(err, FileNotFoundError) and str(err.filename) in SUBMITTERS:
        return (f"{err.filename} is not installed here (not on PATH): submit from a machine of "
                f"the cluster, or choose another hydra/launcher")
    if type(err) is RuntimeError and "srun" in str(err) and _raised_in(err, "submitit"):
        return ("SLURM is not installed here (no srun on PATH): submit from a machine of the "
                "cluster, or choose another hydra/launcher")
    return None


def job_lost(err: BaseException) -> str | None:
    """A scheduler's job that ended without returning a result (cancelled, timed out, out of
    memory, its node failed), in one line; None where `err` is not that."""
    if not _submitit_error(err, "UncompletedJobError"):
        return None
    text = str(err)
    job = re.search(r"Job (\S+)", text)
    state = re.search(r"\(state: ([^)]*)\)", text)
    if job and state:
        return f"SLURM job {job.group(1)} ended without a result (state: {state.group(1)})"
    return text.splitlines()[0] if text.strip() else type(err).__name__

"""submitit's errors as seqforecast.train reads them: a submission sbatch refused or could not
make, a job that ended without a result; anything else is not theirs (a bug keeps its
traceback). Against a real SLURM: tests/cli/test_slurm_cluster.py."""

import subprocess

import pytest

from seqforecast.launcher_errors import job_lost, submission_failure

utils = pytest.importorskip("submitit.core.utils")


def refused(stderr: str, command: str = "sbatch"):
    try:
        try:
            raise subprocess.CalledProcessError(1, [command, "/x/submission.sh"], stderr=stderr)
        except subprocess.CalledProcessError as cause:
            raise utils.FailedJobError(stderr) from cause
    except utils.FailedJobError as err:
        return err


def test_a_submission_sbatch_refused_is_one_line_without_its_prefix():
    err = refused("sbatch: error: Batch job submission failed: Unable to contact slurm "
                  "controller (connect failure)")
    assert submission_failure(err) == ("sbatch refused the sweep's jobs: Batch job submission "
                                       "failed: Unable to contact slurm controller (connect "
                                       "failure)")
    assert submission_failure(refused("")) == "sbatch refused the sweep's jobs: exit 1"
    # a job's failure (its result, not a submission) is not a refused submission
    assert submission_failure(refused("Traceback ...", command="python")) is None


def test_no_sbatch_or_no_srun_is_one_line():
    missing = FileNotFoundError(2, "No such file or directory", "sbatch")
    assert submission_failure(missing).startswith("sbatch is not installed here")
    assert submission_failure(FileNotFoundError(2, "No such file", "data.csv")) is None
    assert submission_failure(RuntimeError('Could not detect "srun"')) is None  # not submitit's
    assert submission_failure(ValueError("srun")) is None


def test_a_job_that_ended_without_a_result_is_one_line():
    err = utils.UncompletedJobError(
        "Job 12_3 (task: 0) with path /x/12_3_0_result.pkl\nhas not produced any output "
        "(state: CANCELLED by 0)\nError stream produced:\n----\nsrun: got SIGCONT")
    assert job_lost(err) == "SLURM job 12_3 ended without a result (state: CANCELLED by 0)"
    assert job_lost(utils.UncompletedJobError("odd\nmessage")) == "odd"
    assert job_lost(RuntimeError("Job 1 (state: X)")) is None

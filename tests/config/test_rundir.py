"""Where runs go: a sweep job's folder name, the command that resumes a run."""

import shlex

from seqforecast.config.rundir import MAX_JOB_DIRNAME, _job_dirname, resume_command, unquoted


def test_a_sweep_jobs_folder_is_one_folder_whatever_its_overrides_hold():
    name = _job_dirname(3, "data_dir=/data/ett,seed=1")
    assert name == "3_data_dir=_data_ett,seed=1" and "/" not in name
    assert len(_job_dirname(0, "x=" + "a" * 500)) == MAX_JOB_DIRNAME
    assert _job_dirname(2, "") == "2"


def test_the_resume_command_survives_the_shell_and_hydras_grammar():
    plain = resume_command("outputs/2026-01-01/12-00-00")
    assert plain == "python -m seqforecast.train resume=outputs/2026-01-01/12-00-00"
    job = "outputs/multirun/x/1_lr=0.01,seed=1"
    argument = shlex.split(resume_command(job))[-1]  # what the shell hands the program
    assert argument == f'resume="{job}"'
    assert unquoted(argument.partition("=")[2]) == job  # what Hydra then reads

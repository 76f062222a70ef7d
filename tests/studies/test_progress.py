"""A running study's progress line (studies/launch.py): jobs done, failed and stopped, and the
time the rest should take; a stopped job (a signal, a killed process) is told apart from a
failed one by why it did not complete (comparison/runs.py `resumable`), since the same command
goes on with it."""

from seqforecast.comparison.runs import load_run, resumable
from seqforecast.studies.launch import progress_line, tally
from seqforecast.training.status import write_status


def test_the_line_counts_stopped_jobs_as_left_not_failed():
    # 54 jobs, 12 held before this launch, 6 done by it in 2 h, 1 failed, 2 stopped: the 35
    # left (stopped ones included: they run again) at 2 h / 6 jobs
    line = progress_line(18, 1, 2, 54, 12, 7200.0)
    assert line == ("progress: 18 of 54 jobs done, 1 failed, 2 stopped (the same command "
                    "goes on with them); the 35 left should take about 11.7 h at this launch's "
                    "pace")
    assert progress_line(3, 0, 1, 4, 0, 60.0).endswith(
        "0 failed, 1 stopped (the same command goes on with it); the 1 left should take about "
        "0.0 h at this launch's pace")
    # nothing done by this launch yet: no pace to tell; nothing stopped: not said
    assert progress_line(4, 2, 0, 6, 4, 30.0) == "progress: 4 of 6 jobs done, 2 failed"


def test_a_run_stopped_or_killed_is_resumable_and_a_failed_one_is_not(tmp_path):
    interrupted, killed, failed = (tmp_path / n for n in ("interrupted", "killed", "failed"))
    for d in (interrupted, killed, failed):
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "config.yaml").write_text("seed: 0\n")  # a run dir
    write_status(interrupted, "interrupted", "SIGTERM received: stopped at epoch 2")
    write_status(failed, "failed", "loss=poisson describes counts")
    # what load_run says of each (a report keeps the same words, its run dir gone or not)
    problems = {d.name: load_run(d, "test").problem for d in (interrupted, killed, failed)}
    assert resumable(problems["interrupted"])
    assert resumable(problems["killed"])  # killed: no status.json written
    assert not resumable(problems["failed"])
    # a dir that is no run dir at all is no stopped run
    assert not resumable(load_run(tmp_path / "stray", "test").problem)


def test_a_failure_only_a_from_report_records_is_left_for_this_launch(tmp_path):
    study_dir, elsewhere = tmp_path / "study", tmp_path / "elsewhere"
    cell = study_dir / "m" / "c" / "multirun"
    stopped, failed, old = cell / "0", cell / "1", elsewhere / "m" / "c" / "0"
    for d in (stopped, failed, old):
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "config.yaml").write_text("seed: 0\n")  # a run dir
    write_status(stopped, "interrupted", "SIGTERM received: stopped at epoch 2")
    write_status(failed, "failed", "loss diverged")

    def failure(seed, run_dir, reason, cell="c"):
        return {"model": "m", "cell": cell, "value": "vanilla", "seed": seed,
                "reason": reason, "run_dir": str(run_dir)}

    failures = [failure(0, stopped, load_run(stopped, "test").problem),
                failure(1, failed, load_run(failed, "test").problem),
                # the same run dir as a report recorded it, by another spelling of its path
                failure(1, tmp_path / "study" / ".." / "study" / "m" / "c" / "multirun" / "1",
                        load_run(failed, "test").problem),
                failure(2, old, "failed: loss diverged"),  # a from= dir's: run again here
                failure(3, study_dir / "m" / "c" / "gone", "interrupted: SIGTERM"),  # a report's
                failure(0, stopped, "failed: x", cell="other")]  # a cell this launch has not
    runs = {("m", "c", "vanilla", 4): None, ("m", "other", "vanilla", 0): None}
    assert tally(runs, failures, {"m/c"}, study_dir) == (1, 1, 1)
    assert tally(runs, failures, {"m/c", "m/other"}, study_dir) == (2, 2, 1)

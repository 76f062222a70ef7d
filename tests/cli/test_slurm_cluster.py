"""hydra/launcher=slurm against a real SLURM: a one-node cluster started in a temporary folder
(scripts/slurm_cluster.py: slurmctld, slurmd, slurmdbd with its MariaDB, munged), a study
dispatched to it through the study CLI, its long job cancelled with scancel after a checkpoint,
the same command again continuing that job from its checkpoint, and a controller that does not
answer refused in one line.

Only `make test-slurm` runs this file (`pytest -m slurm`): the cluster is installed with apt-get
where it is missing, as root. Where SLURM cannot be had (not root, no apt-get, no network) the
module is skipped with the reason in one line."""

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from ..cli_helpers import REPO

pytestmark = pytest.mark.slurm

SCRIPT = REPO / "scripts" / "slurm_cluster.py"
GRID = REPO / "tests" / "cli" / "slurm_study.yaml"  # two quick jobs and a long one
# What the launcher asks of SLURM: the node has 2 CPUs, partition cpu
LAUNCHER = ["hydra/launcher=slurm", "hydra.launcher.partition=cpu",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1",
            "hydra.launcher.timeout_min=10"]
JOBS = {("quick", "vanilla"), ("quick", "einsum"), ("long", "vanilla")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A fresh one-node cluster for this module, always stopped afterwards: the environment
    its clients need (SLURM_CONF), and the seconds it took to start."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    root = tmp_path_factory.mktemp("slurm") / "cluster"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(SCRIPT), "start", str(root)],
                          capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    try:
        if proc.returncode == 3:  # SLURM cannot be had here: the script's one line says why
            pytest.skip(proc.stderr.strip().splitlines()[-1])
        assert proc.returncode == 0, proc.stderr
        export = proc.stdout.strip().splitlines()[-1]
        assert export == f"export SLURM_CONF={root / 'etc' / 'slurm.conf'}"
        env = dict(os.environ, SLURM_CONF=export.partition("=")[2], PYTHONPATH=str(REPO))
        env.pop("HYDRA_FULL_ERROR", None)
        print(f"[slurm] cluster started in {seconds:.1f} s")
        yield {"root": root, "env": env, "start_seconds": seconds}
    finally:
        stop = subprocess.run([sys.executable, str(SCRIPT), "stop", str(root)],
                              capture_output=True, text=True, timeout=300)
        assert stop.returncode == 0 or not (root / "cluster.json").exists(), stop.stderr


def slurm(cluster, *command):
    proc = subprocess.run(list(command), env=cluster["env"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def study_command(base):
    return [sys.executable, "-m", "seqforecast.study", str(base / "slurm.yaml"), *LAUNCHER,
            "trainer.num_threads=1", f"dir={base / 'out'}"]


def run_dir(base, model, value="vanilla"):
    return base / "out" / model / "h4" / f"{value}-seed0"


def wait(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout} s")


@pytest.fixture(scope="module")
def studied(cluster, tmp_path_factory):
    """The study dispatched to the cluster; its long job cancelled once its first checkpoint is
    written; the same command again, once that job has left the queue."""
    base = tmp_path_factory.mktemp("study")
    shutil.copy(GRID, base / "slurm.yaml")
    long_dir = run_dir(base, "long")
    started = time.monotonic()
    with open(base / "first.out", "w") as out, open(base / "first.err", "w") as err:
        first = subprocess.Popen(study_command(base), cwd=base, env=cluster["env"], stdout=out,
                                 stderr=err)
        try:
            wait(lambda: (long_dir / "checkpoints" / "last.pt").is_file(), 300,
                 "the long job's first checkpoint")
            (job,) = [p.name for p in (base / "out" / "long" / "h4" / ".submitit").iterdir()
                      if p.is_dir()]
            slurm(cluster, "scancel", job)
            first.wait(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
    # the job gone from the queue before its run dir is used again
    wait(lambda: not slurm(cluster, "squeue", "-h", "-o", "%A").split(), 60, "an empty queue")
    interrupted = json.loads((long_dir / "status.json").read_text())
    metrics = {(m, v): (run_dir(base, m, v) / "metrics.json").read_bytes()
               for m, v in JOBS if m == "quick"}
    again = subprocess.run(study_command(base), cwd=base, env=cluster["env"],
                           capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    print(f"[slurm] study, cancel and relaunch: {seconds:.1f} s")
    return {"base": base, "first": first, "job": job, "interrupted": interrupted,
            "quick_metrics": metrics, "again": again,
            "first_err": (base / "first.err").read_text()}


def test_the_cluster_has_its_node_idle_with_two_cpus_and_its_accounting(cluster):
    """First, so that its setup's duration (make test-slurm prints them) is the cluster's
    start (with the packages' install where they were missing)."""
    node = slurm(cluster, "sinfo", "-h", "-N", "-o", "%P %c %t").split()
    assert node == ["cpu*", "2", "idle"], node
    assert "seqforecast" in slurm(cluster, "sacctmgr", "-n", "-P", "show", "cluster",
                                  "format=cluster").split()
    assert slurm(cluster, "sacct", "-n", "-X", "-o", "JobID") == ""  # read, and nothing run yet
    status = subprocess.run([sys.executable, str(SCRIPT), "status", str(cluster["root"])],
                            capture_output=True, text=True, check=True).stdout
    assert status.count(": running (pid ") == 5 and "node: idle" in status


def test_a_cancelled_job_stops_at_a_checkpoint_and_the_study_says_so_in_one_line(
        cluster, studied):
    first, job, err = studied["first"], studied["job"], studied["first_err"]
    assert first.returncode == 1, err  # a cell with a failed job
    # SLURM's accounting holds the job as cancelled (submitit reads the same, through sacct)
    states = slurm(cluster, "sacct", "-n", "-P", "-X", "-j", job, "-o", "State").split()
    assert states and states[0] == "CANCELLED", states
    # the train CLI's line, not submitit's traceback; then the study's
    assert "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: a sweep job failed: SLURM job {job} ended without a result "
                           f"(state: CANCELLED"), line
    assert "continues a run it stopped part-way from its last checkpoint" in line
    assert "[study] cells with failed jobs: long/h4" in err
    # the job caught SLURM's SIGTERM: it saved its state mid-run and said so
    interrupted = studied["interrupted"]
    assert interrupted["status"] == "interrupted"
    stopped = re.fullmatch(r"SIGTERM received: stopped at epoch (\d+), step (\d+)",
                           interrupted["reason"])
    assert stopped and 1 <= int(stopped[1]) < 60, interrupted["reason"]
    job_err = (studied["base"] / "out" / "long" / "h4" / ".submitit" / job
               / f"{job}_0_log.err").read_text()
    assert "checkpoint saved" in job_err and f"JOB {job} ON" in job_err


def test_the_same_command_again_continues_the_cancelled_job_from_its_checkpoint(studied):
    base, again = studied["base"], studied["again"]
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    stopped = re.search(r"epoch (\d+), step (\d+)", studied["interrupted"]["reason"])
    log = (run_dir(base, "long") / "train.log").read_text()
    continued = re.search(r"stopped before completing: continued from its last checkpoint "
                          r"\(epoch (\d+), step (\d+); skip_completed=true\)", log)
    assert continued, log
    # the checkpoint SIGTERM left: the step it stopped at, the epochs it had completed (the
    # one it was in, where it stopped at an epoch's end)
    epoch = int(continued[1])
    assert continued[2] == stopped[2] and 1 <= epoch <= int(stopped[1]) <= epoch + 1
    # after the continuation, training goes on from the next epoch, not from the first
    resumed = log.split("continued from its last checkpoint", 1)[1]
    done = [int(n) for n in re.findall(r"epoch (\d+)/60 ", resumed)]
    assert done == list(range(epoch + 1, 61)), done
    status = json.loads((run_dir(base, "long") / "status.json").read_text())
    assert status["status"] == "completed"
    metrics = json.loads((run_dir(base, "long") / "metrics.json").read_text())
    assert metrics["run"]["epochs_run"] == 60
    # the jobs that had completed were not trained again: their results as they were
    for model, value in JOBS - {("long", "vanilla")}:
        path = run_dir(base, model, value)
        assert (path / "metrics.json").read_bytes() == studied["quick_metrics"][(model, value)]
        assert "holds a completed run with these overrides: skipped" in \
            (path / "train.log").read_text()


def test_the_merged_report_holds_every_job_with_a_finite_mse(studied):
    base = studied["base"]
    report = json.loads((base / "out" / "study.json").read_text())
    assert report["failed"] == []
    found = {}
    for cell in report["cells"]:
        assert cell["missing"] == [], cell
        for row in cell["rows"]:
            assert row["seeds"] == [0]
            mse = row["runs"]["0"]["mse"]
            assert math.isfinite(mse) and mse > 0
            found[(cell["model"], row["value"])] = mse
    assert set(found) == JOBS
    for model, value in JOBS:  # each the run's own score
        metrics = json.loads((run_dir(base, model, value) / "metrics.json").read_text())
        assert found[(model, value)] == pytest.approx(metrics["test"]["model"].get(
            "mse_scaled", metrics["test"]["model"]["mse"]))
    page = (base / "out" / "study.md").read_text()
    assert "| long | h4 | vanilla | 1 |" in page and "| quick | h4 | einsum | 1 |" in page


def test_a_controller_that_does_not_answer_stops_the_study_in_one_line(cluster, studied,
                                                                        tmp_path):
    """SLURM_CONF naming this cluster with its controller's port closed (a stopped controller):
    the study stops at its first cell, exit 2, one error line; nothing run is lost."""
    base = tmp_path / "study"
    shutil.copytree(studied["base"], base)
    conf = tmp_path / "slurm.conf"
    text = (cluster["root"] / "etc" / "slurm.conf").read_text()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+$", f"SlurmctldPort={closed}", text))
    kept = {p: p.read_bytes() for p in (base / "out").rglob("*")
            if p.is_file() and p.name in ("metrics.json", "status.json", "last.pt")}
    assert len(kept) >= 3 * 2
    env = dict(cluster["env"], SLURM_CONF=str(conf))
    proc = subprocess.run(study_command(base), cwd=base, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: sbatch refused the sweep's jobs: Batch job submission failed: "
                           "Unable to contact slurm controller"), line
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "[study] stopped at quick/h4: its launcher submitted no job")
    assert "long/h4" not in proc.stderr  # the next cell was not launched
    assert {p: p.read_bytes() for p in kept} == kept  # every run as it was
    report = json.loads((base / "out" / "study.json").read_text())
    assert report["failed"] == [] and sum(len(c["rows"]) for c in report["cells"]) == 3

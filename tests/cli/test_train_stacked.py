"""`hydra/launcher=stacked`: a sweep's seeds trained as one batched model in one process, each
job's run dir as its solo run leaves it. Every sweep runs through run_cli, in this process (the
signal test's too: signal_once sends it this process's way)."""

import json
import re
import signal

import pytest
import torch

from seqforecast.config.compose import compose_config
from seqforecast.stacking.jobs import group_key, stack_refusal

from ..cli_helpers import TINY, run_cli
from .test_train_resume_and_failures import signal_once

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

STACKED = ["--multirun", "hydra/launcher=stacked"]
# Several steps an epoch (64 windows, 4 batches): each member's own batch order (its seed's
# generator) then matters, which one batch of every window would not show.
BATCHES = [*TINY, "batch_size=16"]


def job_dirs(sweep):
    return sorted((p for p in sweep.iterdir() if p.is_dir()), key=lambda p: int(p.name[0]))


def metrics(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def test_stacked_seeds_equal_their_solo_runs_and_leave_solo_run_dirs(tmp_path):
    args = [*BATCHES, "epochs=2", "seed=0,1"]
    run_cli([*STACKED, *args, f"hydra.sweep.dir={tmp_path / 'stacked'}"], tmp_path)
    # the stack runs torch's kernels (vmap batches them): the solo runs beside it too
    run_cli(["--multirun", *args, "trainer.kernels=torch", f"hydra.sweep.dir={tmp_path / 'solo'}"],
            tmp_path)
    stacked, solo = job_dirs(tmp_path / "stacked"), job_dirs(tmp_path / "solo")
    assert len(stacked) == len(solo) == 2
    tests = []
    for seed, (mine, theirs) in enumerate(zip(stacked, solo, strict=True)):
        ours, own = metrics(mine), metrics(theirs)
        assert ours["run"]["stacked_members"] == 2 and "stacked_members" not in own["run"]
        for split in ("val", "test"):
            a, b = ours[split]["model"]["mse"], own[split]["model"]["mse"]
            assert abs(a - b) <= 1e-5 * b, (seed, split, a, b)
        tests.append(ours["test"]["model"]["mse"])
        # its own files: status, checkpoints (weights-only), events, its own log lines
        status = json.loads((mine / "status.json").read_text())
        assert status["status"] == "completed" and f"seed={seed}" in status["overrides"]
        for name in ("best.pt", "last.pt"):
            state = torch.load(mine / "checkpoints" / name, weights_only=True)
            assert state["kernels"] == "torch" and state["world_size"] == 1
        assert list(mine.glob("events.out.tfevents.*"))
        log = (mine / "train.log").read_text()
        assert f"train split: 64 sigmoid series, seed {seed}\n" in log
        assert f"seed {1 - seed}\n" not in log, "the other member's lines"
        assert log.count("epoch 2/2") == 1
        assert (mine / ".hydra" / "overrides.yaml").is_file()
    assert tests[0] != tests[1], "each member its own seed"
    summary = json.loads((tmp_path / "stacked" / "summary.json").read_text())
    assert summary["counts"] == {"completed": 2}
    out = run_cli([str(tmp_path / "stacked")], tmp_path, module="seqforecast.compare")
    assert "2 runs" in out.stdout or "n=2" in out.stdout, out.stdout

    # the sweep again: skip_completed=true finds both runs (the same job dirs: it is not in
    # their names); without it, training over them is refused, every job's files (its saved
    # config too) as they were
    def files():
        return {p: p.read_bytes() for d in stacked for p in d.rglob("*")
                if p.is_file() and p.name != "train.log"}

    kept = files()
    out = run_cli([*STACKED, *args, "skip_completed=true",
                   f"hydra.sweep.dir={tmp_path / 'stacked'}"], tmp_path)
    assert (out.stdout + out.stderr).count("skipped (skip_completed=true)") == 2
    out = run_cli([*STACKED, *args, f"hydra.sweep.dir={tmp_path / 'stacked'}"], tmp_path,
                  check=False)
    assert out.returncode == 2
    assert "holds a completed run; training there would overwrite it" in out.stderr
    assert files() == kept


def test_members_that_stop_early_leave_the_stack_and_the_rest_equal_their_solo_runs(tmp_path):
    # with patience 1 these seeds' solo runs stop after 5, 4 and 2 epochs: the stack drops
    # seed 5 after epoch 2 and seed 1 after epoch 4 (its slot mapping and sliced optimizer
    # state are what the later epochs' equality checks)
    args = [*BATCHES, "epochs=5", "trainer.patience=1", "seed=0,1,5"]
    out = run_cli([*STACKED, *args, f"hydra.sweep.dir={tmp_path / 'stacked'}"], tmp_path)
    run_cli(["--multirun", *args, "trainer.kernels=torch", f"hydra.sweep.dir={tmp_path / 'solo'}"],
            tmp_path)
    stacked, solo = job_dirs(tmp_path / "stacked"), job_dirs(tmp_path / "solo")
    epochs = [metrics(d)["run"]["epochs_run"] for d in solo]
    assert len(set(epochs)) == 3, f"the members must stop at different epochs: {epochs}"
    for mine, theirs in zip(stacked, solo, strict=True):
        ours, own = metrics(mine), metrics(theirs)
        assert ours["run"]["epochs_run"] == own["run"]["epochs_run"], (
            mine.name, ours["run"]["epochs_run"], own["run"]["epochs_run"])
        for split in ("val", "test"):
            a, b = ours[split]["model"]["mse"], own[split]["model"]["mse"]
            assert abs(a - b) <= 1e-5 * b, (mine.name, split, a, b)
    streams = out.stdout + out.stderr
    assert "after epoch 2, 2 of the stack's 3 members train on" in streams, streams
    assert "after epoch 4, 1 of the stack's 2 members train on" in streams, streams


def test_jobs_stack_by_config_and_the_rest_run_alone(tmp_path):
    sweep = tmp_path / "sweep"
    out = run_cli([*STACKED, *TINY, "epochs=1", "seed=0,1", "attention=vanilla,einsum",
                   f"hydra.sweep.dir={sweep}"], tmp_path)
    assert "Launching 4 jobs: 2 stacked group(s)" in out.stdout + out.stderr
    runs = job_dirs(sweep)
    assert [metrics(d)["run"]["stacked_members"] for d in runs] == [2, 2, 2, 2]
    # refused configs: each job alone, as the basic launcher runs it
    assert stack_refusal(compose_config([*TINY, "trainer.kernels=native"])) is not None
    assert stack_refusal(compose_config([*TINY, "trainer.compile=true"])) is not None
    assert stack_refusal(compose_config(TINY)) is None
    assert group_key(compose_config([*TINY, "seed=1"])) == group_key(compose_config(TINY))
    assert group_key(compose_config([*TINY, "lr=0.01"])) != group_key(compose_config(TINY))


def test_a_stack_whose_first_job_was_skipped_logs_each_member_into_its_own_run_dir(tmp_path):
    # job 0 completed before: skip_completed=true skips it, so the stack trains jobs 1 and 2
    # (stack position 0 is job 1): each member's epoch lines go to its own job's train.log
    sweep = tmp_path / "sweep"
    args = [*BATCHES, "epochs=1"]
    run_cli([*STACKED, *args, "seed=0", f"hydra.sweep.dir={sweep}"], tmp_path)
    out = run_cli([*STACKED, *args, "seed=0,1,2", "skip_completed=true",
                   f"hydra.sweep.dir={sweep}"], tmp_path)
    streams = out.stdout + out.stderr
    assert streams.count("skipped (skip_completed=true)") == 1, streams
    assert "training 2 runs as one stack" in streams, streams
    runs = job_dirs(sweep)
    assert len(runs) == 3
    for run_dir in runs:
        log = (run_dir / "train.log").read_text()
        epochs = [line for line in log.splitlines() if "epoch 1/1" in line]
        assert len(epochs) == 1, f"{run_dir.name}: one epoch line expected, got {epochs}"
        # the line is this job's own: its validation MSE is the one its metrics.json holds
        logged = float(re.search(r"val_mse (\S+)", epochs[0]).group(1))
        own = metrics(run_dir)["val"]["model"]["mse"]
        assert abs(logged - own) <= 1e-4 * own, (run_dir.name, logged, own)


def test_the_stacked_launcher_runs_a_resume_sweep_alone_and_it_is_refused(tmp_path):
    # resume= cannot stack (stack_refusal): the launcher runs each job alone, where the task
    # refuses to sweep a resume, instead of training every seed afresh in a stack
    run_dir, args = tmp_path / "run", [*TINY, "epochs=1"]  # (a stack would train them fast)
    run_cli([*args, f"hydra.run.dir={run_dir}"], tmp_path)
    sweep = tmp_path / "sweep"
    out = run_cli([*STACKED, *args, f"resume={run_dir}", "seed=0,1", f"hydra.sweep.dir={sweep}"],
                  tmp_path, check=False)
    streams = out.stdout + out.stderr
    assert out.returncode == 2, streams
    assert streams.count("runs alone: resume= continues one run\n") == 2, streams
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: a sweep job failed: "), out.stderr
    assert "continues one run; it cannot be swept" in last, out.stderr
    assert "Traceback" not in out.stderr
    assert not list(sweep.glob("*/checkpoints")), "nothing trained"


# Long enough (6 epochs of 16 steps) that the signal, sent when epoch 1's checkpoint appears,
# lands mid-run.
EPOCHS = 6
RUN = ["experiment=quick", f"epochs={EPOCHS}", "data.train_size=512", "batch_size=32",
       "log.figures=false"]


def test_a_signal_stops_every_member_with_a_checkpoint_each_resumes_alone(tmp_path):
    sweep = tmp_path / "sweep"
    name = (f"0_batch_size=32,data.train_size=512,epochs={EPOCHS},experiment=quick,"
            "log.figures=False,seed=0")
    with signal_once(sweep / name / "checkpoints" / "last.pt", signal.SIGTERM) as late:
        proc = run_cli([*STACKED, *RUN, "seed=0,1", f"hydra.sweep.dir={sweep}"], tmp_path,
                       check=False)
    stderr = proc.stderr
    assert proc.returncode == 143 and not late, (late, stderr)
    assert "Traceback" not in stderr
    runs = job_dirs(sweep)
    for run_dir in runs:
        assert f"""Resume with: python -m seqforecast.train 'resume="{run_dir}"'""" in stderr
        assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"
        state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
        assert 0 < state["epoch"] < EPOCHS
    run_cli([f'resume="{runs[1]}"'], tmp_path)  # as the shell passes the quoted line
    status = json.loads((runs[1] / "status.json").read_text())
    assert status["status"] == "completed"
    assert metrics(runs[1])["run"]["epochs_run"] == EPOCHS

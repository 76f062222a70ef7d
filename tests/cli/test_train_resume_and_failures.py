"""Runs survive crashes, interrupts and bad input: exact resume, safe checkpoints, one-line
errors, isolated sweep failures. SIGKILL hits a subprocess of its own (start); SIGINT and
SIGTERM a run in this process (signal_once), as the rest run: through run_cli."""
# ruff: noqa: E501  (the bad-input table keeps each expected message on its line)

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqforecast.config import CONFIG_VERSION
from seqforecast.train import unfinished_state
from seqforecast.training import load_checkpoint, save_checkpoint

from ..cli_helpers import REPO, TINY, run_cli

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

# Long enough (6 epochs of 16 steps, more than trainer.log_every's 10) that a signal sent
# when epoch 1's checkpoint appears lands mid-run, short enough for CI (small batches: the
# steps, not their size, are what the tests count).
EPOCHS, STEPS = 6, 16
RUN = ["experiment=quick", f"epochs={EPOCHS}", f"data.train_size={STEPS * 32}", "batch_size=32",
       "attention=diff", "block_size=4", "log.figures=false"]


def start(args, cwd) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "seqforecast.train", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"run ended before writing {path}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {path} after {timeout}s"
        time.sleep(0.02)


@contextmanager
def signal_once(path: Path, signum: int):
    """Send this process `signum` once `path` exists: a run in this process (run_cli, in the
    main thread) stops on it as a run of its own would. A signal that lands after the run's
    handlers are gone is kept in the list yielded, not delivered to the tests' process."""
    late, given_up = [], threading.Event()
    previous = signal.signal(signum, lambda s, _: late.append(s))

    def send():
        while not path.exists():
            if given_up.wait(0.02):  # the run ended without writing it
                return
        os.kill(os.getpid(), signum)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        yield late
    finally:
        given_up.set()
        sender.join()
        signal.signal(signum, previous)


def results(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {"test": metrics["test"], "val": metrics["val"]}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("uninterrupted")
    run_cli([*RUN, f"hydra.run.dir={base / 'run'}"], base)
    return base / "run"


def test_sigkill_then_the_same_command_continues_bit_for_bit_like_the_uninterrupted_run(
    uninterrupted, tmp_path
):
    # a study's job, or a benchmark's run: skip_completed=true, a run dir of its own
    command = [*RUN, "skip_completed=true", f"hydra.run.dir={tmp_path / 'run'}"]
    run_dir = tmp_path / "run"
    proc = start(command, tmp_path)
    wait_for(run_dir / "checkpoints" / "last.pt", proc)
    proc.kill()  # SIGKILL: no handler, no cleanup, no status
    proc.communicate()
    assert not (run_dir / "metrics.json").exists(), "killed before the end"
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    killed_at = state["epoch"]
    assert killed_at < EPOCHS
    # this run, and not one of another config, is there to continue
    made = OmegaConf.create(state["config"])
    assert unfinished_state(run_dir, made)["epoch"] == killed_at
    assert unfinished_state(run_dir, OmegaConf.merge(made, {"log": {"figures": True}})) is None
    assert unfinished_state(tmp_path / "elsewhere", made) is None

    out = run_cli(command, tmp_path)  # the same command again, as a study's rerun
    assert f"continued from its last checkpoint (epoch {killed_at}," in out.stdout + out.stderr
    assert f"resuming after epoch {killed_at}" in out.stdout
    assert results(run_dir) == results(uninterrupted)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "completed" and status["overrides"] == command[:-1]
    assert unfinished_state(run_dir, made) is None  # completed: reused, not resumed
    finished = (run_dir / "metrics.json").read_text()
    out = run_cli(command, tmp_path)
    assert "skipped (skip_completed=true)" in out.stdout + out.stderr
    assert (run_dir / "metrics.json").read_text() == finished
    # without skip_completed the same command is refused there rather than training over the
    # completed run: one line, exit 2, its status, metrics, checkpoints and saved config kept
    kept = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != "train.log"}
    log = (run_dir / "train.log").read_text()
    out = run_cli([*RUN, f"hydra.run.dir={run_dir}"], tmp_path, check=False)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"error: {run_dir} holds a completed run; training there would overwrite it: "
        "skip_completed=true reuses it (when made with the same overrides), or choose another "
        "run dir (hydra.run.dir, hydra.sweep.dir), or remove that one")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != "train.log"} == kept
    assert (run_dir / "train.log").read_text().startswith(log)  # the refusal appended, no more


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_at_a_step_boundary_with_a_resumable_checkpoint(
    uninterrupted, tmp_path, signum, code
):
    run_dir = tmp_path / "run"
    with signal_once(run_dir / "checkpoints" / "last.pt", signum) as late:
        proc = run_cli([*RUN, f"hydra.run.dir={run_dir}"], tmp_path, check=False)
    stderr = proc.stderr
    assert proc.returncode == code and not late, (late, stderr)
    assert f"Resume with: python -m seqforecast.train resume={run_dir}" in stderr
    assert "Traceback" not in stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and signal.Signals(signum).name in status["reason"]

    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert state["step"] > 0 and state["epoch"] < EPOCHS
    events = EventAccumulator(str(run_dir))
    events.Reload()
    steps = [e.step for e in events.Scalars("train/mse")]
    assert steps and steps[-1] == state["step"]

    run_cli([f"resume={run_dir}"], tmp_path)
    assert results(run_dir) == results(uninterrupted)
    # the run it continued, with that run's overrides: the same command with
    # skip_completed=true then finds it done instead of training it again over its files
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "completed" and status["overrides"] == RUN
    events = EventAccumulator(str(run_dir))
    events.Reload()
    steps = [e.step for e in events.Scalars("train/mse")]
    # train/* scalars come once per interval of at most trainer.log_every (10) steps, every
    # epoch's end included: each step covered once, in order, across the interruption.
    assert steps == sorted(set(steps)) and steps[-1] == EPOCHS * STEPS, "once each, in order"
    assert all(0 < b - a <= 10 for a, b in zip([0, *steps], steps, strict=False))
    assert {STEPS * e for e in range(1, EPOCHS + 1)} <= set(steps), "every epoch's end"


def _copy_run(uninterrupted: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "copy"
    shutil.copytree(uninterrupted, run_dir)
    return run_dir


def test_a_run_saved_before_log_figures_existed_resumes_drawing_them(uninterrupted, tmp_path):
    run_dir = _copy_run(uninterrupted, tmp_path)
    # RUN's; a run saved before the key existed has no such line, and no config_version
    key, version = "  figures: false\n", f"config_version: {CONFIG_VERSION}\n"
    config = run_dir / ".hydra" / "config.yaml"
    assert key in config.read_text() and version in config.read_text()
    config.write_text(config.read_text().replace(key, "").replace(version, ""))
    last = run_dir / "checkpoints" / "last.pt"
    state = load_checkpoint(last)
    state["config"] = state["config"].replace(key, "").replace(version, "")
    state.pop("format")
    save_checkpoint(last, state)
    run_cli([f"resume={run_dir}"], tmp_path)
    assert (run_dir / "figures" / "final" / "forecast.png").stat().st_size > 1000


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "code-running pickle"])
def test_resume_refuses_a_damaged_checkpoint_in_one_line(uninterrupted, tmp_path, damage):
    run_dir = _copy_run(uninterrupted, tmp_path)
    last = run_dir / "checkpoints" / "last.pt"
    if damage == "truncated":
        last.write_bytes(last.read_bytes()[:1000])
    elif damage == "random bytes":
        last.write_bytes(os.urandom(4096))
    else:
        last.write_bytes(pickle.dumps(_RunsCode(), protocol=2))
    before = (run_dir / "metrics.json").read_text()
    proc = run_cli([f"resume={run_dir}"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {last}: not a readable seqforecast checkpoint")
    assert proc.stderr.count("\n") == 1 and "pwned" not in proc.stdout
    assert (run_dir / "metrics.json").read_text() == before, "nothing already written is lost"


def test_resume_refuses_a_checkpoint_from_another_config(uninterrupted, tmp_path):
    other = tmp_path / "other"
    run_cli([*TINY, "epochs=1", "d_model=8", f"hydra.run.dir={other}"], tmp_path)
    run_dir = _copy_run(uninterrupted, tmp_path)
    shutil.copy(other / "checkpoints" / "last.pt", run_dir / "checkpoints" / "last.pt")
    proc = run_cli([f"resume={run_dir}"], tmp_path, check=False)
    assert proc.returncode == 2
    assert "was written by another config than" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_takes_the_saved_config_only(uninterrupted, tmp_path):
    run_dir = _copy_run(uninterrupted, tmp_path)
    proc = run_cli([f"resume={run_dir}", "epochs=20"], tmp_path, check=False)
    assert proc.returncode == 2
    assert "drop the other overrides: epochs=20" in proc.stderr


def test_resume_last_picks_the_newest_run_under_outputs(tmp_path):
    run_cli([*TINY, "epochs=1"], tmp_path)
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    out = run_cli(["resume=last"], tmp_path)
    assert f"resuming {run_dir}" in out.stdout
    assert len(list((tmp_path / "outputs").glob("*/*"))) == 1, "no new run dir"


def test_non_finite_loss_stops_with_epoch_and_step(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_cli(
        [*TINY, "lr=1e30", "trainer.grad_clip=0", f"hydra.run.dir={run_dir}"], tmp_path, check=False
    )
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: non-finite ")  # loss or validation MSE
    assert "at epoch 1, step" in proc.stderr and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert json.loads((run_dir / "status.json").read_text())["status"] == "failed"


def test_sweep_failures_are_recorded_and_the_other_jobs_complete(tmp_path):
    args = ["--multirun", *TINY, "model.label_len=4,99", "lr=0.002,1e30", "trainer.grad_clip=0"]
    proc = run_cli(args, tmp_path, check=False)
    assert proc.returncode != 0  # the sweep reports that some jobs failed
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    summary = json.loads((sweep / "summary.json").read_text())
    by_job = {job["job"].split("_")[0]: job for job in summary["jobs"]}
    assert summary["counts"] == {"completed": 1, "failed": 3}
    assert by_job["0"]["status"] == "completed"
    assert by_job["1"]["reason"].startswith("non-finite ")
    assert (
        "model.label_len=99" in by_job["2"]["reason"]
        and "model.label_len=99" in by_job["3"]["reason"]
    )
    good = next(sweep.glob("0_*"))
    assert json.loads((good / "metrics.json").read_text())["test"]["model"]["mse"] >= 0
    assert (good / "checkpoints" / "best.pt").is_file()
    for job in ("1", "2", "3"):
        status = json.loads((next(sweep.glob(f"{job}_*")) / "status.json").read_text())
        assert status["status"] == "failed"


# ----------------------------------------------------------------------------- bad input

# One case for each way a bad input reaches the user: a group with no such option, a type or key
# the schema refuses, a value or a combination validation refuses, a run that cannot be resumed.
# Every value validation refuses is checked in-process in tests/config/test_validate.py; here
# the CLI must turn each kind into one line and a non-zero exit.
BAD_INPUTS = [  # (arguments, text stderr must contain; the key, its value, what is allowed)
    ("attention=nope", "attention"),
    ("data=sines", "data"),
    ("d_model=abc", "d_model"),
    ("epochs=1.5", "epochs"),
    ("model.norm_first=maybe", "model.norm_first"),
    ("model.bogus=3", "model.bogus"),
    ("d_model=30 n_heads=4", "model.d_model=30 is not allowed: must be a multiple of model.n_heads=4"),
    ("attention=diff attention.lambda_mode=exp", "attention.lambda_mode='exp' is not allowed: choose one of scalar, reparam"),
    ("model.label_len=99", "model.label_len=99 is not allowed: must be in [0, data.in_len=12]"),
    ("model.dropout=1.5", "model.dropout=1.5 is not allowed: must be in [0, 1)"),
    ("pos_encoding=rope d_model=12 n_heads=4", "error: pos_encoding=rope conflicts with model.d_model=12: rope rotates pairs of q/k channels, and the q/k width per head, model.d_model/model.n_heads = 12/4 = 3, is odd"),
    ("device=gpu", "trainer.device='gpu' is not allowed: choose one of auto, cpu, cuda, cuda:N, mps"),
    ("data.slope_range=[2,1]", "data.slope_range=[2.0, 1.0] is not allowed: must be [low, high]"),
    ("seed=-1", "seed=-1"),
    ("resume=/nonexistent/run", "resume=/nonexistent/run: /nonexistent/run/checkpoints/last.pt does not exist"),
    ("attention=diff attention.talking_heads=true attention.kernel=sdpa", "error: attention.kernel=sdpa cannot serve diff attention here: talking heads' mixing acts between the scores and the softmax"),
    ("embedding=variate", "embedding=variate is not allowed: choose one of patch, point (variate is now model=itransformer)"),
    # a list typed as key=a,b: Hydra's fixes kept in the one line, the list's first
    ("data.features=load_forecast,wind", "error: data.features=load_forecast,wind is ambiguous: write data.features=[load_forecast,wind] for a list, add --multirun to sweep over its values, or quote it for one string: data.features='load_forecast,wind'"),
    ("data.targets=price,load", "error: data.targets=price,load is ambiguous: write data.targets=[price,load] for a list"),
]


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory):
    """Every bad input through the CLI's entry point."""
    base = tmp_path_factory.mktemp("bad")

    def one(case):
        index, (args, _) = case
        run_dir = base / f"run{index}"
        proc = run_cli([*TINY, *args.split(), f"hydra.run.dir={run_dir}"], base, check=False)
        return proc, run_dir

    # one after another, each stopping before training
    return list(map(one, enumerate(BAD_INPUTS)))


@pytest.mark.parametrize("index", range(len(BAD_INPUTS)), ids=[a for a, _ in BAD_INPUTS])
def test_bad_input_gets_one_clear_error_and_a_non_zero_exit(bad_input_runs, index):
    args, expected = BAD_INPUTS[index]
    proc, run_dir = bad_input_runs[index]
    assert proc.returncode != 0, args
    assert expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "checkpoints").exists()

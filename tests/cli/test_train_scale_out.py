"""Scaling out on existing engines: torchrun/DDP, the joblib and SLURM launchers, Optuna."""

import fcntl
import io
import json
import math
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ..cli_helpers import REPO, TINY, run_cli

pytestmark = pytest.mark.slow  # trains: make test-fast skips it


def torchrun(args, cwd, nproc=2, popen=False):
    # TMPDIR: torchrun's own folders (torchelastic_*) stay in the test's, not in /tmp
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", TMPDIR=str(cwd))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={nproc}", "-m", "seqforecast.train", *args,
    ]
    if popen:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def losses(run_dir: Path) -> list[float]:
    events = EventAccumulator(str(run_dir))
    events.Reload()
    return [e.value for e in events.Scalars("train/mse")]


# Long enough (4 epochs of 32 steps) that a signal sent after epoch 1's checkpoint lands
# mid-run; the one uninterrupted run serves every test below. 1000 windows: each epoch's last
# global batch is short (8 windows, 4 a rank), whose loss scaling and shards must match one
# process too. trainer.log_every=1: every step's loss is compared (so a signal mid-interval,
# the ranks agreeing at its end, is not what the resume here exercises).
DDP = [*TINY, "trainer.strategy=ddp", "epochs=4", "data.train_size=1000", "trainer.log_every=1"]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("ddp")
    proc = torchrun([*DDP, "batch_size=16"], cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (cwd / "outputs").glob("*/*")
    return run_dir


def test_ddp_writes_one_run_dir_with_one_set_of_events(ddp_run):
    outputs = ddp_run.parents[1]
    assert list(outputs.glob("*/*")) == [ddp_run], "one run dir, shared by both ranks"
    assert len(list(ddp_run.rglob("events.out.tfevents*"))) == 1
    assert len(list(ddp_run.glob("checkpoints/*.pt"))) == 2
    run = json.loads((ddp_run / "metrics.json").read_text())["run"]
    assert run["world_size"] == 2
    assert run["ranks_hold_identical_weights"] is True
    log = (ddp_run / "train.log").read_text()
    assert log.count("epoch 4/4") == 1, "only rank 0 logs"


def test_two_ranks_with_batch_b_train_like_one_process_with_batch_2b(ddp_run, tmp_path):
    single = tmp_path / "single"
    run_cli([*DDP, "trainer.strategy=single", "batch_size=32", f"hydra.run.dir={single}"], tmp_path)
    two, one = losses(ddp_run), losses(single)
    assert len(two) == len(one) == 4 * math.ceil(1000 / 32)
    for a, b in zip(two, one, strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    two_test = json.loads((ddp_run / "metrics.json").read_text())["test"]["model"]["mse"]
    one_test = json.loads((single / "metrics.json").read_text())["test"]["model"]["mse"]
    assert two_test == pytest.approx(one_test, rel=1e-4)


def test_ddp_run_interrupted_and_resumed_matches_the_uninterrupted_one(ddp_run, tmp_path):
    # epoch 1 ends (last.pt), the signal lands in epoch 2, the resumed run does the rest; the
    # uninterrupted run is the module's (the same arguments)
    run_dir = tmp_path / "stopped"
    proc = torchrun([*DDP, "batch_size=16", f"hydra.run.dir={run_dir}"], tmp_path, popen=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "checkpoints" / "last.pt").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # torchrun passes it on to both ranks
    out, err = proc.communicate(timeout=120)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted", (status, out, err)
    assert not (run_dir / "metrics.json").exists()

    resumed = torchrun([f"resume={run_dir}"], tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for split in ("test", "val"):
        a = json.loads((run_dir / "metrics.json").read_text())[split]
        b = json.loads((ddp_run / "metrics.json").read_text())[split]
        assert a == b


def test_torchrun_without_ddp_strategy_is_one_clear_error(tmp_path):
    proc = torchrun([*TINY, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode != 0
    assert "error: trainer.strategy='single' under torchrun with 2 processes" in proc.stderr
    assert proc.stderr.count("error: trainer.strategy") == 1, "rank 0 says it once"


class _Terminal(io.TextIOWrapper):
    """A text stream onto a pseudo-terminal's side: a real terminal (isatty, a width) for a run
    in this process. What it wrote is read at the other side, so getvalue is empty."""

    def getvalue(self) -> str:
        return ""


def _run_on_a_terminal(args, cwd, fresh=True) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal (progress bars on), return its output: in
    a process of its own (`fresh`: the processes it starts write there too) or in this one."""
    master, slave = pty.openpty()
    # A terminal 120 columns wide: a fresh pty reports 0, and tqdm would draw nothing.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    if fresh:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.Popen(
            [sys.executable, "-m", "seqforecast.train", *args],
            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=slave,
        )
        os.close(slave)
        code = proc.wait(timeout=300)
    else:
        with _Terminal(io.FileIO(slave, "w"), encoding="utf-8", line_buffering=True) as term:
            code = run_cli(args, cwd, check=False, stderr=term).returncode
    reader.join(timeout=30)
    os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


BAR = re.compile(r"\d+%\|")


def test_joblib_runs_jobs_in_parallel_with_a_line_each_and_no_bars(tmp_path):
    args = ["--multirun", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *TINY,
            "attention=vanilla,diff"]
    code, terminal = _run_on_a_terminal(args, tmp_path)
    assert code == 0, terminal
    assert not BAR.search(terminal), "no progress bars from parallel jobs"
    assert len(re.findall(r"\[sweep\] job \d completed", terminal)) == 2
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["counts"] == {"completed": 2}
    for job, attention in (("0", "vanilla"), ("1", "diff")):
        job_dir = next(sweep.glob(f"{job}_*"))
        log = (job_dir / "train.log").read_text()
        assert f"encoder: {attention}/" in log and "epoch 2/2" in log
        assert (job_dir / "metrics.json").is_file()
    # The same run alone, on a terminal, does show its bars: the check above can fail. (In
    # this process: no interpreter to start; its stderr is the terminal all the same.)
    code, terminal = _run_on_a_terminal([*TINY, f"hydra.run.dir={tmp_path / 'one'}"], tmp_path,
                                        fresh=False)
    assert code == 0 and BAR.search(terminal)


def test_slurm_launcher_config_composes(tmp_path):
    out = run_cli(
        ["--cfg", "hydra", "hydra/launcher=slurm", "hydra.launcher.partition=gpu",
         "hydra.launcher.gpus_per_task=1"],
        tmp_path,
    ).stdout
    launcher = yaml.safe_load(out)["hydra"]["launcher"]
    assert launcher["_target_"].endswith("submitit_launcher.SlurmLauncher")
    assert launcher["partition"] == "gpu"
    assert launcher["timeout_min"] == 60 and launcher["cpus_per_task"] == 4
    assert launcher["gpus_per_task"] == 1
    assert list(tmp_path.iterdir()) == []


def test_optuna_study_finishes_and_writes_its_best_parameters(tmp_path):
    # one epoch a trial: the search's sizes (d_model up to 128, 3 layers) are not TINY's
    run_cli(["hparams_search=optuna", "hydra.sweeper.n_trials=3", *TINY, "epochs=1"], tmp_path)
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert math.isfinite(results["best_value"]) and results["best_value"] >= 0
    assert {"lr", "d_model", "attention", "block_size", "pos_encoding", "ffn"} <= set(
        results["best_params"]
    )
    assert {"model.encoder_layers", "model.decoder_layers"} <= set(results["best_params"])
    trials = [p for p in sweep.iterdir() if p.is_dir() and p.name[0].isdigit()]
    assert len(trials) == 3
    best = min(json.loads((t / "status.json").read_text())["best_val_mse"] for t in trials)
    assert best == pytest.approx(results["best_value"])

"""Running the project's CLIs as a user would: argv in, exit code and both streams out (in the
test's process, or a fresh one where a real process is the point: run_cli)."""

import contextlib
import importlib.util
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Runs whose test does not read their figures skip drawing them (about a second a run); the
# tests of the figures themselves use TINY_WITH_FIGURES.
TINY_WITH_FIGURES = ["experiment=quick", "data.train_size=64", "data.val_size=16"]
TINY = [*TINY_WITH_FIGURES, "log.figures=false"]


# The CLIs a test runs in its own process unless it asks for a fresh one: a fresh interpreter
# costs about 8 s of imports (torch, Hydra, TensorBoard) against 2 s for a tiny run in process,
# which made most of the suite's time. The tests that need a real process (SIGKILL, torchrun,
# launchers' workers, console scripts, the default run, a study that trains: its runs are
# processes of their own, writing to its streams) ask for one (`fresh=True`) or spawn it
# themselves; SIGINT and SIGTERM reach a run in this process as they would its own.
# module run -> the module whose main(argv) it runs (train: its Hydra app's cli())
IN_PROCESS = {"seqforecast.train": "seqforecast.train", "seqforecast.evaluate":
              "seqforecast.evaluate", "seqforecast.predict": "seqforecast.predict",
              "seqforecast.compare": "seqforecast.compare",
              "seqforecast.datasets": "seqforecast.datasets.cli",
              "seqforecast.study": "seqforecast.study"}


def fresh_env() -> dict:
    """A fresh process's environment: this one's, the repository importable, and Hydra's full
    tracebacks off (a refusal is its one line, as a user sees it)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def run_cli(args, cwd, module="seqforecast.train", check=True, fresh=False, children=False,
            stderr=None):
    """`python -m <module> <args>` in `cwd`: its exit code and both streams
    (subprocess.CompletedProcess); in this process unless `fresh` (see IN_PROCESS).
    `children`: the run starts processes that write to its streams (a study's multiruns):
    in this process, its streams are taken at the file descriptors, theirs with them.
    `stderr`: in this process, the stream the run's stderr is (a terminal's, say: anything with
    write, isatty and getvalue, whose getvalue is the result's stderr)."""
    if fresh or module not in IN_PROCESS:
        proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=fresh_env(),
                              capture_output=True, text=True)
    else:
        import importlib

        entry = importlib.import_module(IN_PROCESS[module])
        if module == "seqforecast.train":  # its Hydra app reads sys.argv
            proc = _in_process(module, args, cwd, entry.cli, children, stderr)
        else:
            proc = _in_process(module, args, cwd, lambda: entry.main(list(args)), children,
                               stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@contextlib.contextmanager
def fits_in_process():
    """Forecaster.fit's training run in this process, as run_cli runs the CLI, rather than in
    its child process: the child's start (~5 s here) spared where a test is about the frames
    and the run, not the process (tests/api/test_forecaster.py's first fit keeps the child)."""
    import pytest

    import seqforecast.api.forecaster as forecaster

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(forecaster, "train_command",
                      lambda args: run_cli(args, os.getcwd(), check=False))
        yield


@contextlib.contextmanager
def sweeps_in_process():
    """A study's multiruns (seqforecast.studies.launch.run_sweep) in this process, as run_cli
    runs the CLI, their streams then written to the study's: the child's start (~5 s here)
    spared where a test is about the study, not the process (tests/cli/test_study.py's first
    study keeps its child)."""
    import pytest

    import seqforecast.studies.launch as launch

    def run_sweep(command):
        assert command[1:3] == ["-m", "seqforecast.train"], command
        proc = run_cli(command[3:], os.getcwd(), check=False)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        return proc.returncode

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launch, "run_sweep", run_sweep)
        yield


# The child of run_fresh: each command as run_cli runs it in process, one after another.
_COMMANDS = """
import json, sys
from tests.cli_helpers import run_cli
found = [run_cli(args, ".", module=sys.argv[1], check=False) for args in json.loads(sys.argv[2])]
print(json.dumps([[p.returncode, p.stdout, p.stderr] for p in found]))
"""


def run_fresh(commands, cwd, module="seqforecast.train", env=None):
    """Each of `commands` (a list of args) as `python -m <module> <args>` in `cwd`, in one
    fresh interpreter (with `env`, default this one's plus PYTHONPATH=REPO), one after another
    as run_cli runs them in process: their exit codes and both streams. For what a fresh
    process is needed for (an environment, a plugin's entry point, kernels not yet loaded) at
    the cost of one interpreter's start (~5 s here) rather than one a command. An `env` of
    one's own must put REPO on PYTHONPATH (the child imports tests.cli_helpers). What the
    child writes outside the commands' streams (a warning while importing, anything at file
    descriptor 2) fails the call, as it would have been a line of a command's own process."""
    child = subprocess.run([sys.executable, "-c", _COMMANDS, module, json.dumps(commands)],
                           cwd=cwd, env=env or fresh_env(), capture_output=True, text=True)
    if child.returncode != 0 or child.stderr:
        raise AssertionError(f"exit {child.returncode}\n{child.stdout}\n{child.stderr}")
    found = json.loads(child.stdout.strip().splitlines()[-1])
    return [subprocess.CompletedProcess([module, *args], code, out, err)
            for args, (code, out, err) in zip(commands, found, strict=True)]


class _Descriptor(io.TextIOWrapper):
    """A text stream over a temporary file that file descriptor `fd` points at until close()
    (then put back): what this process and the processes it starts write there."""

    def __init__(self, fd: int):
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        super().__init__(tempfile.TemporaryFile(), encoding="utf-8", line_buffering=True)
        self.fd, self.saved = fd, None
        try:
            self.saved = os.dup(fd)
            os.dup2(self.buffer.fileno(), fd)
        except OSError:
            self.close()
            raise

    def getvalue(self) -> str:
        self.flush()
        self.seek(0)
        return self.read()

    def close(self) -> None:
        saved, self.saved = getattr(self, "saved", None), None
        try:
            if saved is not None:
                self.flush()
        finally:
            if saved is not None:  # the descriptor put back whatever flushing did
                os.dup2(saved, self.fd)
                os.close(saved)
            super().close()


def _in_process(name, args, cwd, main, children=False, stderr=None):
    """`main()` (a CLI's entry point, with `args` bound or read from sys.argv) in this
    process, as a subprocess would run `name args` (argv in, exit code and both streams out),
    without an interpreter's start. What a run changes in the process (cwd, environment,
    torch's threads, logging, warning filters, signal handlers) is put back afterwards.
    `children`: file descriptors 1 and 2 point at the streams too, for the processes it
    starts (sys.stdout and sys.stderr write to the same files, so lines keep their order where
    the run flushes before it starts one). `stderr`: the stream for sys.stderr (run_cli)."""
    with contextlib.ExitStack() as stack:
        if children:
            out, err = (stack.enter_context(contextlib.closing(_Descriptor(fd)))
                        for fd in (1, 2))
        else:
            out, err = io.StringIO(), io.StringIO()
        return _run_main(name, args, cwd, main, out, stderr or err)


def _run_main(name, args, cwd, main, out, err):
    """_in_process with its streams: `out` and `err` (anything with write and getvalue)."""
    import torch

    argv, before, env = sys.argv, os.getcwd(), dict(os.environ)
    threads = torch.get_num_threads()
    loggers = {name: (lg.level, lg.disabled, lg.propagate, list(lg.handlers))
               for name, lg in logging.Logger.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    root = logging.getLogger()
    root_state = (root.level, list(root.handlers))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.argv = [name, *args]
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            code = main() or 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if isinstance(exit_.code, str):
            err.write(exit_.code + "\n")  # what the interpreter prints for sys.exit("...")
    finally:
        sys.argv = argv
        os.chdir(before)
        os.environ.clear()
        os.environ.update(env)  # the CLI sets HYDRA_FULL_ERROR for itself
        torch.set_num_threads(threads)
        for handler in root.handlers[:]:
            if handler not in root_state[1]:
                handler.close()
        root.setLevel(root_state[0])
        root.handlers[:] = root_state[1]
        for name, (level, disabled, propagate, kept) in loggers.items():
            lg = logging.getLogger(name)
            lg.setLevel(level)
            lg.disabled, lg.propagate, lg.handlers[:] = disabled, propagate, kept
        for name, lg in list(logging.Logger.manager.loggerDict.items()):
            if isinstance(lg, logging.Logger) and name not in loggers:
                lg.handlers[:] = []  # a logger made during the run: its handlers were the run's
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return subprocess.CompletedProcess([name, *args], code, out.getvalue(), err.getvalue())


def run_script(name, *args, cwd, fresh=False, check=True):
    """Run scripts/<name> with `args` in `cwd`; assert it exits 0 and return its stdout (or,
    unless `check`, the finished process). Its main(argv) in this process (as run_cli), unless
    `fresh`: the processes it starts (trains, workers, the official code) are its own either
    way."""
    if fresh:
        proc = subprocess.run(
            [sys.executable, str(REPO / "scripts" / name), *args],
            cwd=cwd, capture_output=True, text=True, timeout=600,
        )
    else:
        script = load_script(name)
        proc = _in_process(name, args, cwd, lambda: script.main(list(args)))
    if not check:
        return proc
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def load_script(name):
    """scripts/<name> imported as a module (its functions, without running its main); the
    scripts' folder on sys.path, as when one runs (they import bench_common)."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    # in sys.modules under a name of its own (dataclasses look their module up there), not the
    # one a script imports it by (bench_common stays the scripts' own)
    spec = importlib.util.spec_from_file_location(f"script_{Path(name).stem}",
                                                  REPO / "scripts" / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def trained(args, cwd):
    """Train with `args` into cwd/run; (the run dir, its metrics.json)."""
    run_dir = Path(cwd) / "run"
    run_cli([*args, f"hydra.run.dir={run_dir}"], cwd)
    return run_dir, json.loads((run_dir / "metrics.json").read_text())


def assert_refused(args, cwd, expected):
    """Training with `args` stops before writing anything: exit 2, its last stderr line the
    one line `error: ...` holding `expected`, no traceback."""
    run_dir = Path(cwd) / "run"
    proc = run_cli([*args, f"hydra.run.dir={run_dir}"], cwd, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and expected in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "checkpoints").exists()


def write_ett_file(path: Path, rows: int = 700) -> Path:
    """An hourly file in ETT's layout: a date column and three channels of different scales,
    daily and weekly cycles, a drift and noise (same bytes every time)."""
    import csv

    import numpy as np

    rng = np.random.default_rng(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["date", "HUFL", "MUFL", "OT"])
        for i in range(rows):
            moment = str(np.datetime64("2016-07-01T00:00") + np.timedelta64(i, "h"))
            cells = [
                level * (1 + 0.3 * np.sin(2 * np.pi * i / 24 + k) + 0.1 * np.sin(
                    2 * np.pi * i / 168) + 0.0005 * i) + rng.normal(0, 0.05 * level)
                for k, level in enumerate((5.0, 2.0, 30.0))
            ]
            writer.writerow([moment.replace("T", " "), *(f"{c:.4f}" for c in cells)])
    return path

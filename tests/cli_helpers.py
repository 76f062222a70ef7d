"""Running the project's CLIs in subprocesses, as a user would."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Runs whose test does not read their figures skip drawing them (about a second a run); the
# tests of the figures themselves use TINY_WITH_FIGURES.
TINY_WITH_FIGURES = ["experiment=quick", "data.train_size=64", "data.val_size=16"]
TINY = [*TINY_WITH_FIGURES, "log.figures=false"]


def run_cli(args, cwd, module="seqforecast.train", check=True):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_cli_in_process(args, cwd, module="seqforecast.train"):
    """The training CLI's entry point in this process, as `run_cli(..., check=False)` runs it
    in a subprocess (argv in, exit code and both streams out), without an interpreter's start:
    for the tables of bad input, which each end before training starts."""
    import contextlib
    import io

    from seqforecast import train

    assert module == "seqforecast.train"
    out, err = io.StringIO(), io.StringIO()
    argv, before, env = sys.argv, os.getcwd(), dict(os.environ)
    sys.argv = [module, *args]
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            train.cli()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = argv
        os.chdir(before)
        os.environ.clear()
        os.environ.update(env)  # the CLI sets HYDRA_FULL_ERROR for itself
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def run_script(name, *args, cwd):
    """Run scripts/<name> with `args` in `cwd`; assert it exits 0 and return its stdout."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / name), *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def load_script(name):
    """scripts/<name> imported as a module (its functions, without running its main)."""
    spec = importlib.util.spec_from_file_location(Path(name).stem, REPO / "scripts" / name)
    module = importlib.util.module_from_spec(spec)
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

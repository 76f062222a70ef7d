"""The package as a user installs it: the wheel built from this tree, installed into a fresh
virtual environment (reusing this environment's torch, numpy, Hydra ... through a .pth line,
never its editable seqforecast), and its four console scripts run from an empty folder."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from ..cli_helpers import REPO

pytestmark = pytest.mark.slow


def _run(args, cwd, check=True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """bin/ of a fresh venv holding the wheel of this tree."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    # A copy of the tree as a clone has it (setuptools would reuse a build/ left in the tree;
    # the configs link is copied as a link).
    source = root / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "outputs", "*.egg-info", "__pycache__", ".*_cache"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist), str(source)], cwd=root)
    (wheel,) = dist.glob("seqforecast-*.whl")
    env_dir = root / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", purelib], cwd=root).stdout.strip())
    # This environment's packages after the venv's own (plain paths: its .pth files, and so
    # its editable seqforecast, are not read).
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "reused.pth").write_text("\n".join(sorted(ours)) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
          str(wheel)], cwd=root)
    return env_dir / "bin"


@pytest.fixture(scope="module")
def probed(installed, tmp_path_factory):
    """One interpreter of the venv (each costs seconds of imports): where it imports
    seqforecast from, every packaged experiment composed (their names printed), and
    experiment=patchtst's patch length."""
    code = ("from pathlib import Path\n"
            "import seqforecast\n"
            "from seqforecast.config import CONFIG_DIR, compose_config\n"
            "print(seqforecast.__file__)\n"
            "names = sorted(p.stem for p in (Path(CONFIG_DIR) / 'experiment').glob('*.yaml'))\n"
            "for name in names:\n"
            "    assert compose_config([f'experiment={name}']).model.d_model > 0, name\n"
            "print(' '.join(names))\n"
            "print(compose_config(['experiment=patchtst']).embedding.patch_len)\n")
    return _run([str(installed / "python"), "-c", code],
                cwd=tmp_path_factory.mktemp("probe")).stdout.splitlines()


def test_the_installed_package_is_the_wheels(installed, probed):
    where = probed[0]
    assert str(installed.parent) in where and str(REPO) not in where


def test_the_console_scripts_train_evaluate_predict_and_compare_from_an_empty_folder(
    installed, tmp_path
):
    """The four console scripts on a CSV run. (seqforecast-train on the synthetic data, and
    its --cfg job, are the user's-config-folder test's below: experiment=tiny there is quick
    made smaller.)"""
    help_text = _run([str(installed / "seqforecast-train"), "--help"], cwd=tmp_path).stdout
    assert ("attention: autocorrelation, destationary, diff, einsum, flow, fourier, "
            "learned_mixing, no_mixing, normlin, probsparse, sigmoid, uniform, vanilla, "
            "zero") in help_text
    train = str(installed / "seqforecast-train")
    csv = REPO / "data" / "example.csv"
    _run([train, "experiment=csv_example", f"data.path={csv}",
          "epochs=1", "d_model=16", "n_heads=2", "log.figures=false",
          "hydra.run.dir=run"], cwd=tmp_path)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test"]["model"]["mse"] > 0
    _run([str(installed / "seqforecast-evaluate"), "run_dir=run"], cwd=tmp_path)
    assert (tmp_path / "run" / "evaluate" / "best" / "metrics.json").is_file()
    _run([str(installed / "seqforecast-predict"), "run_dir=run", f"input={csv}",
          "output=forecast.csv"], cwd=tmp_path)
    assert len((tmp_path / "forecast.csv").read_text().splitlines()) > 1
    out = _run([str(installed / "seqforecast-compare"), "run"], cwd=tmp_path).stdout
    assert "mse" in out.lower()


def test_every_experiment_travels_in_the_wheel_and_composes(probed):
    composed = probed[1].split()
    assert composed == sorted(p.stem for p in (REPO / "configs" / "experiment").glob("*.yaml"))
    assert probed[2] == "16"  # experiment=patchtst's patches, from the packaged preset


@pytest.fixture(scope="module")
def users_sweep(installed, tmp_path_factory):
    """A folder of one's own configs (an experiment built on the packaged quick) given with
    --config-dir: its job printed (--cfg job --resolve), then two seeds of it trained with
    hydra/launcher=stacked (one process for the two tests that read it)."""
    cwd = tmp_path_factory.mktemp("mine")
    mine = cwd / "my_configs" / "experiment"
    mine.mkdir(parents=True)
    (mine / "tiny.yaml").write_text(
        "# @package _global_\ndefaults:\n  - quick\n  - _self_\nd_model: 8\nepochs: 1\n"
        "data:\n  train_size: 64\n  val_size: 16\n  test_size: 64\n"
    )
    train = str(installed / "seqforecast-train")
    job = _run([train, "--config-dir", "my_configs", "experiment=tiny", "--cfg", "job",
                "--resolve"], cwd=cwd).stdout
    _run([train, "--config-dir", "my_configs", "--multirun", "hydra/launcher=stacked",
          "experiment=tiny", "log.figures=false", "seed=0,1", "hydra.sweep.dir=sweep"], cwd=cwd)
    runs = [json.loads(p.read_text()) for p in sorted((cwd / "sweep").glob("*/metrics.json"))]
    return job, runs


def test_a_users_own_config_folder_joins_the_search_path(users_sweep):
    job, runs = users_sweep
    assert "d_model: 8" in job
    assert runs
    for metrics in runs:
        assert metrics["run"]["parameters"] > 0 and metrics["test"]["model"]["mse"] > 0


def test_the_studies_travel_in_the_wheel(installed, tmp_path):
    """`seqforecast-study attention` finds its grid in the installed package (report only:
    no run yet, so every cell says its jobs are missing)."""
    out = _run([str(installed / "seqforecast-study"), "attention", "report"], cwd=tmp_path).stdout
    assert "patchtst/etth1-96: not run (18 jobs)" in out
    assert (tmp_path / "outputs" / "study" / "attention" / "study.json").is_file()


def test_the_stacked_launcher_travels_in_the_wheel(users_sweep):
    """hydra/launcher=stacked is found in the installed package (Hydra's hydra_plugins): the
    user's two seeds above ran as one stack."""
    _, runs = users_sweep
    assert len(runs) == 2
    assert all(metrics["run"]["stacked_members"] == 2 for metrics in runs)

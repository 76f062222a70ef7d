"""The default run still forecasts as well as the docs say (slow: one full default run).

The synthetic benchmark page (docs/benchmarks/synthetic.md) holds the 5-seed mean ± std of
each variant's held-out test MSE, made by `seqforecast.compare` (the series are drawn on the
CPU, so the sets are the same on every machine). The default run (vanilla, seed 0) must land
within 3 standard deviations of its row's mean: the seeds' own spread is the stated tolerance.
The baselines that do not depend on the training seed (last_value, drift) must reproduce the
page's values to the 3 digits printed there, since the test set is a fixed draw.

The README's quickstart prints the default run's test block: its baselines (no fit, or a
closed-form one, on that fixed draw) must be what the run prints, to every digit; the model's
test MSE varies with the CPU and the thread count (0.00661-0.00682 over the CPUs and thread
counts measured, 3.2% apart) and must lie within 5% of the README's.
"""

import json
import re

import pytest

from ..cli_helpers import REPO, run_cli

pytestmark = pytest.mark.slow
PAGE = REPO / "docs" / "benchmarks" / "synthetic.md"
README = REPO / "README.md"
# The model's test MSE against the README's: the runs measured (0.00661 and 0.00670 at 1 and 2
# threads on an AVX2 CPU, 0.00661 and 0.00682 at 1 thread on two AVX-512 ones) lie 3.2% apart.
README_TOLERANCE = 0.05


def page_row(group: str) -> tuple[float, float]:
    """(mean, std) of the held-out test MSE in the page's summary row for `group`."""
    text = PAGE.read_text()
    match = re.search(
        rf"^\| `{re.escape(group)}` \| [0-9,]+ \| (\d+) \| ([0-9.e-]+) ± ([0-9.e-]+) \|",
        text,
        re.MULTILINE,
    )
    assert match, f"no summary row for {group} in {PAGE.name}"
    return float(match.group(2)), float(match.group(3))


def page_baselines() -> dict[str, float]:
    text = PAGE.read_text()
    line = re.search(r"Baselines on the same windows \(MSE, mean over the runs\): (.*?)\.$",
                     text, re.MULTILINE | re.DOTALL)
    assert line, f"no baseline line in {PAGE.name}"
    return {name: float(value) for name, value in re.findall(r"(\w+) ([0-9.e-]+)", line.group(1))}


def readme_quickstart() -> dict[str, dict[str, str]]:
    """The README quickstart's test block: {forecaster: {mse, mae, rmse, smape: as printed}}."""
    block = re.search(r"^ +test \(held out\): .*\n +forecaster +(.*)\n((?: +\w+ +\d.*\n)+)",
                      README.read_text(), re.MULTILINE)
    assert block, f"no test block in {README.name}'s quickstart"
    names = block.group(1).split()[:4]
    assert names == ["mse", "mae", "rmse", "smape"], names
    return {cells[0]: dict(zip(names, cells[1:5], strict=True))
            for cells in (line.split() for line in block.group(2).splitlines())}


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    """metrics.json of the default run, run as a user runs it but for its figures (drawn at 6
    epochs) and its held-out test scalars in TensorBoard (8,192 series scored every 10 epochs):
    they cost time and change no number (test_train_tensorboard_and_evaluate.py:
    test_figures_and_test_scalars_off_keep_every_number, on a diff run with dropout: the
    default's vanilla maps are drawn by the same code)."""
    base = tmp_path_factory.mktemp("default")
    run_cli(["log.figures=false", "log.test_every=0", f"hydra.run.dir={base / 'run'}"], base,
            fresh=True)
    return json.loads((base / "run" / "metrics.json").read_text())


def test_the_readme_quickstart_is_what_a_run_prints(metrics):
    rows = readme_quickstart()
    assert set(rows) == {"model", "last_value", "drift", "nlinear"}
    for name in ("last_value", "drift", "nlinear"):
        for metric, shown in rows[name].items():
            assert f"{metrics['test'][name][metric]:.6g}" == shown, (name, metric)
    shown, mse = float(rows["model"]["mse"]), metrics["test"]["model"]["mse"]
    assert abs(mse - shown) <= README_TOLERANCE * shown, f"test MSE {mse:.6g}, README {shown}"


def test_the_default_run_matches_the_docs(metrics):
    mean, std = page_row("attention=vanilla pos_encoding=sinusoidal")
    mse = metrics["test"]["model"]["mse"]
    assert abs(mse - mean) <= 3 * std, f"test MSE {mse:.4g}, docs {mean:.4g} ± {std:.2g}"
    assert metrics["model_over_baseline_mse"]["test"]["nlinear"] < 1
    baselines = page_baselines()
    for name in ("last_value", "drift"):
        assert f"{metrics['test'][name]['mse']:.3g}" == f"{baselines[name]:.3g}", name

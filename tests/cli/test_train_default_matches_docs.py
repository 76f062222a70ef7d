"""The default run still forecasts as well as the docs say (slow: one full default run).

The synthetic benchmark page (docs/benchmarks/synthetic.md) holds the 5-seed mean ± std of
each variant's held-out test MSE, made by `seqforecast.compare` (the series are drawn on the
CPU, so the sets are the same on every machine). The default run (vanilla, seed 0) must land
within 3 standard deviations of its row's mean: the seeds' own spread is the stated tolerance.
The baselines that do not depend on the training seed (last_value, drift) must reproduce the
page's values to the 3 digits printed there, since the test set is a fixed draw.
"""

import json
import re

import pytest

from ..cli_helpers import REPO, run_cli

pytestmark = pytest.mark.slow
PAGE = REPO / "docs" / "benchmarks" / "synthetic.md"


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


def test_the_default_run_matches_the_docs(tmp_path):
    run_dir = tmp_path / "run"
    run_cli([f"hydra.run.dir={run_dir}"], tmp_path, fresh=True)  # as a user runs it
    metrics = json.loads((run_dir / "metrics.json").read_text())
    mean, std = page_row("attention=vanilla pos_encoding=sinusoidal")
    mse = metrics["test"]["model"]["mse"]
    assert abs(mse - mean) <= 3 * std, f"test MSE {mse:.4g}, docs {mean:.4g} ± {std:.2g}"
    assert metrics["model_over_baseline_mse"]["test"]["nlinear"] < 1
    baselines = page_baselines()
    for name in ("last_value", "drift"):
        assert f"{metrics['test'][name]['mse']:.3g}" == f"{baselines[name]:.3g}", name

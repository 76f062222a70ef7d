"""compare's metrics from metrics.json rows: a probabilistic model's own interval scores are
summarised and paired over seeds like the conformal ones."""

from pathlib import Path

import pytest

from seqforecast.comparison.runs import Group, Run
from seqforecast.comparison.summary import compare


def _run(loss: str, seed: int, crps: float, own_crps: float) -> Run:
    row = {"mse": 1.0 + seed, "mae": 1.0, "crps": crps, "coverage_80": 0.8, "msis_80": 3.0,
           "own_crps": own_crps, "own_coverage_80": 0.7, "own_msis_80": 4.0}
    metrics = {"test": {"model": row, "nlinear": {"mse": 2.0}},
               "model_over_baseline_mse": {"test": {"nlinear": row["mse"] / 2.0}},
               "run": {"train_seconds": 1.0}}
    return Run(Path(f"{loss}{seed}"), seed, {"loss.name": loss}, [f"loss={loss}"], metrics)


def test_own_scores_are_summarised_and_paired_like_the_conformal_ones():
    quantile = Group("loss=quantile", ("quantile",),
                     [_run("quantile", s, 1.0, own) for s, own in enumerate([0.5, 0.6, 0.7])])
    gaussian = Group("loss=gaussian", ("gaussian",),
                     [_run("gaussian", s, 1.0, own) for s, own in enumerate([1.0, 0.9, 1.4])])
    result = compare("test", [quantile, gaussian], quantile, [])
    names = [m.name for m in result.metrics]
    assert {"CRPS", "own CRPS", "own coverage 80%", "own MSIS 80%"} <= set(names)
    own = result.summaries["loss=gaussian", "own CRPS"]
    assert own.mean == pytest.approx(1.1)
    pair = result.paired["loss=gaussian", "own CRPS"]
    assert pair.ratio == pytest.approx((2.0 * 1.5 * 2.0) ** (1 / 3))
    assert ("loss=gaussian", "own coverage 80%") not in result.paired  # coverage: not a loss


def test_own_scores_are_left_out_unless_every_run_has_them():
    point = _run("mse", 0, 1.0, 0.0)
    for key in ("own_crps", "own_coverage_80", "own_msis_80"):
        del point.metrics["test"]["model"][key]
    group = Group("loss=mse", ("mse",), [point])
    other = Group("loss=quantile", ("quantile",), [_run("quantile", 0, 1.0, 0.5)])
    names = [m.name for m in compare("test", [group, other], group, []).metrics]
    assert "CRPS" in names and not any(n.startswith("own") for n in names)

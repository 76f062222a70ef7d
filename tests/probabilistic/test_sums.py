"""IntervalSums, batch by batch, equals the scores computed on all values at once."""

import math

import pytest
import torch

from seqforecast.probabilistic import coverage, crps_from_quantiles, interval_width, msis, pinball
from seqforecast.probabilistic.sums import IntervalSums

LEVELS = (0.025, 0.1, 0.5, 0.9, 0.975)


def test_batch_sums_equal_the_scores_on_everything_at_once():
    torch.manual_seed(0)
    b, h, t = 40, 6, 3
    quantiles = torch.randn(b, h, t, 1) + torch.tensor(LEVELS).logit()  # increasing levels
    target = torch.randn(b, h, t) * 1.5
    scale = torch.rand(b, t) + 0.5
    scale[:5, 0] = 0.0  # series without a seasonal-naive scale: left out of MSIS only
    sums = IntervalSums(LEVELS, (0.8, 0.95))
    for part in (slice(0, 13), slice(13, 40)):
        sums.add(quantiles[part], target[part], scale[part])
    found = sums.totals()
    torch.testing.assert_close(
        torch.tensor([found[f"pinball_{n}"] for n in ("2.5", "10", "50", "90", "97.5")],
                     dtype=torch.float64),
        pinball(quantiles, target, LEVELS).double(), rtol=1e-6, atol=1e-7,
    )
    assert found["crps"] == pytest.approx(crps_from_quantiles(quantiles, target, LEVELS).item())
    for level, (low, high) in ((0.8, (1, 3)), (0.95, (0, 4))):
        lower, upper = quantiles[..., low], quantiles[..., high]
        name = f"{100 * level:g}"
        assert found[f"coverage_{name}"] == pytest.approx(coverage(lower, upper, target).item())
        assert found[f"width_{name}"] == pytest.approx(interval_width(lower, upper).item())
        keep = (scale > 0)[:, None, :].expand_as(target)
        expected = msis(lower[keep], upper[keep], target[keep], level,
                        scale[:, None, :].expand_as(target)[keep])
        assert found[f"msis_{name}"] == pytest.approx(expected.item(), rel=1e-6)


def test_without_a_scale_there_is_no_msis():
    sums = IntervalSums(LEVELS, (0.8,))
    sums.add(torch.zeros(2, 3, 1, 5), torch.zeros(2, 3, 1))
    assert "msis_80" not in sums.totals() and sums.totals()["coverage_80"] == 1.0


def test_per_series_scores_are_each_series_alone():
    torch.manual_seed(1)
    quantiles = torch.randn(30, 4, 2, 1) + torch.tensor(LEVELS).logit()
    target = torch.randn(30, 4, 2)
    scale = torch.rand(30, 2) + 0.5
    series = torch.tensor([0, 2] * 15)  # series 1 has no window
    both = IntervalSums(LEVELS, (0.8,), n_series=3)
    both.add(quantiles, target, scale, series)
    per_series = both.per_series()
    assert set(per_series) == {"crps", "coverage_80", "width_80", "msis_80"}
    for s in (0, 2):
        alone = IntervalSums(LEVELS, (0.8,))
        keep = series == s
        alone.add(quantiles[keep], target[keep], scale[keep])
        for name, value in alone.totals().items():
            if name in per_series:
                assert per_series[name][s] == pytest.approx(value)
    assert math.isnan(per_series["msis_80"][1]) and per_series["coverage_80"][1] == 0.0
    pooled = IntervalSums(LEVELS, (0.8,))
    pooled.add(quantiles, target, scale)
    for name, value in pooled.totals().items():
        assert both.totals()[name] == pytest.approx(value)

"""Conformal intervals: coverage on data whose true quantiles are known, and causality."""

import math

import pytest
import torch

from seqforecast.probabilistic import AdaptiveConformal, SplitConformal, coverage

H, T = 6, 2  # horizon steps, targets
SIGMA = torch.linspace(0.5, 3.0, H)[:, None].expand(H, T)  # the error grows with the step


def _errors(n, generator, scale=1.0):
    return torch.randn(n, H, T, generator=generator, dtype=torch.float64) * SIGMA * scale


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_split_conformal_covers_its_level_on_new_windows(level):
    g = torch.Generator().manual_seed(0)
    calibration = SplitConformal(_errors(2000, g))
    point = torch.randn(20000, H, T, generator=g, dtype=torch.float64)
    truth = point + _errors(20000, g)
    lower, upper = calibration.interval(point, level)
    for h in range(H):  # per horizon step, not only on average
        got = coverage(lower[:, h], upper[:, h], truth[:, h]).item()
        assert abs(got - level) < 4 * math.sqrt(level * (1 - level) / 40000) + 0.01
    # the bounds are the true error quantiles, up to sampling
    z = torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor((1 + level) / 2))
    torch.testing.assert_close((upper - point)[0], (z * SIGMA).double(), rtol=0.08, atol=0.0)


def test_quantiles_never_cross_and_too_few_windows_give_an_open_interval():
    g = torch.Generator().manual_seed(1)
    calibration = SplitConformal(_errors(50, g))
    q = calibration.quantiles(torch.zeros(3, H, T), [0.1, 0.25, 0.5, 0.75, 0.9])
    assert (q[..., 1:] >= q[..., :-1]).all()
    few = SplitConformal(_errors(5, g))  # (5 + 1) * 0.975 > 5: no finite rank
    lower, upper = few.interval(torch.zeros(1, H, T), 0.95)
    assert torch.isinf(upper).all() and torch.isinf(lower).all()
    with pytest.raises(ValueError, match="finite"):
        SplitConformal(torch.tensor([[math.nan]]))


def test_float32_errors_sorted_in_slices_give_the_float64_bands_to_the_bit(monkeypatch):
    """The calibration keeps float32 errors in float32, sorted a slice of columns at a time:
    its quantiles and adaptive radii equal those of the float64 copy sorted whole (the
    reference: what it held before), to the bit."""
    from seqforecast.probabilistic import conformal

    g = torch.Generator().manual_seed(3)
    errors = torch.randn(101, H, T, generator=g) * SIGMA.float()  # float32, as a run's are
    monkeypatch.setattr(conformal, "SORT_CHUNK_VALUES", 101 * 5)  # 5 columns a slice, of 12
    split = SplitConformal(errors)
    assert split.sorted.dtype == torch.float32
    assert torch.equal(split.sorted.double(), errors.double().sort(dim=0).values)
    point = torch.randn(7, H, T, generator=g)
    levels = [0.005, 0.1, 0.5, 0.9, 0.995]
    reference = errors.double().sort(dim=0).values
    for i, q in enumerate(levels):
        got = split.quantiles(point, levels)[..., i]
        if q >= 0.5:
            k = math.ceil(102 * q)
            expected = point.double() + (reference[k - 1] if k <= 101 else math.inf)
        else:
            k = math.floor(102 * q)
            expected = point.double() + (reference[k - 1] if k >= 1 else -math.inf)
        assert got.dtype == torch.float64 and torch.equal(got, expected)
    adaptive = AdaptiveConformal(errors, 0.8)
    rate = torch.full((H, T), 0.2, dtype=torch.float64)
    k = math.ceil(102 * 0.8)
    assert torch.equal(adaptive.radius(rate), errors.double().abs().sort(dim=0).values[k - 1])


def test_adaptive_conformal_recovers_coverage_when_the_errors_grow():
    g = torch.Generator().manual_seed(2)
    residuals = _errors(1000, g)
    m = 6000
    point = torch.zeros(m, H, T, dtype=torch.float64)
    truth = point + _errors(m, g, scale=1.6)  # test months noisier than the calibration ones
    origins = torch.arange(m)
    split_lower, split_upper = SplitConformal(residuals).interval(point, 0.9)
    lower, upper, _ = AdaptiveConformal(residuals, 0.9, gamma=0.01).intervals(point, truth, origins)
    late = slice(m // 2, m)  # after it has adapted
    assert coverage(split_lower, split_upper, truth).item() < 0.8  # split conformal undercovers
    assert abs(coverage(lower[late], upper[late], truth[late]).item() - 0.9) < 0.02
    # a run of misses drives a rate below what 1,000 errors bound: the largest, not inf
    shocked = truth.clone()
    shocked[100:160] += 50.0
    lower, upper, rates = AdaptiveConformal(residuals, 0.9, gamma=0.01).intervals(
        point, shocked, origins)
    assert (rates < 0).any() and torch.isfinite(upper).all()
    largest = residuals.abs().amax(dim=0)
    torch.testing.assert_close(upper[rates < 0], largest.expand_as(upper)[rates < 0])


def test_adaptive_conformal_never_reads_a_truth_that_has_not_arrived():
    g = torch.Generator().manual_seed(3)
    residuals = _errors(200, g)
    point = torch.zeros(300, H, T, dtype=torch.float64)
    truth = _errors(300, g)
    origins = torch.arange(300) * 2  # a window every 2 steps
    aci = AdaptiveConformal(residuals, 0.8, gamma=0.05)
    lower, upper, _ = aci.intervals(point, truth, origins)
    i = 150
    changed = truth.clone()
    changed[i:] += 100.0  # the window's own truth and everything after it
    # truths of earlier windows that lie at or after window i's origin: also unknown at i
    for j in range(i):
        for h in range(H):
            if origins[j] + h >= origins[i]:
                changed[j, h] += 100.0
    lower2, upper2, _ = aci.intervals(point, changed, origins)
    torch.testing.assert_close(lower2[: i + 1], lower[: i + 1])
    torch.testing.assert_close(upper2[: i + 1], upper[: i + 1])
    assert not torch.equal(upper2[i + H :], upper[i + H :])  # later windows do adapt


def test_adaptive_conformal_refuses_windows_out_of_time_order():
    aci = AdaptiveConformal(torch.randn(10, H, T), 0.8)
    with pytest.raises(ValueError, match="time order"):
        aci.intervals(torch.zeros(2, H, T), torch.zeros(2, H, T), torch.tensor([5, 3]))


def _aci_reference(residuals, coverage_level, gamma, point, truth, origins):
    """ACI by its definition, element by element: window i's miss rate at step h sums the
    updates of every window j whose truth at h arrived before i's origin (a rate the
    calibration errors cannot bound takes the largest of them)."""
    magnitudes = residuals.double().abs().sort(dim=0).values
    n, (m, horizon) = residuals.shape[0], point.shape[:2]
    lower, upper = torch.empty_like(point), torch.empty_like(point)
    missed = torch.zeros_like(point, dtype=torch.bool)
    for i in range(m):
        for h in range(horizon):
            updates = [(1 - coverage_level) - missed[j, h].double()
                       for j in range(i) if origins[j] + h < origins[i]]
            rate = (1 - coverage_level) + gamma * sum(updates, torch.zeros(T, dtype=torch.float64))
            k = torch.ceil((n + 1) * (1 - rate)).long()  # [T]
            radius = torch.stack([magnitudes[int(k[t].clamp(1, n)) - 1, h, t] for t in range(T)])
            radius = torch.where(k < 1, torch.zeros_like(radius), radius)
            lower[i, h], upper[i, h] = point[i, h] - radius, point[i, h] + radius
            missed[i, h] = (truth[i, h] < lower[i, h]) | (truth[i, h] > upper[i, h])
    return lower, upper


def test_adaptive_conformal_equals_its_definition():
    g = torch.Generator().manual_seed(4)
    residuals = _errors(50, g)
    point = torch.randn(40, H, T, generator=g, dtype=torch.float64)
    truth = point + _errors(40, g, scale=1.5)
    origins = torch.cumsum(torch.randint(1, 4, (40,), generator=g), 0)  # uneven gaps
    lower, upper, _ = AdaptiveConformal(residuals, 0.8, gamma=0.05).intervals(point, truth,
                                                                             origins)
    ref_lower, ref_upper = _aci_reference(residuals, 0.8, 0.05, point, truth, origins)
    torch.testing.assert_close(lower, ref_lower)
    torch.testing.assert_close(upper, ref_upper)


def test_adaptive_quantiles_adapt_each_series_on_its_own_and_recover_coverage():
    """The run's ACI (training/evaluation.py): every central interval of every series of a
    panel adapts on that series' own arrived truths; under test errors 1.6x the calibration
    ones, the adapted 80% band covers 80% where the split one does not."""
    from seqforecast.training.evaluation import adaptive_quantiles

    g = torch.Generator().manual_seed(5)
    residuals = _errors(500, g)
    levels = (0.1, 0.5, 0.9)
    m = 1500  # two series: 1,000 windows, then 500
    point = torch.randn(m, H, T, generator=g, dtype=torch.float64)
    truth = point + _errors(m, g, scale=1.6)
    series = torch.cat([torch.zeros(1000), torch.ones(500)]).long()
    quantiles = adaptive_quantiles(residuals, point, truth, series, 2, levels, gamma=0.01)
    torch.testing.assert_close(quantiles[..., 1], point)  # the median is the point
    aci = AdaptiveConformal(residuals, 0.8, gamma=0.01)
    origins = torch.arange(500) * 2  # the second series starts afresh
    lower, upper, _ = aci.intervals(point[1000:], truth[1000:], origins)
    torch.testing.assert_close(quantiles[1000:, ..., 0], lower)
    torch.testing.assert_close(quantiles[1000:, ..., 2], upper)
    late = slice(400, 1000)
    adapted = coverage(quantiles[late, ..., 0], quantiles[late, ..., 2], truth[late]).item()
    split_lower, split_upper = SplitConformal(residuals).interval(point, 0.8)
    assert abs(adapted - 0.8) < 0.03
    assert coverage(split_lower, split_upper, truth).item() < 0.7


def test_the_band_after_the_data_is_the_one_a_window_forecast_there_gets():
    """rate_after: the miss rate once every truth has arrived. A window whose origin lies a
    whole horizon after the last one (so every earlier truth has arrived) gets exactly it;
    adaptive_quantiles hands it on per series (what predict centres on a new forecast)."""
    from seqforecast.training.evaluation import adaptive_quantiles

    g = torch.Generator().manual_seed(6)
    residuals = _errors(200, g)
    m = 300
    point = torch.randn(m + 1, H, T, generator=g, dtype=torch.float64)
    truth = point + _errors(m + 1, g, scale=1.4)
    origins = torch.cat([torch.arange(m), torch.tensor([m - 1 + H])])
    aci = AdaptiveConformal(residuals, 0.8, gamma=0.02)
    lower, upper, _ = aci.intervals(point, truth, origins)  # m + 1 windows: the last one after
    aci.intervals(point[:m], truth[:m], origins[:m])  # the first m alone
    torch.testing.assert_close(upper[m] - point[m], aci.radius(aci.rate_after))
    assert not torch.allclose(aci.rate_after, torch.full_like(aci.rate_after, 0.2))  # it moved
    # per series: two series, each with its own state after its own windows
    series = torch.cat([torch.zeros(m), torch.ones(m)]).long()
    after = {}
    adaptive_quantiles(residuals, torch.cat([point[:m]] * 2), torch.cat([truth[:m], point[:m]]),
                       series, 1, (0.1, 0.5, 0.9), 0.02, after, n_series=3)
    assert list(after) == [pytest.approx(0.8)] and after[0.8].shape == (3, H, T)
    assert after[0.8][2].isnan().all()  # a third series without test windows: none
    torch.testing.assert_close(after[0.8][0], aci.radius(aci.rate_after))
    assert (after[0.8][1] < after[0.8][0]).all()  # the second series never missed: narrower

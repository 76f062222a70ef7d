"""Quantile levels, non-crossing outputs and the probabilistic scores against closed forms."""

import math

import pytest
import torch

from seqforecast.probabilistic import (
    QuantileError,
    check_quantiles,
    coverage,
    crps_from_quantiles,
    interval_bounds,
    interval_width,
    monotone_quantiles,
    msis,
    pinball,
)
from seqforecast.probabilistic.quantiles import median_index


@pytest.mark.parametrize("levels, message", [
    ([], "at least one level"),
    ([0.1, 1.0], "1.0 is outside (0, 1)"),
    ([0.0, 0.5], "0.0 is outside (0, 1)"),
    ([-0.2], "outside (0, 1)"),
    ([0.1, 0.5, 0.5], "0.5 is given twice"),
    ([0.9, 0.1], "0.9 comes before 0.1"),
])
def test_bad_levels_are_refused_in_one_line(levels, message):
    with pytest.raises(QuantileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_quantiles(levels)


def test_an_interval_needs_both_of_its_levels():
    levels = check_quantiles([0.025, 0.1, 0.5, 0.9, 0.975])
    assert interval_bounds(levels, 0.8) == (1, 3)
    assert interval_bounds(levels, 0.95) == (0, 4)
    with pytest.raises(QuantileError, match="needs the quantiles 0.05 and 0.95"):
        interval_bounds(levels, 0.9)
    with pytest.raises(QuantileError, match="strictly between 0 and 1"):
        interval_bounds(levels, 80)
    assert median_index(levels) == 2


def test_monotone_outputs_never_cross_and_keep_the_anchor():
    torch.manual_seed(0)
    raw = torch.randn(500, 24, 5) * 10  # outputs that would cross, unconstrained
    q = monotone_quantiles(raw, anchor=2)
    assert (q[..., 1:] >= q[..., :-1]).all()
    torch.testing.assert_close(q[..., 2], raw[..., 2])
    raw.requires_grad_()
    monotone_quantiles(raw, anchor=2).sum().backward()
    assert torch.isfinite(raw.grad).all() and (raw.grad != 0).any()


def test_pinball_on_a_worked_example():
    q = torch.tensor([[1.0, 2.0, 3.0]])  # levels 0.1, 0.5, 0.9
    y = torch.tensor([2.5])
    # errors y - f: 1.5, 0.5, -0.5 -> 0.1 * 1.5, 0.5 * 0.5, (0.9 - 1) * -0.5
    torch.testing.assert_close(pinball(q, y, [0.1, 0.5, 0.9]), torch.tensor([0.15, 0.25, 0.05]))


@pytest.mark.parametrize("mu, sigma, y", [(0.0, 1.0, 0.3), (2.0, 0.5, 3.1), (-1.0, 2.0, -6.0)])
def test_crps_from_many_quantiles_is_the_gaussian_closed_form(mu, sigma, y):
    n = 999
    levels = [(i + 0.5) / n for i in range(n)]  # the midpoint rule
    normal = torch.distributions.Normal(mu, sigma)
    q = normal.icdf(torch.tensor(levels, dtype=torch.float64))[None, :]
    z = (y - mu) / sigma
    phi = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    big_phi = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    exact = sigma * (z * (2 * big_phi - 1) + 2 * phi - 1 / math.sqrt(math.pi))
    ours = crps_from_quantiles(q, torch.tensor([y], dtype=torch.float64), levels)
    assert ours.item() == pytest.approx(exact, rel=2e-3)


def test_interval_scores_on_a_worked_example():
    lower, upper = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([2.0, 2.0, 2.0])
    y = torch.tensor([1.0, -1.0, 3.0])  # inside, 1 below, 1 above
    assert coverage(lower, upper, y).item() == pytest.approx(1 / 3)
    assert interval_width(lower, upper).item() == 2.0
    # level 0.95: a = 0.05, penalty 2 / a = 40 per unit outside -> (2 + 42 + 42) / 3
    assert msis(lower, upper, y, 0.95).item() == pytest.approx(86 / 3)
    assert msis(lower, upper, y, 0.95, scale=2.0).item() == pytest.approx(43 / 3)

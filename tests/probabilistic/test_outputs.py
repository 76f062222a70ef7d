"""The outputs a model can forecast (probabilistic/outputs.py): each loss against its reference,
and each learning the true quantiles of data whose law is known."""

import pytest
import torch

from seqforecast.data.splits import ForecastData, Split
from seqforecast.options import ConfigError
from seqforecast.probabilistic import pinball
from seqforecast.probabilistic.outputs import (
    OUTPUTS,
    GaussianOutput,
    LossOptions,
    PointOutput,
    PoissonOutput,
    QuantileOutput,
    available_outputs,
    build_output,
    register_output,
)

LEVELS = (0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975)


def test_quantile_loss_is_the_mean_pinball_loss_over_the_levels():
    output = QuantileOutput(LEVELS)
    params = torch.randn(40, 7).sort(dim=-1).values
    target = torch.randn(40)
    expected = pinball(params, target, LEVELS).mean()
    torch.testing.assert_close(output.loss(params, target).mean(), expected)


def test_gaussian_loss_and_quantiles_are_the_normal_distributions():
    output = GaussianOutput()
    mean, scale = torch.randn(30, dtype=torch.float64), torch.rand(30, dtype=torch.float64) + 0.1
    params = torch.stack([mean, scale], dim=-1)
    target = torch.randn(30, dtype=torch.float64)
    normal = torch.distributions.Normal(mean, scale)
    torch.testing.assert_close(output.loss(params, target), -normal.log_prob(target))
    q = torch.tensor(LEVELS, dtype=torch.float64)
    expected = torch.distributions.Normal(mean[:, None], scale[:, None]).icdf(q)
    torch.testing.assert_close(output.quantiles(params, LEVELS), expected)


def test_map_back_moves_locations_and_scales_spreads():
    a, b = torch.tensor([2.0, -3.0]), torch.tensor([1.0, 5.0])
    params = torch.tensor([[0.5, 0.25], [0.5, 0.25]])  # (mean, scale) per value
    out = GaussianOutput().map_back(params, a, b)
    torch.testing.assert_close(out, torch.tensor([[2.0, 0.5], [3.5, 0.75]]))
    quantiles = QuantileOutput((0.1, 0.5, 0.9)).map_back(
        torch.tensor([[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]), a, b
    )
    torch.testing.assert_close(quantiles, torch.tensor([[-1.0, 1.0, 3.0], [2.0, 5.0, 8.0]]))


@pytest.mark.parametrize("output", [QuantileOutput(LEVELS), GaussianOutput()],
                         ids=["quantile", "gaussian"])
def test_training_on_known_noise_learns_its_quantiles(output):
    """Free raw outputs per horizon step, fitted by the output's own loss to N(mu_h, s_h)
    samples: the forecast quantiles approach the true ones at every level and step."""
    gen = torch.Generator().manual_seed(0)
    mu, sigma = torch.tensor([2.0, -1.0, 0.0]), torch.tensor([0.5, 1.0, 2.0])
    raw = torch.zeros(3, output.n_params, requires_grad=True)
    optimizer = torch.optim.Adam([raw], lr=0.05)
    for step in range(800):
        target = mu + sigma * torch.randn(512, 3, generator=gen)  # [N, steps]
        params = output.constrain(raw).expand(512, -1, -1)
        optimizer.param_groups[0]["lr"] = 0.05 if step < 500 else 0.005
        optimizer.zero_grad()
        output.loss(params, target).mean().backward()
        optimizer.step()
    with torch.no_grad():
        forecast = output.quantiles(output.constrain(raw), LEVELS)  # [steps, Q]
    true = torch.distributions.Normal(mu[:, None], sigma[:, None]).icdf(torch.tensor(LEVELS))
    error = (forecast - true).abs() / sigma[:, None]  # in each step's own noise units
    assert error.max() < 0.08, error
    assert (forecast.diff(dim=-1) > 0).all()


def test_build_output_names_what_is_allowed():
    assert isinstance(build_output({"name": "mse"}), PointOutput)
    assert build_output({"name": "quantile", "quantiles": [0.1, 0.5, 0.9]}).n_params == 3
    assert isinstance(build_output({"name": "poisson"}), PoissonOutput)
    with pytest.raises(ValueError, match="unknown loss 'tweedie'; allowed: gaussian, mse, "
                                         "poisson, quantile"):
        build_output({"name": "tweedie"})


def test_a_registered_output_is_built_by_its_name():
    """A loss is its class and its options, registered: nothing else names it."""

    @register_output("absolute_test", LossOptions)
    class AbsoluteOutput(PointOutput):
        name = "absolute_test"

        def loss(self, params, target):
            return (params[..., 0] - target).abs()

    try:
        built = build_output({"name": "absolute_test"})
        assert isinstance(built, AbsoluteOutput)
        assert float(built.loss(torch.tensor([[1.0]]), torch.tensor([3.0]))) == 2.0
        assert "absolute_test" in available_outputs()
    finally:
        OUTPUTS.unregister("absolute_test")


def test_quantile_levels_must_hold_the_run_s_interval_levels():
    intervals = {"method": "split", "levels": [0.8]}
    built = build_output({"name": "quantile", "quantiles": [0.1, 0.5, 0.9]}, intervals)
    assert built.levels == (0.1, 0.5, 0.9)
    with pytest.raises(ConfigError, match=r"^loss.quantiles: interval level 0.8 needs"):
        build_output({"name": "quantile", "quantiles": [0.2, 0.5, 0.8]}, intervals)
    build_output({"name": "quantile", "quantiles": [0.2, 0.5, 0.8]},
                 {"method": "none", "levels": [0.8]})  # no intervals scored: any levels
    with pytest.raises(ConfigError, match=r"^loss.quantiles=\[0.1, 0.9\] is not allowed: "
                                          r"include 0.5"):
        build_output({"name": "quantile", "quantiles": [0.1, 0.9]})


def test_poisson_loss_and_quantiles_are_the_poisson_distributions():
    """Its NLL is torch's, and its quantile at q is the smallest count whose CDF reaches q
    (summed from the probabilities here), from rates near 0 to the thousands."""
    output = PoissonOutput()
    rate = torch.tensor([1e-3, 0.2, 1.0, 3.5, 17.0, 250.0, 4000.0], dtype=torch.float64)
    target = torch.tensor([0.0, 1.0, 0.0, 5.0, 12.0, 260.0, 3900.0], dtype=torch.float64)
    poisson = torch.distributions.Poisson(rate)
    torch.testing.assert_close(output.loss(rate[:, None], target), -poisson.log_prob(target))
    found = output.quantiles(rate[:, None], LEVELS)  # [7, Q]
    counts = torch.arange(6000, dtype=torch.float64)
    cdf = torch.distributions.Poisson(rate[:, None]).log_prob(counts).exp().cumsum(-1)
    for i, q in enumerate(LEVELS):
        expected = (cdf < q).sum(-1).double()  # the first count whose CDF reaches q
        torch.testing.assert_close(found[:, i], expected)
    assert (found == found.round()).all() and (found.diff(dim=-1) >= 0).all()
    # mapped back like a point, then positive: a rate even where a f + b is below 0
    params = output.map_back(torch.tensor([[-5.0], [3.0]]), torch.ones(2), torch.zeros(2))
    assert (params > 0).all() and params[1, 0] == pytest.approx(3.0486, abs=1e-4)


def _data(values, scaled_by=None) -> ForecastData:
    split = Split(values[:, :4, None], values[:, 4:, None])
    return ForecastData(train=split, val=split, test=split, n_features=1, n_targets=1,
                        scaled_by=scaled_by)


def test_poisson_refuses_data_that_are_not_counts():
    counts = torch.tensor([[0.0, 1, 3, 2, 4, 0], [7, 2, 0, 1, 1, 5]])
    output = PoissonOutput()
    assert output.cannot_describe(_data(counts)) is None
    assert output.cannot_describe(_data(counts, "standard")) == (
        "loss=poisson forecasts counts in the data's own units; the data is scaled "
        "(data.scale=standard): set data.scale=none")
    for bad in (-1.0, 2.5):
        values = counts.clone()
        values[1, 5] = bad
        assert output.cannot_describe(_data(values)) == (
            f"loss=poisson describes counts (whole numbers >= 0); the train targets hold "
            f"{bad:g}: choose loss=gaussian, quantile or mse")
    for other in (PointOutput(), GaussianOutput()):  # every real value will do
        assert other.cannot_describe(_data(counts * 0.37 - 1)) is None


def test_training_on_known_counts_learns_their_rate():
    """Free raw outputs per step, mapped back (a = 1, b = 0) and fitted by the Poisson NLL to
    Poisson samples: the rates approach the true ones, and so its quantiles the true counts."""
    gen = torch.Generator().manual_seed(0)
    output, true = PoissonOutput(), torch.tensor([0.5, 4.0, 30.0])
    raw = torch.zeros(3, 1, requires_grad=True)
    optimizer = torch.optim.Adam([raw], lr=0.3)
    ones, zeros = torch.ones(3), torch.zeros(3)
    for step in range(1000):
        optimizer.param_groups[0]["lr"] = 0.5 if step < 600 else 0.05 if step < 800 else 0.005
        target = torch.poisson(true.expand(512, 3), generator=gen)
        params = output.map_back(output.constrain(raw), ones, zeros).expand(512, -1, -1)
        optimizer.zero_grad()
        output.loss(params, target).mean().backward()
        optimizer.step()
    with torch.no_grad():
        rate = output.map_back(output.constrain(raw), ones, zeros)
    assert ((rate[:, 0] - true).abs() / true).max() < 0.05, rate
    torch.testing.assert_close(output.quantiles(rate, (0.1, 0.5, 0.9)),
                               output.quantiles(true[:, None], (0.1, 0.5, 0.9)))

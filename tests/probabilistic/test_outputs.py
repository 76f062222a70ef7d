"""The outputs a model can forecast (probabilistic/outputs.py): each loss against its reference,
and each learning the true quantiles of data whose law is known."""

import pytest
import torch

from seqforecast.probabilistic import pinball
from seqforecast.probabilistic.outputs import (
    GaussianOutput,
    PointOutput,
    QuantileOutput,
    build_output,
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
                         ids=["quantile", "gaussian"])  # fmt: skip
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
    assert isinstance(build_output(None), PointOutput)  # runs saved before the group
    assert build_output({"name": "quantile", "quantiles": [0.1, 0.5, 0.9]}).n_params == 3
    with pytest.raises(ValueError, match="loss='poisson'; allowed: mse, quantile, gaussian"):
        build_output({"name": "poisson"})

"""Baselines and metrics on series where the right answer is known."""

import math

import pytest
import torch

from seqforecast.data import Split
from seqforecast.training import NLinear, drift, fit_baselines, forecast_metrics, last_value


def test_last_value_repeats_the_last_observation():
    src = torch.randn(3, 5, 2)
    out = last_value(src, 4)
    assert out.shape == (3, 4, 2)
    assert torch.equal(out, src[:, -1:].expand(-1, 4, -1))


def test_drift_continues_a_straight_line_exactly():
    t = torch.arange(10.0)
    line = (2.0 + 0.5 * t)[None, :, None]
    torch.testing.assert_close(drift(line[:, :6], 4), line[:, 6:])


def test_nlinear_recovers_an_exact_linear_relation():
    gen = torch.Generator().manual_seed(0)
    src = torch.randn(200, 8, 1, generator=gen)
    weight = torch.randn(8, 3, generator=gen)
    bias = torch.randn(3, generator=gen)
    last = src[:, -1:]
    target = ((src - last)[..., 0] @ weight + bias)[..., None] + last
    model = NLinear.fit(src, target)
    # The last input is always 0 after centring, so its weight is not identifiable.
    torch.testing.assert_close(model.weight[:-1], weight[:-1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model.bias, bias, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model(src), target, atol=1e-4, rtol=1e-4)


def test_nlinear_is_one_map_shared_across_target_channels():
    """Three target channels follow the same non-trivial map of their centred inputs: the one
    fitted map reproduces each channel (zero weights, or a per-channel map, would not)."""
    gen = torch.Generator().manual_seed(1)
    src = torch.randn(50, 6, 3, generator=gen) * torch.tensor([1.0, 10.0, 0.1])
    weight = torch.randn(6, 2, generator=gen)
    bias = torch.tensor([0.5, -1.0])
    last = src[:, -1:, :]
    target = ((src - last).transpose(1, 2) @ weight + bias).transpose(1, 2) + last  # [50, 2, 3]
    fitted = fit_baselines(Split(src, target))
    assert set(fitted) == {"last_value", "drift", "nlinear"}
    torch.testing.assert_close(fitted["nlinear"](src), target, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(fitted["last_value"](src), target, atol=0.1)
    nlinear = NLinear.fit(src, target)
    torch.testing.assert_close(nlinear.weight[:-1], weight[:-1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(nlinear.bias, bias, atol=1e-4, rtol=1e-4)


def test_metrics_values():
    pred = torch.tensor([[[1.0], [2.0]]])
    target = torch.tensor([[[0.0], [4.0]]])
    m = forecast_metrics(pred, target)
    assert m["mse"] == pytest.approx((1 + 4) / 2)
    assert m["mae"] == pytest.approx(1.5)
    assert m["rmse"] == pytest.approx(math.sqrt(2.5))
    with pytest.raises(ValueError):
        forecast_metrics(pred, target[:, :1])


def test_several_seasons_give_a_seasonal_naive_each():
    series = torch.arange(48.0).reshape(1, 48, 1) % 7 + torch.arange(48.0).reshape(1, 48, 1) // 12
    src, target = series[:, :36], series[:, 36:]
    one = fit_baselines(Split(src, target), 12)
    several = fit_baselines(Split(src, target), [7, 12])
    assert "seasonal_naive" in one and "seasonal_naive" not in several
    assert torch.equal(several["seasonal_naive_12"](src), one["seasonal_naive"](src))
    # Period 7 repeats src[29..35], then src[29..33].
    assert torch.equal(
        several["seasonal_naive_7"](src)[0, :, 0], src[0, [*range(29, 36), *range(29, 34)], 0]
    )
    assert "seasonal_naive" not in fit_baselines(Split(src, target), 0)


def test_nlinear_fitted_batch_by_batch_is_the_fit_of_every_window(monkeypatch):
    """A fit whose windows hold more than FIT_ONCE_VALUES values reads them in batches and adds
    up the normal equations: the same map as one fit of every window (to float64's rounding),
    where one fit below the threshold is the very computation it always was."""
    from seqforecast.training import baselines

    gen = torch.Generator().manual_seed(2)
    src = torch.randn(300, 10, 3, generator=gen)
    target = torch.randn(300, 4, 3, generator=gen) + src[:, -4:] * 0.5
    whole = NLinear.fit(src, target)
    parts = NLinear.fit_batches((src[i : i + 37], target[i : i + 37]) for i in range(0, 300, 37))
    torch.testing.assert_close(parts.weight, whole.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(parts.bias, whole.bias, rtol=1e-5, atol=1e-6)
    batches = list(baselines.fit_batches(Split(src, target), 200_000))
    assert len(batches) == 1  # 300 x 14 x 3 values: one fit, as before
    monkeypatch.setattr(baselines, "FIT_ONCE_VALUES", 1000)
    monkeypatch.setattr(baselines, "FIT_BATCH_VALUES", 420)  # 10 windows a batch
    batches = list(baselines.fit_batches(Split(src, target), 200_000))
    assert [len(b[0]) for b in batches] == [10] * 30
    assert torch.equal(torch.cat([b[0] for b in batches]), src)
    sampled = list(baselines.fit_batches(Split(src, target), 100))  # evenly spaced, batched
    assert torch.equal(torch.cat([b[1] for b in sampled]), Split(src, target).sample(100).target)
    batched = fit_baselines(Split(src, target))["nlinear"]
    torch.testing.assert_close(batched(src), whole(src), rtol=1e-5, atol=1e-5)

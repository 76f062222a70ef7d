"""The linear path beside the Transformer, channel independence, and epoch 0 competing."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config, validate_config
from seqforecast.model.linear_path import LinearPath, moving_average
from seqforecast.training.baselines import NLinear

IN, OUT = 24, 6


def cfg(*overrides):
    c = compose_config(["d_model=8", "n_heads=2", f"in_len={IN}", f"out_len={OUT}", *overrides])
    validate_config(c)
    return c


def windows(n=300, channels=1, seed=0):
    """Windows of a noisy seasonal series with a trend: [n, IN, C], [n, OUT, C]."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n + IN + OUT, dtype=torch.float32)
    series = torch.stack(
        [torch.sin(t / (3 + c)) + 0.01 * t + 0.1 * torch.randn(len(t), generator=g)
         for c in range(channels)], dim=-1,
    )
    rows = torch.arange(n)[:, None]
    src = series[rows + torch.arange(IN)]
    target = series[rows + IN + torch.arange(OUT)]
    return src, target


def test_the_linear_path_alone_is_nlinear_fitted_the_same_way():
    """Least squares on the training windows, the Transformer's output zeroed (as it starts):
    the model's forecast is the NLinear baseline's, fitted by the baseline's own code."""
    src, target = windows()
    model = build_model(cfg("model.linear_path=nlinear", "model.instance_norm=last")).eval()
    model.fit_linear_path(src, target)
    baseline = NLinear.fit(src, target)
    with torch.no_grad():
        assert torch.allclose(model(src), baseline(src), atol=1e-5)
        # Not a trivial map: it beats repeating the last value by far.
        assert (model(src) - target).pow(2).mean() < 0.5 * (src[:, -1:] - target).pow(2).mean()
    assert torch.allclose(model.linear_path.maps[0].weight.T, baseline.weight, atol=1e-5)


def test_the_transformer_learns_on_top_of_the_linear_path():
    src, target = windows()
    model = build_model(cfg("model.linear_path=nlinear"))
    model.fit_linear_path(src, target)
    with torch.no_grad():
        start = NLinear.fit(src, target)(src)
        assert torch.allclose(model.eval()(src), start, atol=1e-5)  # head starts at zero
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(3):
        optimizer.zero_grad()
        (model(src, target) - target).pow(2).mean().backward()
        optimizer.step()
    assert model.head.weight.abs().sum() > 0
    with torch.no_grad():
        assert not torch.allclose(model.eval()(src), start, atol=1e-5)


def test_moving_average_is_a_centred_mean_with_the_ends_repeated():
    x = torch.randn(2, 3, 11)
    for kernel in (1, 4, 5):
        left = (kernel - 1) // 2
        padded = torch.cat(
            [x[..., :1].repeat(1, 1, left), x, x[..., -1:].repeat(1, 1, kernel - 1 - left)], -1
        )
        expected = torch.stack([padded[..., i : i + kernel].mean(-1) for i in range(11)], dim=-1)
        assert torch.allclose(moving_average(x, kernel), expected, atol=1e-6)


def test_dlinear_maps_trend_and_remainder_and_fits_as_well_as_nlinear():
    src, target = windows()
    path = LinearPath("dlinear", IN, OUT, kernel=5)
    with torch.no_grad():
        path.maps[0].weight.normal_()
        centred = (src - src[:, -1:]).transpose(1, 2)
        trend = moving_average(centred, 5)
        by_hand = path.maps[0](trend) + path.maps[1](centred - trend) + src[:, -1:].transpose(1, 2)
        assert torch.allclose(path(src), by_hand.transpose(1, 2), atol=1e-5)
    path.fit_least_squares(src, target)
    # trend + remainder span the same inputs: least squares reaches NLinear's error.
    with torch.no_grad():
        dl = (path(src) - target).pow(2).mean()
        nl = (NLinear.fit(src, target)(src) - target).pow(2).mean()
    assert dl == pytest.approx(nl.item(), rel=1e-3)


def test_channel_independence_forecasts_each_channel_from_its_own_past():
    src, target = windows(n=8, channels=3)
    model = build_model(
        cfg("model.channel_independent=true", "model.instance_norm=revin",
            "embedding=patch", "embedding.patch_len=8", "embedding.stride=4"),
        n_features=3, n_targets=3,
    ).eval()
    with torch.no_grad():
        together = model(src)
        for c in range(3):
            alone = model(src[..., c : c + 1].repeat(1, 1, 3))[..., 0]
            assert torch.allclose(together[..., c], alone, atol=1e-5)
        moved = src.clone()
        moved[..., 1] += torch.randn_like(moved[..., 1])
        after = model(moved)
    assert torch.equal(after[..., 0], together[..., 0]) and torch.equal(
        after[..., 2], together[..., 2]
    )
    assert not torch.allclose(after[..., 1], together[..., 1])
    with pytest.raises(ValueError, match="no linear path"):
        model.fit_linear_path(src, target)


@pytest.mark.parametrize("model", ["transformer", "encoder"])
def test_behind_revin_the_fit_minimises_the_training_loss(model):
    """Behind RevIN the path maps normalised windows, but the loss is measured in the data's
    (scaled) units: the fit weights each window by its scale, so the training loss has no
    gradient left on the path's weights. A nearly flat window (std ~ 0) then counts by its
    error, not by its normalised target blown up 1000-fold."""
    src, target = windows(n=200)
    src[:5] = src[:5, -1:] + 1e-4 * torch.randn(5, IN, 1)  # five nearly flat windows
    extra = ["model.encoder_layers=1"] + ([] if model == "encoder" else ["model.label_len=4"])
    net = build_model(cfg(f"model={model}", "model.linear_path=nlinear",
                          "model.instance_norm=revin", *extra))
    net.fit_linear_path(src, target)
    net.eval()
    loss = (net(src) - target).pow(2).mean()
    loss.backward()
    for p in net.linear_path.parameters():
        assert p.grad.abs().max() < 1e-4 * (1 + p.abs().max())
    # The same map fitted without the weights: far worse on the windows it was fitted to.
    unweighted = LinearPath("nlinear", IN, OUT, kernel=25)
    normalized, stats = net.norm.normalize(src)
    unweighted.fit_least_squares(normalized, net.norm.normalize_targets(target, stats))
    with torch.no_grad():
        plain = (net.norm.denormalize_targets(unweighted(normalized), stats) - target).pow(2).mean()
        nlinear = (NLinear.fit(src, target)(src) - target).pow(2).mean()
    assert loss < 0.5 * plain
    assert loss <= nlinear * 1.01  # NLinear up to its bias: as good on these windows


@pytest.mark.parametrize("model", ["transformer", "encoder"])
def test_a_raw_linear_path_is_nlinear_exactly_behind_revin(model):
    """model.linear_path_input=raw: the path reads the window itself, so its fit is the NLinear
    baseline's to the last digit, RevIN or not; the Transformer's part keeps RevIN's scale but
    not its level, so a level shift of the window still shifts the forecast by as much."""
    src, target = windows(n=200, channels=2)
    extra = ["model.encoder_layers=1"] + ([] if model == "encoder" else ["model.label_len=4"])
    net = build_model(
        cfg(f"model={model}", "model.linear_path=nlinear", "model.instance_norm=revin",
            "model.linear_path_input=raw", "model.channel_independent=true", *extra),
        n_features=2, n_targets=2,
    ).eval()
    net.fit_linear_path(src, target)
    baseline = NLinear.fit(src, target)
    with torch.no_grad():
        torch.testing.assert_close(net(src), baseline(src), atol=1e-5, rtol=1e-5)
        torch.nn.init.normal_(net.head.weight, std=0.1)  # a trained Transformer's part
        shifted = net(src + 3.0) - 3.0
        torch.testing.assert_close(shifted, net(src), atol=1e-4, rtol=1e-4)
        assert not torch.allclose(net(src), baseline(src), atol=1e-3)

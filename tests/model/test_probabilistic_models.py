"""Every model forecasting quantiles or a distribution (`loss=quantile|gaussian`): shapes,
monotone quantiles, the point as the median or mean, and the map back (linear path, instance
normalisation, channel independence) equal to the point path's."""

import copy
import functools

import pytest
import torch
from omegaconf import OmegaConf

from seqforecast import build_model
from seqforecast.config import compose_config, validate_config

from .helpers import assert_teacher_forcing_reads_the_target

TINY = ["d_model=8", "n_heads=2", "in_len=16", "out_len=4"]
ENCODER_DECODER = ["model.label_len=4", "model.encoder_layers=2", "model.decoder_layers=1"]
PATCHTST = ["model=encoder", "embedding=patch", "embedding.patch_len=4", "embedding.stride=2",
            "model.encoder_layers=2"]

# (overrides, n_features, n_targets): every way a forecast is made and mapped back
SETTINGS = {
    "oneshot": (ENCODER_DECODER, 1, 1),
    "autoregressive": ([*ENCODER_DECODER, "model.decoding=autoregressive"], 1, 1),
    "covariates": ([*ENCODER_DECODER, "model.instance_norm=revin"], 3, 2),
    "nlinear_normalized": ([*ENCODER_DECODER, "model.linear_path=nlinear",
                            "model.instance_norm=revin"], 2, 2),
    "dlinear_raw": ([*ENCODER_DECODER, "model.linear_path=dlinear",
                     "model.linear_path_input=raw", "model.instance_norm=revin"], 2, 2),
    "encoder": (PATCHTST, 3, 3),
    "patchtst_channel_independent": ([*PATCHTST, "model.channel_independent=true"], 3, 3),
    "patchtst_nlinear_ci": ([*PATCHTST, "model.channel_independent=true",
                             "model.linear_path=nlinear"], 2, 2),
}


@functools.cache
def _composed(setting: str) -> dict:
    """The setting's config, composed once (the loss is swapped in by `build`)."""
    cfg = compose_config([*TINY, *SETTINGS[setting][0], "loss=quantile"])
    validate_config(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def build(setting: str, loss: str, seed: int = 0):
    _, n_features, n_targets = SETTINGS[setting]
    cfg = copy.deepcopy(_composed(setting))
    if loss != "quantile":
        cfg["loss"] = {"name": loss}  # configs/loss/{mse,gaussian}.yaml
    torch.manual_seed(seed)
    model = build_model(cfg, n_features, n_targets)
    _perturb(model)  # zero-initialised heads (linear path) would hide the map back
    return model, n_features


def _perturb(model) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("loss", ["quantile", "gaussian"])
def test_every_model_forecasts_its_distribution_and_trains(setting, loss):
    model, features = build(setting, loss)
    k = model.output.n_params
    src = torch.randn(5, 16, features) * 3 + 2
    target = torch.randn(5, 4, model.n_targets)
    model.train()
    params = model(src, target, distribution=True)
    assert params.shape == (5, 4, model.n_targets, k)
    model.output.loss(params, target).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and g.isfinite().all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    model.eval()
    with torch.no_grad():
        params, point = model(src, distribution=True), model(src)
    assert params.isfinite().all()
    assert point.shape == (5, 4, model.n_targets)
    if loss == "quantile":
        assert (params.diff(dim=-1) >= 0).all()  # never crossing
        median = model.output.levels.index(0.5)
        torch.testing.assert_close(point, params[..., median])
    else:
        assert (params[..., 1] > 0).all()  # a positive scale
        torch.testing.assert_close(point, params[..., 0])


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_distribution_path_maps_back_as_the_point_path(setting):
    """A point model's forecast taken through the K-output path (an affine map back of the
    head's output) equals its plain forecast, for every linear path and normalisation."""
    model, features = build(setting, "mse")
    src = torch.randn(4, 16, features) * 3 + 2
    with torch.no_grad():
        model.eval()
        params = model(src, distribution=True)
        plain = model(src)
    assert params.shape == (*plain.shape, 1)
    torch.testing.assert_close(params[..., 0], plain, atol=1e-5, rtol=1e-5)


def test_quantiles_stay_in_order_when_the_revin_affine_weight_is_negative():
    model, features = build("covariates", "quantile")
    with torch.no_grad():
        model.norm.weight.copy_(-model.norm.weight.abs() - 0.5)  # the map back reverses order
    params = model.eval()(torch.randn(3, 16, features), distribution=True)
    assert (params.diff(dim=-1) >= 0).all()


def test_a_shift_of_the_window_shifts_every_quantile():
    """RevIN: the window's level carries to every quantile and the scale to every spread."""
    model, features = build("patchtst_channel_independent", "quantile")
    src = torch.randn(2, 16, features)
    with torch.no_grad():
        model.eval()
        base = model(src, distribution=True)
        moved = model(src * 3.0 + 7.0, distribution=True)
    torch.testing.assert_close(moved, base * 3.0 + 7.0, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("loss", ["quantile", "gaussian"])
def test_generation_feeds_back_the_point_and_agrees_with_teacher_forcing(loss):
    model, _ = build("autoregressive", loss)
    src = torch.randn(2, 16, 1)
    with torch.no_grad():
        generated = model.eval()(src, distribution=True)
        point = model.output.point(generated)
        # no dropout configured: train == eval maths; teacher forcing on the generated points
        forced = model.train()(src, point, distribution=True)
        torch.testing.assert_close(forced, generated, atol=1e-5, rtol=1e-5)
        assert_teacher_forcing_reads_the_target(model, src, point, distribution=True)


def test_a_point_model_has_one_output_and_no_quantiles():
    model, _ = build("oneshot", "mse")
    assert model.output.n_params == 1 and not model.output.probabilistic
    with pytest.raises(ValueError, match="forecasts a point"):
        model.output.quantiles(torch.zeros(1, 1), [0.5])

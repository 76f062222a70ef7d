"""iTransformer (experiment=itransformer): variate tokens through every backend and FFN, the
order of channels meaning nothing, calendar features kept out of the instance norm, and its
official weights: the loader against a reference written from the published equations at the
ETTh1 and Weather settings, and every state dict it must refuse."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.attention import available_attention
from seqforecast.model.embedding import VariateTokens
from seqforecast.options import ConfigError
from seqforecast.published import (
    OfficialWeightsError,
    load_official_itransformer,
    load_official_weights,
)

from .helpers import ATTENTION, FFNS, forward_backward, validated
from .itransformer_reference import official_forward, official_state_dict

MARKS = 4  # hour, weekday, day of month, day of year (timeF at --freq h)
SETTINGS = {  # channels, in_len, out_len, d_model, d_ff, layers: the published horizon-96 ones
    "etth1": (7, 96, 96, 256, 256, 2),
    "weather": (21, 96, 96, 512, 512, 3),
}


def preset(*overrides):
    return validated("experiment=itransformer", "data.path=x.csv", *overrides)


def _cfg(channels, in_len, out_len, d_model, d_ff, layers, *extra):
    return preset(f"in_len={in_len}", f"out_len={out_len}", f"d_model={d_model}",
                  f"ffn.d_ff={d_ff}", f"model.encoder_layers={layers}", *extra)


def _window(batch, in_len, channels):
    steps = torch.arange(in_len)[None, :, None]
    x = 5 * torch.sin(steps / 7 + torch.rand(batch, 1, channels) * 6) + torch.randn(
        batch, in_len, channels) + 3
    marks = torch.rand(batch, in_len, MARKS) - 0.5  # each feature in [-0.5, 0.5]
    return x, marks


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("training", [False, True])
def test_loaded_official_weights_give_the_official_forward(name, training):
    channels, in_len, out_len, d_model, d_ff, layers = SETTINGS[name]
    state = official_state_dict(in_len, out_len, d_model, d_ff, layers)
    cfg = _cfg(*SETTINGS[name], "model.dropout=0.0")  # train mode: dropout 0 on both sides
    model = load_official_itransformer(state, cfg, channels).train(training)
    x, marks = _window(3, in_len, channels)
    out = model(torch.cat([x, marks], dim=-1))
    expected = official_forward(state, x, marks, n_heads=8, layers=layers)
    assert out.shape == expected.shape == (3, out_len, channels)
    assert (out - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_the_calendar_features_skip_the_instance_norm():
    """Scaling the series moves the forecast by the same affine map; the marks stay put."""
    channels, in_len, out_len, d_model, d_ff, layers = 3, 24, 6, 16, 32, 1
    model = build_model(_cfg(channels, in_len, out_len, d_model, d_ff, layers),
                        channels + MARKS, channels).eval()
    x, marks = _window(2, in_len, channels)
    with torch.no_grad():
        base = model(torch.cat([x, marks], -1))
        moved = model(torch.cat([10 * x - 4, marks], -1))
        other_marks = model(torch.cat([x, marks.flip(1)], -1))
    assert torch.allclose(moved, 10 * base - 4, rtol=1e-4, atol=1e-3)
    assert not torch.allclose(other_marks, base)  # the marks are read, not normalised away


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("ffn", FFNS)
def test_every_backend_and_ffn_attends_across_channels(attention, ffn):
    cfg = _cfg(5, 16, 4, 16, 32, 2, f"attention={attention}", f"ffn={ffn}", "n_heads=4")
    model = build_model(cfg, 5 + MARKS, 5)
    assert isinstance(model.tokens, VariateTokens) and model.tokens.encoder_tokens == 9
    forward_backward(model, features=5 + MARKS)


VARIATE_BACKENDS = ["vanilla", "einsum", "diff", "flow", "probsparse", "destationary",
                    "sigmoid", "normlin", "learned_mixing", "no_mixing", "uniform", "zero"]


def test_the_backends_that_serve_channel_tokens():
    """Exactly these build at channel tokens; the others refuse, when built, in one line."""
    served = set()
    for name in available_attention():
        try:
            _cfg(5, 16, 4, 16, 32, 2, f"attention={name}", "n_heads=4")
            served.add(name)
        except ConfigError as err:
            assert "tokens are channels, in no order" in str(err), name
    assert served == set(VARIATE_BACKENDS)


@pytest.mark.parametrize("attention", VARIATE_BACKENDS)
def test_the_order_of_channels_means_nothing_where_the_backend_says_so(attention):
    """No positions: permuting the series channels permutes their forecasts, nothing else, for
    every backend that declares it (Attention.CHANNEL_ORDER is None); the others say
    why not, and here it shows (probsparse at factor 1: 3 of its 9 queries active)."""
    extra = ["attention.factor=1"] if attention == "probsparse" else []
    cfg = _cfg(5, 16, 4, 16, 32, 2, f"attention={attention}", "n_heads=4", *extra)
    model = build_model(cfg, 5 + MARKS, 5).eval()
    with torch.no_grad():  # off their starting values (a learned mixing starts uniform)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x, marks = _window(2, 16, 5)
    order = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        base = model(torch.cat([x, marks], -1))
        permuted = model(torch.cat([x[..., order], marks], -1))
    keeps_it = model.encoder[0].self_attn.CHANNEL_ORDER is None
    assert torch.allclose(permuted, base[..., order], atol=1e-5) == keeps_it


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda s: s.pop("projector.bias"), "key 'projector.bias' is missing"),
        (lambda s: s.update({"projector.weight": torch.zeros(48, 16)}),
         "key 'projector.weight' has shape (48, 16), this config needs (6, 16)"),
        (lambda s: s.update({"encoder.attn_layers.0.conv1.weight": torch.zeros(32, 16)}),
         "key 'encoder.attn_layers.0.conv1.weight' has shape (32, 16), this config needs "
         "(32, 16, 1)"),
        (lambda s: s.update({"decoder.weight": torch.zeros(1)}), "unexpected key 'decoder.weight'"),
    ],
)
def test_a_state_dict_that_does_not_fit_is_one_line_and_nothing_is_copied(change, message):
    cfg = _cfg(3, 24, 6, 16, 32, 1)
    state = official_state_dict(24, 6, 16, 32, 1)
    change(state)
    model = build_model(cfg, 3 + MARKS, 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(OfficialWeightsError) as err:
        load_official_weights(model, state)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_official_weights_need_the_published_model():
    state = official_state_dict(24, 6, 16, 32, 1)
    for extra, message in [(["model.final_norm=auto"], "model.final_norm=always"),
                           (["model.revin_affine=true"], "model.revin_affine=false"),
                           (["attention=diff"], "attention=vanilla or einsum")]:
        model = build_model(_cfg(3, 24, 6, 16, 32, 1, *extra), 3 + MARKS, 3)
        with pytest.raises(OfficialWeightsError, match=message.replace(".", r"\.")):
            load_official_weights(model, state)

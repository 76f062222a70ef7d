"""TimeXer (model=timexer): official weights through the loader equal a reference written from
the published equations (features M and MS, with and without calendar tokens, eval and train
mode with dropout 0), every backend at each of its two positions trains, what it cannot take is
refused in one line, and its FLOPs are counted as the explicit path computes them."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.attention import available_attention
from seqforecast.options import ConfigError
from seqforecast.published import (
    OfficialWeightsError,
    load_official_timexer,
    load_official_weights,
)

from .helpers import forward_backward, validated
from .timexer_reference import official_forward, official_state_dict

MARKS = 4  # hour, weekday, day of month, day of year (timeF at --freq h)
SMALL = ["in_len=48", "out_len=12", "d_model=16", "n_heads=4", "ffn.d_ff=32",
         "embedding.patch_len=8", "embedding.stride=8", "model.encoder_layers=2"]


def preset(*overrides):
    return validated("experiment=timexer", "data.path=x.csv", *SMALL, *overrides)


def _window(batch, series, marks=True):
    steps = torch.arange(48)[None, :, None]
    x = 4 * torch.sin(steps / 5 + torch.rand(batch, 1, series) * 6) + torch.randn(
        batch, 48, series) + 2
    return x, (torch.rand(batch, 48, MARKS) - 0.5 if marks else None)


def test_calendar_features_the_config_does_not_give_are_refused_when_loading():
    state = official_state_dict(48, 12, 8, 16, 32, 2, n_vars=5)
    with pytest.raises(OfficialWeightsError, match="4 calendar features asked for, and the "
                                                   "config's data gives 0") as err:
        load_official_timexer(state, preset("data.time_features=false"), 5, 5, MARKS)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("features", ["M", "MS"])
@pytest.mark.parametrize("marks", [True, False])
@pytest.mark.parametrize("training", [False, True])
def test_loaded_official_weights_give_the_official_forward(features, marks, training):
    series = 5
    targets = series if features == "M" else 1
    state = official_state_dict(48, 12, 8, 16, 32, 2, n_vars=targets)
    cfg = preset("model.dropout=0.0", f"data.time_features={str(marks).lower()}")
    model = load_official_timexer(state, cfg, series, targets, MARKS if marks else 0)
    model.train(training)
    x, stamp = _window(3, series, marks)
    # the official MS convention puts the target last; this project's, first
    ours = x if features == "M" else x[..., [series - 1, *range(series - 1)]]
    inputs = ours if stamp is None else torch.cat([ours, stamp], dim=-1)
    out = model(inputs)
    expected = official_forward(state, x, stamp, n_heads=4, layers=2, patch_len=8,
                                features=features)
    assert out.shape == expected.shape == (3, 12, targets)
    assert (out - expected).abs().max() <= 1e-5 * expected.abs().max()


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda s: s.pop("head.linear.bias"), "key 'head.linear.bias' is missing"),
        (lambda s: s.update({"en_embedding.glb_token": torch.zeros(1, 2, 1, 16)}),
         "key 'en_embedding.glb_token' has shape (1, 2, 1, 16), this config needs "
         "(1, 5, 1, 16)"),
        (lambda s: s.update({"encoder.layers.0.conv1.weight": torch.zeros(32, 16)}),
         "key 'encoder.layers.0.conv1.weight' has shape (32, 16), this config needs "
         "(32, 16, 1)"),
        (lambda s: s.update({"projector.weight": torch.zeros(1)}),
         "unexpected key 'projector.weight'"),
        (lambda s: s.update({"en_embedding.position_embedding.pe": torch.zeros(1, 5000, 16)}),
         "is not the sinusoidal table"),
    ],
)
def test_a_state_dict_that_does_not_fit_is_one_line_and_nothing_is_copied(change, message):
    state = official_state_dict(48, 12, 8, 16, 32, 2, n_vars=5)
    change(state)
    model = build_model(preset(), 5 + MARKS, 5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(OfficialWeightsError) as err:
        load_official_weights(model, state)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


VARIATE = [n for n in available_attention() if n not in ("autocorrelation", "fourier")]


@pytest.mark.parametrize("attention", available_attention())
def test_every_backend_serves_both_positions_or_is_refused_in_one_line(attention):
    """One backend at both positions (the attention group alone), where it can serve both."""
    overrides = [f"attention={attention}"]
    if attention == "no_mixing":  # the exogenous position is cross-attention
        with pytest.raises(ConfigError, match=f"attention={attention} conflicts with "
                                              f"model=timexer: its exogenous position is "
                                              f"cross-attention"):
            preset(*overrides)
        return
    if attention not in VARIATE:
        with pytest.raises(ConfigError, match=f"model=timexer conflicts with "
                                              f"attention={attention}: .* exogenous tokens are "
                                              f"channels, in no order; keep it on the time "
                                              f"axis and give the exogenous tokens another "
                                              f"backend: attention@variate_attention=vanilla"):
            preset(*overrides)
        return
    model = build_model(preset(*overrides), 3 + MARKS, 3)
    forward_backward(model, features=3 + MARKS)


def _backend_names(stack) -> set[str]:
    return {layer.options.name for layer in stack}


@pytest.mark.parametrize("time_axis", available_attention())
def test_each_position_takes_its_own_backend(time_axis):
    """Any backend along time with another at the exogenous tokens (attention@variate_attention):
    each stack is built from its own node, trains, and a time-axis backend at the variate
    position is one line naming variate_attention."""
    variate = "einsum" if time_axis != "einsum" else "vanilla"
    model = build_model(preset(f"attention={time_axis}", f"attention@variate_attention={variate}"),
                        3 + MARKS, 3)
    stacks = model.attention_stacks()
    assert _backend_names(stacks["exogenous"]) == {variate}
    assert _backend_names(stacks["encoder"]) == {time_axis}
    forward_backward(model, features=3 + MARKS)
    with pytest.raises(ConfigError) as err:
        preset("attention@variate_attention=fourier")
    assert str(err.value).startswith("model=timexer conflicts with variate_attention=fourier: "
                                     "its modes are frequencies along time, and its exogenous "
                                     "tokens are channels, in no order")


def test_a_backend_of_its_own_at_the_variate_position_has_the_published_dropout():
    """attention_dropout (experiment=timexer: the model's 0.1) is what every attention config
    reads: a backend chosen for the exogenous tokens drops weights as the published model
    does, attention_dropout= sets both positions, and each position's own key sets it alone."""
    published = preset().model.dropout
    chosen = preset("attention@variate_attention=einsum")
    assert chosen.variate_attention.dropout == chosen.attention.dropout == published > 0
    both = preset("attention@variate_attention=einsum", "attention_dropout=0.2")
    assert both.variate_attention.dropout == both.attention.dropout == 0.2
    one = preset("attention@variate_attention=einsum", "variate_attention.dropout=0")
    assert (one.attention.dropout, one.variate_attention.dropout) == (published, 0.0)
    model = build_model(chosen, 3 + MARKS, 3)
    assert {layer.options.dropout for stack in model.attention_stacks().values()
            for layer in stack} == {published}


def test_variate_attention_where_it_cannot_apply_is_one_line_and_factors_serve_it_alone():
    with pytest.raises(ConfigError, match="variate_attention=einsum conflicts with "
                                          "model=transformer: its attention has no variate-axis "
                                          "position; drop variate_attention"):
        validated("attention@variate_attention=einsum")
    # a backend that reads per-window factors at the variate position alone gets them
    model = build_model(preset("attention@variate_attention=destationary"), 3 + MARKS, 3)
    assert model.side_name == "destationary"
    forward_backward(model, features=3 + MARKS)


def test_one_target_reads_the_others_and_the_targets_are_never_exogenous_then():
    """MS: changing a covariate moves the forecast; the target is not among the exogenous
    tokens (`model.exogenous=others`), M: it is."""
    model = build_model(preset("model.exogenous=others"), 3 + MARKS, 1).eval()
    assert not model.reads_targets
    x = torch.randn(2, 48, 3 + MARKS)
    moved = x.clone()
    moved[..., 1] += torch.randn(2, 48)
    with torch.no_grad():
        assert not torch.allclose(model(x), model(moved))
        assert model(x).shape == (2, 12, 1)
    assert build_model(preset(), 3 + MARKS, 3).reads_targets  # auto: every series a target


@pytest.mark.parametrize("overrides,message", [
    (["in_len=50"], "data.in_len=50 conflicts with embedding.patch_len=8: model=timexer cuts "
                    "the window into whole patches (the published code drops the last 2 "
                    "steps unread)"),
    (["embedding.stride=4"], "embedding.stride=4 conflicts with model=timexer: its patches "
                             "do not overlap"),
    (["pos_encoding=rope"], "model=timexer conflicts with pos_encoding=rope: its global token "
                            "has no time step"),
    (["model.channel_independent=true"], "model=timexer conflicts with "
                                         "model.channel_independent=true"),
])
def test_what_it_cannot_take_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        preset(*overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_no_exogenous_token_is_one_line():
    with pytest.raises(ConfigError, match="model=timexer has no exogenous token to read"):
        preset("model.exogenous=others", "data.time_features=false", "data.targets=[OT]")
    cfg = preset()  # the data's own channels (here two targets, nothing else) refused so too
    cfg.model.exogenous, cfg.data.time_features = "others", False
    with pytest.raises(ConfigError, match="model=timexer has no exogenous token to read"):
        build_model(cfg, 2, 2)


def test_maps_name_both_stacks_with_their_tokens():
    model = build_model(preset(), 3 + MARKS, 3)
    _, maps = model.eval()(torch.randn(1, 48, 3 + MARKS), return_attention=True)
    assert [w.shape for w in maps["encoder"]] == [(3, 4, 7, 7)] * 2  # 6 patches + global
    assert [w.shape for w in maps["exogenous"]] == [(1, 4, 3, 7)] * 2  # 3 series + 4 marks
    queries, keys = model.map_spans("encoder", 7, 7)
    assert queries[0] == (0, 7) and queries[-1] == (0, 47)

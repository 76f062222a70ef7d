"""The model built from composed configs: every combination, decoding modes, causality."""


import pytest
import torch
from omegaconf import OmegaConf

from seqforecast import build_model
from seqforecast.attention import (
    DifferentialAttention,
    RelativePositionTerms,
    RotaryEmbedding,
    available_attention,
    takes_position,
)
from seqforecast.config import ConfigError
from seqforecast.model.positional import sinusoidal_table

from .helpers import (
    ATTENTION,
    assert_teacher_forcing_reads_the_target,
    combination,
    every_combination,
    forward_backward,
    validated,
)

TINY = [
    "d_model=8", "n_heads=2", "in_len=6", "out_len=3", "block_size=2",
    "model.label_len=2", "model.encoder_layers=2", "model.decoder_layers=2",
]


def tiny(*overrides):
    return validated(*TINY, *overrides)


@every_combination
def test_every_combination_builds_and_trains(attention, position, ffn):
    model = build_model(combination(TINY, attention, position, ffn))
    forward_backward(model)


@pytest.mark.parametrize("attention,position,ffn", [("diff", "rope", "swiglu"),
                                                    ("einsum", "relative", "glu")])
def test_a_combination_composed_in_parts_is_its_whole_composition(attention, position, ffn):
    whole = tiny(f"attention={attention}", f"pos_encoding={position}", f"ffn={ffn}")
    parts = combination(TINY, attention, position, ffn)
    resolved = [OmegaConf.to_container(cfg, resolve=True) for cfg in (parts, whole)]
    assert resolved[0] == resolved[1]


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("instance_norm", ["last", "none", "revin"])
def test_autoregressive_decoding_builds_and_trains(attention, norm_first, instance_norm):
    cfg = tiny(
        f"attention={attention}",
        "model.decoding=autoregressive",
        f"model.norm_first={norm_first}",
        f"model.instance_norm={instance_norm}",
    )
    forward_backward(build_model(cfg))


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("position", ["sinusoidal", "relative", "rope"])
def test_teacher_forcing_is_causal(attention, position):
    model = build_model(
        tiny(f"attention={attention}", f"pos_encoding={position}", "model.decoding=autoregressive")
    ).train()
    src, target = torch.randn(2, 6, 1), torch.randn(2, 3, 1)
    forecast = model(src, target)
    for t in range(3):
        changed = target.clone()
        changed[:, t:] += torch.randn_like(changed[:, t:])
        # Forecast step t reads targets before t only ...
        torch.testing.assert_close(model(src, changed)[:, : t + 1], forecast[:, : t + 1])
    assert_teacher_forcing_reads_the_target(model, src, target)  # ... and it reads them


# the backends an autoregressive decoder refuses, each in one line when built
NOT_STEPWISE = {"probsparse", "autocorrelation", "fourier", "flow", "normlin", "no_mixing"}


@pytest.mark.parametrize("position", ["sinusoidal", "rope"])
@pytest.mark.parametrize("attention", available_attention())
def test_generation_agrees_with_teacher_forcing_on_its_own_output(attention, position):
    """Every backend a decoder accepts: generating step by step (each step over a prefix of
    the keys) gives what teacher forcing over all steps gives, fed the generated values."""
    try:
        cfg = tiny(f"attention={attention}", f"pos_encoding={position}",
                   "model.decoding=autoregressive", "model.instance_norm=none")
    except ConfigError as err:
        assert "\n" not in str(err)
        if "takes no position module" in str(err):  # rope, refused by a backend without it
            assert position == "rope" and not takes_position(attention)
        else:
            assert attention in NOT_STEPWISE, str(err)
        return
    assert attention not in NOT_STEPWISE
    torch.manual_seed(0)
    model = build_model(cfg)
    with torch.no_grad():  # off their starting values (a learned mixing starts uniform)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    src = torch.randn(2, 6, 1)
    with torch.no_grad():
        generated = model.eval()(src)
        forced = model.train()(src, generated)  # no dropout configured: train == eval maths
    torch.testing.assert_close(forced, generated, atol=1e-5, rtol=1e-5)


def test_oneshot_ignores_the_target():
    model = build_model(tiny()).train()
    src = torch.randn(2, 6, 1)
    torch.testing.assert_close(model(src, torch.randn(2, 3, 1)), model(src, torch.randn(2, 3, 1)))


@pytest.mark.parametrize("decoding", ["oneshot", "autoregressive"])
def test_last_value_normalisation_makes_level_shifts_free(decoding):
    model = build_model(tiny(f"model.decoding={decoding}")).eval()
    src = torch.randn(2, 6, 1)
    with torch.no_grad():
        torch.testing.assert_close(model(src + 5.0), model(src) + 5.0, atol=1e-5, rtol=1e-5)


def test_diff_layers_get_their_depth_and_role():
    model = build_model(tiny("attention=diff", "model.encoder_layers=3"))
    layers = list(model.encoder) + list(model.decoder)
    assert [layer.self_attn.lambda_init for layer in model.encoder] == [
        pytest.approx(0.8 - 0.6 * torch.exp(torch.tensor(-0.3 * i)).item()) for i in range(3)
    ]
    assert all(isinstance(layer.self_attn, DifferentialAttention) for layer in layers)
    assert all(not layer.self_attn.site.cross for layer in layers)
    assert all(layer.cross_attn.site.cross for layer in model.decoder)
    assert all(layer.self_attn.block_size == 2 for layer in layers)


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize(
    "position,kind", [("relative", RelativePositionTerms), ("rope", RotaryEmbedding)]
)
def test_inside_attention_positions_reach_every_attention(attention, position, kind):
    model = build_model(tiny(f"attention={attention}", f"pos_encoding={position}"))
    attentions = [m for name, m in model.named_modules() if name.endswith("attn")]
    assert len(attentions) == 2 + 2 * 2
    assert all(isinstance(a.position, kind) for a in attentions)
    # Each attention owns its own learnable terms.
    assert len({id(a.position) for a in attentions}) == len(attentions)


def test_sinusoidal_table_is_the_seeds():
    import math

    table = sinusoidal_table(50, 8)
    position = torch.arange(50.0)[:, None]
    div = torch.exp(torch.arange(0, 8, 2).float() * -(math.log(10000.0) / 8))
    torch.testing.assert_close(table[:, 0::2], torch.sin(position * div))
    torch.testing.assert_close(table[:, 1::2], torch.cos(position * div))


def test_block_size_shorthand_and_group_override():
    assert tiny("attention=diff", "block_size=16").attention.block_size == 16
    cfg = tiny("attention=diff", "block_size=16", "attention.block_size=32")
    assert cfg.attention.block_size == 32 and cfg.block_size == 16


def test_wrong_src_shape_is_a_clear_error():
    model = build_model(tiny())
    with pytest.raises(ValueError, match=r"src must be \[batch, 6, 1\]"):
        model(torch.randn(2, 5, 1))

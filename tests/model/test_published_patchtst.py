"""The published PatchTST, option by option (experiment=patchtst), and its official weights:
end padding, residual attention through the model, the uniform learned table, RevIN without
affine, dropout on the attention's output, the CPU dropout; the loader against a reference
written from the published equations, and every state dict it must refuse."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config, validate_config
from seqforecast.model.embedding import Tokenizer
from seqforecast.model.normalization import RevIN
from seqforecast.published import (
    OfficialWeightsError,
    load_official_patchtst,
    load_official_weights,
)

from .helpers import ATTENTION, forward_backward
from .official_reference import official_forward, official_state_dict

C = 3  # channels


def preset(*overrides):
    cfg = compose_config(["experiment=patchtst", "data.path=x.csv", *overrides])
    validate_config(cfg)
    return cfg


SETTINGS = {  # (in_len, out_len, patch_len, stride, d_model, n_heads, d_ff, layers)
    "etth": (336, 96, 16, 8, 16, 4, 128, 3),  # the published ETTh setting
    "illness": (104, 24, 24, 2, 16, 4, 128, 3),  # another patch length and stride
    "odd": (50, 7, 12, 5, 8, 2, 16, 2),  # (in_len - patch_len) not a multiple of stride
}


def _setting_cfg(in_len, out_len, patch_len, stride, d_model, n_heads, d_ff, layers):
    return preset(f"in_len={in_len}", f"out_len={out_len}", f"embedding.patch_len={patch_len}",
                  f"embedding.stride={stride}", f"d_model={d_model}", f"n_heads={n_heads}",
                  f"ffn.d_ff={d_ff}", f"model.encoder_layers={layers}",
                  "model.dropout=0.0")


# ------------------------------------------------------------------ official weights


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("training", [False, True])
def test_loaded_official_weights_give_the_official_forward(name, training):
    in_len, out_len, patch_len, stride, d_model, n_heads, d_ff, layers = SETTINGS[name]
    state = official_state_dict(C, *SETTINGS[name])
    model = load_official_patchtst(state, _setting_cfg(*SETTINGS[name]), C)
    model.train(training)
    # z-scored channels, as the published protocol feeds them
    steps = torch.arange(in_len)[None, :, None]
    x = torch.sin(steps / 12 + torch.rand(4, 1, C) * 6) + 0.3 * torch.randn(4, in_len, C)
    model_out = model(x)
    expected = official_forward(state, x, patch_len, stride, n_heads, layers, training)
    assert model_out.shape == (4, out_len, C)
    torch.testing.assert_close(model_out, expected, rtol=1e-5, atol=2e-5)
    # As exact as float32 allows: against the float64 forward, no further off than the
    # reference's own float32 forward (both round differently, each about 1e-5 here).
    exact = official_forward({key: t.double() for key, t in state.items()}, x.double(),
                             patch_len, stride, n_heads, layers, training)
    own_error = (expected.double() - exact).abs().max().item()
    assert (model_out.double() - exact).abs().max().item() <= 1.5 * own_error + 1e-6


def test_the_head_is_rearranged_not_copied_as_is():
    """The official head reads [d_model, N] d_model-major; ours [N, d_model]: a copy as-is
    would give another function, so the loader must permute (and does)."""
    state = official_state_dict(C, *SETTINGS["odd"])
    model = load_official_patchtst(state, _setting_cfg(*SETTINGS["odd"]), C)
    assert not torch.equal(model.head.weight, state["model.head.linear.weight"])
    theirs = state["model.head.linear.weight"]
    assert torch.equal(model.head.weight.detach().sort(1).values, theirs.sort(1).values)


def _cfg_odd():
    return _setting_cfg(*SETTINGS["odd"])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda s: s.pop("model.backbone.W_P.bias"), "key 'model.backbone.W_P.bias' is missing"),
        (lambda s: s.update({"model.head.linear.weight": torch.zeros(7, 5)}),
         "key 'model.head.linear.weight' has shape (7, 5), this config needs (7, 72)"),
        (lambda s: s.update({"model.model_trend.backbone.W_pos": torch.zeros(1)}),
         "unexpected key 'model.model_trend.backbone.W_pos'"),
        (lambda s: s.update({"model.backbone.encoder.layers.0.self_attn.sdp_attn.scale":
                             torch.tensor(0.1)}), "1/sqrt(4)"),
    ],
    ids=["missing", "misshapen", "unexpected", "scale"],
)
def test_a_state_dict_that_does_not_fit_is_refused_naming_the_first_bad_key(change, message):
    state = official_state_dict(C, *SETTINGS["odd"])
    change(state)
    model = build_model(_cfg_odd(), C, C)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(OfficialWeightsError, match=None) as err:
        load_official_weights(model, state)
    assert message in str(err.value) and "\n" not in str(err.value)
    for key, value in model.state_dict().items():  # refused whole: nothing copied
        assert torch.equal(value, before[key]), key


def test_another_models_state_dict_is_refused():
    other = build_model(_cfg_odd(), C, C).state_dict()  # seqforecast's own keys
    with pytest.raises(OfficialWeightsError, match="is missing"):
        load_official_weights(build_model(_cfg_odd(), C, C), other)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["model.revin_affine=true"], "model.revin_affine=false"),
        (["embedding.padding=start"], "embedding.padding=end"),
        (["pos_encoding=sinusoidal"], "pos_encoding=learned"),
        (["attention=diff", "model.res_attention=false"], "attention=vanilla or einsum"),
        (["model.channel_independent=false", "data.columns=series"],
         "model.channel_independent=true"),
    ],
)
def test_a_config_the_official_weights_cannot_mean_is_refused(overrides, message):
    model = build_model(preset(*overrides), C, C)
    with pytest.raises(OfficialWeightsError, match=message.replace(".", r"\.")):
        load_official_weights(model, official_state_dict(C, *SETTINGS["etth"]))


# ------------------------------------------------------------------ each option on its own


def test_end_padding_repeats_the_last_value_and_adds_a_patch():
    start, end = Tokenizer(336, 0, 96, 16, 8, "start"), Tokenizer(336, 0, 96, 16, 8, "end")
    assert (start.encoder_tokens, end.encoder_tokens) == (41, 42)
    src = torch.arange(336.0)[None, :, None]
    tokens = end.encoder_input(src)  # [1, 42, 16]
    torch.testing.assert_close(tokens[0, 0], torch.arange(16.0))  # starts at step 0, no shift
    torch.testing.assert_close(tokens[0, -1], torch.tensor([*range(328, 336)] + [335.0] * 8))
    assert end.encoder_spans()[-1] == (328, 335) and end.encoder_spans()[0] == (0, 15)


def test_end_padding_is_refused_for_the_encoder_decoder():
    cfg = compose_config(["embedding=patch", "embedding.padding=end", "model.label_len=8"])
    with pytest.raises(ValueError, match="embedding.padding=end"):
        validate_config(cfg)


def test_the_learned_table_starts_uniform_within_two_hundredths():
    table = build_model(preset(), C, C).input_encoding.embedding.detach()
    assert table.abs().max() <= 0.02
    assert table.std().item() == pytest.approx(0.02 / 3**0.5, rel=0.05)
    normal = build_model(preset("pos_encoding=learned"), C, C).input_encoding.embedding
    assert normal.abs().max() > 0.02  # N(0, 0.02^2) reaches past 0.02


def test_revin_without_affine_standardises_and_maps_back():
    norm = RevIN(2, affine=False)
    assert list(norm.parameters()) == []
    x = torch.randn(5, 40, 2) * 3 + 7
    z, stats = norm.normalize(x)
    torch.testing.assert_close(z.mean(1), torch.zeros(5, 2), atol=1e-5, rtol=0)
    torch.testing.assert_close(norm.denormalize_targets(z, stats), x, atol=1e-4, rtol=0)
    torch.testing.assert_close(norm.error_scale(stats, 2), stats[1])


def test_residual_attention_changes_only_the_layers_after_the_first():
    torch.manual_seed(0)
    with_res = build_model(preset(), C, C).eval()
    without = build_model(preset("model.res_attention=false"), C, C).eval()
    without.load_state_dict(with_res.state_dict())
    x = torch.randn(2, 336, C)
    _, maps = with_res(x, return_attention=True)
    _, plain_maps = without(x, return_attention=True)
    torch.testing.assert_close(maps["encoder"][0], plain_maps["encoder"][0])
    assert (maps["encoder"][1] - plain_maps["encoder"][1]).abs().max() > 1e-4


def test_attention_output_dropout_acts_in_training_only():
    torch.manual_seed(0)
    dropped = build_model(preset("model.dropout=0.0", "model.attention_output_dropout=0.5"), C, C)
    plain = build_model(preset("model.dropout=0.0", "model.attention_output_dropout=0.0"), C, C)
    plain.load_state_dict(dropped.state_dict())
    x = torch.randn(2, 336, C)
    dropped.eval(), plain.eval()
    torch.testing.assert_close(dropped(x), plain(x))
    dropped.train(), plain.train()
    assert (dropped(x) - plain(x)).abs().max() > 1e-3


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("position", ["learned", "rope", "none"])
def test_every_backend_that_carries_scores_trains_under_the_preset(attention, position):
    cfg = preset(f"attention={attention}", f"pos_encoding={position}", "in_len=48", "out_len=6",
                 "embedding.patch_len=8", "embedding.stride=4", "block_size=4")
    forward_backward(build_model(cfg, C, C), features=C)


def test_the_attention_projections_start_as_nn_linear_does():
    """The published projections keep nn.Linear's init: weights U(+-1/sqrt(fan_in)), biases
    nonzero; the backends' default (nn.MultiheadAttention's) zeroes the biases."""
    published = build_model(preset(), C, C).encoder[0].self_attn
    bound = 16**-0.5
    for proj in (published.q_proj, published.k_proj, published.v_proj, published.out_proj):
        assert proj.weight.abs().max() <= bound and proj.weight.abs().max() > 0.9 * bound
        assert proj.bias.abs().max() > 0
    mha = build_model(preset("model.attention_init=mha"), C, C).encoder[0].self_attn
    assert mha.q_proj.bias.abs().max() == 0 and mha.q_proj.weight.abs().max() > bound

"""The literature's backends inside both models: every one builds and trains where the config
accepts it (the encoder-decoder, the encoder-only model on points and patches, variate tokens
where it needs no time axis), and the causal one keeps the decoder causal."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.attention import build_attention

from .helpers import assert_teacher_forcing_reads_the_target, forward_backward, validated

LITERATURE = ["flow", "probsparse", "autocorrelation", "fourier", "destationary"]
TINY = ["d_model=8", "n_heads=2", "in_len=12", "out_len=6", "model.encoder_layers=2"]
MODELS = {
    "encoder-decoder": ["model.label_len=4", "model.decoder_layers=2"],
    "encoder, points": ["model=encoder"],
    "encoder, patches": ["model=encoder", "embedding=patch", "embedding.patch_len=4",
                         "embedding.stride=2", "embedding.padding=end"],
}


@pytest.mark.parametrize("attention", LITERATURE)
@pytest.mark.parametrize("model", MODELS)
def test_every_backend_trains_in_both_models(attention, model):
    forward_backward(build_model(validated(*TINY, *MODELS[model], f"attention={attention}")))


@pytest.mark.parametrize("attention", ["flow", "probsparse", "destationary"])
def test_across_variates(attention):
    cfg = validated(*TINY, "model=itransformer", "pos_encoding=none", f"attention={attention}")
    forward_backward(build_model(cfg, n_features=3, n_targets=3), features=3)


def test_flow_cross_attention_mixes_the_queries():
    """Why flow cannot decode autoregressively although its self-attention can be causal:
    through cross-attention a decoder step's output moves with a later step's query."""
    attn = build_attention("flow", 8, 2).eval()
    queries, memory = torch.randn(1, 6, 8), torch.randn(1, 12, 8)
    out, _ = attn(queries, memory)
    changed = queries.clone()
    changed[:, 5] += 1.0
    assert not torch.allclose(attn(changed, memory)[0][:, 0], out[:, 0])


def test_each_layer_gets_its_token_counts():
    """fourier's modes are chosen per layer from the tokens it reads: the encoder's, the
    decoder's, and (cross) the decoder's queries on the encoder's keys."""
    cfg = validated(*TINY, *MODELS["encoder-decoder"], "attention=fourier", "attention.modes=64",
                    "attention.mode_select=lowest")
    model = build_model(cfg)
    encoder_tokens, decoder_tokens = 12, 4 + 6
    assert model.encoder[0].self_attn.modes_q.numel() == encoder_tokens // 2
    layer = model.decoder[0]
    assert layer.self_attn.modes_q.numel() == decoder_tokens // 2
    assert layer.cross_attn.modes_q.numel() == decoder_tokens // 2
    assert layer.cross_attn.modes_k.numel() == encoder_tokens // 2


def test_destationary_keeps_teacher_forcing_causal():
    model = build_model(validated(*TINY, "model.label_len=4", "attention=destationary",
                                  "model.decoding=autoregressive")).train()
    src, target = torch.randn(2, 12, 1), torch.randn(2, 6, 1)
    forecast = model(src, target)
    for t in range(6):
        changed = target.clone()
        changed[:, t:] += torch.randn_like(changed[:, t:])
        torch.testing.assert_close(model(src, changed)[:, : t + 1], forecast[:, : t + 1])
    assert_teacher_forcing_reads_the_target(model, src, target)


@pytest.mark.parametrize("model", MODELS)
def test_destationary_factors_give_back_what_the_norm_took(model):
    """Under RevIN a model with vanilla attention forecasts a * x + b as a * f(x) + b: the
    window's level and scale are gone before attention. The de-stationary factors read the
    window before its norm, so attention sees them again (the paper's point)."""
    overrides = [*TINY, *MODELS[model], "model.instance_norm=revin", "model.revin_affine=false"]
    src = torch.randn(2, 12, 1)
    for attention, invariant in (("vanilla", True), ("destationary", False)):
        net = build_model(validated(*overrides, f"attention={attention}")).eval()
        with torch.no_grad():
            moved, base = net(src * 3.0 + 2.0), net(src) * 3.0 + 2.0
        assert torch.allclose(moved, base, atol=1e-4) == invariant, attention

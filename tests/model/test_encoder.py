"""PatchTST's encoder-only forecaster (`model=encoder`): equal to a reference built from
torch's own encoder layer, every attention backend, position encoding and FFN, the flatten
head, the linear path, BatchNorm."""


import pytest
import torch
from torch import nn

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.model import EncoderForecaster

from .helpers import combination, every_combination, forward_backward, validated

IN, OUT, PATCH, STRIDE = 32, 6, 8, 4
TINY = ["model=encoder", "d_model=8", "n_heads=2", f"in_len={IN}", f"out_len={OUT}",
        "embedding=patch", f"embedding.patch_len={PATCH}", f"embedding.stride={STRIDE}",
        "block_size=2", "model.encoder_layers=2"]


def tiny(*overrides):
    return validated(*TINY, *overrides)


@every_combination
def test_every_combination_builds_and_trains(attention, position, ffn):
    model = build_model(combination(TINY, attention, position, ffn))
    assert isinstance(model, EncoderForecaster) and not hasattr(model, "decoder")
    forward_backward(model)


@pytest.mark.parametrize("norm", ["layer", "batch"])
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("instance_norm", ["revin", "last", "none"])
@pytest.mark.parametrize("linear_path", ["none", "nlinear", "dlinear"])
def test_norms_instance_norms_and_linear_paths(norm, norm_first, instance_norm, linear_path):
    model = build_model(
        tiny(f"model.norm={norm}", f"model.norm_first={norm_first}",
             f"model.instance_norm={instance_norm}", f"model.linear_path={linear_path}",
             "model.dropout=0.1", "model.head_dropout=0.1", "model.decomposition_kernel=5")
    )
    forward_backward(model)


def test_covariates_and_channel_independence():
    """Mixed channels: every input channel (targets first, then covariates) is read, the
    targets forecast; channel-independent: each channel from its own past."""
    forward_backward(build_model(tiny(), n_features=3, n_targets=2), features=3)
    model = build_model(tiny("model.channel_independent=true"), n_features=3, n_targets=3).eval()
    src = torch.randn(4, IN, 3)
    with torch.no_grad():
        together = model(src)
        moved = src.clone()
        moved[..., 1] += 1.0 + torch.randn_like(moved[..., 1])
        after = model(moved)
    assert torch.equal(after[..., 0], together[..., 0]) and torch.equal(
        after[..., 2], together[..., 2]
    )
    assert not torch.allclose(after[..., 1], together[..., 1])


class ReferencePatchTST(nn.Module):
    """PatchTST as its paper draws it, from torch's own parts: RevIN (no affine), patches
    (the input padded on the left with its first value so the last patch ends at the forecast
    start), a linear patch embedding, torch.nn.TransformerEncoderLayer (post-norm, GELU), and a
    flatten head over every patch's output."""

    def __init__(self, d_model, n_heads, d_ff, layers, n_patches):
        super().__init__()
        self.embed = nn.Linear(PATCH, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=False)
            for _ in range(layers)
        )
        self.head = nn.Linear(n_patches * d_model, OUT)

    def forward(self, src):  # [B, IN, 1]
        mean = src.mean(1, keepdim=True)
        std = torch.sqrt(src.var(1, keepdim=True, unbiased=False) + 1e-5)
        x = ((src - mean) / std)[..., 0]  # [B, IN]
        pad = (-(IN - PATCH)) % STRIDE
        x = torch.cat([x[:, :1].expand(-1, pad), x], dim=1)
        patches = x.unfold(1, PATCH, STRIDE)  # [B, N, PATCH]
        h = self.embed(patches)
        for layer in self.layers:
            h = layer(h)
        out = self.head(h.flatten(1))  # [B, OUT]
        return out[..., None] * std + mean


def test_equals_a_reference_built_from_torch_encoder_layers():
    cfg = tiny("pos_encoding=none", "model.norm=layer", "model.norm_first=false",
               "ffn=gelu", "ffn.d_ff=16", "model.encoder_layers=2")
    model = build_model(cfg).eval()
    n_patches = model.tokens.encoder_tokens
    ref = ReferencePatchTST(8, 2, 16, 2, n_patches).eval()
    with torch.no_grad():
        ref.embed.load_state_dict(model.src_embed.state_dict())
        ref.head.load_state_dict(model.head.state_dict())
        for theirs, ours in zip(ref.layers, model.encoder, strict=True):
            attn = ours.self_attn
            theirs.self_attn.in_proj_weight.copy_(
                torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
            )
            theirs.self_attn.in_proj_bias.copy_(
                torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
            )
            theirs.self_attn.out_proj.load_state_dict(attn.out_proj.state_dict())
            theirs.linear1.load_state_dict(ours.ffn.up.state_dict())
            theirs.linear2.load_state_dict(ours.ffn.down.state_dict())
            theirs.norm1.load_state_dict(ours.attn_residual.norm.state_dict())
            theirs.norm2.load_state_dict(ours.ffn_residual.norm.state_dict())
        src = torch.randn(5, IN, 1) * 3 + 2
        torch.testing.assert_close(model(src), ref(src), atol=1e-5, rtol=1e-5)


def test_the_flatten_head_lets_every_step_read_every_patch():
    """No decoder, no causal order: the first forecast step moves when the oldest input step
    does, and each step has its own row of the head."""
    model = build_model(tiny("model.instance_norm=none")).eval()
    src = torch.randn(2, IN, 1)
    with torch.no_grad():
        base = model(src)
        moved = src.clone()
        moved[:, 0] += 1.0
        changed = model(moved)
    assert (changed - base).abs()[:, :, 0].min() > 0  # every step moved
    assert model.head.in_features == model.tokens.encoder_tokens * 8
    assert model.head.out_features == OUT


def test_the_linear_path_alone_is_the_start_and_the_head_learns_on_top():
    model = build_model(tiny("model.linear_path=nlinear", "model.instance_norm=last")).eval()
    assert model.head.weight.abs().sum() == 0 and model.head.bias.abs().sum() == 0
    src = torch.randn(64, IN, 1).cumsum(1)
    target = src[:, -1:] + torch.randn(64, OUT, 1) * 0.1
    model.fit_linear_path(src, target)
    with torch.no_grad():
        path = model.linear_path(model.norm.normalize(src)[0])
        torch.testing.assert_close(model(src), path + src[:, -1:], atol=1e-5, rtol=1e-5)


def test_batch_norm_uses_the_batch_in_training_and_running_stats_in_evaluation():
    model = build_model(tiny("model.norm=batch"))
    norm = model.encoder[0].attn_residual.norm
    assert isinstance(norm, nn.BatchNorm1d)
    src = torch.randn(6, IN, 1)
    model.train()
    alone = model(src[:1].repeat(2, 1, 1))[0]
    together = model(src)[0]
    assert not torch.allclose(alone, together)  # training: the other windows count
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(src[:1])[0], model(src)[0])  # evaluation: they do not


def test_decoder_keys_are_not_patchtst_keys():
    with pytest.raises(Exception, match="decoder_layers"):
        compose_config([*TINY, "model.decoder_layers=2"])

"""Patch tokens: the tokeniser's round trips and time spans, patch decoding (oneshot and
autoregressive), every backend x embedding training a step, maps labelled in patches."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from seqforecast import build_model
from seqforecast.config import compose_config, validate_config
from seqforecast.model.embedding import Tokenizer
from seqforecast.training.probe import probe

from .helpers import combination

IN, OUT = 30, 10


def patch_base(patch=(6, 4), label_len=8) -> list[str]:
    return ["d_model=8", "n_heads=2", f"in_len={IN}", f"out_len={OUT}", "block_size=2",
            "embedding=patch", f"embedding.patch_len={patch[0]}", f"embedding.stride={patch[1]}",
            f"model.label_len={label_len}"]


def patch_cfg(*overrides, patch=(6, 4), label_len=8):
    cfg = compose_config([*patch_base(patch, label_len), *overrides])
    validate_config(cfg)
    return cfg


@pytest.mark.parametrize(
    "in_len,patch_len,stride", [(30, 6, 4), (32, 8, 8), (336, 16, 8), (7, 7, 1), (10, 4, 3)]
)
def test_patches_are_the_padded_input_cut_every_stride_and_end_at_the_forecast(
    in_len, patch_len, stride
):
    tok = Tokenizer(in_len, 0, 5, patch_len, stride, "start")
    src = torch.randn(2, in_len, 3)
    tokens = tok.encoder_input(src)
    padded = torch.cat([src[:, :1].expand(-1, tok.pad, -1), src], dim=1)
    assert tokens.shape == (2, tok.encoder_tokens, patch_len * 3)
    for k in range(tok.encoder_tokens):
        window = padded[:, k * stride : k * stride + patch_len]  # [B, patch_len, F]
        assert torch.equal(tokens[:, k], window.flatten(1))  # step-major inside a token
    spans = tok.encoder_spans()
    assert spans[-1][1] == in_len - 1  # the last patch ends where the forecast starts
    assert all(b[1] - a[1] == stride for a, b in itertools.pairwise(spans))
    assert all(last - first + 1 <= patch_len for first, last in spans)
    if (in_len, patch_len, stride) == (336, 16, 8):
        assert tok.encoder_tokens == 41  # PatchTST's 42 pads the end; here the start


def test_decoder_chunks_round_trip_and_sit_on_the_encoders_time_axis():
    tok = Tokenizer(30, 8, 10, 6, 4, "start")
    values = torch.randn(3, 12, 2)
    chunks = tok.chunk(values)
    assert chunks.shape == (3, 3, 8)
    assert torch.equal(tok.unchunk(chunks), values)
    assert tok.output_tokens == 3  # ceil(10 / 4): the last two steps are cut off
    # The last label chunk ends where the last encoder patch ends: on the same token index.
    assert tok.decoder_start + tok.label_tokens - 1 == tok.encoder_tokens - 1
    assert tok.decoder_spans(2) == [(22, 25), (26, 29)]


def test_point_tokens_are_the_time_steps():
    tok = Tokenizer(12, 4, 3, 1, 1, "start")
    src = torch.randn(2, 12, 3)
    assert torch.equal(tok.encoder_input(src), src)
    assert tok.encoder_spans() == [(t, t) for t in range(12)]
    assert tok.decoder_start == 8 and tok.output_tokens == 3


@pytest.mark.parametrize(
    "attention,embedding,decoding,linear",
    list(itertools.product(
        ["vanilla", "einsum", "diff"], ["point", "patch"], ["oneshot", "autoregressive"],
        ["none", "nlinear", "dlinear"],
    )),
)
def test_every_backend_and_embedding_trains_one_step(attention, embedding, decoding, linear):
    overrides = [
        f"attention={attention}", f"model.decoding={decoding}", f"model.linear_path={linear}",
        "model.decomposition_kernel=5",
    ]
    if embedding == "point":
        cfg = patch_cfg(*overrides, "embedding=point")  # patch_len 6, stride 4 then do not apply
    else:
        cfg = patch_cfg(*overrides)
    model = build_model(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    src, target = torch.randn(4, IN, 1), torch.randn(4, OUT, 1)
    model.train()
    loss = F.mse_loss(model(src, target), target)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.isfinite().all(), name
    optimizer.step()
    model.eval()
    with torch.no_grad():
        forecast = model(src)
    assert forecast.shape == (4, OUT, 1) and forecast.isfinite().all()


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "relative"])
def test_patch_teacher_forcing_is_causal_and_matches_generation(position):
    model = build_model(
        patch_cfg("model.decoding=autoregressive", f"pos_encoding={position}", "d_model=16")
    )
    src = torch.randn(2, IN, 1)
    model.eval()
    with torch.no_grad():
        generated = model(src)  # chunk by chunk, each fed back
        model.train()  # no dropout in this config: train mode only switches on teacher forcing
        forced = model(src, generated)
        assert torch.allclose(forced, generated, atol=1e-5)
        # Changing the target from step 4 on (chunk 1 on) leaves chunk 0's forecast as it was,
        # and chunk 1's too: chunk k reads chunks before k only.
        changed = generated.clone()
        changed[:, 4:] += 10.0
        moved = model(src, changed)
    assert torch.equal(moved[:, :8], forced[:, :8])
    assert not torch.allclose(moved[:, 8:], forced[:, 8:])


def test_attention_maps_are_labelled_with_each_patchs_time_steps():
    model = build_model(patch_cfg())
    _, maps = probe(model, torch.randn(1, IN, 1))
    by_name = {m.name: m for m in maps}
    encoder = by_name["encoder_layer1"]
    assert encoder.weights.shape[1:] == (7, 7)
    assert encoder.query_spans == model.tokens.encoder_spans()
    assert encoder.query_spans[0] == (0, 5) and encoder.query_spans[-1] == (24, 29)
    cross = by_name["cross_layer1"]
    # Decoder: two label chunks then three output chunks, four steps each, from step 22.
    assert cross.query_spans == [(22 + 4 * j, 25 + 4 * j) for j in range(5)]
    assert cross.key_spans == encoder.key_spans


def test_patch_positions_count_tokens_on_one_axis():
    """Sinusoidal encodings: encoder token k gets row k, decoder token j row decoder_start + j."""
    model = build_model(patch_cfg())
    seen = []
    model.input_encoding.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append((args[0].shape[1], kwargs.get("offset", 0))),
        with_kwargs=True,
    )
    model.eval()
    with torch.no_grad():
        model(torch.randn(1, IN, 1))
    assert seen == [(7, 0), (5, model.tokens.decoder_start)]
    assert model.tokens.decoder_start == 5


@pytest.mark.parametrize(
    "position,ffn",
    list(itertools.product(
        ["sinusoidal", "learned", "relative", "rope", "none"],
        ["relu", "gelu", "glu", "geglu", "swiglu"],
    )),
)
def test_every_position_encoding_and_ffn_works_on_patches(position, ffn):
    model = build_model(combination(patch_base(), "diff", position, ffn))
    src, target = torch.randn(2, IN, 1), torch.randn(2, OUT, 1)
    model.train()
    F.mse_loss(model(src, target), target).backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())

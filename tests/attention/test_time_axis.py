"""One time axis: every position-aware attention reads absolute time steps.

The references here are written from the time steps themselves (encoder 0..in_len-1, decoder
from in_len - label_len), not from the code's geometry: with the q/k projections set so that
the raw scores carry no content, a map depends only on where its queries and keys sit in time,
and must equal the softmax of the position terms at those times.
"""

import math

import pytest
import torch

from seqforecast import build_model
from seqforecast.attention import RelativePositionTerms, build_attention
from seqforecast.config import compose_config
from seqforecast.model.positional import build_positions

from .helpers import randomize_

IN_LEN, OUT_LEN, LABEL_LEN, HEADS, D_MODEL = 12, 6, 4, 2, 16
DECODER_START = IN_LEN - LABEL_LEN  # the decoder's first time step


def _attentions(model):
    """(stack, module) for every attention in the model."""
    for layer in model.encoder:
        yield "encoder", layer.self_attn
    for layer in model.decoder:
        yield "decoder_self", layer.self_attn
        yield "cross", layer.cross_attn


def _model(pos_encoding: str, decoding: str):
    cfg = compose_config([
        "experiment=quick", f"pos_encoding={pos_encoding}", f"model.decoding={decoding}",
        f"in_len={IN_LEN}", f"out_len={OUT_LEN}", f"model.label_len={LABEL_LEN}",
        f"n_heads={HEADS}", f"d_model={D_MODEL}",
    ])
    model = build_model(cfg).eval()
    gen = torch.Generator().manual_seed(3)
    content = torch.randn(D_MODEL, generator=gen)  # rope: q = k = this vector at every token
    with torch.no_grad():
        for _, attn in _attentions(model):
            for proj in (attn.q_proj, attn.k_proj):
                proj.weight.zero_()
                proj.bias.copy_(content if pos_encoding == "rope" else torch.zeros(D_MODEL))
            if pos_encoding == "relative":
                attn.position.slope_raw.copy_(torch.tensor([0.3, -1.0]))
                attn.position.bias.fill_(0.7)
    return model, content


def _steps(stack: str, q_len: int, k_len: int):
    """Absolute time steps of a map's queries and keys."""
    q0 = 0 if stack == "encoder" else DECODER_START
    k0 = DECODER_START if stack == "decoder_self" else 0
    return torch.arange(q0, q0 + q_len)[:, None], torch.arange(k0, k0 + k_len)[None, :]


def _relative_reference(attn, t_q, t_k):
    """The scores -m_h |t_q - t_k| - b [t_k < t_q], per head: [H, Lq, Lk]."""
    slopes = torch.log1p(torch.exp(attn.position.slope_raw))
    bias = attn.position.bias
    scores = -slopes[:, None, None] * (t_q - t_k).abs() - bias * (t_k < t_q)
    return scores


def _rope_reference(content, t_q, t_k):
    """q = k = `content` rotated at its time step: per head, q.k / sqrt(d) =
    sum_c (a_c^2 + b_c^2) cos((t_q - t_k) base^(-c / (d/2))) / sqrt(d)."""
    d = D_MODEL // HEADS
    half = d // 2
    heads = content.view(HEADS, d)
    power = heads[:, :half] ** 2 + heads[:, half:] ** 2  # [H, d/2]
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    angle = (t_q - t_k).double()[..., None] * freq  # [Lq, Lk, d/2]
    return (torch.cos(angle) * power.double()[:, None, None, :]).sum(-1).float() / math.sqrt(d)


@pytest.mark.parametrize("pos_encoding", ["relative", "rope"])
@pytest.mark.parametrize("decoding", ["oneshot", "autoregressive"])
def test_every_map_matches_a_reference_written_from_absolute_time_steps(pos_encoding, decoding):
    model, content = _model(pos_encoding, decoding)
    src = torch.randn(2, IN_LEN, 1)
    with torch.no_grad():
        _, maps = model(src, return_attention=True)
    for stack, attn in _attentions(model):  # one layer per stack (experiment=quick)
        weights = maps[stack][0][0]  # [H, Lq, Lk] of the first series
        t_q, t_k = _steps(stack, *weights.shape[1:])
        if pos_encoding == "relative":
            scores = _relative_reference(attn, t_q, t_k)
        else:
            scores = _rope_reference(content, t_q, t_k)
        if stack == "decoder_self" and decoding == "autoregressive":
            scores = scores.masked_fill(t_k > t_q, float("-inf"))  # causal
        torch.testing.assert_close(weights, scores.softmax(-1), atol=1e-5, rtol=1e-4)
    # Cross-attention: the first forecast step (time in_len) sees the last encoder step as
    # the nearest key, not step label_len - 1 as when both counted from 0.
    if pos_encoding == "relative":
        first_forecast = maps["cross"][0][0, :, LABEL_LEN]  # query at time IN_LEN: [H, Lk]
        assert (first_forecast.argmax(-1) == IN_LEN - 1).all()


def test_generation_keeps_the_steps_of_teacher_forcing():
    """Autoregressive: the last generation step's maps equal teacher forcing's (the maps here
    depend on time steps alone)."""
    model, _ = _model("relative", "autoregressive")
    src, target = torch.randn(2, IN_LEN, 1), torch.randn(2, OUT_LEN, 1)
    with torch.no_grad():
        _, generated = model(src, return_attention=True)
        model.train()
        _, forced = model(src, target, return_attention=True)
    for stack in ("decoder_self", "cross"):
        torch.testing.assert_close(forced[stack][0], generated[stack][0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("layout", ["paper", "wide"])
@pytest.mark.parametrize("block_size", [0, 4])
def test_diff_cross_attention_terms_read_time_steps(layout, block_size):
    """diff with zero q/k projections: both softmaxes equal the position terms' softmax, so
    the map is (1 - lambda) softmax(-m_h |t_q - t_k| - b [t_k < t_q])."""
    terms = randomize_(RelativePositionTerms(True, True, "alibi", n_heads=4))
    attn = build_attention("diff", 16, 4, cross_attention=True, block_size=block_size,
                           head_layout=layout, position=terms).eval()
    with torch.no_grad():
        attn.q_proj.weight.zero_()
        attn.k_proj.weight.zero_()
    query, memory = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    _, weights = attn(query, memory, need_weights=True, query_start=7, key_start=0)
    t_q, t_k = torch.arange(7, 12)[:, None], torch.arange(9)[None, :]
    slopes = torch.log1p(torch.exp(terms.slope_raw))
    scores = -slopes[:, None, None] * (t_q - t_k).abs() - terms.bias * (t_k < t_q)
    expected = (1 - attn.lambda_value()) * scores.softmax(-1)
    torch.testing.assert_close(weights, expected.expand_as(weights), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["vanilla", "einsum", "diff"])
def test_self_attention_is_the_same_wherever_it_sits_in_time(name):
    """Scores depend on time differences only: shifting queries and keys together changes
    nothing (rope and relative terms alike); shifting one of them does."""
    for position in ("relative", "rope"):
        cfg = ({"name": position, "distance_decay": True, "past_bias": True,
                "decay_form": "alibi"} if position == "relative" else
               {"name": position, "base": 100.0})
        attn = build_attention(name, 16, 4, position=build_positions(cfg).inside(4))
        attn = randomize_(attn).eval()
        x = torch.randn(2, 7, 16)
        at_zero, _ = attn(x, x, need_weights=True)
        shifted, _ = attn(x, x, need_weights=True, query_start=40, key_start=40)
        torch.testing.assert_close(shifted, at_zero, atol=1e-5, rtol=1e-4)
        apart, _ = attn(x, x, need_weights=True, query_start=40, key_start=0)
        assert not torch.allclose(apart, at_zero, atol=1e-4)

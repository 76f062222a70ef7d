"""A decay that only decays: with equal raw scores, a key's weight never grows with distance."""

import pytest
import torch

from seqforecast.attention import RelativePositionTerms, build_attention

from .helpers import randomize_

LENGTH = 24


def _equal_score_weights(name, terms, raw_score, **options):
    """Every query-key raw score equal to `raw_score`: q and k constant vectors whose scaled
    product is that score. Returns the weights [H, L, L] of the first series."""
    attn = build_attention(name, 16, 4, position=terms, **options).eval()
    width = getattr(attn, "half_dim", attn.head_dim)  # q/k width per head (diff: per half)
    chunks = attn.q_proj.out_features // width
    with torch.no_grad():
        attn.q_proj.weight.zero_()
        attn.k_proj.weight.zero_()
        # q = k = c per chunk, with c.c / sqrt(width) = raw_score: c = (s * sqrt(w))^(1/2)
        # on one channel (sign by the score, on q only).
        q_bias = torch.zeros(chunks, width)
        k_bias = torch.zeros(chunks, width)
        magnitude = (abs(raw_score) * width**0.5) ** 0.5
        q_bias[:, 0] = magnitude * (1 if raw_score >= 0 else -1)
        k_bias[:, 0] = magnitude
        if attn.q_proj.bias is None:
            attn.q_proj.bias = torch.nn.Parameter(q_bias.flatten())
            attn.k_proj.bias = torch.nn.Parameter(k_bias.flatten())
        else:
            attn.q_proj.bias.copy_(q_bias.flatten())
            attn.k_proj.bias.copy_(k_bias.flatten())
    x = torch.randn(1, LENGTH, 16)
    _, weights = attn(x, x, need_weights=True)
    return weights[0]


@pytest.mark.parametrize("name", ["vanilla", "einsum", "diff"])
@pytest.mark.parametrize("raw_score", [-3.0, -0.5, 0.0, 2.0])
@pytest.mark.parametrize("past_bias", [False, True])
def test_alibi_weights_never_grow_with_distance(name, raw_score, past_bias):
    terms = randomize_(RelativePositionTerms(True, past_bias, "alibi", n_heads=4))
    options = {"lambda_mode": "scalar", "lambda_init": 0.0} if name == "diff" else {}
    weights = _equal_score_weights(name, terms, raw_score, **options)  # [H, L, L]
    assert (terms.slopes() >= 0).all()
    for i in (0, 9, LENGTH - 1):
        row = weights[:, i]  # [H, L]
        past, future = row[:, : i + 1].flip(-1), row[:, i:]  # each from distance 0 outwards
        for side in (past, future):
            assert (side.diff(dim=-1) <= 1e-7).all(), (i, side)


def test_a_negative_slope_cannot_be_learnt():
    terms = RelativePositionTerms(True, True, "alibi", n_heads=4)
    with torch.no_grad():
        terms.slope_raw.fill_(-30.0)  # as far negative as an optimizer could push it
    assert (terms.slopes() >= 0).all()


def test_the_seed_form_raises_distant_keys_for_negative_scores():
    """The documented caveat, in the numbers the issue found: a raw score of -2 under
    1 / (1 + 0.1 |i - j|) gives weights 0.148 / 0.289 / 0.563 at distances 0 / 5 / 20."""
    terms = RelativePositionTerms(True, False, "reciprocal", 1)
    scores = torch.full((1, 1, 1, 3), -2.0)
    distance = torch.tensor([0.0, 5.0, 20.0])
    weights = terms.score_terms(scores, distance, torch.zeros(3)).softmax(-1)[0, 0, 0]
    torch.testing.assert_close(weights, torch.tensor([0.148, 0.289, 0.563]), atol=1e-3, rtol=0)
    alibi = RelativePositionTerms(True, False, "alibi", n_heads=1)
    decayed = alibi.score_terms(scores, distance, torch.zeros(3)).softmax(-1)[0, 0, 0]
    assert decayed[0] > decayed[1] > decayed[2]

"""Position information inside attention: rotary embeddings and relative terms."""

import math

import pytest
import torch

from seqforecast.attention import RelativePositionTerms, RotaryEmbedding, build_attention

from .helpers import dense_diff_reference, randomize_


def _rotary_reference(x, base=10000.0):
    """Rotary embedding as complex multiplication: pair (c, c + d/2) is one complex number."""
    length, d = x.shape[1], x.shape[-1]
    half = d // 2
    theta = base ** (-torch.arange(half, dtype=torch.float64) / half)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * theta  # [L, d/2]
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    rotated = z * torch.polar(torch.ones_like(angle), angle)[None, :, None, :]
    return torch.cat([rotated.real, rotated.imag], dim=-1).to(x.dtype)


def test_rotary_matches_complex_rotation():
    rope = RotaryEmbedding(head_dim=8, base=10000.0)
    x = torch.randn(2, 11, 3, 8)
    torch.testing.assert_close(rope.rotate(x), _rotary_reference(x), atol=1e-6, rtol=1e-5)


def test_rotary_scores_depend_on_offset_only():
    rope = RotaryEmbedding(head_dim=8, base=10000.0)
    q = torch.randn(8).expand(1, 20, 1, 8)  # the same vector at every position
    k = torch.randn(8).expand(1, 20, 1, 8)
    scores = torch.einsum("bqhd,bkhd->qk", rope.rotate(q), rope.rotate(k))
    for shift in (1, 5):
        torch.testing.assert_close(scores[shift:, shift:], scores[:-shift, :-shift])


def test_rotary_rejects_odd_head_dim():
    with pytest.raises(ValueError, match="even head_dim"):
        RotaryEmbedding(head_dim=5, base=10000.0)


def _vanilla_reference(attn, x, causal, terms=None, rope=None):
    """Plain multi-head attention with optional rotary and relative terms, written densely."""
    batch, length, d_model = x.shape
    heads, d = attn.n_heads, d_model // attn.n_heads
    q, k, v = (p(x).view(batch, length, heads, d) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    if rope is not None:
        q, k = _rotary_reference(q), _rotary_reference(k)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    if terms is not None and terms.decay_form == "reciprocal":
        scores = scores / (1 + terms.decay * (i - j).abs()) - terms.bias * (j < i)
    elif terms is not None:  # alibi: minus a non-negative slope per head times the distance
        slopes = torch.log1p(torch.exp(terms.slope_raw))[:, None, None]
        scores = scores - slopes * (i - j).abs() - terms.bias * (j < i)
    if causal:
        scores = scores.masked_fill(j > i, float("-inf"))
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
    return attn.out_proj(out.reshape(batch, length, d_model))


@pytest.mark.parametrize("name", ["vanilla", "einsum"])
@pytest.mark.parametrize("kind", ["relative-alibi", "relative-reciprocal", "rope"])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_projected_backends_apply_position_modules(name, kind, need_weights, causal):
    if kind == "rope":
        position = RotaryEmbedding(head_dim=4, base=10000.0)
    else:
        form = kind.split("-")[1]
        position = randomize_(RelativePositionTerms(True, True, form, n_heads=4))
    attn = build_attention(name, 16, 4, position=position).eval()
    x = torch.randn(2, 9, 16)
    out, weights = attn(x, x, causal=causal, need_weights=need_weights)
    expected = _vanilla_reference(
        attn,
        x,
        causal,
        terms=position if kind != "rope" else None,
        rope=position if kind == "rope" else None,
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    assert (weights is None) == (not need_weights)


@pytest.mark.parametrize("block_size", [0, 3])
@pytest.mark.parametrize("layout", ["paper", "wide"])
def test_diff_applies_rotary_to_both_halves(block_size, layout):
    rope = RotaryEmbedding(base=10000.0)
    options = dict(block_size=block_size, head_layout=layout)
    attn = randomize_(build_attention("diff", 16, 4, position=rope, **options)).eval()
    plain = build_attention("diff", 16, 4, **options).eval()
    width = attn.half_dim  # each q/k half is rotated on its own
    plain.load_state_dict(attn.state_dict())
    x = torch.randn(2, 10, 16)

    # The reference: rotate the projections, then run the dense reference on fixed projections.
    class Rotated(torch.nn.Module):
        def __init__(self, proj):
            super().__init__()
            self.proj = proj

        def forward(self, t):
            y = self.proj(t).view(t.shape[0], t.shape[1], -1, width)
            return _rotary_reference(y).flatten(2)

    plain.q_proj, plain.k_proj = Rotated(plain.q_proj), Rotated(plain.k_proj)
    expected, _ = dense_diff_reference(plain, x, x, causal=True)
    torch.testing.assert_close(attn(x, x, causal=True)[0], expected, atol=1e-5, rtol=1e-4)


def test_relative_terms_change_the_function():
    attn = build_attention("vanilla", 16, 4).eval()
    terms = RelativePositionTerms(True, True, "alibi", 1)
    with_terms = build_attention("vanilla", 16, 4, position=terms).eval()
    with_terms.load_state_dict(attn.state_dict(), strict=False)
    x = torch.randn(2, 9, 16)
    assert not torch.allclose(attn(x, x)[0], with_terms(x, x)[0])


def test_diff_position_shorthand_conflicts_with_a_module():
    with pytest.raises(ValueError, match="both would put a position module inside diff attention"):
        build_attention("diff", 16, 4, distance_decay=True,
                        position=RotaryEmbedding(4, base=10000.0))


def test_fused_path_used_with_rotary_only(sdpa_calls):
    """rope keeps the fused kernel; relative terms need the explicit scores."""
    x = torch.randn(1, 6, 16)
    build_attention("vanilla", 16, 4, position=RotaryEmbedding(4, base=10000.0))(x, x)
    assert len(sdpa_calls) == 1
    build_attention("vanilla", 16, 4, position=RelativePositionTerms(True, True, "alibi", 1))(x, x)
    assert len(sdpa_calls) == 1

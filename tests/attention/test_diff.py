"""The differential backend against a dense reference written in the tests."""

import itertools
import math

import pytest
import torch

from seqforecast.attention import build_attention
from seqforecast.attention.diff import default_lambda_init

from .helpers import dense_diff_reference, randomize_

ALL_OPTIONS = dict(talking_heads=True, distance_decay=True, past_bias=True)


def _diff(d_model=16, heads=4, **options):
    return randomize_(build_attention("diff", d_model, heads, **options)).eval()


LAYOUTS = ["paper", "wide"]


@pytest.mark.parametrize("length", [1, 7, 12, 13])
@pytest.mark.parametrize("block_size", [0, 1, 3, 4, 5, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("options", [{}, ALL_OPTIONS], ids=["plain", "all-options"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_self_attention_matches_dense_reference(length, block_size, causal, options, layout):
    attn = _diff(block_size=block_size, head_layout=layout, **options)
    x = torch.randn(2, length, 16)
    out, weights = attn(x, x, causal=causal, need_weights=True)
    expected, expected_weights = dense_diff_reference(attn, x, x, causal=causal)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("block_size", [0, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("options", [{}, ALL_OPTIONS], ids=["plain", "all-options"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cross_attention_matches_dense_reference(block_size, causal, options, layout):
    """Queries at time steps 20.., keys at 0..: the position terms read the time steps."""
    attn = _diff(block_size=block_size, cross_attention=True, head_layout=layout, **options)
    query, memory = torch.randn(2, 6, 16), torch.randn(2, 11, 16)
    out, weights = attn(
        query, memory, causal=causal, need_weights=True, query_start=20, key_start=0
    )
    expected, expected_weights = dense_diff_reference(
        attn, query, memory, causal=causal, query_start=20, key_start=0
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("block_size", [0, 3, 8])
@pytest.mark.parametrize("causal", [False, True])
def test_key_padding_matches_dense_reference(block_size, causal):
    attn = _diff(block_size=block_size, **ALL_OPTIONS)
    x = torch.randn(3, 10, 16)
    padding = torch.zeros(3, 10, dtype=torch.bool)
    padding[0, 6:] = True
    padding[1, :4] = True  # with causal and small blocks, early rows have no key at all
    padding[2, :] = True  # every key padded
    out, weights = attn(x, x, causal=causal, key_padding_mask=padding, need_weights=True)
    expected, expected_weights = dense_diff_reference(attn, x, x, causal, padding)
    assert out.isfinite().all()
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize(
    "lambda_mode,head_norm", list(itertools.product(["scalar", "reparam"], [False, True]))
)
def test_lambda_and_head_norm_options_match_reference(lambda_mode, head_norm):
    attn = _diff(block_size=4, lambda_mode=lambda_mode, head_norm=head_norm, layer=3)
    x = torch.randn(2, 9, 16)
    out, _ = attn(x, x, causal=True)
    torch.testing.assert_close(out, dense_diff_reference(attn, x, x, True)[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("length", [5, 8, 12])
@pytest.mark.parametrize("causal", [False, True])
def test_block_size_at_least_length_equals_full_attention(length, causal):
    full = _diff(block_size=0, **ALL_OPTIONS)
    for block_size in (length, length + 5):
        blocked = build_attention("diff", 16, 4, block_size=block_size, **ALL_OPTIONS).eval()
        blocked.load_state_dict(full.state_dict())
        x = torch.randn(2, length, 16)
        torch.testing.assert_close(
            blocked(x, x, causal=causal)[0], full(x, x, causal=causal)[0], atol=1e-6, rtol=1e-5
        )


def test_weights_are_zero_outside_the_window_and_signed():
    attn = build_attention("diff", 16, 4, block_size=4, lambda_mode="scalar", lambda_init=0.8)
    x = torch.randn(2, 19, 16)
    _, weights = attn(x, x, need_weights=True)
    block = torch.arange(19) // 4
    outside = (block[:, None] - block[None, :]).abs() > 1
    assert (weights[..., outside] == 0).all()
    assert (weights[..., ~outside] != 0).any()
    assert (weights < 0).any(), "a differential map has negative entries"


def test_lambda_init_follows_the_depth_schedule():
    for layer in (1, 2, 5):
        attn = build_attention("diff", 16, 4, layer=layer)
        assert attn.lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * (layer - 1)))
    scalar = build_attention("diff", 16, 4, lambda_mode="scalar", layer=2)
    assert scalar.lambda_value().item() == pytest.approx(default_lambda_init(2))
    assert build_attention("diff", 16, 4, lambda_init=0.5).lambda_init == 0.5


def test_block_local_self_attention_rejects_different_lengths():
    attn = build_attention("diff", 16, 4, block_size=4)
    with pytest.raises(ValueError, match="cross_attention=True"):
        attn(torch.randn(1, 5, 16), torch.randn(1, 6, 16))


@pytest.mark.parametrize("cross,block_size", [(False, 0), (True, 0), (True, 4)], ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fused_path_matches_the_reference(cross, block_size, causal, padded, layout, sdpa_calls):
    """Without weights asked for and nothing between scores and softmax, dense diff (self or
    cross) runs on two fused SDPA calls: the same function."""
    attn = _diff(block_size=block_size, cross_attention=cross, head_layout=layout)
    query, memory = torch.randn(3, 7, 16), torch.randn(3, 9 if cross else 7, 16)
    padding = None
    if padded:
        padding = torch.zeros(3, memory.shape[1], dtype=torch.bool)
        padding[0, -3:] = True
        padding[1, :] = True  # no key at all: zero attention, finite output
    kv = memory if cross else query
    out, weights = attn(query, kv, causal=causal, key_padding_mask=padding)
    assert weights is None and sdpa_calls, "the fused path ran"
    expected, _ = dense_diff_reference(attn, query, kv, causal, padding)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)

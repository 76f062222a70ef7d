"""vanilla and einsum against torch.nn.MultiheadAttention with copied weights."""

import pytest
import torch
from torch import nn

from .helpers import mha_copy

SHAPES = [  # (batch, q_len, k_len, d_model, heads)
    (2, 7, 7, 16, 4),
    (3, 5, 9, 24, 3),
    (1, 12, 4, 8, 1),
    (2, 1, 6, 32, 8),
]


def _padding(batch, k_len):
    """Row b pads its last b + 1 keys, never every key (MHA returns NaN for those)."""
    mask = torch.zeros(batch, k_len, dtype=torch.bool)
    for b in range(batch):
        mask[b, k_len - min(b + 1, k_len - 1) :] = True
    return mask


@pytest.mark.parametrize("name", ["vanilla", "einsum"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_matches_multihead_attention(name, shape, causal, padded, need_weights):
    batch, q_len, k_len, d_model, heads = shape
    mha = nn.MultiheadAttention(d_model, heads, batch_first=True)
    attn = mha_copy(name, mha)
    query = torch.randn(batch, q_len, d_model)
    key_value = torch.randn(batch, k_len, d_model)
    padding = _padding(batch, k_len) if padded else None
    mask = torch.ones(q_len, k_len, dtype=torch.bool).triu(1) if causal else None
    if causal and padded:
        # Causal rows see keys 0..i; keep key 0 unpadded so no row is empty for MHA.
        padding[:, 0] = False

    expected, expected_weights = mha(
        query, key_value, key_value, key_padding_mask=padding, attn_mask=mask, need_weights=True
    )
    out, weights = attn(
        query, key_value, causal=causal, key_padding_mask=padding, need_weights=need_weights
    )
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    if need_weights:
        assert weights.shape == (batch, heads, q_len, k_len)
        torch.testing.assert_close(weights.mean(dim=1), expected_weights, atol=1e-6, rtol=1e-5)
    else:
        assert weights is None


@pytest.mark.parametrize("need_weights", [False, True])
def test_einsum_equals_vanilla(need_weights):
    """On the fused path (no weights) and the explicit one (weights), forward and backward."""
    mha = nn.MultiheadAttention(32, 4, batch_first=True)
    vanilla, einsum = mha_copy("vanilla", mha), mha_copy("einsum", mha)
    query, key_value = torch.randn(3, 10, 32), torch.randn(3, 13, 32)
    padding = torch.zeros(3, 13, dtype=torch.bool)
    padding[1, 9:] = True
    for causal in (False, True):
        outputs = []
        for attn in (vanilla, einsum):
            attn.zero_grad()
            q = query.clone().requires_grad_()
            out, weights = attn(
                q, key_value, causal=causal, key_padding_mask=padding, need_weights=need_weights
            )
            out.square().sum().backward()
            grads = [q.grad] + [p.grad for p in attn.parameters()]
            outputs.append((out, weights, grads))
        (a, a_weights, a_grads), (b, b_weights, b_grads) = outputs
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        for ga, gb in zip(a_grads, b_grads, strict=True):
            torch.testing.assert_close(ga, gb, atol=1e-5, rtol=1e-4)
        if need_weights:
            assert a_weights.shape == (3, 4, 10, 13)
            torch.testing.assert_close(a_weights, b_weights, atol=1e-6, rtol=1e-5)
        else:
            assert a_weights is None and b_weights is None


@pytest.mark.parametrize("name", ["vanilla", "einsum"])
def test_fused_and_explicit_paths_agree_under_dropout_free_training(name):
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    attn = mha_copy(name, mha).train()
    x = torch.randn(2, 9, 16)
    fused, _ = attn(x, x, causal=True, need_weights=False)
    explicit, _ = attn(x, x, causal=True, need_weights=True)
    torch.testing.assert_close(fused, explicit, atol=1e-6, rtol=1e-5)

"""`sigmoid` attention against a reference written from the paper's equations (Ramapuram et
al., ICLR 2025): w_ij = sigmoid(q_i.k_j / sqrt(d) + b), b = -log(n) by default."""

import math

import pytest
import torch

from seqforecast.attention import build_attention
from seqforecast.config import validate_config
from seqforecast.config.compose import compose_config
from seqforecast.options import ConfigError

D, H = 16, 4


def reference(attn, query, key_value, causal, bias, key_padding_mask=None):
    batch, q_len, _ = query.shape
    k_len, d = key_value.shape[1], D // H
    q = attn.q_proj(query).view(batch, q_len, H, d).transpose(1, 2)
    k = attn.k_proj(key_value).view(batch, k_len, H, d).transpose(1, 2)
    v = attn.v_proj(key_value).view(batch, k_len, H, d).transpose(1, 2)
    b = -math.log(k_len) if bias is None else bias
    weights = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(d) + b)
    allowed = torch.ones(q_len, k_len, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    allowed = allowed[None, None]
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, :]
    weights = weights * allowed
    out = (weights @ v).transpose(1, 2).reshape(batch, q_len, D)
    return attn.out_proj(out), weights


@pytest.mark.parametrize("bias", [None, -2.5, 0.0])
@pytest.mark.parametrize("causal", [False, True])
def test_sigmoid_attention_equals_the_papers_equations(causal, bias):
    torch.manual_seed(0)
    attn = build_attention("sigmoid", D, H, logit_bias=bias, lengths=(9, 9))
    x = torch.randn(3, 9, D, requires_grad=True)
    out, weights = attn(x, x, causal=causal, need_weights=True)
    ref, ref_weights = reference(attn, x, x, causal, bias)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights, ref_weights, rtol=1e-5, atol=1e-7)
    # no softmax: a row's weights need not sum to 1
    assert not torch.allclose(weights.sum(-1), torch.ones(()))
    params = [x, *attn.parameters()]
    grads = torch.autograd.grad(out.square().sum(), params)
    ref_grads = torch.autograd.grad(ref.square().sum(), params)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_cross_attention_padding_and_the_default_bias_follow_the_keys():
    torch.manual_seed(1)
    attn = build_attention("sigmoid", D, H, lengths=(5, 11))
    query, memory = torch.randn(2, 5, D), torch.randn(2, 11, D)
    padding = torch.zeros(2, 11, dtype=torch.bool)
    padding[1, 7:] = True
    out, weights = attn(query, memory, key_padding_mask=padding, need_weights=True)
    ref, ref_weights = reference(attn, query, memory, False, None, padding)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert torch.all(weights[1, :, :, 7:] == 0)
    assert attn.kernel.name == "explicit"  # the fused kernels are softmax kernels


def test_the_future_does_not_move_the_past():
    torch.manual_seed(2)
    attn = build_attention("sigmoid", D, H, lengths=(10, 10))
    x = torch.randn(1, 10, D)
    changed = x.clone()
    changed[:, 6:] += 5.0
    before, after = attn(x, x, causal=True)[0], attn(changed, changed, causal=True)[0]
    torch.testing.assert_close(before[:, :6], after[:, :6])


def test_the_bias_is_fixed_when_built_so_a_prefix_is_the_full_calls_rows():
    """Generating step by step, a decoder reads a prefix of its keys: with the bias fixed at
    -log(the site's keys), a causal call over the first k steps gives the full call's first k
    rows (with -log(k) of each call, as before, it did not: 0.67 relative)."""
    torch.manual_seed(3)
    attn = build_attention("sigmoid", D, H, lengths=(10, 10))
    assert attn.logit_bias == -math.log(10)
    x = torch.randn(2, 10, D)
    full = attn(x, x, causal=True)[0]
    for k in (1, 4, 9):
        torch.testing.assert_close(attn(x[:, :k], x[:, :k], causal=True)[0], full[:, :k])
    fixed = build_attention("sigmoid", D, H, logit_bias=-3.0)  # a number needs no lengths
    assert fixed.logit_bias == -3.0
    with pytest.raises(ConfigError, match="attention.logit_bias=null sets b = -log.keys. from "
                                          "the keys the layer reads"):
        build_attention("sigmoid", D, H)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_bias_that_is_not_finite_is_refused_in_one_line(value):
    expected = f"attention.logit_bias={value} is not allowed: must be a finite"
    with pytest.raises(ConfigError, match=expected) as err:
        validate_config(compose_config(["attention=sigmoid", f"attention.logit_bias={value}"]))
    assert "\n" not in str(err.value)

"""attention.gate: gated attention's output gate (Qiu et al. 2025, G1) against a reference
written from the paper's equations, on every backend that has per-head outputs."""

import math

import pytest
import torch

from seqforecast.attention import (
    AttentionCall,
    available_attention,
    build_attention,
)
from seqforecast.config.compose import compose_config
from seqforecast.options import ConfigError

D, H = 16, 4


def gated_reference(attn, x, causal, key_value=None):
    """Softmax attention per head, each head's output times sigmoid(x W_g + b_g) with x the
    query input (one gate a head, or one a value), then the output projection: the paper's
    G1 position. key_value: x (self-attention) unless given."""
    kv = x if key_value is None else key_value
    batch, length, _ = x.shape
    d = D // H
    q = attn.q_proj(x).view(batch, length, H, d).transpose(1, 2)
    k = attn.k_proj(kv).view(batch, kv.shape[1], H, d).transpose(1, 2)
    v = attn.v_proj(kv).view(batch, kv.shape[1], H, d).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(length, length).triu(1).bool(), -math.inf)
    heads = (scores.softmax(-1) @ v).transpose(1, 2)  # [B, Lq, H, d]
    gate = torch.sigmoid(attn.output_gate.proj(x))  # [B, Lq, H] or [B, Lq, D]
    gate = gate.view(batch, length, H, -1)  # one a head broadcasts over its d values
    return attn.out_proj((heads * gate).reshape(batch, length, D))


@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ["vanilla", "einsum"])
def test_the_gate_equals_the_papers_equations(name, gate, causal):
    torch.manual_seed(0)
    attn = build_attention(name, D, H, gate=gate)
    x = torch.randn(3, 7, D, requires_grad=True)
    out, _ = attn(x, x, causal=causal)
    ref = gated_reference(attn, x, causal)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(out.square().sum(), [x, *attn.parameters()])
    ref_grads = torch.autograd.grad(ref.square().sum(), [x, *attn.parameters()])
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    width = {"headwise": H, "elementwise": D}[gate]
    assert attn.output_gate.proj.weight.shape == (width, D)


@pytest.mark.parametrize("lengths", [(7, 7), (5, 9)], ids=["same_length", "other_length"])
@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
@pytest.mark.parametrize("name", ["vanilla", "einsum"])
def test_the_gate_reads_the_query_in_cross_attention(name, gate, lengths):
    """Query and key_value apart (a decoder's cross-attention): the gate is computed from the
    queries, one per query position, never from the keys."""
    torch.manual_seed(2)
    attn = build_attention(name, D, H, gate=gate)
    q_len, k_len = lengths
    query, key_value = torch.randn(3, q_len, D), torch.randn(3, k_len, D)
    out, _ = attn(query, key_value)
    assert out.shape == (3, q_len, D)
    torch.testing.assert_close(out, gated_reference(attn, query, False, key_value),
                               rtol=1e-5, atol=1e-6)


def per_head_backends():
    """The backends that build with a gate (one refuses it when built: normlin, whose one
    matrix mixes whole tokens)."""
    found = []
    for name in available_attention():
        try:
            build_attention(name, D, H, gate="headwise", lengths=(16, 16))
            found.append(name)
        except ConfigError as err:
            assert "the gate scales each head's output" in str(err), name
    assert set(available_attention()) - set(found) == {"normlin"}
    return found


@pytest.mark.parametrize("name", per_head_backends())
def test_every_backend_with_per_head_outputs_takes_the_gate(name):
    """Gated = ungated times the gate, head by head, whatever mixes the values (the output
    projection set to the identity to read the heads)."""
    torch.manual_seed(1)
    gated = build_attention(name, D, H, gate="headwise", lengths=(16, 16))
    plain = build_attention(name, D, H, lengths=(16, 16))
    missing, unexpected = plain.load_state_dict(gated.state_dict(), strict=False)
    assert not missing and unexpected and all(k.startswith("output_gate.proj.")
                                              for k in unexpected)
    for attn in (gated, plain):
        with torch.no_grad():
            attn.out_proj.weight.copy_(torch.eye(D))
            if attn.out_proj.bias is not None:
                attn.out_proj.bias.zero_()
        attn.eval()
    x = torch.randn(2, 16, D)
    call, side = AttentionCall(), None
    reads = plain.side_inputs(3, 16, 16)  # factors a model computes
    if reads:
        side = reads[1](torch.randn(2, 16, 3))
    with torch.no_grad():
        out = gated.attend(x, x, call._replace(side=side)).out
        ref = plain.attend(x, x, call._replace(side=side)).out
    gate = torch.sigmoid(gated.output_gate.proj(x)).unsqueeze(-1)  # [B, L, H, 1]
    torch.testing.assert_close(out, (ref.view(2, 16, H, -1) * gate).view(2, 16, D),
                               rtol=1e-5, atol=1e-6)


def test_no_gate_adds_nothing_and_a_bad_gate_is_refused():
    plain = build_attention("vanilla", D, H)
    assert not any("gate" in n for n, _ in plain.named_parameters())
    with pytest.raises(ConfigError, match="attention.gate.*headwise.*elementwise"):
        compose_config(["attention.gate=channelwise"])
    cfg = compose_config(["attention.gate=elementwise"])
    assert cfg.attention.gate == "elementwise"

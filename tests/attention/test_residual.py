"""Residual attention (RealFormer, as PatchTST): each layer's scores are its own plus the
previous layer's pre-softmax scores. Checked against a reference that sums the explicit score
matrices layer by layer, on every path of every backend that carries them, the native kernels'
short-sequence path included."""

import pytest
import torch

from seqforecast.attention import (
    AttentionCall,
    ResidualQK,
    block_local,
    build_attention,
)
from seqforecast.attention.position import RelativePositionTerms, RotaryEmbedding
from seqforecast.native import attention as native_attention
from seqforecast.options import ConfigError

from ..native.helpers import WHY
from .helpers import randomize_

# Each backend's own paths, and the native kernels' short-sequence path (where they build).
KERNELS = ["torch", pytest.param("native", marks=pytest.mark.skipif(
    WHY is not None, reason=f"no C kernels here: {WHY}"))]

B, L, E, H = 3, 10, 16, 4


def _stack(name, layers=3, kernels="torch", **options):
    """A residual stack's attentions, each with the kernel the builder would choose."""
    torch.manual_seed(0)
    if name == "diff":
        return [randomize_(build_attention(name, E, H, layer=i + 1, kernels=kernels,
                                           residual=True, **options), 0.1)
                for i in range(layers)]
    return [randomize_(build_attention(name, E, H, kernels=kernels, residual=True, **options),
                       0.1) for _ in range(layers)]


def _projected_reference(stack, x, causal=False):
    """vanilla/einsum: layer l attends by softmax(sum_{i<=l} q_i k_i^T / sqrt(head_dim)),
    each layer reading the previous layer's output."""
    carried, outs, maps = 0.0, [], []
    for attn in stack:
        heads = lambda t: t.view(B, L, H, -1).transpose(1, 2)  # noqa: E731
        q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
        if attn.position is not None:  # rope: rotate per layer, as the backend does
            q = attn.position.rotate(q.transpose(1, 2), 0).transpose(1, 2)
            k = attn.position.rotate(k.transpose(1, 2), 0).transpose(1, 2)
        carried = carried + q @ k.transpose(-1, -2) / (E // H) ** 0.5  # [B, H, L, L]
        scores = carried
        if causal:
            scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(-1)
        x = attn.out_proj((weights @ v).transpose(1, 2).reshape(B, L, E))
        outs.append(x)
        maps.append(weights)
    return outs, maps


def _run(stack, x, need_weights, causal=False):
    """The stack as a model runs it: each layer's call carries the q and k the one before
    returned."""
    call = AttentionCall(causal=causal, need_weights=need_weights, residual=ResidualQK())
    outs, maps = [], []
    for attn in stack:
        x, weights, carried = attn.attend(x, x, call)
        call = call._replace(residual=carried)
        outs.append(x)
        maps.append(weights)
    return outs, maps


@pytest.mark.parametrize("name", ["vanilla", "einsum"])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("kernels", KERNELS)
def test_projected_backends_equal_the_summed_scores(name, need_weights, causal, rope, kernels):
    rotary = RotaryEmbedding(E // H, base=10000.0) if rope else None
    stack = _stack(name, kernels=kernels, position=rotary)
    x = torch.randn(B, L, E)
    expected, expected_maps = _projected_reference(stack, x, causal)
    got, maps = _run(stack, x, need_weights, causal)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    if need_weights:
        for e, g in zip(expected_maps, maps, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_without_carried_scores_a_layer_is_plain_attention():
    stack = _stack("vanilla", layers=2)
    x = torch.randn(B, L, E)
    first_plain, _ = stack[0](x, x)
    (first, second), _ = _run(stack, x, need_weights=False)
    torch.testing.assert_close(first, first_plain, rtol=1e-5, atol=1e-6)  # layer 1: nothing to add
    second_plain, _ = stack[1](first, first)
    assert (second - second_plain).abs().max() > 1e-3  # layer 2 reads layer 1's scores


def _diff_reference(stack, x, block_size=0, causal=False):
    """diff: each half's scores sum over the layers; weights = p1 - lambda p2 per layer, the
    pairs outside a block window (and in the future) masked: a dense masked reference."""
    carried, outs = 0.0, []
    blocked = torch.zeros(L, L, dtype=torch.bool)
    if block_size:
        blocked |= block_local.outside_windows(L, block_size, 0 if causal else 1, "cpu")
    if causal:
        blocked |= torch.ones(L, L, dtype=torch.bool).triu(1)
    for attn in stack:
        w = attn.half_dim
        q = attn.q_proj(x).view(B, L, H, 2, w).permute(0, 2, 3, 1, 4)  # [B, H, 2, L, w]
        k = attn.k_proj(x).view(B, L, H, 2, w).permute(0, 2, 3, 1, 4)
        v = attn.v_proj(x).view(B, L, H, -1).transpose(1, 2)
        carried = carried + q @ k.transpose(-1, -2) / w**0.5
        p = carried.masked_fill(blocked, float("-inf")).softmax(-1)
        weights = p[:, :, 0] - attn.lambda_value() * p[:, :, 1]
        out = weights @ v
        if attn.head_norm is not None:
            out = attn.head_norm(out) * (1 - attn.lambda_init)
        x = attn.out_proj(out.transpose(1, 2).reshape(B, L, E))
        outs.append(x)
    return outs


@pytest.mark.parametrize("block_size", [0, 4, L])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernels", KERNELS)
def test_diff_carries_each_half_dense_and_block_local(block_size, causal, kernels):
    """Against the dense masked reference at every layer, windows narrower than the sequence
    included (a window reads the carried q and k of every earlier layer, not its own alone)."""
    stack = _stack("diff", kernels=kernels, block_size=block_size)
    x = torch.randn(B, L, E)
    got, _ = _run(stack, x, need_weights=False, causal=causal)
    expected = _diff_reference(stack, x, block_size, causal)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    if block_size == 4:
        weights_maps = _run(stack, x, need_weights=True, causal=causal)[1]
        # Outside the window, a block-local weight is exactly zero at every layer.
        assert weights_maps[-1][..., 0, L - 1].abs().max() == 0


@pytest.mark.parametrize("block_size", [0, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernels", KERNELS[1:])
def test_diff_on_the_short_attention_path_equals_its_explicit_path(monkeypatch, block_size,
                                                                   causal, kernels):
    """With the native kernels, short residual attention takes their kernel (chosen when the
    layer is built: one call a layer, block windows and causality as a dense mask); asking for
    the weights takes the explicit path: outputs and gradients agree, at every layer."""
    calls, original = [], native_attention.attention
    monkeypatch.setattr(native_attention, "attention", lambda *a: calls.append(1) or original(*a))
    stack = _stack("diff", kernels=kernels, block_size=block_size)
    x = torch.randn(B, L, E)

    def outputs_and_grads(need_weights):
        for attn in stack:
            attn.zero_grad()
        leaf = x.clone().requires_grad_()
        outs = _run(stack, leaf, need_weights, causal)[0]
        (outs[-1] * torch.linspace(-1, 1, E)).sum().backward()
        grads = [leaf.grad] + [p.grad.clone() for attn in stack for p in attn.parameters()]
        return outs, grads

    cached, cached_grads = outputs_and_grads(False)
    assert len(calls) == len(stack)
    explicit, explicit_grads = outputs_and_grads(True)
    assert len(calls) == len(stack)  # weights asked for: the explicit path
    stack[0](x, x, causal=causal)
    assert len(calls) == len(stack) + 1  # the kernel was chosen once, when it was built
    for c, e in zip(cached, explicit, strict=True):
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-6)
    for c, e in zip(cached_grads, explicit_grads, strict=True):  # sums over every token
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lookahead", [0, 1])
def test_block_windows_as_a_dense_mask(lookahead):
    length, bs = 11, 4
    nb, width = block_local.num_blocks(length, bs), block_local.window_width(bs, lookahead)
    inside = block_local.windows_to_dense(torch.ones(nb, bs, width), length) > 0
    assert torch.equal(block_local.outside_windows(length, bs, lookahead, "cpu"), ~inside)


def test_what_cannot_be_carried_is_refused_when_built_in_one_line():
    relative = RelativePositionTerms(True, True, "alibi", 1)
    for name in ("vanilla", "diff"):  # rope acts on q and k: carried
        build_attention(name, E, H, residual=True, position=RotaryEmbedding(base=100.0))
        with pytest.raises(ConfigError, match="pos_encoding=relative adds its terms to the "
                                              "scores, which residual attention cannot carry"):
            build_attention(name, E, H, residual=True,
                            position=RelativePositionTerms(True, True, "alibi", 1))
    for key in ("talking_heads", "distance_decay", "past_bias"):
        with pytest.raises(ConfigError, match=f"attention.{key}=true acts on the scores"):
            build_attention("diff", E, H, residual=True, **{key: True})
    for name in ("flow", "probsparse", "autocorrelation", "fourier", "destationary", "normlin",
                 "learned_mixing", "no_mixing"):
        with pytest.raises(ConfigError, match="model.res_attention=true conflicts: .*; set "
                                              "model.res_attention=false") as err:
            build_attention(name, E, H, residual=True, lengths=(L, L))
        assert "\n" not in str(err.value)
    # a layer built without residual attention refuses a call that carries it
    attn = build_attention("vanilla", E, H, position=relative)
    x = torch.randn(B, L, E)
    with pytest.raises(ValueError, match="built for a stack without residual attention"):
        attn.attend(x, x, AttentionCall(residual=ResidualQK()))

"""Properties every backend must have: causality, locality, finiteness, gradients, dropout."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from seqforecast.attention import RelativePositionTerms, RotaryEmbedding, build_attention

from .helpers import randomize_

ALL_OPTIONS = dict(talking_heads=True, distance_decay=True, past_bias=True)
CONFIGS = {
    "vanilla": ("vanilla", {}),
    "einsum": ("einsum", {}),
    "diff-full": ("diff", {}),
    "diff-full-all-options": ("diff", ALL_OPTIONS),
    "diff-block4": ("diff", {"block_size": 4}),
    "diff-block3-all-options": ("diff", {"block_size": 3, **ALL_OPTIONS}),
    "diff-block3-scalar-no-norm": (
        "diff",
        {"block_size": 3, "lambda_mode": "scalar", "head_norm": False},
    ),
    "vanilla-rope": ("vanilla", {"position": "rope"}),
    "einsum-relative": ("einsum", {"position": "relative"}),
    "diff-block3-rope": ("diff", {"block_size": 3, "position": "rope"}),
    "diff-wide-layout-block3-all-options": (
        "diff",
        {"block_size": 3, "head_layout": "wide", "decay_form": "reciprocal", **ALL_OPTIONS},
    ),
    "diff-wide-layout-rope": ("diff", {"head_layout": "wide", "position": "rope"}),
}


def _build(config_id, d_model=16, heads=4, **extra):
    name, options = CONFIGS[config_id]
    options = dict(options)
    if options.get("position") == "rope":
        options["position"] = RotaryEmbedding(base=10000.0)
    elif options.get("position") == "relative":
        options["position"] = RelativePositionTerms(True, True, "alibi", 1)
    return randomize_(build_attention(name, d_model, heads, **options, **extra)).eval()


@pytest.mark.parametrize("config_id", CONFIGS)
@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_outputs_ignore_the_future(config_id, need_weights):
    attn = _build(config_id)
    x = torch.randn(2, 14, 16)
    out, _ = attn(x, x, causal=True, need_weights=need_weights)
    for t in (0, 5, 12):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 3
        out_changed, _ = attn(changed, changed, causal=True, need_weights=need_weights)
        torch.testing.assert_close(out_changed[:, : t + 1], out[:, : t + 1], atol=1e-6, rtol=0)
        if t < 12:  # and the future did change: the check can fail
            assert not torch.allclose(out_changed[:, t + 1 :], out[:, t + 1 :])


@pytest.mark.parametrize("block_size", [2, 4, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_diff_outputs_ignore_keys_outside_the_window(block_size, causal):
    attn = randomize_(build_attention("diff", 16, 4, block_size=block_size, **ALL_OPTIONS)).eval()
    length = 23
    x = torch.randn(2, length, 16)
    out, _ = attn(x, x, causal=causal)
    block = torch.arange(length) // block_size
    for query_block in range(block[-1] + 1):
        far = (block - query_block).abs() > 1
        if not far.any():
            continue
        changed = x.clone()
        changed[:, far] = torch.randn_like(changed[:, far]) * 3
        out_changed, _ = attn(changed, changed, causal=causal)
        rows = block == query_block
        torch.testing.assert_close(out_changed[:, rows], out[:, rows], atol=1e-6, rtol=0)


@pytest.mark.parametrize("config_id", CONFIGS)
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_finite_outputs_and_gradients_even_with_every_key_padded(config_id, need_weights, causal):
    attn = _build(config_id).train()
    x = torch.randn(3, 9, 16, requires_grad=True)
    padding = torch.zeros(3, 9, dtype=torch.bool)
    padding[0] = True  # every key padded: rows with nothing to attend to
    padding[1, :3] = True  # causal early rows are empty too
    out, weights = attn(x, x, causal=causal, key_padding_mask=padding, need_weights=need_weights)
    assert out.shape == (3, 9, 16)
    assert out.isfinite().all()
    if need_weights:
        assert weights.shape == (3, 4, 9, 9)
        assert weights.isfinite().all()
        assert (weights[0] == 0).all(), "an all-padded row attends to nothing"
    out.square().sum().backward()
    assert x.grad.isfinite().all()
    for name, p in attn.named_parameters():
        assert p.grad is not None and p.grad.isfinite().all(), name


@pytest.mark.parametrize("config_id", CONFIGS)
@pytest.mark.parametrize("need_weights", [False, True])
def test_gradcheck_float64(config_id, need_weights):
    attn = _build(config_id, d_model=8, heads=2).double()  # q/k halves of width 2 (paper)
    query = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)

    def run(q, kv):
        return attn(q, kv, causal=True, need_weights=need_weights)[0]

    assert torch.autograd.gradcheck(run, (query, memory), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("config_id", CONFIGS)
def test_dropout_only_in_training(config_id):
    attn = _build(config_id, dropout=0.5)
    x = torch.randn(2, 8, 16)
    attn.eval()
    first, _ = attn(x, x, causal=True, need_weights=True)
    torch.testing.assert_close(attn(x, x, causal=True, need_weights=True)[0], first)
    without = _build(config_id)
    without.load_state_dict(attn.state_dict())
    torch.testing.assert_close(without(x, x, causal=True)[0], first, atol=1e-6, rtol=1e-5)
    attn.train()
    a, _ = attn(x, x, causal=True, need_weights=True)
    b, _ = attn(x, x, causal=True, need_weights=False)
    assert not torch.allclose(a, first) and not torch.allclose(a, b)


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor any op produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("options", [{}, ALL_OPTIONS], ids=["plain", "all-options"])
@pytest.mark.parametrize("causal", [False, True])
def test_block_local_never_builds_a_quadratic_score_matrix(options, causal):
    batch, length, heads, block_size = 2, 512, 4, 8
    attn = build_attention("diff", 16, heads, block_size=block_size, **options)
    x = torch.randn(batch, length, 16, requires_grad=True)
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[1, -40:] = True
    with _LargestTensor() as probe:
        out, _ = attn(x, x, causal=causal, key_padding_mask=padding)
        out.sum().backward()
    # The windows hold 2 halves x 3 * block_size keys per query: linear in the length.
    assert probe.largest <= batch * heads * 2 * (length + block_size) * 3 * block_size
    assert probe.largest < batch * heads * length * length / 4


def test_masks_are_cached_per_module_not_globally():
    a = build_attention("diff", 16, 4, block_size=4)
    b = build_attention("diff", 16, 4, block_size=4)
    x = torch.randn(1, 10, 16)
    a(x, x, causal=True)
    a(x, x, causal=True)
    assert len(a._geometry_cache._entries) == 1
    assert len(b._geometry_cache._entries) == 0

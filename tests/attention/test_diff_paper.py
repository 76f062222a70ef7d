"""`diff` in the paper's layout: sizes, and the function against the paper's equations.

The reference follows the Differential Transformer paper (Ye et al. 2024, Eq. 1-3) in the
structure of its official code: q and k projected to 2H half-heads of width d = E / (2H),
v to H heads of width 2d; half-heads taken in interleaved pairs (2h, 2h + 1);
λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init; each head's output RMS-normalised over its 2d channels
and scaled by (1 − λ_init); heads concatenated and projected. It reads only the module's
parameter tensors, not its code.
"""

import pytest
import torch

from seqforecast.attention import build_attention

from .helpers import randomize_

E, H = 32, 4


def paper_reference(attn, x, memory, causal=False, window=0):
    """x [B, Lq, E], memory [B, Lk, E] -> [B, Lq, E] by the paper's equations."""
    batch, q_len, _ = x.shape
    k_len = memory.shape[1]
    d = E // H // 2
    q = (x @ attn.q_proj.weight.T).view(batch, q_len, 2 * H, d).transpose(1, 2)
    k = (memory @ attn.k_proj.weight.T).view(batch, k_len, 2 * H, d).transpose(1, 2)
    v = (memory @ attn.v_proj.weight.T).view(batch, k_len, H, 2 * d).transpose(1, 2)
    scores = (q * d**-0.5) @ k.transpose(-1, -2)  # [B, 2H, Lq, Lk]
    i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
    allowed = torch.ones(q_len, k_len, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if window:  # the block-local window: previous, own and next block
        allowed &= (i // window - j // window).abs() <= 1
    scores = scores.masked_fill(~allowed, float("-inf"))
    attn_weights = scores.softmax(-1).view(batch, H, 2, q_len, k_len)
    lam = (
        torch.exp(torch.sum(attn.lambda_q1 * attn.lambda_k1))
        - torch.exp(torch.sum(attn.lambda_q2 * attn.lambda_k2))
        + attn.lambda_init
    )
    diff = attn_weights[:, :, 0] - lam * attn_weights[:, :, 1]  # [B, H, Lq, Lk]
    out = diff @ v  # [B, H, Lq, 2d]
    out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + 1e-5) * attn.head_norm.weight
    out = out * (1 - attn.lambda_init)
    out = out.transpose(1, 2).reshape(batch, q_len, E)
    return out @ attn.out_proj.weight.T


def test_parameter_counts_per_layout():
    vanilla = build_attention("vanilla", E, H)
    paper = build_attention("diff", E, H)
    seed = build_attention("diff", E, H, head_layout="wide")

    def weights(module):  # projection matrices only
        return sum(p.numel() for n, p in module.named_parameters() if n.endswith("proj.weight"))

    assert weights(vanilla) == weights(paper) == 4 * E * E
    assert weights(seed) == 6 * E * E
    # Besides the matrices: vanilla's 4 biases; paper diff's 4 λ vectors of the half width and
    # the per-head RMSNorm gain.
    assert sum(p.numel() for p in vanilla.parameters()) == 4 * E * E + 4 * E
    assert sum(p.numel() for p in paper.parameters()) == 4 * E * E + 4 * (E // H // 2) + E // H
    assert sum(p.numel() for p in seed.parameters()) == 6 * E * E + 4 * (E // H) + E // H
    assert paper.lambda_q1.numel() == E // H // 2 and paper.scale == (E // H // 2) ** -0.5


def _both_paths_vs_reference(attn, x, memory, causal, window=0):
    """Outputs and gradients (inputs and every parameter) of the fused path (no weights) and
    the explicit one (weights) against the reference."""
    results = []
    for need_weights in (False, True):
        for p in attn.parameters():
            p.grad = None
        xi, mi = x.clone().requires_grad_(), memory.clone().requires_grad_()
        out, _ = attn(xi, mi, causal=causal, need_weights=need_weights)
        out.square().sum().backward()
        results.append((out, xi.grad, mi.grad, {n: p.grad for n, p in attn.named_parameters()}))
    for p in attn.parameters():
        p.grad = None
    xr, mr = x.clone().requires_grad_(), memory.clone().requires_grad_()
    expected = paper_reference(attn, xr, mr, causal, window)
    expected.square().sum().backward()
    for out, x_grad, m_grad, grads in results:
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(x_grad, xr.grad, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(m_grad, mr.grad, atol=1e-4, rtol=1e-4)
        for name, p in attn.named_parameters():  # every parameter, on both sides
            assert p.grad is not None and grads[name] is not None, name
            torch.testing.assert_close(grads[name], p.grad, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layer", [1, 3])
def test_self_attention_is_the_papers(causal, layer):
    attn = randomize_(build_attention("diff", E, H, layer=layer))
    x = torch.randn(2, 11, E)
    _both_paths_vs_reference(attn, x, x, causal)


def test_cross_attention_is_the_papers():
    attn = randomize_(build_attention("diff", E, H, cross_attention=True))
    _both_paths_vs_reference(attn, torch.randn(2, 5, E), torch.randn(2, 13, E), causal=False)


@pytest.mark.parametrize("block_size", [3, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_block_local_windows_are_the_paper_under_a_band_mask(block_size, causal):
    attn = randomize_(build_attention("diff", E, H, block_size=block_size))
    x = torch.randn(2, 14, E)
    _both_paths_vs_reference(attn, x, x, causal, window=block_size)


def test_the_layouts_differ_only_in_the_q_k_width():
    paper = build_attention("diff", E, H)
    seed = build_attention("diff", E, H, head_layout="wide")
    assert (paper.half_dim, seed.half_dim) == (E // H // 2, E // H)
    assert paper.v_proj.weight.shape == seed.v_proj.weight.shape == (E, E)
    assert paper.q_proj.weight.shape == (E, E) and seed.q_proj.weight.shape == (2 * E, E)
    with pytest.raises(ValueError, match="is odd"):
        build_attention("diff", 12, 4)  # head width 3 cannot be halved

"""Reference implementations and small utilities shared by the attention tests."""

from __future__ import annotations

import math

import torch
from torch import nn

from seqforecast.attention import build_attention


def mha_copy(name: str, mha: nn.MultiheadAttention, **options) -> nn.Module:
    """A `name` backend whose q/k/v/out projections are copied from `mha`."""
    attn = build_attention(name, mha.embed_dim, mha.num_heads, **options)
    q_w, k_w, v_w = mha.in_proj_weight.chunk(3)
    q_b, k_b, v_b = mha.in_proj_bias.chunk(3)
    with torch.no_grad():
        for proj, w, b in (
            (attn.q_proj, q_w, q_b),
            (attn.k_proj, k_w, k_b),
            (attn.v_proj, v_w, v_b),
        ):
            proj.weight.copy_(w)
            proj.bias.copy_(b)
        attn.out_proj.weight.copy_(mha.out_proj.weight)
        attn.out_proj.bias.copy_(mha.out_proj.bias)
    return attn


def randomize_(module: nn.Module, scale: float = 0.3) -> nn.Module:
    """Move every parameter off its initial value (identity mixes, default lambdas, ...)."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * scale)
    return module


def dense_diff_reference(
    attn, query, key_value, causal=False, key_padding_mask=None, query_start=0, key_start=0
):
    """Differential attention written densely: the full [Lq, Lk] score matrix and a window mask.

    Independent of the backend's block layout; reads only the module's parameters. Position
    terms act on the time steps query_start + i and key_start + j.
    Returns (out [B, Lq, E], weights [B, H, Lq, Lk]).
    """
    batch, q_len, d_model = query.shape
    k_len = key_value.shape[1]
    heads, d = attn.n_heads, d_model // attn.n_heads
    w = d // 2 if attn.head_layout == "paper" else d  # width of each q/k half
    q = attn.q_proj(query).view(batch, q_len, heads, 2, w)
    k = attn.k_proj(key_value).view(batch, k_len, heads, 2, w)
    v = attn.v_proj(key_value).view(batch, k_len, heads, d)

    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    allowed = torch.ones(q_len, k_len, dtype=torch.bool)
    if attn.block_size and not attn.site.cross:
        bs = attn.block_size
        allowed &= (i // bs - j // bs).abs() <= 1
    if causal:
        allowed &= j <= i
    allowed = allowed.expand(batch, 1, q_len, k_len)
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, :]
    t_q, t_k = i + query_start, j + key_start
    distance = (t_q - t_k).abs().to(query.dtype)
    past = (t_k < t_q).to(query.dtype)
    terms = attn.position

    def probs(half: int) -> torch.Tensor:
        s = torch.einsum("bqhd,bkhd->bhqk", q[..., half, :], k[..., half, :]) / math.sqrt(w)
        if terms is not None and getattr(terms, "slope_raw", None) is not None:
            slopes = torch.nn.functional.softplus(terms.slope_raw)
            s = s - slopes[:, None, None] * distance
        if terms is not None and getattr(terms, "decay", None) is not None:
            s = s / (1 + terms.decay.clamp(min=0) * distance)
        if terms is not None and getattr(terms, "bias", None) is not None:
            s = s - terms.bias * past
        if attn.talk_before is not None:
            s = torch.einsum("gh,bhqk->bgqk", attn.talk_before, s)
        p = s.masked_fill(~allowed, float("-inf")).softmax(-1)
        return torch.nan_to_num(p, nan=0.0)  # rows with no allowed key: zero weights

    if attn.lambda_mode == "scalar":
        lam = attn.lambda_scalar
    else:
        lam = (
            torch.exp((attn.lambda_q1 * attn.lambda_k1).sum())
            - torch.exp((attn.lambda_q2 * attn.lambda_k2).sum())
            + attn.lambda_init
        )
    weights = probs(0) - lam * probs(1)
    if attn.talk_after is not None:
        weights = torch.einsum("gh,bhqk->bgqk", attn.talk_after, weights)
    out = torch.einsum("bhqk,bkhd->bqhd", weights, v)  # [B, Lq, H, d]
    if attn.head_norm is not None:
        rms = torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + attn.head_norm.eps)
        out = out * rms * attn.head_norm.weight * (1 - attn.lambda_init)
    return attn.out_proj(out.reshape(batch, q_len, d_model)), weights

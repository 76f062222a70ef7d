"""The Time-Series-Library's layers as the published iTransformer and TimeXer use them, written
from their equations for the references: random weights under their key names, and their
attention (`AttentionLayer` around `FullAttention`, no mask) and kernel-1 convolution FFN."""

from __future__ import annotations

import torch.nn.functional as F


def random_attention(state: dict, prefix: str, r, d_model: int) -> None:
    """`AttentionLayer`'s projections under `prefix` (r: a random tensor of a shape, scale s)."""
    for name in ("query", "key", "value", "out"):
        state[f"{prefix}.{name}_projection.weight"] = r(d_model, d_model, s=d_model**-0.5)
        state[f"{prefix}.{name}_projection.bias"] = r(d_model)


def random_conv_ffn(state: dict, prefix: str, r, d_model: int, d_ff: int) -> None:
    """`conv1` and `conv2` (kernel 1) under `prefix`."""
    state[f"{prefix}conv1.weight"] = r(d_ff, d_model, 1, s=d_model**-0.5)
    state[f"{prefix}conv1.bias"] = r(d_ff)
    state[f"{prefix}conv2.weight"] = r(d_model, d_ff, 1, s=d_ff**-0.5)
    state[f"{prefix}conv2.bias"] = r(d_model)


def attention(state: dict, prefix: str, queries, keys, n_heads: int):
    """Multi-head attention without a mask: queries [B, Lq, d], keys [B, Lk, d] -> [B, Lq, d],
    scores / sqrt(head width)."""
    batch, q_len, d_model = queries.shape
    k_len, width = keys.shape[1], d_model // n_heads

    def project(x, name, length):  # -> [B, H, L, d / H]
        y = F.linear(x, state[f"{prefix}.{name}_projection.weight"],
                     state[f"{prefix}.{name}_projection.bias"])
        return y.view(batch, length, n_heads, width).transpose(1, 2)

    q, k = project(queries, "query", q_len), project(keys, "key", k_len)
    v = project(keys, "value", k_len)
    weights = (q @ k.transpose(-1, -2) / width**0.5).softmax(dim=-1)
    mixed = (weights @ v).transpose(1, 2).reshape(batch, q_len, d_model)
    return F.linear(mixed, state[f"{prefix}.out_projection.weight"],
                    state[f"{prefix}.out_projection.bias"])


def conv_ffn(state: dict, prefix: str, h):
    """conv2(gelu(conv1(h))) over tokens h [..., d]."""
    y = F.gelu(F.linear(h, state[f"{prefix}conv1.weight"][..., 0], state[f"{prefix}conv1.bias"]))
    return F.linear(y, state[f"{prefix}conv2.weight"][..., 0], state[f"{prefix}conv2.bias"])

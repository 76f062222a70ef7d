"""The published iTransformer's forward, written from its equations for the tests: a state dict
in the official code's layout (`model/iTransformer.py`: use_norm, timeF marks as tokens,
post-norm LayerNorm layers with kernel-1 convolutions, a last LayerNorm, the projector) and a
window [B, L, C] with its calendar features [B, L, k] -> the forecast [B, T, C]. The loader's
output must equal it; the check against the official code itself runs outside the project
(docs/itransformer.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def official_state_dict(in_len, out_len, d_model, d_ff, layers, seed=0) -> dict:
    """Random weights under the official key names and shapes."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape, s=0.3: torch.randn(*shape, generator=g) * s  # noqa: E731
    state = {"enc_embedding.value_embedding.weight": r(d_model, in_len, s=in_len**-0.5),
             "enc_embedding.value_embedding.bias": r(d_model)}
    for i in range(layers):
        p = f"encoder.attn_layers.{i}."
        for name in ("query", "key", "value", "out"):
            state[f"{p}attention.{name}_projection.weight"] = r(d_model, d_model,
                                                                s=d_model**-0.5)
            state[f"{p}attention.{name}_projection.bias"] = r(d_model)
        state[f"{p}conv1.weight"] = r(d_ff, d_model, 1, s=d_model**-0.5)
        state[f"{p}conv1.bias"] = r(d_ff)
        state[f"{p}conv2.weight"] = r(d_model, d_ff, 1, s=d_ff**-0.5)
        state[f"{p}conv2.bias"] = r(d_model)
        for norm in ("norm1", "norm2"):
            state[f"{p}{norm}.weight"], state[f"{p}{norm}.bias"] = 1 + r(d_model, s=0.1), r(d_model)
    state["encoder.norm.weight"], state["encoder.norm.bias"] = 1 + r(d_model, s=0.1), r(d_model)
    state["projector.weight"], state["projector.bias"] = r(out_len, d_model, s=d_model**-0.5), \
        r(out_len)
    return state


def official_forward(state: dict, x, marks, n_heads: int, layers: int):
    """x [B, L, C], marks [B, L, k] -> [B, T, C], dropout 0 (so train and eval alike)."""
    mean = x.mean(1, keepdim=True)  # the window's statistics (use_norm), per channel
    std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)
    tokens = torch.cat([(x - mean) / std, marks], dim=-1).transpose(1, 2)  # [B, C + k, L]
    h = F.linear(tokens, state["enc_embedding.value_embedding.weight"],
                 state["enc_embedding.value_embedding.bias"])  # [B, N, d]
    batch, n, d_model = h.shape
    width = d_model // n_heads

    def heads(t):  # [B, N, d] -> [B, H, N, d / H]
        return t.view(batch, n, n_heads, width).transpose(1, 2)

    for i in range(layers):
        p = f"encoder.attn_layers.{i}."
        q, k, v = (heads(F.linear(h, state[f"{p}attention.{name}_projection.weight"],
                                  state[f"{p}attention.{name}_projection.bias"]))
                   for name in ("query", "key", "value"))
        weights = torch.softmax(q @ k.transpose(-1, -2) / width**0.5, dim=-1)  # no mask
        mixed = (weights @ v).transpose(1, 2).reshape(batch, n, d_model)
        out = F.linear(mixed, state[f"{p}attention.out_projection.weight"],
                       state[f"{p}attention.out_projection.bias"])
        h = F.layer_norm(h + out, (d_model,), state[f"{p}norm1.weight"], state[f"{p}norm1.bias"])
        y = F.gelu(F.linear(h, state[f"{p}conv1.weight"][..., 0], state[f"{p}conv1.bias"]))
        y = F.linear(y, state[f"{p}conv2.weight"][..., 0], state[f"{p}conv2.bias"])
        h = F.layer_norm(h + y, (d_model,), state[f"{p}norm2.weight"], state[f"{p}norm2.bias"])
    h = F.layer_norm(h, (d_model,), state["encoder.norm.weight"], state["encoder.norm.bias"])
    out = F.linear(h, state["projector.weight"], state["projector.bias"])  # [B, N, T]
    out = out.transpose(1, 2)[:, :, : x.shape[-1]]  # the series' tokens: [B, T, C]
    return out * std + mean

"""The published iTransformer's forward, written from its equations for the tests: a state dict
in the official code's layout (`model/iTransformer.py`: use_norm, timeF marks as tokens,
post-norm LayerNorm layers with kernel-1 convolutions, a last LayerNorm, the projector) and a
window [B, L, C] with its calendar features [B, L, k] -> the forecast [B, T, C]. The loader's
output must equal it; the check against the official code itself runs outside the project
(docs/itransformer.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .tslib_layers import attention, conv_ffn, random_attention, random_conv_ffn


def official_state_dict(in_len, out_len, d_model, d_ff, layers, seed=0) -> dict:
    """Random weights under the official key names and shapes."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape, s=0.3: torch.randn(*shape, generator=g) * s  # noqa: E731
    state = {"enc_embedding.value_embedding.weight": r(d_model, in_len, s=in_len**-0.5),
             "enc_embedding.value_embedding.bias": r(d_model)}
    for i in range(layers):
        p = f"encoder.attn_layers.{i}."
        random_attention(state, f"{p}attention", r, d_model)
        random_conv_ffn(state, p, r, d_model, d_ff)
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
    d_model = h.shape[-1]
    for i in range(layers):
        p = f"encoder.attn_layers.{i}."
        out = attention(state, f"{p}attention", h, h, n_heads)
        h = F.layer_norm(h + out, (d_model,), state[f"{p}norm1.weight"], state[f"{p}norm1.bias"])
        h = F.layer_norm(h + conv_ffn(state, p, h), (d_model,), state[f"{p}norm2.weight"],
                         state[f"{p}norm2.bias"])
    h = F.layer_norm(h, (d_model,), state["encoder.norm.weight"], state["encoder.norm.bias"])
    out = F.linear(h, state["projector.weight"], state["projector.bias"])  # [B, N, T]
    out = out.transpose(1, 2)[:, :, : x.shape[-1]]  # the series' tokens: [B, T, C]
    return out * std + mean

"""The published TimeXer's forward, written from its equations for the tests: a state dict in
the official code's layout (`models/TimeXer.py`: use_norm; each target's non-overlapping
patches through a linear map without a bias plus the sinusoidal table, then its global token;
each exogenous series' and calendar feature's window one token; post-norm layers of
self-attention, the global tokens' cross-attention, kernel-1 convolutions; a last LayerNorm; the
d-major flatten head) and a window -> the forecast. `features="M"`: every series a target and
an exogenous token; `"MS"`: the last series the target (the official convention), the others
exogenous. The loader's output must equal it; the check against the official code itself runs
outside the project (scripts/check_official_timexer.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .tslib_layers import attention, conv_ffn, random_attention, random_conv_ffn


def official_state_dict(in_len, out_len, patch_len, d_model, d_ff, layers, n_vars,
                        seed=0) -> dict:
    """Random weights under the official key names and shapes (`n_vars`: the target series,
    the official glb_token's second dimension: all series under M, 1 under MS)."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape, s=0.3: torch.randn(*shape, generator=g) * s  # noqa: E731
    patches = in_len // patch_len
    state = {"en_embedding.value_embedding.weight": r(d_model, patch_len, s=patch_len**-0.5),
             "en_embedding.glb_token": r(1, n_vars, 1, d_model, s=1.0),
             "en_embedding.position_embedding.pe": table(5000, d_model)[None],
             "ex_embedding.value_embedding.weight": r(d_model, in_len, s=in_len**-0.5),
             "ex_embedding.value_embedding.bias": r(d_model)}
    for i in range(layers):
        p = f"encoder.layers.{i}."
        random_attention(state, f"{p}self_attention", r, d_model)
        random_attention(state, f"{p}cross_attention", r, d_model)
        random_conv_ffn(state, p, r, d_model, d_ff)
        for norm in ("norm1", "norm2", "norm3"):
            state[f"{p}{norm}.weight"], state[f"{p}{norm}.bias"] = 1 + r(d_model, s=0.1), r(d_model)
    state["encoder.norm.weight"], state["encoder.norm.bias"] = 1 + r(d_model, s=0.1), r(d_model)
    nf = d_model * (patches + 1)
    state["head.linear.weight"] = r(out_len, nf, s=nf**-0.5)
    state["head.linear.bias"] = r(out_len)
    return state


def table(length: int, d_model: int):
    """The sinusoidal table: sin on even channels, cos on odd, 10000^(-2i/d)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    return pe


def official_forward(state: dict, x, marks, n_heads: int, layers: int, patch_len: int,
                     features: str = "M"):
    """x [B, L, C], marks [B, L, k] (or None) -> [B, T, C] (M) or [B, T, 1] (MS: the last
    series), dropout 0 (so train and eval alike)."""
    mean = x.mean(1, keepdim=True)  # the window's statistics (use_norm), per series
    std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)
    z = (x - mean) / std
    targets = z if features == "M" else z[..., -1:]  # [B, L, T]
    exogenous = z if features == "M" else z[..., :-1]
    batch, length, n_targets = targets.shape
    d_model = state["encoder.norm.weight"].shape[0]
    patches = length // patch_len
    # each target's patches: [B, T, N, P] -> [B * T, N, d] + positions, then its global token
    cut = targets.transpose(1, 2).unfold(-1, patch_len, patch_len)
    h = F.linear(cut, state["en_embedding.value_embedding.weight"])
    h = h + table(patches, d_model)
    glb = state["en_embedding.glb_token"].expand(batch, -1, -1, -1)  # [B, T, 1, d]
    h = torch.cat([h, glb], dim=2).reshape(batch * n_targets, patches + 1, d_model)
    tokens = exogenous if marks is None else torch.cat([exogenous, marks], dim=-1)
    ex = F.linear(tokens.transpose(1, 2), state["ex_embedding.value_embedding.weight"],
                  state["ex_embedding.value_embedding.bias"])  # [B, X, d]

    def norm(t, name):
        return F.layer_norm(t, (d_model,), state[f"{name}.weight"], state[f"{name}.bias"])

    for i in range(layers):
        p = f"encoder.layers.{i}."
        h = norm(h + attention(state, f"{p}self_attention", h, h, n_heads), f"{p}norm1")
        g = h[:, -1:]  # [B * T, 1, d]: each series' global token
        cross = attention(state, f"{p}cross_attention", g.reshape(batch, n_targets, d_model),
                          ex, n_heads)
        g = norm(g + cross.reshape(batch * n_targets, 1, d_model), f"{p}norm2")
        h = torch.cat([h[:, :-1], g], dim=1)
        h = norm(h + conv_ffn(state, p, h), f"{p}norm3")
    h = norm(h, "encoder.norm")  # [B * T, N + 1, d]
    flat = h.transpose(1, 2).reshape(batch, n_targets, -1)  # d-major: [B, T, d * (N + 1)]
    out = F.linear(flat, state["head.linear.weight"], state["head.linear.bias"])  # [B, T, H]
    out = out.transpose(1, 2)
    if features == "M":
        return out * std + mean
    return out * std[..., -1:] + mean[..., -1:]

"""The published PatchTST's forward, written from its equations for the tests: a state dict in
the official code's layout (`PatchTST_supervised/models/PatchTST.py`, individual=False,
decomposition=False, revin without affine, BatchNorm, residual attention, end padding) and a
window [B, L, C] -> the forecast [B, T, C]. A reference the loader's output must equal; the
check against the official code itself runs outside the project (docs/patchtst.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def official_state_dict(c_in, in_len, out_len, patch_len, stride, d_model, n_heads, d_ff,
                        layers, seed=0) -> dict:
    """Random weights (and BatchNorm statistics) under the official key names and shapes."""
    g = torch.Generator().manual_seed(seed)
    n = (in_len - patch_len) // stride + 2  # + 1 patch for the end padding
    r = lambda *shape, s=0.3: torch.randn(*shape, generator=g) * s  # noqa: E731
    state = {"model.backbone.W_pos": r(n, d_model, s=0.02),
             "model.backbone.W_P.weight": r(d_model, patch_len, s=patch_len**-0.5),
             "model.backbone.W_P.bias": r(d_model)}
    for i in range(layers):
        p = f"model.backbone.encoder.layers.{i}."
        for name in ("W_Q", "W_K", "W_V", "to_out.0"):
            state[f"{p}self_attn.{name}.weight"] = r(d_model, d_model, s=d_model**-0.5)
            state[f"{p}self_attn.{name}.bias"] = r(d_model)
        state[f"{p}self_attn.sdp_attn.scale"] = torch.tensor((d_model // n_heads) ** -0.5)
        for norm in ("norm_attn", "norm_ffn"):
            state[f"{p}{norm}.1.weight"] = 1 + r(d_model, s=0.1)
            state[f"{p}{norm}.1.bias"] = r(d_model, s=0.1)
            state[f"{p}{norm}.1.running_mean"] = r(d_model, s=0.5)
            state[f"{p}{norm}.1.running_var"] = 0.5 + torch.rand(d_model, generator=g)
            state[f"{p}{norm}.1.num_batches_tracked"] = torch.tensor(7)
        state[f"{p}ff.0.weight"] = r(d_ff, d_model, s=d_model**-0.5)
        state[f"{p}ff.3.weight"] = r(d_model, d_ff, s=d_ff**-0.5)
        state[f"{p}ff.0.bias"], state[f"{p}ff.3.bias"] = r(d_ff), r(d_model)
    state["model.head.linear.weight"] = r(out_len, d_model * n, s=(d_model * n) ** -0.5)
    state["model.head.linear.bias"] = r(out_len)
    return state


def official_forward(state: dict, x, patch_len, stride, n_heads, layers, training=False):
    """x [B, L, C] -> [B, T, C], dropout 0; `training`: BatchNorm on the batch's statistics."""
    batch, _, c_in = x.shape
    mean = x.mean(1, keepdim=True)
    std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)
    z = ((x - mean) / std).permute(0, 2, 1)  # [B, C, L]
    z = torch.cat([z, z[..., -1:].expand(-1, -1, stride)], dim=-1)  # the end padding
    patches = z.unfold(-1, patch_len, stride)  # [B, C, N, P]
    n = patches.shape[2]
    u = F.linear(patches, state["model.backbone.W_P.weight"], state["model.backbone.W_P.bias"])
    u = u.reshape(batch * c_in, n, -1) + state["model.backbone.W_pos"]  # [B*C, N, d]
    d_model = u.shape[-1]
    head = d_model // n_heads
    prev = None
    def split(t):  # [B*C, N, d] -> [B*C, heads, N, d / heads]
        return t.view(batch * c_in, n, n_heads, head).transpose(1, 2)

    for i in range(layers):
        p = f"model.backbone.encoder.layers.{i}."

        def lin(t, name, p=p):
            return F.linear(t, state[f"{p}{name}.weight"], state[f"{p}{name}.bias"])

        q, k, v = (split(lin(u, f"self_attn.{w}")) for w in ("W_Q", "W_K", "W_V"))
        scores = q @ k.transpose(-1, -2) * state[f"{p}self_attn.sdp_attn.scale"]
        if prev is not None:
            scores = scores + prev
        prev = scores
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch * c_in, n, d_model)
        u = _batch_norm(u + lin(out, "self_attn.to_out.0"), state, f"{p}norm_attn.1", training)
        ff = lin(F.gelu(lin(u, "ff.0")), "ff.3")
        u = _batch_norm(u + ff, state, f"{p}norm_ffn.1", training)
    flat = u.view(batch, c_in, n, d_model).permute(0, 1, 3, 2).flatten(2)  # [B, C, d * N]
    y = F.linear(flat, state["model.head.linear.weight"], state["model.head.linear.bias"])
    return y.permute(0, 2, 1) * std + mean  # [B, T, C]


def _batch_norm(u, state, key, training):
    flat = u.reshape(-1, u.shape[-1])
    out = F.batch_norm(flat, state[f"{key}.running_mean"].clone(),
                       state[f"{key}.running_var"].clone(), state[f"{key}.weight"],
                       state[f"{key}.bias"], training=training, eps=1e-5)
    return out.view_as(u)

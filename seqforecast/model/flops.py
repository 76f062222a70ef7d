"""FLOPs of the forecaster by formula, for throughput and utilisation figures.

torch's `FlopCounterMode` counts the fused `scaled_dot_product_attention` call as 0 FLOPs on
CPU, so every model whose attention runs fused looks cheaper than it is. This counts the
matrix products of one window's forward pass from the config alone (2 FLOPs per
multiply-add): the token embeddings, each attention's q/k/v/output projections, its scores
and its weighted values over the (query, key) pairs it attends, each FFN (two or, gated,
three matrices), the head and the linear path. Elementwise work (norms, softmax,
activations) is left out, as in nanoGPT's `estimate_mfu`; training is forward x 3 (the
backward pass costs about twice the forward).

`pairs` says which (query, key) pairs count:

- `seen` (the default, what the model computes as a function): every key a query attends:
  all of them in the encoder and cross-attention, itself and the ones before under a causal
  mask, only its block window with `block_size` (block_local.py: the previous, own and, when
  not causal, next block; causal, up to itself).
- `computed`: the pairs an explicit (unfused) implementation multiplies, masked ones
  included: Lq x Lk for dense attention, every padded window position for block windows.
  This is what `FlopCounterMode` sees on the explicit paths, which tests check it against.

Differential attention computes two score maps of the q/k half width w and applies their
difference to v once: per pair and head, 2 x 2w (scores) + 2 d_head (values), the same as a
standard head in the paper layout (w = d_head / 2). Under residual attention (PatchTST's
`model.res_attention`) layer l scores with the l layers' q and k so far (residual.py): its
score products are l times as wide.
"""

from __future__ import annotations

from collections.abc import Mapping

from .embedding import Tokenizer, patch_shape


def block_pairs(length: int, block_size: int, causal: bool, pairs: str = "seen") -> int:
    """Pairs of block-local self-attention over `length` tokens (block_local.py's windows:
    query block n sees blocks n - 1, n and, not causal, n + 1)."""
    blocks = -(-length // block_size)
    if pairs == "computed":  # every padded window position
        return blocks * block_size * (2 if causal else 3) * block_size
    total = 0
    for i in range(length):
        first = max(0, (i // block_size - 1) * block_size)
        last = i + 1 if causal else min(length, (i // block_size + 2) * block_size)
        total += last - first
    return total


def attention_pairs(
    q_len: int, k_len: int, causal: bool, block_size: int, pairs: str = "seen"
) -> int:
    """(query, key) pairs one head multiplies for self- (q_len == k_len) or cross-attention."""
    if block_size > 0:
        return block_pairs(q_len, block_size, causal, pairs)
    if pairs == "computed" or not causal:
        return q_len * k_len
    return q_len * (q_len + 1) // 2  # causal self-attention: itself and every key before


def forward_flops(
    cfg: Mapping, n_features: int = 1, n_targets: int = 1, pairs: str = "seen"
) -> dict[str, int]:
    """Forward FLOPs of one window by part (embeddings, attention projections, attention
    cores, FFN, head, linear path) and their `total`, for a composed, resolved config."""
    model, attn, ffn, data = cfg["model"], cfg["attention"], cfg["ffn"], cfg["data"]
    encoder_only = model["name"] == "encoder"  # encoder-only, flatten head
    if not encoder_only and model["decoding"] != "oneshot":
        raise ValueError("forward_flops counts one-shot decoding (model.decoding=oneshot)")
    d, heads = model["d_model"], model["n_heads"]
    patch_len, stride = patch_shape(cfg)
    label_len = 0 if encoder_only else model["label_len"]
    tokens = Tokenizer(data["in_len"], label_len, data["out_len"], patch_len, stride,
                       cfg["embedding"]["padding"])
    enc_len = tokens.encoder_tokens
    dec_len = 0 if encoder_only else tokens.label_tokens + tokens.output_tokens  # one-shot
    independent = model["channel_independent"]
    inner_f, inner_t = (1, 1) if independent else (n_features, n_targets)
    channels = n_targets if independent else 1  # windows per window the model runs

    d_head = d // heads
    diff = attn["name"] == "diff"
    wide = diff and attn["head_layout"] == "wide"
    half = (d_head if wide else d_head // 2) if diff else d_head
    qk_width = 2 * heads * half if diff else d
    # Residual attention (PatchTST's encoder): layer l scores with the l layers' q and k so far.
    residual = encoder_only and model["res_attention"]
    block_size = attn["block_size"] if diff else 0  # only diff has windows

    def attention(q_len: int, k_len: int, causal: bool, cross: bool, carried: int = 1):
        projections = 2 * d * (q_len * qk_width + k_len * qk_width + k_len * d + q_len * d)
        per_pair = (heads * (2 * 2 * half * carried + 2 * d_head) if diff
                    else heads * (2 * d_head * carried + 2 * d_head))
        windows = 0 if cross else block_size
        core = per_pair * attention_pairs(q_len, k_len, causal, windows, pairs)
        return projections, core

    d_ff = ffn["d_ff"] or 4 * d
    ffn_per_token = 2 * d * d_ff * (3 if ffn["gated"] else 2)

    parts = {"embeddings": 0, "attention_projections": 0, "attention_cores": 0, "ffn": 0,
             "head": 0, "linear_path": 0}
    # The decoder embeds its known (label) tokens; the output tokens are learned placeholders.
    parts["embeddings"] = (
        2 * d * (enc_len * patch_len * inner_f + tokens.label_tokens * stride * inner_t)
    )
    for layer in range(1, model["encoder_layers"] + 1):
        proj, core = attention(enc_len, enc_len, False, False, layer if residual else 1)
        parts["attention_projections"] += proj
        parts["attention_cores"] += core
        parts["ffn"] += enc_len * ffn_per_token
    for _ in range(0 if encoder_only else model["decoder_layers"]):
        # One-shot decoding: the placeholders see each other, so no causal mask.
        for q_len, k_len, causal, cross in ((dec_len, dec_len, False, False),
                                            (dec_len, enc_len, False, True)):
            proj, core = attention(q_len, k_len, causal, cross)
            parts["attention_projections"] += proj
            parts["attention_cores"] += core
        parts["ffn"] += dec_len * ffn_per_token
    if encoder_only:  # every encoder token's output flattened, projected to the horizon
        parts["head"] = 2 * enc_len * d * data["out_len"] * inner_t
    else:
        parts["head"] = 2 * dec_len * d * stride * inner_t
    maps = {"none": 0, "nlinear": 1, "dlinear": 2}[model["linear_path"]]
    parts["linear_path"] = 2 * maps * data["in_len"] * data["out_len"] * inner_t
    parts = {name: value * channels for name, value in parts.items()}
    parts["total"] = sum(parts.values())
    return parts


def training_flops(cfg: Mapping, n_features: int = 1, n_targets: int = 1) -> int:
    """One window's training step (forward + backward) by formula: forward x 3."""
    return 3 * forward_flops(cfg, n_features, n_targets)["total"]

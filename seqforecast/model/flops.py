"""FLOPs of a forecaster by formula, for throughput and utilisation figures.

torch's `FlopCounterMode` counts the fused `scaled_dot_product_attention` call as 0 FLOPs on
CPU, so every model whose attention runs fused looks cheaper than it is. This counts the
matrix products of one window's forward pass from the config alone (2 FLOPs per
multiply-add): the token embeddings, each attention's projections and its mixing (each backend
counts its own: `AttentionOptions.projection_flops` and `core_flops`, over the pairs it attends:
attention/cost.py), each FFN (two or, gated, three matrices), the head and the linear path.
Elementwise work (norms, softmax, activations) is left out, as in nanoGPT's `estimate_mfu`;
training is forward x 3 (the backward pass costs about twice the forward).

Each family counts its own model (`ModelOptions.forward_flops`), from its attention positions
(`sites`) and its head, with the helpers here; `pairs` (attention/cost.py): `seen`, what the
model computes as a function, or `computed`, what an explicit implementation multiplies.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..attention import attention_schema
from .options import ModelOptions, Site, attention_node

PARTS = ("embeddings", "attention_projections", "attention_cores", "attention_side", "ffn",
         "head", "linear_path")


def forward_flops(cfg: Mapping, n_features: int = 1, n_targets: int = 1,
                  pairs: str = "seen") -> dict[str, int]:
    """Forward FLOPs of one window by part (PARTS) and their `total`, for a composed,
    resolved config (plain values)."""
    from .families import family_options

    return family_options(cfg).forward_flops(cfg, n_features, n_targets, pairs)


def training_flops(cfg: Mapping, n_features: int = 1, n_targets: int = 1) -> int:
    """One window's training step (forward + backward) by formula: forward x 3."""
    return 3 * forward_flops(cfg, n_features, n_targets)["total"]


def stack_flops(cfg: Mapping, options: ModelOptions, site: Site, pairs: str
                ) -> tuple[int, int, int]:
    """(attention projections, attention cores, FFN) of every layer at `site` (an FFN after
    each self-attention; a cross-attention site's layers share their FFN with the self site's,
    so it counts none). Under residual attention layer l scores with the l layers' q and k."""
    _, node = attention_node(cfg, site)
    attn = attention_schema(node["name"])(**node)
    d, heads = options.d_model, options.n_heads
    projections = cores = 0
    for layer in range(1, site.layers + 1):
        projections += attn.projection_flops(site.q_len, site.k_len, d, heads, site.cross)
        carried = layer if site.residual else 1
        cores += heads * attn.core_flops(site.q_len, site.k_len, d // heads, site.causal,
                                         carried, pairs, cross=site.cross)
    ffn = 0 if site.cross else site.layers * site.q_len * ffn_flops_per_token(cfg, d)
    return projections, cores, ffn


def ffn_flops_per_token(cfg: Mapping, d_model: int) -> int:
    ffn = cfg["ffn"]
    d_ff = ffn["d_ff"] or 4 * d_model
    return 2 * d_model * d_ff * (3 if ffn["gated"] else 2)


def linear_path_flops(options: ModelOptions, in_len: int, out_len: int, targets: int) -> int:
    maps = {"none": 0, "nlinear": 1, "dlinear": 2}[str(options.linear_path)]
    return 2 * maps * in_len * out_len * targets


def count_parts(cfg: Mapping, options: ModelOptions, sites: list[Site], embeddings: int,
                head: int, targets: int, windows: int, pairs: str,
                series: tuple[int, int]) -> dict[str, int]:
    """Every part of a model from its sites, its embeddings' and head's FLOPs and the target
    channels its linear path forecasts, times the `windows` it runs per window of data
    (channel independence: one per channel). `series`: (the window's series channels, the
    encoder's tokens), what a backend's side inputs read and give (de-stationary factors)."""
    parts = dict.fromkeys(PARTS, 0)
    parts["embeddings"], parts["head"] = embeddings, head
    attn = attention_schema(cfg["attention"]["name"])(**cfg["attention"])
    parts["attention_side"] = attn.side_flops(series[0], cfg["data"]["in_len"], series[1])
    for site in sites:
        projections, cores, ffn = stack_flops(cfg, options, site, pairs)
        parts["attention_projections"] += projections
        parts["attention_cores"] += cores
        parts["ffn"] += ffn
    data = cfg["data"]
    parts["linear_path"] = linear_path_flops(options, data["in_len"], data["out_len"], targets)
    parts = {name: value * windows for name, value in parts.items()}
    parts["total"] = sum(parts.values())
    return parts

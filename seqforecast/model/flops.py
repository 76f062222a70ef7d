"""FLOPs of a forecaster, counted from the model itself, for throughput and utilisation figures.

The model a config builds runs one window forward under torch's `FlopCounterMode`, every
attention on its explicit path (attention.kernel=explicit): torch's counter
sees the fused `scaled_dot_product_attention` as 0 FLOPs on the CPU, and an explicit path's
products are all matrix products it counts. What is counted is what the counter counts: matrix
products and convolutions, 2 FLOPs a multiply-add, every pair an explicit path multiplies
(masked ones and a block window's padding included); elementwise work (norms, softmax,
activations) and FFTs (Auto-Correlation's, Fourier's) are not, as in nanoGPT's
`estimate_mfu`. No formula re-describes the model: a new backend or family is counted as it is
built. Training is forward x 3 (the backward pass costs about twice the forward).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.utils.flop_counter import FlopCounterMode

from .builder import build_model


def forward_flops(cfg: Mapping, n_features: int = 1, n_targets: int = 1) -> dict[str, int]:
    """Forward FLOPs of one window of `n_features` channels (`n_targets` forecast) of the
    model a composed config builds: by the model's top-level part (its attribute names:
    `encoder`, `decoder`, `head`, ...) and their `total`."""
    explicit = {**cfg, **{key: {**cfg[key], "kernel": "explicit"}
                          for key in ("attention", "variate_attention") if cfg.get(key)}}
    model = build_model(explicit, n_features, n_targets).eval()
    src = torch.zeros(1, model.in_len, n_features)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(src)
    # module path ("<class>.encoder.0.ffn") -> its FLOPs, every op counted in each module
    # around it; a part is its outermost modules that ran (a ModuleList never runs itself)
    totals = {name: sum(counts.values()) for name, counts in counter.get_flop_counts().items()}
    root = type(model).__name__
    parts = {}
    for part, _ in model.named_children():
        prefix = f"{root}.{part}"
        inside = [n for n in totals if n == prefix or n.startswith(prefix + ".")]
        outermost = [n for n in inside
                     if not any(n != m and n.startswith(m + ".") for m in inside)]
        flops = sum(totals[n] for n in outermost)
        if flops:
            parts[part] = flops
    return {**parts, "total": counter.get_total_flops()}


def training_flops(cfg: Mapping, n_features: int = 1, n_targets: int = 1) -> int:
    """One window's training step (forward + backward): forward x 3."""
    return 3 * forward_flops(cfg, n_features, n_targets)["total"]

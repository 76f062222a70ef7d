"""What every backend's options hold (`AttentionOptions`): the config's `attention=<name>` node.

A backend's options are values only. What its mechanism can and cannot do is said where it is
built: its constructor reads the layer's site (site.py) and refuses there, in one line, what it
cannot serve, so no code outside a backend's module names it or re-describes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..options import Check, choice, option, probability
from .kernels import kernel_names

GATES = ("none", "headwise", "elementwise")
Gate = choice("Gate", GATES)
# Kernels are registered (kernels.py; a package's through an entry point), so the names are
# read when a value is checked, not frozen when this module is imported.
kernel_name = Check(lambda v: v in kernel_names(),
                    lambda: "choose one of " + ", ".join(kernel_names()))


@dataclass
class AttentionOptions:
    """What every backend takes (`attention=vanilla|einsum`); a backend with more subclasses
    it. `name` is the backend's (the config group's option); build_attention sets it."""

    name: str = ""
    dropout: float = option(0.0, probability)  # on the attention weights, in training
    bias: bool = True  # in the q, k, v and output projections
    kernel: str = option("auto", kernel_name)  # what computes it (kernels.py): auto (per
    # layer, the fastest that serves) | explicit (its own path) | sdpa (torch's fused kernel) |
    # native (the CPU's C kernel for short sequences; trainer.kernels=native or auto) | triton,
    # flex (block-local windows on a GPU: band_triton.py, band_flex.py) | a package's
    gate: Gate = Gate.none  # a sigmoid gate on each head's output before out_proj, computed
    # from the layer's query input (Qiu et al. 2025, gated attention's G1): none | headwise
    # (one gate a head) | elementwise (one a value); core.OutputGate

    def gate_width(self, d_model: int, n_heads: int) -> int:
        """How many gates the output gate computes per query: 0 (none), one a head, or one a
        value of the output."""
        return {"none": 0, "headwise": n_heads, "elementwise": d_model}[str(self.gate)]

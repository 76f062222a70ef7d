"""The generic pieces a kernel set builds (`trainer.kernels`): dropout, the FFN, the residual
block. A model's layers ask their set for these when they are built, so the run's kernels are
chosen once, at build time, and no module is swapped afterwards.

    torch    stock PyTorch: nn.Dropout, FeedForward, Residual (this module)
    native   the CPU's C kernels where they take the piece (seqforecast/native registers it)

A set holds the same parameters in the same order whatever it builds, so a checkpoint loads
under either; a run repeats bit for bit only under the set it was trained with.
"""

from __future__ import annotations

from torch import nn

from .ffn import FeedForward
from .layers import Residual


class Parts:
    """Stock PyTorch's pieces; a kernel set subclasses it and builds its own where it takes
    them."""

    name = "torch"

    def dropout(self, p: float) -> nn.Module:
        return nn.Dropout(p)

    def ffn(self, d_model: int, d_ff: int, *, activation: str, gated: bool, bias: bool,
            bias_gate: bool, dropout: float) -> FeedForward:
        return FeedForward(d_model, d_ff, activation=activation, gated=gated, bias=bias,
                           bias_gate=bias_gate, dropout=self.dropout(dropout))

    def residual(self, d_model: int, dropout: float, norm_first: bool, norm: str) -> Residual:
        return Residual(d_model, self.dropout(dropout), norm_first, norm)


TORCH = Parts()
_SETS: dict[str, Parts] = {TORCH.name: TORCH}


def register_parts(parts: Parts) -> Parts:
    """Make a kernel set buildable by its name (trainer.kernels resolves to it)."""
    _SETS[parts.name] = parts
    return parts


def kernel_set(name: str) -> Parts:
    """The pieces of kernel set `name` (torch, or one registered: native)."""
    try:
        return _SETS[name]
    except KeyError:
        raise ValueError(f"unknown kernel set {name!r}; registered: {', '.join(_SETS)}") from None

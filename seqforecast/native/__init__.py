"""The kernels a model runs (`trainer.kernels`), chosen once, when the model is built.

- `torch`: stock PyTorch only: nn.Dropout, torch's fused attention or the backends' explicit
  paths, the FFN's nn.Linear layers, op-by-op norms. No project C code runs, on any device.
- `native`: small C kernels for the CPU (this folder), built for this machine's CPU on first
  use (build.py). Its kernel set (`NativeParts`, registered with model/parts.py) builds three
  pieces of its own where they take the piece, each computing the same function (dropout: the
  same distribution from another random stream):
    dropout                                   HashDropout (dropout.py)
    a plain FFN                               SlicedFeedForward (ffn.py)
    a post-norm residual block on BatchNorm   BatchNormResidual (residual_norm.py)
  and each attention, told the set when it is built, takes the short-sequence kernel
  (attention.py, registered as attention.kernel=native by attention_kernel.py) where it serves
  and pays (residual attention).
  They hold the same parameters (the state dict is the same), so a checkpoint loads under
  either set; a run repeats bit for bit only under the set it was trained with.
- `auto`: `native` where it applies (a float32 run on the CPU) and the kernels build, else
  `torch`.

`resolve` turns the choice into the set a run uses, or refuses `native` in one line where it
cannot run; the builder builds every piece from that set. The generic layers never look at the
device.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from ..model.ffn import FeedForward
from ..model.layers import Residual
from ..model.parts import Parts, register_parts
from . import build
from .attention_kernel import NATIVE_SET  # importing it registers the native attention kernel
from .dropout import HashDropout
from .ffn import SlicedFeedForward
from .residual_norm import BatchNormResidual

log = logging.getLogger(__name__)

KERNELS = ("auto", "torch", "native")


class KernelsUnavailable(ValueError):
    """trainer.kernels=native where the kernels cannot run; str() is the one line to show."""


def resolve(choice: str, device: torch.device | str, precision: str = "fp32") -> str:
    """The kernel set (`torch` or `native`) a run on `device` at `precision` uses for
    trainer.kernels=`choice`; KernelsUnavailable for `native` where it cannot run."""
    if choice == "torch":
        return "torch"
    device = torch.device(device)
    why = None
    if device.type != "cpu":
        why = f"they run on the CPU, and the device is {device}"
    elif precision != "fp32":
        why = f"they compute in float32, and trainer.precision={precision}"
    else:
        why = build.unavailable()
    if why is None:
        return "native"
    if choice == "native":
        raise KernelsUnavailable(f"trainer.kernels=native cannot run here: {why}; "
                                 f"use trainer.kernels=auto or torch")
    return "torch"


class NativeParts(Parts):
    """The native set's pieces: its own where they take the piece, stock PyTorch's elsewhere."""

    name = NATIVE_SET

    def dropout(self, p: float) -> nn.Module:
        return HashDropout(p)

    def ffn(self, d_model, d_ff, *, activation, gated, bias, bias_gate, dropout):
        # a plain FFN of an activation it computes: sliced; a gated one stays op by op
        cls = SlicedFeedForward if SlicedFeedForward.takes(gated, activation) else FeedForward
        return cls(d_model, d_ff, activation=activation, gated=gated, bias=bias,
                   bias_gate=bias_gate, dropout=self.dropout(dropout))

    def residual(self, d_model, dropout, norm_first, norm):
        cls = BatchNormResidual if BatchNormResidual.takes(norm_first, norm) else Residual
        return cls(d_model, self.dropout(dropout), norm_first, norm)


register_parts(NativeParts())

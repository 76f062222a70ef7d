"""The plain FFN on the CPU, a cache-sized slice of the tokens at a time, forward and backward
(`SlicedFeedForward`, the native kernel set's plain FeedForward; __init__.py
builds it).

    y = down(dropout(act(up(x))))        x [T, d_model] -> y [T, d_model], hidden d_ff wide

Run op by op, every elementwise step (the activation, the dropout mask and its product, and
their backward) streams the whole [T, d_ff] hidden tensor through main memory: 19 MB a layer
for the published PatchTST's 37,632 tokens x 128, far beyond the core's cache, for a few flops
an element. Here each slice of rows goes up, through the activation and the mask, and down
again while its hidden block (about 1 MB) stays in cache; the backward recomputes a slice's
activation from the saved pre-activation instead of keeping the activation too. The dropout
mask is one mask over the whole [T, d_ff] tensor, keyed as `HashDropout` keys its own (the
same generator, the same draw), whose rows each slice draws where it uses them (dropout.py), so
the function is the layer-by-layer one with HashDropout to float rounding, mask included.
`scripts/bench_longhorizon.py --speed` times the whole training step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model.ffn import FeedForward
from .dropout import KeepMask, keep_mask

HIDDEN_FLOATS = 1 << 18  # hidden values per slice: 1 MB of float32
# Up to this many hidden values the layer runs op by op (with HashDropout's mask): a hidden
# tensor this small stays in cache anyway, and slicing it only costs the recomputed activation
# and thinner weight-gradient products (TimeXer's 196 tokens x 2048: 49 against 57 ms a
# training step, one thread; docs/timexer.md#speed).
WHOLE_FLOATS = 1 << 19

# activation -> (forward, backward from its input: (grad, input) -> grad of the input)
ACTIVATIONS = {
    "relu": (F.relu, lambda g, a: g * (a > 0)),
    "gelu": (F.gelu, lambda g, a: torch.ops.aten.gelu_backward(g, a)),
    "silu": (F.silu, lambda g, a: torch.ops.aten.silu_backward(g, a)),
    "sigmoid": (torch.sigmoid, lambda g, a: torch.ops.aten.sigmoid_backward(g, torch.sigmoid(a))),
    "tanh": (torch.tanh, lambda g, a: torch.ops.aten.tanh_backward(g, torch.tanh(a))),
}


class SlicedFeedForward(FeedForward):
    """A plain FeedForward (no gate, an activation in ACTIVATIONS) computed by `feed_forward`:
    the same parameters and state dict, the same function."""

    @staticmethod
    def takes(gated: bool, activation: str) -> bool:
        """Whether it computes an FFN of these options (a plain one of its activations)."""
        return not gated and activation in ACTIVATIONS

    def forward(self, x: Tensor) -> Tensor:
        if x.numel() // x.shape[-1] * self.up.out_features <= WHOLE_FLOATS:
            return super().forward(x)
        p = self.dropout.p if self.training else 0.0
        up, down = self.up, self.down
        return feed_forward(x, up.weight, up.bias, down.weight, down.bias, self.activation_name, p)


def feed_forward(x: Tensor, up_w, up_b, down_w, down_b, activation: str, p: float) -> Tensor:
    """down(dropout_p(act(up(x)))) over x [..., d_model], p = 0 outside training."""
    rows = x.reshape(-1, x.shape[-1])
    shape = (rows.shape[0], up_w.shape[0])
    mask = keep_mask(shape, p) if p > 0 else None
    slice_rows = max(1, HIDDEN_FLOATS // up_w.shape[0])
    args = (rows, mask, up_w, up_b, down_w, down_b, activation, slice_rows)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in
                                       (rows, up_w, up_b, down_w, down_b)):
        out = _SlicedFFN.apply(*args)
    else:
        out = _forward(*args, keep_input=False)[0]
    return out.view(*x.shape[:-1], down_w.shape[0])


def _masked(hidden: Tensor, mask: KeepMask | None) -> Tensor:
    """hidden with the dropped elements zeroed, in place. Dropout's scale is folded into the
    down projection's weight (one product fewer over the hidden block)."""
    return hidden if mask is None else mask.apply_(hidden)


def _forward(rows, mask, up_w, up_b, down_w, down_b, activation, slice_rows, keep_input: bool):
    """(y [T, d_model], the pre-activations [T, d_ff] if keep_input else None)."""
    n = rows.shape[0]
    down_scaled = down_w if mask is None else down_w * mask.scale
    out = rows.new_empty(n, down_w.shape[0])
    pre_all = rows.new_empty(n, up_w.shape[0]) if keep_input else None
    act = ACTIVATIONS[activation][0]
    for i in range(0, n, slice_rows):
        part = slice(i, i + slice_rows)
        pre = _linear(rows[part], up_w, up_b, None if pre_all is None else pre_all[part])
        hidden = _masked(act(pre), None if mask is None else mask.rows(part))
        _linear(hidden, down_scaled, down_b, out[part])
    return out, pre_all


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None, out: Tensor | None) -> Tensor:
    """x W^T (+ b), into `out` when given."""
    if bias is None:
        return torch.mm(x, weight.t()) if out is None else torch.mm(x, weight.t(), out=out)
    if out is None:
        return torch.addmm(bias, x, weight.t())
    return torch.addmm(bias, x, weight.t(), out=out)


class _SlicedFFN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, mask, up_w, up_b, down_w, down_b, activation, slice_rows):
        out, pre = _forward(rows, mask, up_w, up_b, down_w, down_b, activation, slice_rows,
                            keep_input=True)
        ctx.save_for_backward(rows, pre, up_w, down_w)
        ctx.mask, ctx.activation, ctx.slice_rows = mask, activation, slice_rows
        ctx.up_bias, ctx.down_bias = up_b is not None, down_b is not None
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        rows, pre, up_w, down_w = ctx.saved_tensors
        mask = ctx.mask
        scale = 1.0 if mask is None else mask.scale
        act, act_backward = ACTIVATIONS[ctx.activation]
        down_scaled = down_w if mask is None else down_w * scale
        grad_out = grad_out.contiguous()
        grad_rows = torch.empty_like(rows)
        grad_up_w, grad_down_w = torch.zeros_like(up_w), torch.zeros_like(down_w)
        grad_up_b = rows.new_zeros(up_w.shape[0]) if ctx.up_bias else None
        for i in range(0, rows.shape[0], ctx.slice_rows):
            part = slice(i, i + ctx.slice_rows)
            hidden = act(pre[part])  # recomputed, in cache
            grad_hidden = grad_out[part] @ down_scaled  # [r, d_ff]
            if mask is not None:  # one draw of the slice's mask for both
                mask.rows(part).apply_(hidden, also=grad_hidden)
            grad_down_w.addmm_(grad_out[part].t(), hidden)  # times the scale below
            grad_pre = act_backward(grad_hidden, pre[part])
            grad_up_w.addmm_(grad_pre.t(), rows[part])
            if grad_up_b is not None:
                grad_up_b.add_(grad_pre.sum(0))
            torch.mm(grad_pre, up_w, out=grad_rows[part])
        grad_down_b = grad_out.sum(0) if ctx.down_bias else None
        return (grad_rows, None, grad_up_w, grad_up_b, grad_down_w.mul_(scale), grad_down_b,
                None, None)

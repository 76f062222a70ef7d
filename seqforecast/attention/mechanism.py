"""Shared body of the forecasting literature's mechanisms (flow, probsparse, autocorrelation,
fourier, destationary): a mechanism that is not a softmax over q.k scores, or computes them its
own way, inside the attention core (core.py: the projections, heads and the one forward).

A subclass writes `_attend(q, k, v, causal, need_weights)` on heads [B, H, L, head_dim] (None
for a projection it does not read). What the call cannot mean for a mechanism (a padding mask,
residual attention, the future masked where it cannot be) is refused here in one line; the
config refuses it before a model is built (AttentionOptions' TIME_AXIS, CAUSAL, SCORES,
config/rules.py). Only the explicit kernel computes these (kernels.py).
"""

from __future__ import annotations

from torch import Tensor

from .core import Attention, AttentionCall


class MechanismAttention(Attention):
    def check_call(self, call: AttentionCall, key_padding_mask: Tensor | None) -> None:
        super().check_call(call, key_padding_mask)
        name = self.options.name
        if key_padding_mask is not None:
            raise ValueError(f"{name} attention takes no key padding mask")
        why = self.cannot_be_causal() if call.causal else None
        if why:
            raise ValueError(f"{name} attention cannot be causal: {why}")

    def cannot_be_causal(self) -> str | None:
        """Why a causal call is refused, or None."""
        return type(self.options).CAUSAL

    def explicit(self, q, k, v, residual, call, key_padding_mask):
        return self._attend(q, k, v, call.causal, call.need_weights)

    def _attend(self, q: Tensor | None, k: Tensor | None, v: Tensor | None, causal: bool,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Heads [B, H, L, head_dim] (None for what the mechanism does not read) ->
        (out [B, Lq, E], the weights each output row puts on each value row [B, H, Lq, Lk],
        when asked and the mechanism has them)."""
        raise NotImplementedError

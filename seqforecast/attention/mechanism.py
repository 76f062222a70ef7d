"""Shared body of the forecasting literature's mechanisms (flow, probsparse, autocorrelation,
fourier, destationary) and the control arms: a mechanism that is not a softmax over q.k scores,
or computes them its own way, inside the attention core (core.py: the projections, heads and the
one forward).

A subclass writes `_attend(q, k, v, causal, need_weights)` on heads [B, H, L, head_dim] (None
for a projection it does not read), and says in its constructor what it cannot serve: the site
(site.py: `Site.refuse`, one line when the model is built) and, through `causal`, a call that
masks the future (refused at its site when built, and a direct call at the call). None of them
takes a padding mask; only the explicit kernel computes them (kernels.py).
"""

from __future__ import annotations

from torch import Tensor

from .base import AttentionOptions
from .core import Attention, AttentionCall
from .site import ALONE, Site


def no_scores(why: str) -> str:
    """The words refusing residual attention to a mechanism without q.k scores."""
    return f"{why}; set model.res_attention=false"


class MechanismAttention(Attention):
    def __init__(self, d_model: int, n_heads: int, options: AttentionOptions,
                 site: Site = ALONE, *, causal: str | None = None,
                 reads: tuple[str, ...] = ("q", "k", "v")):
        """`causal`: why the mechanism cannot mask the future, or None (it can); the
        subclass has refused its site (Site.refuse) before calling this."""
        super().__init__(d_model, n_heads, options, site, reads=reads)
        self.not_causal = causal

    def check_call(self, call: AttentionCall, key_padding_mask: Tensor | None) -> None:
        super().check_call(call, key_padding_mask)
        name = self.options.name
        if key_padding_mask is not None:
            raise ValueError(f"{name} attention takes no key padding mask")
        if call.causal and self.not_causal:
            raise ValueError(f"{name} attention cannot be causal: {self.not_causal}")

    def explicit(self, q, k, v, residual, call, key_padding_mask):
        return self._attend(q, k, v, call.causal, call.need_weights)

    def _attend(self, q: Tensor | None, k: Tensor | None, v: Tensor | None, causal: bool,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Heads [B, H, L, head_dim] (None for what the mechanism does not read) ->
        (out [B, Lq, E], the weights each output row puts on each value row [B, H, Lq, Lk],
        when asked and the mechanism has them)."""
        raise NotImplementedError

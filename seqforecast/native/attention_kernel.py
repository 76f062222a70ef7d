"""The `native` attention kernel (attention.kernel=native, and auto's choice where it pays):
the C kernel of attention.py, served to a layer only in a run whose kernel set is this
package's (trainer.kernels=native, or auto where it applies), registered with attention's
kernels when the package is imported."""

from __future__ import annotations

from ..attention.kernels import Kernel, not_softmax, refuse_padding, register_kernel
from . import attention as short
from .attention import MAX_SCORES, MAX_WIDTH

NATIVE_SET = "native"  # the kernel set this package registers (NativeParts.name)


@register_kernel
class Native(Kernel):
    """The CPU's C kernel for short sequences (trainer.kernels=native), reading residual
    attention's carried q and k where they lie; a layer whose tokens or widths lie beyond its
    window is refused when built (auto takes another). A layer built alone, its tokens not
    told, is held to the window at each call instead."""

    name = "native"

    @classmethod
    def cannot_serve(cls, facts):
        if facts.kernel_set != NATIVE_SET:
            return (f"it is one of the CPU's C kernels, and this run's set is "
                    f"{facts.kernel_set} (trainer.kernels)")
        why = not_softmax(facts)
        if why is None and facts.dropout:
            why = "it has no dropout on the weights; set attention.dropout=0"
        if why is None and facts.q_len and facts.k_len and \
                facts.q_len * facts.k_len > MAX_SCORES:
            why = (f"its scores stay in cache up to {MAX_SCORES} a window, and the layer's "
                   f"{facts.q_len} x {facts.k_len} are more")
        if why is None and max(facts.width, facts.value_width) > MAX_WIDTH:
            why = (f"its q, k and v are at most {MAX_WIDTH} wide a head, and the layer's are "
                   f"{max(facts.width, facts.value_width)}")
        return why

    @classmethod
    def favoured(cls, facts):
        return facts.residual  # where it beats the explicit path (torch's kernel does not serve)

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        refuse_padding(self, key_padding_mask)
        q_pieces = (q,) if residual is None else residual.q_pieces
        k_pieces = (k,) if residual is None else residual.k_pieces
        qs, ks = [attn.groups(t) for t in q_pieces], [attn.groups(t) for t in k_pieces]
        vs = attn.group_values(v)
        if not short.applies(qs, ks, vs):
            raise ValueError("attention.kernel=native takes float32 CPU heads of short "
                             "sequences: this call's are beyond its window; build the layer "
                             "with lengths=(queries, keys) so that auto chooses another")
        blocked = attn.blocked(qs[0].shape[-2], ks[0].shape[-2], call.causal, vs.device)
        return attn.ungroup(short.attention(qs, ks, vs, attn.scale, blocked)), None

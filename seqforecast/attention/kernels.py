"""Attention kernels: what computes a softmax backend's function, chosen once per layer.

    explicit   the backend's own path (its scores, terms, softmax, weights): serves every backend
               and every call, and is the only one that returns weights (attention maps)
    sdpa       torch's fused scaled_dot_product_attention over the backend's groups
    native     the CPU's C kernel for short sequences, registered by seqforecast/native
               (attention_kernel.py) with its kernel set: it reads residual attention's carried
               q and k where they lie
    triton     block-local windows as Triton kernels, forward and backward (band_triton.py): a
               GPU's, or the CPU's under TRITON_INTERPRET=1 (how the suite checks it)
    flex       block-local windows as a FlexAttention block mask (band_flex.py): a GPU's; on
               the CPU its compiled forward (no backward there)

`attention.kernel=auto` (the default) takes, per layer, the first registered kernel that serves
it and that measurement favours for it (`favoured`), the explicit path last; any other value
names one kernel, refused in one line where it cannot serve the layer (`cannot_serve`). The
choice is made once, when the layer is built, from what its backend and its site tell
(`KernelFacts`: whether it is softmax attention over q.k at all, what it puts between its scores
and its softmax, its block band, how its dropout acts, its token counts and head widths,
residual attention, the run's kernel set): a kernel that cannot serve a layer's calls is
refused then, not skipped call by call. Two things only a call tells are the call's own: a call
that asks for the weights (the attention maps) runs the explicit path, the only one that has
them, and a key padding mask a kernel has no use for is refused at the call, in one line (a
model never passes one).

A kernel is a `Kernel` subclass with its `name`, registered with `@register_kernel`: in this
folder a module of its own (band_flex.py, band_triton.py), in a package of yours a module
declared under the entry-point group `seqforecast.kernels` (attention/__init__.py loads them),
then selected by name like these. The layers, the backends' forward and the builder stay as
they are. `auto` takes the band kernels only where measured to pay: not yet (no GPU visit so
far).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..options import ConfigError
from ._common import combine_masks, fused_attention

if TYPE_CHECKING:
    from .core import Attention, AttentionCall
    from .residual import ResidualQK


class KernelFacts(NamedTuple):
    """What a layer's backend, options and place in the model tell the kernels."""

    softmax: bool = False  # softmax(q k^T * scale) v over the groups `Attention.groups` gives
    between: str | None = None  # what acts between the scores and the softmax (position
    # terms, talking heads), or None
    band: int = 0  # block-local windows' block size (self-attention), 0: none
    group_dropout: bool = True  # dropping each group's weights is the backend's dropout
    dropout: float = 0.0  # on the weights, in training
    residual: bool = False  # the stack carries residual attention (its q and k grow a layer)
    kernel_set: str = "torch"  # the run's kernel set (trainer.kernels, resolved: model/parts.py)
    trains_on: str | None = None  # the device type the layer trains on (cpu, cuda, ...);
    # None: it is not trained where it is built (a saved run evaluated, or a layer built alone)
    q_len: int | None = None  # the tokens its queries (its site's; None: not known)
    k_len: int | None = None  # and its keys number
    width: int = 0  # a group's q/k width, residual attention's carried layers included
    value_width: int = 0  # a group's v width


class Kernel:
    """A kernel for one layer; `facts` are that layer's."""

    name = ""

    def __init__(self, facts: KernelFacts | None = None):
        self.facts = KernelFacts() if facts is None else facts

    @classmethod
    def cannot_serve(cls, facts: KernelFacts) -> str | None:
        """Why this kernel cannot compute the layer's function, or None."""
        return None

    @classmethod
    def favoured(cls, facts: KernelFacts) -> bool:
        """Whether `auto` takes it for such a layer (where it serves)."""
        return True

    def __call__(self, attn: Attention, q, k, v, residual: ResidualQK | None,
                 call: AttentionCall, key_padding_mask: Tensor | None
                 ) -> tuple[Tensor, Tensor | None]:
        """The backend's heads -> (out [B, Lq, E] before out_proj, weights or None)."""
        raise NotImplementedError


KERNELS: dict[str, type[Kernel]] = {}  # registered kernels, in the order registered
LAST = "explicit"  # auto's last resort: it serves every layer


def register_kernel(cls: type[Kernel]) -> type[Kernel]:
    """Class decorator: make a kernel (a Kernel subclass with its `name`) selectable by name
    (attention.kernel=<name>); auto tries it after the kernels registered before it, before
    the explicit path."""
    if cls.name in KERNELS:
        raise ValueError(f"attention kernel {cls.name!r} is registered twice")
    KERNELS[cls.name] = cls
    return cls


def kernel_names() -> tuple[str, ...]:
    """What attention.kernel accepts: auto and every registered kernel."""
    return ("auto", *KERNELS)


@register_kernel
class Explicit(Kernel):
    name = "explicit"

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        return attn.explicit(q, k, v, residual, call, key_padding_mask)


def not_softmax(facts: KernelFacts) -> str | None:
    """Why a fused softmax kernel cannot compute the layer's function, or None."""
    if not facts.softmax:
        return "the mechanism is not a softmax over q.k scores (only its own path computes it)"
    if facts.between:
        return f"{facts.between} acts between the scores and the softmax"
    return None


@register_kernel
class SDPA(Kernel):
    """torch's scaled_dot_product_attention over the backend's groups."""

    name = "sdpa"

    @classmethod
    def cannot_serve(cls, facts):
        why = not_softmax(facts)
        if why is None and facts.dropout and not facts.group_dropout:
            why = ("its dropout acts on the combined weights, the fused kernel's on each "
                   "softmax's; set attention.dropout=0")
        return why

    @classmethod
    def favoured(cls, facts):
        # Block windows: no faster than the explicit windows here (L = 1024 to 16384, 16 x 48
        # tiles); residual attention's carried q and k are wider than v, which the kernel runs
        # only on its slow generic path.
        return not (facts.band or facts.residual)

    def __call__(self, attn, q, k, v, residual, call, key_padding_mask):
        if residual is not None:  # the layers' q and k so far, concatenated along the width
            q, k = residual.joined()
        qs, ks, vs = attn.groups(q), attn.groups(k), attn.group_values(v)  # [B, G, L, w]
        width, value_width = qs.shape[-1], vs.shape[-1]
        if width < value_width:
            # q and k narrower than v (diff's paper layout): the kernel's fast paths want one
            # width, so pad q and k with zeros (q.k unchanged): measured 6x faster here than
            # the mixed-width call (L = 1024, forward + backward).
            qs, ks = F.pad(qs, (0, value_width - width)), F.pad(ks, (0, value_width - width))
        padding = key_padding_mask is not None
        blocked = None
        if padding or self.facts.band:  # one mask holding all; else the kernel's own causal
            q_len, k_len = qs.shape[-2], ks.shape[-2]
            blocked = combine_masks(
                attn.blocked(q_len, k_len, call.causal, qs.device),
                key_padding_mask[:, None, None, :] if padding else None)
        dropout = self.facts.dropout if attn.training else 0.0
        out = fused_attention(qs, ks, vs, causal=call.causal, blocked=blocked,
                              rows_may_be_empty=padding, dropout=dropout, scale=attn.scale)
        return attn.ungroup(out), None


def refuse_padding(kernel: Kernel, key_padding_mask: Tensor | None) -> None:
    """ValueError in one line for a call with a key padding mask, which `kernel` has no use for
    (a model never passes one; a layer called directly with one is built on explicit or
    sdpa)."""
    if key_padding_mask is not None:
        raise ValueError(f"attention.kernel={kernel.name} takes no key padding mask: build the "
                         f"layer with attention.kernel=explicit or sdpa to pass one")


def band_refusal(facts: KernelFacts) -> str | None:
    """Why a block-local band kernel (band_triton.py, band_flex.py) cannot compute the layer's
    function, or None."""
    why = not_softmax(facts)
    if why is None and not facts.band:
        why = ("it computes block-local windows (attention.block_size > 0); dense attention is "
               "torch's fused kernel's (sdpa)")
    if why is None and facts.dropout:
        why = "it has no dropout on the weights; set attention.dropout=0"
    if why is None and facts.residual:
        why = "it cannot carry residual attention's scores"
    return why


EXPLICIT = Explicit()


def choose_kernel(attn: Attention, choice: str, kernels: str,
                  trains_on: str | None = None) -> Kernel:
    """The kernel layer `attn` runs (`choice`: attention.kernel; `kernels`: the run's set, torch
    or native; `trains_on`: the device type a run trains it on, None where it is not trained),
    from what its backend and its site tell (residual attention: the site's). ConfigError in
    one line where the chosen kernel cannot serve."""
    site = attn.site
    carried = site.layer if site.residual else 1  # residual attention's layers of q and k
    facts = attn.kernel_facts()._replace(
        residual=site.residual, kernel_set=kernels, trains_on=trains_on, q_len=site.q_len,
        k_len=site.k_len, width=attn.group_width() * carried, value_width=attn.head_dim)
    if choice == "auto":
        for name, cls in KERNELS.items():
            if name != LAST and cls.cannot_serve(facts) is None and cls.favoured(facts):
                return cls(facts)
        return EXPLICIT
    key = site.option("kernel")  # attention.kernel, or variate_attention.kernel
    if choice not in KERNELS:
        raise ConfigError(f"{key}={choice!r} is not allowed: choose one of "
                          f"{', '.join(kernel_names())}")
    why = KERNELS[choice].cannot_serve(facts)
    if why:
        serving = [n for n in KERNELS if KERNELS[n].cannot_serve(facts) is None]
        raise ConfigError(f"{key}={choice} cannot serve {attn.options.name} attention here: "
                          f"{why}; use {key}=auto (or {', '.join(serving)})")
    return KERNELS[choice](facts)


def causal_mask(q_len: int, k_len: int, device: torch.device) -> Tensor:
    """bool [Lq, Lk], True where key j lies after query i (j > i)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(1)

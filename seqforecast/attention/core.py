"""The attention core: one layer's projections, its heads, a kernel chosen once, one forward.

Every backend is an `Attention`. The core owns what they share: the projections (`q_proj`,
`k_proj`, `v_proj`, `out_proj`, nn.MultiheadAttention's names; a mechanism that reads fewer of q,
k, v builds only those), the input checks, the head split, residual attention's carried q and k,
and the one `attend` every call goes through:

    query, key_value -> project (the backend's heads, positions applied) -> the kernel -> merge
                     -> out_proj

A backend supplies its heads (`heads`) and its mixing on the explicit path (`explicit`: its scores
and softmax, or a mechanism that has none); a softmax backend also says how its heads map onto a
fused kernel's groups (`groups`, `group_values`, `ungroup`). The kernel (kernels.py: `explicit`,
`sdpa`, the CPU's `native` one; the seam where FlexAttention and Triton kernels register) is chosen
once, when the backend is built, from what the backend declares it puts between its scores and
its softmax; a call that asks for the weights (attention maps) takes the explicit path, the only
one that has them.

A call is described by an `AttentionCall` (masking, the time steps, residual attention's carried
q and k, the per-window inputs a model computes for its backend) and answered by an `Attended`
record (the output, the weights when asked, the carried q and k including this layer's), so the
layers around attention pass records and never hold backend-specific arguments or state.

The public call is unchanged: `attn(query, key_value, causal=False, key_padding_mask=None,
need_weights=False) -> (out, weights)`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ._common import check_inputs, mha_init
from .base import AttentionOptions
from .kernels import EXPLICIT, Kernel, KernelFacts, causal_mask, choose_kernel
from .residual import ResidualQK
from .site import ALONE, Site


class AttentionCall(NamedTuple):
    """What a layer asks of one attention call, beside its inputs."""

    causal: bool = False  # may a query attend to later keys (False) or not (True)
    need_weights: bool = False  # return the weights [B, H, Lq, Lk] (the explicit path)
    query_start: int = 0  # the time step of the first query (position modules read it)
    key_start: int = 0  # and of the first key
    residual: ResidualQK | None = None  # residual attention: the stack's q and k so far
    side: Any = None  # what the model computes from each window for its backend
    # (Attention.side_inputs: de-stationary attention's factors), or None


def repeat_side(side: Any, repeats: int) -> Any:
    """A window's side inputs (None, or a NamedTuple of batch-first tensors: AttentionCall.side)
    for a batch in which every window became `repeats` consecutive rows (a family that folds
    its series into the batch)."""
    if side is None or repeats == 1:
        return side
    return type(side)(*(t if t is None else t.repeat_interleave(repeats, dim=0) for t in side))


class Attended(NamedTuple):
    """What one attention call gives back."""

    out: Tensor  # [B, Lq, E]
    weights: Tensor | None  # [B, H, Lq, Lk] when asked, else None
    residual: ResidualQK | None  # the carried q and k including this layer's, or None


class OutputGate(nn.Module):
    """Gated attention's output gate (Qiu et al. 2025, "Gated Attention for Large Language
    Models", position G1; `attention.gate`): each head's output times a sigmoid gate computed
    from the layer's query input, before the output projection,

        out_h <- out_h * sigmoid(x W_g + b_g)_h        x: the query input [B, Lq, E]

    with one gate a head (headwise: W_g is E x H, broadcast over the head's values) or one a
    value (elementwise: E x E). A query-dependent, sparse scaling after the values' mixing:
    the paper's reading is a non-linearity between v and the output projection (whose product
    is otherwise one low-rank linear map) and a way to attend to nothing without an
    attention sink."""

    def __init__(self, d_model: int, n_heads: int, gates: int, bias: bool):
        super().__init__()
        self.n_heads, self.elementwise = n_heads, gates == d_model
        self.proj = nn.Linear(d_model, gates, bias=bias)

    def forward(self, out: Tensor, query: Tensor) -> Tensor:
        """out [B, Lq, E] (head h's values at h * E/H onwards), query [B, Lq, E] -> gated."""
        gate = torch.sigmoid(self.proj(query))  # [B, Lq, E] or [B, Lq, H]
        if self.elementwise:
            return out * gate
        batch, q_len, width = out.shape  # headwise: [B, Lq, H, E/H] x [B, Lq, H, 1]
        heads = out.view(batch, q_len, self.n_heads, width // self.n_heads)
        return (heads * gate.unsqueeze(-1)).view(batch, q_len, width)


class _NoGate(nn.Module):
    def forward(self, out: Tensor, query: Tensor) -> Tensor:
        return out


NO_GATE = _NoGate()


class Attention(nn.Module):
    """One attention layer (see the module's docstring). Subclasses implement `explicit`, and
    `heads`/`merge` where their heads are not plain [B, H, L, head_dim] ones."""

    # Why permuting its tokens (channels, in model=itransformer) does more than permute its
    # outputs, or None: it only permutes them (a claim tests/model/test_itransformer.py holds)
    CHANNEL_ORDER: str | None = None

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        options: AttentionOptions,
        site: Site = ALONE,
        *,
        qk_width: int | None = None,
        reads: tuple[str, ...] = ("q", "k", "v"),
    ):
        """`site`: where the layer sits in its model (site.py; a subclass refuses there what it
        cannot serve); `qk_width`: the q and k projections' output width (d_model unless the
        backend's heads are shaped otherwise: diff's halves); `reads`: the projections the
        mechanism reads."""
        super().__init__()
        self.options = options
        self.site = site
        self.signed_weights = False  # whether its weights can be negative (maps centred on 0)
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.dropout = options.dropout
        self.reads = reads
        widths = {"q": qk_width or d_model, "k": qk_width or d_model, "v": d_model}
        for name in reads:
            setattr(self, f"{name}_proj", nn.Linear(d_model, widths[name], bias=options.bias))
        self.out_proj = nn.Linear(d_model, d_model, bias=options.bias)
        gates = options.gate_width(d_model, n_heads)
        # chosen once: the gate, or a pass-through (no parameters, no branch per call)
        self.output_gate = OutputGate(d_model, n_heads, gates, options.bias) if gates else NO_GATE
        self.reset_parameters()
        self.kernel: Kernel = EXPLICIT  # until `choose_kernel` (the builder) picks one

    def reset_parameters(self) -> None:
        """nn.MultiheadAttention's initialisation (a backend that keeps nn.Linear's overrides)."""
        mha_init([getattr(self, f"{name}_proj") for name in self.reads], self.out_proj)

    def use_kernel(self, choice: str = "auto", kernels: str = "torch",
                   trains_on: str | None = None) -> Kernel:
        """Choose the kernel once (kernels.choose_kernel): `choice` the attention.kernel option,
        `kernels` the run's set (torch or native), `trains_on` the device type it trains on
        (None: not trained here). Raises ConfigError in one line where the chosen kernel cannot
        serve the layer at its site."""
        self.kernel = choose_kernel(self, choice, kernels, trains_on)
        return self.kernel

    # ------------------------------------------------------------------ the one forward

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        query_start: int = 0,
        key_start: int = 0,
    ) -> tuple[Tensor, Tensor | None]:
        """query [B, Lq, E], key_value [B, Lk, E], key_padding_mask bool [B, Lk] (True =
        padding) -> (out [B, Lq, E], weights [B, H, Lq, Lk] or None)."""
        call = AttentionCall(causal, need_weights, query_start, key_start)
        out, weights, _ = self.attend(query, key_value, call, key_padding_mask)
        return out, weights

    def attend(self, query: Tensor, key_value: Tensor, call: AttentionCall,
               key_padding_mask: Tensor | None = None) -> Attended:
        """Every call of every backend: query [B, Lq, E], key_value [B, Lk, E] -> Attended."""
        check_inputs(query, key_value, key_padding_mask, self.d_model)
        self.check_call(call, key_padding_mask)
        q, k, v = self.heads(query, key_value, call)
        residual = None if call.residual is None else call.residual.extended(q, k)
        kernel = EXPLICIT if call.need_weights else self.kernel
        out, weights = kernel(self, q, k, v, residual, call, key_padding_mask)
        out = self.output_gate(out, query)
        return Attended(self.out_proj(out), weights if call.need_weights else None, residual)

    # ------------------------------------------------------------------ what a backend supplies

    def check_call(self, call: AttentionCall, key_padding_mask: Tensor | None) -> None:
        """Refuse, in one line, a call the layer was not built for (ValueError)."""
        if call.residual is not None and not self.site.residual:
            raise ValueError(f"{self.options.name} attention was built for a stack without "
                             f"residual attention (its site's residual=False), and the call "
                             f"carries residual scores")

    def heads(self, query: Tensor, key_value: Tensor, call: AttentionCall
              ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """The projections as heads [B, H, L, head_dim] (None for one the mechanism does not
        read); a backend with positions or other head shapes overrides it."""
        return tuple(self.split(getattr(self, f"{name}_proj")(x)) if name in self.reads else None
                     for name, x in (("q", query), ("k", key_value), ("v", key_value)))

    def split(self, x: Tensor) -> Tensor:
        """[B, L, H * w] -> [B, H, L, w] (a view)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, -1).transpose(1, 2)

    def merge(self, out: Tensor) -> Tensor:
        """[B, H, Lq, head_dim] -> [B, Lq, E]."""
        batch, _, q_len, _ = out.shape
        return out.transpose(1, 2).reshape(batch, q_len, self.d_model)

    def explicit(self, q: Tensor | None, k: Tensor | None, v: Tensor | None,
                 residual: ResidualQK | None, call: AttentionCall,
                 key_padding_mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The backend's own path: heads (as `heads` gave them; with `residual`, its joined q and
        k replace them) -> (out [B, Lq, E], weights [B, H, Lq, Lk] or None). It must give the
        weights when `call.need_weights` and the mechanism has them."""
        raise NotImplementedError

    # A softmax backend's function as a fused kernel's softmax(q k^T * scale) v over G groups:
    # None where the backend is not softmax attention over q.k (only its own path computes it).
    def groups(self, t: Tensor) -> Tensor | None:
        """q or k heads (or a carried piece) -> [B, G, L, w]."""
        return None

    def group_values(self, v: Tensor) -> Tensor:
        """v heads -> [B, G, Lk, d]."""
        return v

    def ungroup(self, out: Tensor) -> Tensor:
        """The kernel's [B, G, Lq, d] -> the layer's output before out_proj, [B, Lq, E]."""
        return self.merge(out)

    def shared_values(self, v: Tensor) -> tuple[Tensor, int]:
        """v heads -> (values [B, V, Lk, d], S), group g reading value g // S: for a kernel that
        reads each value once for the S groups sharing it (band_triton.py)."""
        return self.group_values(v), 1

    def group_width(self) -> int:
        """A softmax group's q/k width (`groups`): the head's, unless the backend's heads are
        shaped otherwise."""
        return self.head_dim

    def kernel_facts(self) -> KernelFacts:
        """What the kernels ask before serving (kernels.py): by default, a mechanism only its
        own path computes."""
        return KernelFacts(dropout=self.dropout)

    def blocked(self, q_len: int, k_len: int, causal: bool, device: torch.device
                ) -> Tensor | None:
        """bool [Lq, Lk], True where a query may not attend (for kernels that take one mask for
        the whole batch); None where every pair may."""
        return causal_mask(q_len, k_len, device) if causal else None

    def side_inputs(self, channels: int, in_len: int, tokens: int
                    ) -> tuple[str, nn.Module] | None:
        """(its name in the model, a module) if the backend reads something its model must
        compute from each window before the window's norm (window [B, in_len, channels] ->
        what each call gets as AttentionCall.side; `tokens`: the encoder's), else None.
        De-stationary attention's factors are one; nothing for most."""
        return None

    def logged_scalars(self) -> dict[str, float]:
        """Learned scalars worth a TensorBoard curve (diff's lambda), by name."""
        return {}

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, dropout={self.dropout}, "
                f"kernel={self.kernel.name}")

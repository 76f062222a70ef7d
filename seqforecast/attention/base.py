"""What every backend's options hold (`AttentionOptions`), and what a backend declares of itself:
the rules between its options and the model's (config/rules.py), the kernels (kernels.py), the
figures and the FLOP count read these, so no code outside a backend's module names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from ..options import choice, option, probability
from .cost import attention_pairs
from .kernels import kernel_names

KernelChoice = choice("KernelChoice", kernel_names())
GATES = ("none", "headwise", "elementwise")
Gate = choice("Gate", GATES)


@dataclass
class AttentionOptions:
    """What every backend takes (`attention=vanilla|einsum`); a backend with more subclasses
    it. `name` is the backend's (the config group's option); build_attention sets it."""

    name: str = ""
    dropout: float = option(0.0, probability)  # on the attention weights, in training
    bias: bool = True  # in the q, k, v and output projections
    kernel: KernelChoice = KernelChoice.auto  # what computes it (kernels.py): auto (per layer,
    # the fastest that serves) | explicit (its own path) | sdpa (torch's fused kernel) | native
    # (the CPU's C kernel for short sequences; trainer.kernels=native or auto) | triton, flex
    # (block-local windows on a GPU: band_triton.py, band_flex.py)
    gate: Gate = Gate.none  # a sigmoid gate on each head's output before out_proj, computed
    # from the layer's query input (Qiu et al. 2025, gated attention's G1): none | headwise
    # (one gate a head) | elementwise (one a value); core.OutputGate

    # What the mechanism itself can do, whatever its options (config/rules.py refuses the
    # combinations it cannot serve, in one line, naming the backend and the reason):
    TIME_AXIS: ClassVar[str | None] = None  # why its tokens must lie along time (lags,
    # frequencies), or None: any tokens, variate tokens too
    CAUSAL: ClassVar[str | None] = None  # why it cannot mask the future, or None: it can
    MIXES_QUERIES: ClassVar[str | None] = None  # why one query's output depends on the other
    # queries (so a decoder step would read later steps through cross-attention), or None
    SCORES: ClassVar[str | None] = None  # why it has no pre-softmax q.k scores for residual
    # attention to carry, or None: it has
    INSIDE_POSITIONS: ClassVar[bool] = True  # rope / relative terms act inside it
    CHANNEL_ORDER: ClassVar[str | None] = None  # why permuting its tokens (channels, in
    # model=itransformer) does more than permute its outputs, or None: it only permutes them
    SIGNED_WEIGHTS: ClassVar[bool] = False  # its weights can be negative (maps are drawn on
    # a scale centred on 0)
    HEAD_OUTPUTS: ClassVar[str | None] = None  # why its output is not one block per head (the
    # output gate gates heads), or None: [B, Lq, E] holds head h's values at h * E/H onwards
    CROSS: ClassVar[str | None] = None  # why it cannot serve a cross position (queries and
    # keys from different sequences), or None: it can

    # What a backend says of itself, for the rules between its options and the model's
    # (config/rules.py, residual.carries_residual): a backend whose options change these
    # overrides them, so no rule elsewhere names a backend.

    def side_inputs(self, channels: int, in_len: int, tokens: int
                    ) -> tuple[str, nn.Module] | None:
        """(its name in the model, a module) if the backend reads something every model must
        compute from each window before its norm (window [B, in_len, channels] -> what each
        call gets as AttentionCall.side; `tokens`: the encoder's), else None. De-stationary
        attention's factors are one; nothing for most."""
        return None

    def token_conflict(self, tokens: int) -> tuple[str, str] | None:
        """(the option, what it allows) if these options cannot serve a layer of this many
        tokens (the fewest any layer of the model reads), else None."""
        return None

    def shape_conflict(self, d_model: int, n_heads: int) -> tuple[str, str] | None:
        """(the option, why) if these options cannot build at this width, else None."""
        return None

    def qk_width(self, head_dim: int) -> tuple[int, str]:
        """Each head's q/k width (rope rotates its pairs), and how it follows from the head
        width, a phrase in which `{head}` stands for how the head width is set."""
        return head_dim, "{head}"

    def position_terms(self) -> list[str]:
        """The options set that put the backend's own position terms in its scores."""
        return []

    def time_axis(self) -> list[tuple[str, object]]:
        """(option, value) of the options set that assume tokens along time (windows, distance
        terms); channel tokens (model=itransformer) have none."""
        return [(key, True) for key in self.position_terms()]

    def score_terms(self) -> list[str]:
        """The options set that add to or mix the pre-softmax scores (residual attention
        cannot carry them)."""
        return self.position_terms()

    def side_flops(self, channels: int, in_len: int, tokens: int) -> int:
        """Forward FLOPs of what `side_inputs` computes from one window; 0 for most."""
        return 0

    def projection_flops(self, q_len: int, k_len: int, d_model: int, n_heads: int,
                         cross: bool = False) -> int:
        """Forward FLOPs of the projections of Lq queries and Lk keys (2 a multiply-add): the
        mechanism's own (`_projections`) and the output gate's."""
        return self._projections(q_len, k_len, d_model, n_heads, cross) + \
            2 * d_model * q_len * self.gate_width(d_model, n_heads)

    def gate_conflict(self) -> str | None:
        """Why these options leave no per-head output for the gate, or None."""
        return type(self).HEAD_OUTPUTS

    def gate_width(self, d_model: int, n_heads: int) -> int:
        """How many gates the output gate computes per query: 0 (none), one a head, or one a
        value of the output."""
        return {"none": 0, "headwise": n_heads, "elementwise": d_model}[str(self.gate)]

    def _projections(self, q_len: int, k_len: int, d_model: int, n_heads: int,
                     cross: bool = False) -> int:
        """The q, k, v and output projections' forward FLOPs."""
        return 2 * d_model * (q_len * d_model + 2 * k_len * d_model + q_len * d_model)

    def core_flops(self, q_len: int, k_len: int, head_dim: int, causal: bool,
                   carried: int = 1, pairs: str = "seen", cross: bool = False) -> int:
        """Forward FLOPs of one head's mixing of Lq queries over Lk keys, the projections
        aside: scores and weighted values over the pairs it attends (`pairs`:
        attention/cost.py). `carried`: residual attention's layers of q and k so far."""
        return (2 * head_dim * carried + 2 * head_dim) * attention_pairs(
            q_len, k_len, causal, 0, pairs)

"""What every model family's options hold (`ModelOptions`, the `model` group's node: a family
subclasses it with its own options and its published defaults), and what a family declares of
itself, which the config's rules, the builder, the FLOP count, the probe and the figures read
instead of naming the family:

- `sites(cfg, n_features)`: its attention positions (`Site`): the stack each serves (the name
  its maps and TensorBoard tags carry), the token axis (time or variate), the tokens its queries
  and keys number, whether it masks the future or generates its queries step by step, whether
  it carries residual attention;
- `check(cfg)`: the rules between its options and the other groups', one line each;
- `forward_flops(cfg, n_features, n_targets, pairs)`: its FLOPs by formula;
- `position_tokens(cfg)`: the positions an added encoding's table must hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from omegaconf import MISSING

from ..options import choice, option, positive, probability
from .layers import NORMS
from .linear_path import LINEAR_INITS, LINEAR_PATH_INPUTS, LINEAR_PATHS
from .normalization import INSTANCE_NORMS

Norm = choice("Norm", NORMS)
InstanceNorm = choice("InstanceNorm", INSTANCE_NORMS)
LinearPath = choice("LinearPath", LINEAR_PATHS)
LinearPathInput = choice("LinearPathInput", LINEAR_PATH_INPUTS)
LinearInit = choice("LinearInit", LINEAR_INITS)
AttentionInit = choice("AttentionInit", ("mha", "linear"))  # the attention projections'
FinalNorm = choice("FinalNorm", ("auto", "always", "never"))  # a norm after the encoder stack

TIME, VARIATE = "time", "variate"  # the token axes an attention can serve


class Site(NamedTuple):
    """One attention position of a family's model (every layer of a stack shares it)."""

    stack: str  # its stack's name: maps and TensorBoard tags (attention/<stack>/layer<i>)
    axis: str  # TIME: tokens along time | VARIATE: a token per channel, in no order
    q_len: int  # tokens its queries number
    k_len: int  # and its keys
    layers: int  # in the stack
    cross: bool = False  # queries and keys from different sequences
    causal: bool = False  # the future masked (a decoder generating step by step)
    stepwise: str | None = None  # "key=value" of the option that generates its queries one
    # step at a time (no query may read a later one), or None
    residual: bool = False  # the stack carries residual attention (model.res_attention)
    window_keys: bool = True  # its keys are the window's own tokens (the encoder's)


def attention_node(cfg: Mapping, site: Site) -> tuple[str, Mapping]:
    """(its config key, the node) of the backend serving `site`: `variate_attention` at a
    variate-axis position where it is set, else the attention group's."""
    node = cfg.get("variate_attention") if site.axis == VARIATE else None
    return ("variate_attention", node) if node else ("attention", cfg["attention"])


@dataclass
class ModelOptions:
    """What every family takes (model/forecaster.py reads them); `name` is the family's, set
    by its YAML."""

    name: str = MISSING
    d_model: int = option(MISSING, positive)  # ${d_model}: the root's shorthand
    n_heads: int = option(MISSING, positive)
    encoder_layers: int = option(2, positive)
    norm_first: bool = True  # pre-norm (true) or post-norm (false) residual blocks
    norm: Norm = Norm.layer  # layer (LayerNorm) | batch (BatchNorm over the batch's tokens)
    dropout: float = option(0.0, probability)  # on the residual branches
    instance_norm: InstanceNorm = InstanceNorm.last  # last: subtract the window's last value,
    # add it back | revin | none
    revin_affine: bool = True  # revin: a learned per-channel affine after the standardisation
    linear_path: LinearPath = LinearPath.none  # none | nlinear | dlinear: a linear forecast of
    # the window is added to the model's, which learns the rest (model/linear_path.py)
    linear_path_input: LinearPathInput = LinearPathInput.normalized  # what the path reads:
    # normalized (the instance-normalised window, as the model) | raw (NLinear exactly)
    linear_path_trainable: bool = True  # false: the path stays at its start (its least-squares
    # fit), only the Transformer learns (what the path misses)
    linear_init: LinearInit = LinearInit.zero  # zero (forecast the last value) | least_squares
    # (NLinear's fit on the training windows, so training starts from NLinear)
    decomposition_kernel: int = option(25, positive)  # dlinear: the trend's moving average
    channel_independent: bool = False  # each channel forecast from its own past, shared
    # weights (PatchTST)

    # The axis its tokens lie along (TIME or VARIATE): what its positions and its embedding
    # group read, and which attention backends can serve it.
    TOKEN_AXIS: ClassVar[str] = TIME

    def sites(self, cfg: Mapping, n_features: int) -> list[Site]:
        """Its attention positions, for a composed config and windows of `n_features`
        channels."""
        raise NotImplementedError

    def check(self, cfg: Mapping) -> None:
        """Refuse (ConfigError, one line naming both keys) a combination of its options and
        the other groups' it cannot build."""

    def position_tokens(self, cfg: Mapping) -> tuple[int, str]:
        """(the positions an added encoding's table must hold, how that count is made)."""
        raise NotImplementedError

    def forward_flops(self, cfg: Mapping, n_features: int, n_targets: int,
                      pairs: str = "seen") -> dict[str, int]:
        """Forward FLOPs of one window by part and their `total` (model/flops.py)."""
        raise NotImplementedError


@dataclass
class EncoderOptions(ModelOptions):
    """What an encoder-only family adds (its attention and its stack's published options)."""

    encoder_layers: int = option(3, positive)
    norm_first: bool = False  # post-norm, as PatchTST
    norm: Norm = Norm.batch
    instance_norm: InstanceNorm = InstanceNorm.revin
    head_dropout: float = option(0.0, probability)  # on the encoder's output, before the head
    attention_output_dropout: float = option(0.0, probability)  # on the attention's output,
    # before the residual's dropout (the published PatchTST: = dropout)
    attention_init: AttentionInit = AttentionInit.mha  # mha: xavier q/k/v, zero biases |
    # linear: nn.Linear's own, every projection (the published models')
    official_weights: str | None = None  # an official checkpoint.pth to start from
    final_norm: FinalNorm = FinalNorm.auto  # a norm after the encoder stack: auto (after a
    # pre-norm stack only, as nn.Transformer) | always (iTransformer's) | never


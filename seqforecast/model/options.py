"""What every model family's options hold (`ModelOptions`, the `model` group's node: a family
subclasses it with its own options and its published defaults). Options are values only: what a
family builds from them, and what it refuses, is said in its constructor (families/), so
building the model is the check of its config.
"""

from __future__ import annotations

from dataclasses import dataclass

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


"""Structured-config schemas: the type of every config value, registered with Hydra.

The YAML files under configs/ hold the values; these dataclasses hold the types. Merging the
two makes a wrong type or an unknown key Hydra's one-line error naming the key. Groups whose
options differ in their keys (attention, pos_encoding, model, data) have one schema per option,
stored as `schema/<group>/<option>` and pulled in by each option's YAML defaults list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# ---------------------------------------------------------------- attention


@dataclass
class AttentionConfig:  # vanilla, einsum: what every backend takes
    name: str = MISSING
    dropout: float = MISSING
    bias: bool = MISSING


@dataclass
class DiffAttentionConfig(AttentionConfig):
    block_size: int = MISSING
    lambda_mode: str = MISSING
    lambda_init: float | None = None
    head_norm: bool = MISSING
    talking_heads: bool = MISSING
    distance_decay: bool = MISSING
    past_bias: bool = MISSING
    decay_form: str = MISSING
    head_layout: str = MISSING


# ---------------------------------------------------------------- positional encodings


@dataclass
class AddedEncodingConfig:  # sinusoidal, learned
    name: str = MISSING
    max_len: int = MISSING
    dropout: float = MISSING


@dataclass
class LearnedEncodingConfig(AddedEncodingConfig):
    init: str = MISSING


@dataclass
class NoEncodingConfig:
    name: str = MISSING
    dropout: float = MISSING


@dataclass
class RelativeEncodingConfig(NoEncodingConfig):
    distance_decay: bool = MISSING
    decay_form: str = MISSING
    past_bias: bool = MISSING


@dataclass
class RopeEncodingConfig(NoEncodingConfig):
    base: float = MISSING


# ---------------------------------------------------------------- data


@dataclass
class SigmoidPairDataConfig:
    name: str = MISSING
    in_len: int = MISSING
    out_len: int = MISSING
    train_size: int = MISSING
    val_size: int = MISSING
    val_seed: int = MISSING
    test_size: int = MISSING
    test_seed: int = MISSING


@dataclass
class SigmoidDataConfig(SigmoidPairDataConfig):
    slope_range: list[float] = MISSING
    shift_range: list[float] = MISSING
    amplitude_range: list[float] = MISSING
    offset_range: list[float] = MISSING
    noise: float = MISSING


@dataclass
class CsvDataConfig:
    name: str = MISSING
    path: str = MISSING
    target: str | None = None
    targets: Any = None  # wide format: a list of columns, or "all"
    id_column: str | None = None  # long format: the column naming each row's series
    features: list[str] = MISSING
    time_column: str | None = None
    in_len: int = MISSING
    out_len: int = MISSING
    stride: int = MISSING
    protocol: str = MISSING
    split: list[float] = MISSING
    val_start: str | None = None
    test_start: str | None = None
    test_end: str | None = None
    scale: str = MISSING
    fill: str = MISSING
    season: Any = MISSING  # a period in rows, or a list of periods


# ---------------------------------------------------------------- single-schema groups


@dataclass
class FFNConfig:
    activation: str = MISSING
    gated: bool = MISSING
    d_ff: int | None = None
    bias: bool = MISSING
    bias_gate: bool = MISSING
    dropout: float = MISSING


@dataclass
class SharedModelConfig:  # what every forecaster takes (forecaster.py)
    name: str = MISSING
    d_model: int = MISSING
    n_heads: int = MISSING
    encoder_layers: int = MISSING
    norm_first: bool = MISSING
    norm: str = MISSING
    dropout: float = MISSING
    instance_norm: str = MISSING
    revin_affine: bool = MISSING
    linear_path: str = MISSING
    linear_path_input: str = MISSING
    linear_path_trainable: bool = MISSING
    linear_init: str = MISSING
    decomposition_kernel: int = MISSING
    channel_independent: bool = MISSING
    channels: str = MISSING


@dataclass
class ModelConfig(SharedModelConfig):  # the encoder-decoder (transformer.py)
    decoder_layers: int = MISSING
    decoding: str = MISSING
    label_len: int = MISSING


@dataclass
class PatchTSTModelConfig(SharedModelConfig):  # encoder-only, flatten head (patchtst.py)
    head_dropout: float = MISSING
    res_attention: bool = MISSING
    attention_dropout: float = MISSING
    attention_init: str = MISSING
    official_weights: str | None = None


@dataclass
class EmbeddingConfig:
    name: str = MISSING
    patch_len: int = MISSING
    stride: int = MISSING
    padding: str = MISSING


@dataclass
class TrainerConfig:
    epochs: int = MISSING
    batch_size: int = MISSING
    drop_last: bool = MISSING
    lr: float = MISSING
    optimizer: str = MISSING
    weight_decay: float = MISSING
    schedule: str = MISSING
    pct_start: float = MISSING
    warmup_frac: float = MISSING
    min_lr_frac: float = MISSING
    grad_clip: float = MISSING
    patience: int = MISSING
    validate_initial: bool = MISSING
    min_improvement: float = MISSING
    select_on: str = MISSING
    selection_blocks: int = MISSING
    eval_batch_size: int = MISSING
    log_every: int = MISSING
    device: str = MISSING
    num_threads: Any = MISSING  # auto, or a count (0: torch's default)
    strategy: str = MISSING
    compile: bool = MISSING
    kernels: str = MISSING
    precision: str = MISSING


@dataclass
class LogConfig:
    attention_every: int = MISSING
    figures: bool = True  # False: no attention maps or forecast figures (PNG, npz, TensorBoard)
    test_every: int = MISSING


@dataclass
class IntervalsConfig:  # seqforecast/probabilistic/
    method: str = MISSING  # split | adaptive | none
    levels: list[float] = MISSING
    quantiles: list[float] = MISSING
    gamma: float = 0.005  # adaptive: the miss rate's step per arrived error


@dataclass
class PointLossConfig:  # loss=mse|gaussian|poisson: seqforecast/probabilistic/outputs.py
    name: str = MISSING


@dataclass
class QuantileLossConfig(PointLossConfig):
    quantiles: list[float] = MISSING


@dataclass
class TrainConfig:
    # Shorthands users type at the root; the groups read them by interpolation.
    seed: int = MISSING
    block_size: int = MISSING
    d_model: int = MISSING
    n_heads: int = MISSING
    epochs: int = MISSING
    lr: float = MISSING
    batch_size: int = MISSING
    in_len: int = MISSING
    out_len: int = MISSING
    device: str = MISSING
    resume: str | None = None
    # Groups: per-option schemas (Any here) or one schema for the whole group.
    attention: Any = MISSING
    pos_encoding: Any = MISSING
    data: Any = MISSING
    ffn: FFNConfig = MISSING
    embedding: EmbeddingConfig = MISSING
    model: Any = MISSING
    trainer: TrainerConfig = MISSING
    log: LogConfig = MISSING
    intervals: IntervalsConfig = MISSING
    loss: Any = MISSING


PER_OPTION_SCHEMAS = {
    "attention": {
        "vanilla": AttentionConfig,
        "einsum": AttentionConfig,
        "diff": DiffAttentionConfig,
    },
    "pos_encoding": {
        "sinusoidal": AddedEncodingConfig,
        "learned": LearnedEncodingConfig,
        "none": NoEncodingConfig,
        "relative": RelativeEncodingConfig,
        "rope": RopeEncodingConfig,
    },
    "model": {
        "transformer": ModelConfig,
        "patchtst": PatchTSTModelConfig,
    },
    "loss": {
        "mse": PointLossConfig,
        "quantile": QuantileLossConfig,
        "gaussian": PointLossConfig,
        "poisson": PointLossConfig,
    },
    "data": {
        "sigmoid": SigmoidDataConfig,
        "sigmoid_pair": SigmoidPairDataConfig,
        "csv": CsvDataConfig,
    },
}


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for group, options in PER_OPTION_SCHEMAS.items():
        for option, node in options.items():
            store.store(group=f"schema/{group}", name=option, node=node)

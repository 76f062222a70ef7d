"""Every option of the training config, each defined once: its type, its default, its check
and what it does. A registered component's options live in its own module, registered with it
(`REGISTERED`): an attention backend's (attention/diff.py's DiffOptions), a model family's
(model/families/transformer.py's TransformerOptions; what every family takes:
model/options.py), a positional encoding's (model/positional.py), a data source's
(data/source_csv.py's CsvOptions) and a loss's (probabilistic/outputs.py); every other group's
are here.

A field with a fixed set of values is a Choice (seqforecast/options.py) made from the names the
implementing module lists (e.g. model/layers.py's NORMS), so composition refuses any other
value; a range is the field's Check, run by `validate_config`; rules between fields are in
rules.py. The YAML files under configs/ hold no defaults: an option file names its option and
sets what makes it that option (ffn/glu.yaml: a gated sigmoid), the shorthands' interpolations
and a preset's recipe. Groups whose options differ in their keys (attention, pos_encoding,
model, data, loss) have one schema per option, stored as `schema/<group>/<option>` and pulled in
by each option's YAML defaults list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from .. import published as _published  # noqa: F401  the ${published:...} resolver
from ..attention import DiffOptions, attention_schema, available_attention
from ..data import available_sources, source_schema
from ..model.embedding import EMBEDDINGS, PADDINGS
from ..model.families import available_families, family_schema
from ..model.ffn import ACTIVATIONS
from ..model.positional import available_positions, position_schema
from ..native import KERNELS
from ..options import (
    Check,
    above,
    at_least,
    choice,
    count,
    option,
    positive,
    probability,
    within,
)
from ..probabilistic.conformal import INTERVAL_METHODS
from ..probabilistic.outputs import available_outputs, output_schema
from ..probabilistic.quantiles import QUANTILES
from ..training.distributed import STRATEGIES
from ..training.loop import OPTIMIZERS, PRECISIONS, SELECT_ON
from ..training.runtime import COMPILE_MODES, MATMUL_PRECISIONS
from ..training.schedule import SCHEDULES
from .speed import install as install_speed_ups

# A saved run's config is read through the migrations up to this version (migrations.py).
CONFIG_VERSION = 7

Activation = choice("Activation", ACTIVATIONS)
Embedding = choice("Embedding", EMBEDDINGS)
Padding = choice("Padding", PADDINGS)
Optimizer = choice("Optimizer", OPTIMIZERS)
Schedule = choice("Schedule", SCHEDULES)
SelectOn = choice("SelectOn", SELECT_ON)
Strategy = choice("Strategy", STRATEGIES)
Precision = choice("Precision", PRECISIONS)
MatmulPrecision = choice("MatmulPrecision", MATMUL_PRECISIONS)
CompileMode = choice("CompileMode", COMPILE_MODES)
Kernels = choice("Kernels", KERNELS)
IntervalMethod = choice("IntervalMethod", INTERVAL_METHODS)


device_name = Check(lambda v: v in ("auto", "cpu", "mps") or v == "cuda" or (
    v.startswith("cuda:") and v[5:].isdigit()), "choose one of auto, cpu, cuda, cuda:N, mps")
threads = Check(lambda v: v == "auto" or (isinstance(v, int) and not isinstance(v, bool)
                                          and v >= 0),
                "auto, 0 (torch's default) or a thread count")
blocks = Check(lambda v: v == 0 or v >= 3,
               "0 (off) or at least 3 blocks (a paired interval needs a few)")


# ---------------------------------------------------------------- the other model parts


@dataclass
class FFNConfig:  # position-wise feed-forward (model/ffn.py): ffn=relu|gelu|glu|geglu|swiglu
    activation: Activation = Activation.relu
    gated: bool = False  # true: act(up(x)) * gate(x)
    d_ff: int | None = option(None, positive)  # None = 4 * d_model
    bias: bool = True
    bias_gate: bool = True
    dropout: float = option(0.0, probability)  # on the hidden layer


@dataclass
class EmbeddingConfig:  # tokens along time (model/embedding.py): point (one per step) | patch
    name: Embedding = Embedding.point
    patch_len: int = option(16, positive)  # patch: steps a patch spans
    stride: int = option(8, positive)  # patch: steps between patches; the decoder's tokens
    # are chunks of stride steps (model.label_len a multiple of stride)
    padding: Padding = Padding.start  # start: the first value repeated so the last patch
    # ends at in_len | end: the last value repeated stride times after it (PatchTST's)


# ---------------------------------------------------------------- data


@dataclass
class DatasetConfig:  # dataset=<name>: a file of the field's benchmark (configs/dataset/), its
    # borders and reading set on data (data.path = ${data_dir}/<file>); seqforecast-data gets it
    name: str = MISSING
    file: str = MISSING  # its file name under data_dir
    rows: int = option(MISSING, positive)  # data rows, the header aside
    channels: int = option(MISSING, positive)  # columns besides the time column
    interval: str = MISSING  # the time between rows, e.g. 1h, 15min (for reading; time
    # features follow data.time_freq)
    licence: str = MISSING
    source: str = MISSING  # where it is published (a page)
    url: str | None = None  # a direct download; None: a manual step at `source`
    sha256: str | None = None  # of the file as published (None: not recorded; rows and
    # channels are checked)


# ---------------------------------------------------------------- training and reporting


@dataclass
class TrainerConfig:  # the training loop (training/loop.py)
    epochs: int = option(MISSING, count)  # ${epochs}; 0: evaluate the starting weights
    batch_size: int = option(MISSING, positive)
    drop_last: bool = False  # true: skip each epoch's last incomplete batch (DataLoader's)
    lr: float = option(MISSING, above(0))
    optimizer: Optimizer = Optimizer.adamw  # adamw (decoupled decay on matrices) | adam
    weight_decay: float = option(0.01, at_least(0))  # adamw only
    schedule: Schedule = Schedule.warmup_cosine  # warmup_cosine | type3 | type1 | constant |
    # onecycle: type3, constant and onecycle the published PatchTST's, type1 iTransformer's
    # (training/schedule.py)
    pct_start: float = option(0.3, within(0, 1, closed="()"))  # onecycle: share rising to lr
    warmup_frac: float = option(0.05, probability)  # share of all steps warming the LR up
    min_lr_frac: float = option(0.05, within(0, 1))  # cosine decay floor, a share of lr
    grad_clip: float = option(1.0, at_least(0))  # max global gradient norm; 0 = off
    patience: int = option(10, count)  # epochs without a better val MSE before stopping
    validate_initial: bool = False  # score the starting weights as epoch 0: they stay the
    # result unless an epoch beats them on validation (model.linear_init=least_squares)
    min_improvement: float = option(0.0, probability)  # "better": this fraction below the best
    select_on: SelectOn = SelectOn.mse  # the validation error that picks the best epoch: mse
    # (data units) | mse_scaled (CSV data, data.scale's units) | loss (the model's own)
    selection_blocks: int = option(0, blocks)  # K > 0: better only beyond noise: the paired
    # ratio to the best over K stretches of validation time has a 95% interval below 1
    eval_batch_size: int = option(1024, positive)
    log_every: int = option(10, positive)  # steps between train/* scalars (one host sync each)
    device: str = option(MISSING, device_name)  # ${device}
    num_threads: Any = option("auto", threads)  # torch CPU threads: auto (the cores no other
    # process keeps busy, 1 for a tiny model) | 0 (torch's default) | N
    strategy: Strategy = Strategy.single  # single | ddp (under torchrun)
    compile: bool = False  # torch.compile the model (eager, with a warning, where unsupported)
    compile_mode: CompileMode = CompileMode.default  # default | reduce-overhead (on a GPU the
    # compiled step replayed as CUDA graphs) | max-autotune
    kernels: Kernels = Kernels.auto  # the hot paths' code, chosen when the model is built:
    # auto (native where it applies and builds) | torch (stock PyTorch) | native (the CPU's C
    # kernels: seqforecast/native, docs/operations.md)
    precision: Precision = Precision.fp32  # fp32 | bf16 (autocast on training forward passes)
    matmul_precision: MatmulPrecision = MatmulPrecision.high  # float32 products on a GPU: high
    # (TF32 tensor cores) | highest (full fp32) | medium (bf16); the CPU's stay full fp32


@dataclass
class LogConfig:  # what a run shows (training/monitor.py)
    attention_every: int = option(10, count)  # epochs between attention maps and forecast
    # figures (also before and after)
    figures: bool = True  # false: none of them (a sweep that needs only the numbers)
    test_every: int = option(10, count)  # epochs between held-out test scalars (and the end)


@dataclass
class IntervalsConfig:  # conformal intervals around every forecaster (probabilistic/)
    method: IntervalMethod = IntervalMethod.split  # split | adaptive (CSV data) | none
    levels: list[float] = option([0.8, 0.95], factory=True)  # central intervals scored
    quantiles: list[float] = option(QUANTILES, factory=True)  # pinball, CRPS
    gamma: float = option(0.005, within(0, 1, closed="()"))  # adaptive: the miss rate's step
    # per arrived error (Gibbs and Candes: 0.005)


@dataclass
class TrainConfig:
    config_version: int = CONFIG_VERSION  # what a run writes: migrations.py reads older ones
    # Shorthands users type at the root; the groups read them by interpolation.
    seed: int = option(0, count)
    block_size: int = option(DiffOptions.block_size, count)  # diff attention's window
    # The dropout on the attention weights, read by every attention config: at every position
    # alike (the time axis's `attention`, the variate axis's `variate_attention`), as published
    # models have it; attention.dropout= or variate_attention.dropout= sets one alone.
    attention_dropout: float = option(0.0, probability)
    d_model: int = 64
    n_heads: int = 4
    epochs: int = 50
    lr: float = 0.002
    batch_size: int = 64
    in_len: int = 24
    out_len: int = 12
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    resume: str | None = None  # <run_dir> or last: continue a stopped run, in its own dir
    # A run whose dir already holds a completed run with the same overrides returns that run's
    # result instead of training again: a study's sweep, rerun, runs only what is missing.
    skip_completed: bool = False
    # Where dataset=<name> finds its file (and seqforecast-data puts it).
    data_dir: str = "${oc.env:SEQFORECAST_DATA,data}"
    # The published model whose settings per dataset and horizon its experiment takes
    # (experiment=patchtst|itransformer|timexer set it; seqforecast/published/): each key the
    # experiment writes as ${published:<key>,<preset>} is that cell's value. null: none.
    published: str | None = None
    # Groups: per-option schemas (Any here) or one schema for the whole group.
    attention: Any = MISSING
    # The backend at the variate-axis positions (tokens that are channels: TimeXer's exogenous
    # cross-attention, iTransformer's encoder), chosen as attention@variate_attention=<name>
    # from the same configs; null: the attention group's there too.
    variate_attention: Any = None
    pos_encoding: Any = MISSING
    data: Any = MISSING
    ffn: FFNConfig = MISSING
    embedding: EmbeddingConfig = MISSING
    model: Any = MISSING
    trainer: TrainerConfig = MISSING
    log: LogConfig = MISSING
    intervals: IntervalsConfig = MISSING
    loss: Any = MISSING
    dataset: DatasetConfig | None = None  # optional: dataset=<name>


ONE_SCHEMA = {"ffn": FFNConfig, "embedding": EmbeddingConfig, "trainer": TrainerConfig,
              "log": LogConfig, "intervals": IntervalsConfig}
# The groups whose options are registered components: (their names, an option's dataclass)
REGISTERED = {"attention": (available_attention, attention_schema),
              "model": (available_families, family_schema),
              "pos_encoding": (available_positions, position_schema),
              "data": (available_sources, source_schema),
              "loss": (available_outputs, output_schema)}


def schema_of(group: str, node) -> type | None:
    """The dataclass of a group's node (by its `name` where options differ), or None for a
    name no option has."""
    if group in ONE_SCHEMA:
        return ONE_SCHEMA[group]
    name = node.get("name") if hasattr(node, "get") else None
    names, schema = REGISTERED[group]
    return schema(name) if name in names() else None


# What register_schemas stored, (group, name) -> dataclass: storing converts the dataclass to
# a config, a quarter of a second for all of them, which every composition would pay again.
_STORED: dict[tuple[str | None, str], type] = {}


def _attention_node(options: type) -> DictConfig:
    """A backend's schema node as stored: its options' dataclass, its `dropout` read from the
    root's `attention_dropout`. Put here, once, every backend (a plugin's too, whose YAML only
    names it) takes the shorthand at every position; `attention.dropout=` still sets one."""
    node = OmegaConf.structured(options)
    node.dropout = "${attention_dropout}"
    return node


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent): those not stored yet, or whose
    dataclass changed (a plugin registering a backend or family after the first call). Called
    before every composition, it also makes Hydra's compositions cheaper (speed.py)."""
    install_speed_ups()
    store = ConfigStore.instance()
    options = {group: {name: schema(name) for name in names()}
               for group, (names, schema) in REGISTERED.items()}
    entries = [(None, "train_schema", TrainConfig)] + [
        (f"schema/{group}", option_name, schema)
        for group, schemas in options.items() for option_name, schema in schemas.items()]
    for group, name, schema in entries:
        if _STORED.get((group, name)) is not schema:
            node = _attention_node(schema) if group == "schema/attention" else schema
            store.store(group=group, name=name, node=node)
            _STORED[(group, name)] = schema

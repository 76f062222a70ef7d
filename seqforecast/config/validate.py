"""Semantic checks on a composed config: each failure is one line naming the key, the value
and what is allowed. Types and unknown keys are the schemas' job (schema.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..attention import available_attention, carries_residual
from ..attention.diff import HEAD_LAYOUTS, LAMBDA_MODES
from ..attention.position import DECAY_FORMS
from ..data import DATASETS
from ..data.gaps import FILLS
from ..data.scaling import SCALERS
from ..data.windows import PROTOCOLS
from ..model.builder import MODELS
from ..model.embedding import EMBEDDINGS, PADDINGS, Tokenizer
from ..model.ffn import ACTIVATIONS
from ..model.layers import NORMS
from ..model.linear_path import LINEAR_PATH_INPUTS, LINEAR_PATHS
from ..model.normalization import INSTANCE_NORMS
from ..model.positional import INSIDE_ATTENTION, LEARNED_INITS, POSITIONAL_ENCODINGS
from ..model.transformer import DECODING
from ..native import KERNELS
from ..probabilistic.outputs import LOSSES
from ..probabilistic.quantiles import QuantileError, check_quantiles, interval_bounds
from .upgrade import upgrade_config

STRATEGIES = ("single", "ddp")
LINEAR_INITS = ("zero", "least_squares")
PRECISIONS = ("fp32", "bf16")
SELECT_ON = ("mse", "mse_scaled", "loss")
ATTENTION_INITS = ("mha", "linear")  # model/builder.py
OPTIMIZERS = ("adamw", "adam")  # training/loop.py
SCHEDULES = ("warmup_cosine", "type3", "constant", "onecycle")  # training/schedule.py
DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


INTERVAL_METHODS = ("split", "adaptive", "none")


class ConfigError(ValueError):
    """A config value out of its allowed range; str(err) is the one line to show."""


def _check(ok: bool, key: str, value, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed: {allowed}")


def _choice(cfg: Mapping, key: str, options) -> None:
    value = _get(cfg, key)
    _check(value in options, key, value, "choose one of " + ", ".join(options))


def _check_loss(loss: Mapping, intervals: Mapping | None) -> None:
    """loss.name, and a quantile loss's levels: valid, holding the median (the point
    forecast) and every interval level the run scores."""
    _check(loss["name"] in LOSSES, "loss", loss["name"], "choose one of " + ", ".join(LOSSES))
    if loss["name"] != "quantile":
        return
    try:
        levels = check_quantiles(loss["quantiles"])
    except QuantileError as err:
        raise ConfigError(f"loss.{err}") from None
    _check(0.5 in levels, "loss.quantiles", list(levels),
           "include 0.5: the median is the point forecast")  # fmt: skip
    if intervals is None or intervals["method"] == "none":
        return
    for level in intervals["levels"]:
        try:
            interval_bounds(levels, level)
        except QuantileError as err:
            raise ConfigError(
                f"loss.quantiles: {err} (intervals.levels asks for it; add the levels to "
                f"loss.quantiles or change intervals.levels)"
            ) from None


def check_intervals(intervals: Mapping, data_name: str) -> None:
    """intervals.method (adaptive: for CSV data, whose windows come in time order), and
    quantile levels that hold every interval level asked for; ConfigError in one line."""
    _check_intervals(intervals)
    if intervals["method"] == "adaptive" and data_name != "csv":
        _conflict(
            "intervals.method", "adaptive", "data.name", data_name,
            "adaptive intervals learn from the test windows in time order; synthetic "
            "series are independent draws: use intervals=split",
        )  # fmt: skip


def _check_intervals(intervals: Mapping) -> None:
    """intervals.method, and quantile levels that hold every interval level asked for."""
    _check(intervals["method"] in INTERVAL_METHODS, "intervals.method", intervals["method"],
           "choose one of " + ", ".join(INTERVAL_METHODS))  # fmt: skip
    if intervals["method"] == "none":
        return
    try:
        levels = check_quantiles(intervals["quantiles"])  # "quantiles: ..." on bad levels
    except QuantileError as err:
        raise ConfigError(f"intervals.{err}") from None
    for level in intervals["levels"]:
        try:
            interval_bounds(levels, level)
        except QuantileError as err:
            raise ConfigError(f"intervals.levels: {err}") from None
    _check(len(intervals["levels"]) > 0, "intervals.levels", intervals["levels"],
           "give at least one central interval level, e.g. [0.8, 0.95]")  # fmt: skip
    if intervals["method"] == "adaptive":
        gamma = intervals.get("gamma", 0.005)
        _check(0.0 < gamma < 1.0, "intervals.gamma", gamma, "must be in (0, 1), e.g. 0.005")
        unpaired = [q for q in levels if not any(abs(q + p - 1.0) < 1e-9 for p in levels)]
        _check(not unpaired, "intervals.quantiles", list(levels),
               f"intervals.method=adaptive adapts central intervals: each level needs its "
               f"mirror 1 - q ({unpaired[0] if unpaired else ''} has none)")  # fmt: skip


def _at_least(cfg: Mapping, key: str, low: float) -> None:
    value = _get(cfg, key)
    _check(value >= low, key, value, f"must be >= {low}")


def _probability(cfg: Mapping, key: str) -> None:
    value = _get(cfg, key)
    _check(0.0 <= value < 1.0, key, value, "must be in [0, 1)")


def _range(cfg: Mapping, key: str) -> None:
    value = _get(cfg, key)
    ok = len(value) == 2 and value[0] <= value[1]
    _check(ok, key, value, "must be [low, high] with low <= high")


def _get(cfg: Mapping, key: str):
    node = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"the config has no {key} (written by an older seqforecast?)")
        node = node[part]
    return node


def _check_csv(cfg: Mapping) -> None:
    data = cfg["data"]
    _check(bool(str(data["path"]).strip()), "data.path", data["path"], "the CSV file to read")
    _check_series_columns(cfg)
    _at_least(cfg, "data.stride", 1)
    _choice(cfg, "data.protocol", PROTOCOLS)
    _choice(cfg, "data.scale", SCALERS)
    _choice(cfg, "data.fill", FILLS)
    season = data["season"]
    periods = season if isinstance(season, list) else [season]
    _check(
        all(isinstance(p, int) and not isinstance(p, bool) for p in periods)
        and (periods == [0] or (bool(periods) and all(1 <= p <= data["in_len"] for p in periods)))
        and len(set(periods)) == len(periods),
        "data.season",
        season,
        f"a period in rows in [1, data.in_len={data['in_len']}], or a list of distinct periods "
        f"(e.g. [48, 336]: a seasonal naive each); 0 = no seasonal baseline",
    )
    split = data["split"]
    _check(
        len(split) == 3 and all(f > 0 for f in split) and abs(sum(split) - 1) < 1e-6,
        "data.split",
        split,
        "three positive fractions (train, val, test) summing to 1",
    )
    _check(
        (data["val_start"] is None) == (data["test_start"] is None),
        "data.val_start",
        data["val_start"],
        "give data.val_start and data.test_start together, or neither",
    )


def _is_encoder_decoder(cfg: Mapping) -> bool:
    """model=transformer (configs saved before model= had a name are the encoder-decoder)."""
    return cfg["model"].get("name", "transformer") == "transformer"


def _conflict(key: str, value, other: str, other_value, why: str) -> None:
    raise ConfigError(f"{key}={value} conflicts with {other}={other_value}: {why}")


def _check_attention_with_positions(cfg: Mapping) -> None:
    """Combinations each value allows alone but the builder would reject together: caught
    here, in one line naming both keys."""
    attn, pos, model = cfg["attention"], cfg["pos_encoding"], cfg["model"]
    head_dim = model["d_model"] // model["n_heads"]
    shape = f"model.d_model/model.n_heads = {model['d_model']}/{model['n_heads']}"
    qk_width, qk_what = head_dim, shape
    if attn["name"] == "diff":
        if attn["head_layout"] == "paper":
            if head_dim % 2:
                why = (
                    f"the paper layout halves each head's q/k, and {shape} = {head_dim} is odd; "
                    f"use an even head width or attention.head_layout=wide"
                )
                _conflict("attention.head_layout", "paper", "model.d_model", model["d_model"], why)
            qk_width, qk_what = head_dim // 2, f"half of {shape} (attention.head_layout=paper)"
        own = [key for key in ("distance_decay", "past_bias") if attn[key]]
        if own and pos["name"] in INSIDE_ATTENTION:
            why = (
                "both would put a position module inside diff attention; use "
                "pos_encoding=relative alone (it has distance_decay and past_bias) or set "
                f"attention.{own[0]}=false"
            )
            _conflict(f"attention.{own[0]}", "true", "pos_encoding", pos["name"], why)
    if pos["name"] == "rope" and qk_width % 2:
        why = f"rope rotates pairs of q/k channels, and the q/k width per head, {qk_what} = "
        _conflict(
            "pos_encoding", "rope", "model.d_model", model["d_model"], f"{why}{qk_width}, is odd"
        )


def _check_tokens(cfg: Mapping) -> None:
    _choice(cfg, "embedding.name", EMBEDDINGS)  # first: names the key an old config lacks
    model, emb, data = cfg["model"], cfg["embedding"], cfg["data"]
    if emb["name"] == "point":  # one token per step: patch_len and stride do not apply
        return
    patch_len, stride = emb["patch_len"], emb["stride"]
    _check(
        1 <= patch_len <= data["in_len"],
        "embedding.patch_len",
        patch_len,
        f"must be in [1, data.in_len={data['in_len']}]",
    )
    _check(
        1 <= stride <= patch_len,
        "embedding.stride",
        stride,
        f"must be in [1, embedding.patch_len={patch_len}] (no input step skipped)",
    )
    if "padding" in emb:  # configs saved before the option padded the start
        _choice(cfg, "embedding.padding", PADDINGS)
        if emb["padding"] == "end" and _is_encoder_decoder(cfg):
            _conflict(
                "embedding.padding", "end", "model.name", "transformer",
                "patches past the window's end are PatchTST's; the encoder-decoder's time axis "
                "needs patches ending at in_len (embedding.padding=start)",
            )  # fmt: skip
    if _is_encoder_decoder(cfg) and model["label_len"] % stride:
        _conflict(
            "model.label_len", model["label_len"], "embedding.stride", stride,
            "the decoder reads the last label_len steps in chunks of stride steps; "
            "make label_len a multiple of stride",
        )  # fmt: skip


def _encoder_tokens(cfg: Mapping) -> int:
    """How many tokens the encoder reads (after _check_tokens has passed)."""
    emb, data = cfg["embedding"], cfg["data"]
    if emb["name"] == "point":
        return data["in_len"]
    return Tokenizer(data["in_len"], 0, data["out_len"], emb["patch_len"], emb["stride"],
                     emb.get("padding", "start")).encoder_tokens  # fmt: skip


CHANNELS = ("independent", "mixed")


def _check_series_columns(cfg: Mapping) -> None:
    """One series (data.target), a long panel (+ data.id_column) or a wide one (data.targets)."""
    data = cfg["data"]
    target, targets = data["target"], data.get("targets")
    id_column = data.get("id_column")
    channels = cfg["model"].get("channels", "independent")
    _check(channels in CHANNELS, "model.channels", channels, "choose one of " + ", ".join(CHANNELS))
    if targets is None:
        if target is None:
            raise ConfigError(
                "data.target is required (the column to forecast): set data.target=<value>, or "
                "data.targets=[a, b] / data.targets=all for one series per column"
            )
        _check(bool(str(target).strip()), "data.target", target, "a column name")
        _check(
            target not in data["features"],
            "data.features",
            data["features"],
            f"must not repeat the target {target!r}",
        )
    else:
        _check(
            targets == "all"
            or (
                isinstance(targets, list)
                and targets
                and all(str(t).strip() for t in targets)
                and len(set(targets)) == len(targets)
            ),
            "data.targets",
            targets,
            "a list of distinct column names, or all",
        )
        if target is not None:
            _conflict(
                "data.target",
                target,
                "data.targets",
                targets,
                "name the columns to forecast once: data.targets for several",
            )
        if id_column:
            _conflict(
                "data.id_column",
                id_column,
                "data.targets",
                targets,
                "a long panel (id column) forecasts data.target; wide format names "
                "its series in data.targets",
            )
    if id_column:
        _check(bool(str(id_column).strip()), "data.id_column", id_column, "a column name")
        if id_column == target or id_column in data["features"]:
            _conflict(
                "data.id_column",
                id_column,
                "data.target/features",
                [target, *data["features"]],
                "the id column names each row's series; it cannot be forecast or read",
            )
        if channels == "mixed":
            _conflict(
                "model.channels",
                "mixed",
                "data.id_column",
                id_column,
                "a long panel has one target; mixed channels are wide columns (data.targets)",
            )
        _check(
            data["time_column"] is not None,
            "data.time_column",
            None,
            "a long panel (data.id_column) needs the time column ordering each series",
        )
    if (id_column or (targets and channels == "independent")) and data["fill"] == "interpolate":
        _conflict(
            "data.fill",
            "interpolate",
            "data.id_column/targets",
            id_column or targets,
            "a panel's windows share one buffer of rows; use data.fill=ffill",
        )


def _check_linear_path(cfg: Mapping) -> None:
    _choice(cfg, "model.linear_path", LINEAR_PATHS)
    _choice(cfg, "model.linear_init", LINEAR_INITS)
    if "linear_path_input" in cfg["model"]:  # runs saved before it existed read normalized
        _choice(cfg, "model.linear_path_input", LINEAR_PATH_INPUTS)
    model, data = cfg["model"], cfg["data"]
    _at_least(cfg, "model.decomposition_kernel", 1)
    if model["linear_init"] == "least_squares" and model["linear_path"] == "none":
        _conflict(
            "model.linear_init", "least_squares", "model.linear_path", "none",
            "there is no linear path to fit; set model.linear_path=nlinear or dlinear",
        )  # fmt: skip
    features = data.get("features") or []
    if _get(cfg, "model.channel_independent") and features:
        _conflict(
            "model.channel_independent", "true", "data.features", features,
            "each channel is forecast from its own past, so covariates would be ignored; "
            "drop data.features or set model.channel_independent=false",
        )  # fmt: skip


# What a required key (??? in its YAML) is for, in the line that says it is missing.
REQUIRED_HINTS = {"data.path": "the CSV file to read", "data.target": "the column to forecast"}


def validate_config(cfg) -> None:
    """Raise ConfigError for the first value out of range. Former option values are
    rewritten to their current names first (upgrade.py), with a note."""
    upgrade_config(cfg)
    if isinstance(cfg, DictConfig):
        missing = sorted(OmegaConf.missing_keys(cfg))
        if missing:
            key = missing[0]
            hint = f" ({REQUIRED_HINTS[key]})" if key in REQUIRED_HINTS else ""
            raise ConfigError(f"{key} is required{hint}: set {key}=<value>")
        try:
            cfg = OmegaConf.to_container(cfg, resolve=True)
        except OmegaConfBaseException as err:
            raise ConfigError(str(err).splitlines()[0]) from None

    _at_least(cfg, "seed", 0)
    _at_least(cfg, "block_size", 0)

    # model
    if "name" in cfg["model"]:  # configs saved before model= had a name: the encoder-decoder
        _choice(cfg, "model.name", MODELS)
    layers = ("model.encoder_layers", "model.decoder_layers")
    for key in ("model.d_model", "model.n_heads", *layers[: 2 if _is_encoder_decoder(cfg) else 1]):
        _at_least(cfg, key, 1)
    d_model, n_heads = cfg["model"]["d_model"], cfg["model"]["n_heads"]
    _check(
        d_model % n_heads == 0,
        "model.d_model",
        d_model,
        f"must be a multiple of model.n_heads={n_heads}",
    )
    _probability(cfg, "model.dropout")
    if "norm" in cfg["model"]:  # runs saved before it existed used LayerNorm
        _choice(cfg, "model.norm", NORMS)
    _choice(cfg, "model.instance_norm", INSTANCE_NORMS)
    in_len = cfg["data"]["in_len"]
    if _is_encoder_decoder(cfg):
        _choice(cfg, "model.decoding", DECODING)
        low = 1 if cfg["model"]["decoding"] == "autoregressive" else 0
        label_len = cfg["model"]["label_len"]
        _check(
            low <= label_len <= in_len,
            "model.label_len",
            label_len,
            f"must be in [{low}, data.in_len={in_len}]"
            + (" for autoregressive decoding" if low else ""),
        )
    else:
        _probability(cfg, "model.head_dropout")
        if "attention_dropout" in cfg["model"]:  # PatchTST's published options
            _probability(cfg, "model.attention_dropout")
        if "attention_init" in cfg["model"]:
            _choice(cfg, "model.attention_init", ATTENTION_INITS)
        if cfg["model"].get("res_attention"):
            attn = cfg["attention"]
            why = carries_residual(attn["name"], cfg["pos_encoding"]["name"], attn)
            if why:
                raise ConfigError(f"model.res_attention=true conflicts: {why}")

    _check_tokens(cfg)
    _check_linear_path(cfg)

    # attention
    _choice(cfg, "attention.name", available_attention())
    _probability(cfg, "attention.dropout")
    if cfg["attention"]["name"] == "diff":
        _at_least(cfg, "attention.block_size", 0)
        _choice(cfg, "attention.lambda_mode", LAMBDA_MODES)
        _choice(cfg, "attention.head_layout", HEAD_LAYOUTS)
        _choice(cfg, "attention.decay_form", DECAY_FORMS)

    # positional encoding
    _choice(cfg, "pos_encoding.name", POSITIONAL_ENCODINGS)
    _probability(cfg, "pos_encoding.dropout")
    pos = cfg["pos_encoding"]
    if "max_len" in pos:
        needed, what = in_len + cfg["data"]["out_len"], "data.in_len + data.out_len"
        if not _is_encoder_decoder(cfg):  # the encoder-only model positions its tokens alone
            needed, what = _encoder_tokens(cfg), "the encoder's tokens"
        _check(
            pos["max_len"] >= needed,
            "pos_encoding.max_len",
            pos["max_len"],
            f"must be >= {what} = {needed}",
        )
    if pos["name"] == "learned" and "init" in pos:
        _choice(cfg, "pos_encoding.init", LEARNED_INITS)
    if pos["name"] == "rope":
        _check(pos["base"] > 1, "pos_encoding.base", pos["base"], "must be > 1")
    if pos["name"] == "relative":
        _choice(cfg, "pos_encoding.decay_form", DECAY_FORMS)
    _check_attention_with_positions(cfg)

    # feed-forward
    _choice(cfg, "ffn.activation", list(ACTIVATIONS))
    _probability(cfg, "ffn.dropout")
    d_ff = cfg["ffn"]["d_ff"]
    _check(d_ff is None or d_ff >= 1, "ffn.d_ff", d_ff, "must be >= 1, or null for 4 * d_model")

    # data
    _choice(cfg, "data.name", list(DATASETS))
    for key in ("data.in_len", "data.out_len"):
        _at_least(cfg, key, 1)
    if cfg["data"]["name"] == "csv":
        _check_csv(cfg)
    else:
        for key in ("data.train_size", "data.val_size", "data.test_size"):
            _at_least(cfg, key, 1)
        # Three disjoint draws: training from seed, selection from val_seed, test from test_seed.
        val_seed, test_seed = cfg["data"]["val_seed"], cfg["data"]["test_seed"]
        _check(
            val_seed != cfg["seed"],
            "data.val_seed",
            val_seed,
            f"must differ from seed={cfg['seed']} (validation series differ from training)",
        )
        _check(
            test_seed not in (cfg["seed"], val_seed),
            "data.test_seed",
            test_seed,
            f"must differ from seed={cfg['seed']} and data.val_seed={val_seed} "
            f"(test series differ from training and validation)",
        )
    if cfg["data"]["name"] == "sigmoid":
        for key in ("slope_range", "shift_range", "amplitude_range", "offset_range"):
            _range(cfg, f"data.{key}")
        _at_least(cfg, "data.noise", 0.0)

    # trainer
    _at_least(cfg, "trainer.epochs", 0)  # 0: evaluate the starting weights (official ones)
    for key in ("trainer.batch_size", "trainer.eval_batch_size"):
        _at_least(cfg, key, 1)
    if "log_every" in cfg["trainer"]:  # runs saved before it existed synced every step
        _at_least(cfg, "trainer.log_every", 1)
    lr = cfg["trainer"]["lr"]
    _check(lr > 0, "trainer.lr", lr, "must be > 0")
    for key in ("trainer.weight_decay", "trainer.grad_clip", "trainer.patience"):
        _at_least(cfg, key, 0)
    threads = cfg["trainer"]["num_threads"]
    _check(
        threads == "auto" or (isinstance(threads, int) and not isinstance(threads, bool)
                              and threads >= 0),
        "trainer.num_threads", threads, "auto, 0 (torch's default) or a thread count",
    )  # fmt: skip
    _probability(cfg, "trainer.warmup_frac")
    _probability(cfg, "trainer.min_improvement")
    min_lr = cfg["trainer"]["min_lr_frac"]
    _check(0.0 <= min_lr <= 1.0, "trainer.min_lr_frac", min_lr, "must be in [0, 1]")
    if "selection_blocks" in cfg["trainer"]:  # runs saved before it existed: plain comparison
        blocks = cfg["trainer"]["selection_blocks"]
        _check(blocks == 0 or blocks >= 3, "trainer.selection_blocks", blocks,
               "0 (off) or at least 3 blocks (a paired interval needs a few)")  # fmt: skip
    if "select_on" in cfg["trainer"]:  # runs saved before it existed selected on mse
        _choice(cfg, "trainer.select_on", SELECT_ON)
        data = cfg["data"]
        if cfg["trainer"]["select_on"] == "mse_scaled" and (
            data["name"] != "csv" or data["scale"] == "none"
        ):
            _conflict(
                "trainer.select_on", "mse_scaled", "data.name/data.scale",
                [data["name"], data.get("scale")],
                "only CSV data scaled on its training rows (data.scale=standard or minmax) has "
                "scaled units; select on mse",
            )  # fmt: skip
    if "schedule" in cfg["trainer"]:  # runs saved before it existed: warmup_cosine, AdamW
        _choice(cfg, "trainer.schedule", SCHEDULES)
        _choice(cfg, "trainer.optimizer", OPTIMIZERS)
        pct = cfg["trainer"]["pct_start"]
        _check(0.0 < pct < 1.0, "trainer.pct_start", pct, "must be in (0, 1)")
    _choice(cfg, "trainer.strategy", STRATEGIES)
    _choice(cfg, "trainer.precision", PRECISIONS)
    if "kernels" in cfg["trainer"]:
        _choice(cfg, "trainer.kernels", KERNELS)
    _at_least(cfg, "log.attention_every", 0)
    _at_least(cfg, "log.test_every", 0)
    if "intervals" in cfg:  # runs saved before intervals existed have none
        check_intervals(cfg["intervals"], cfg["data"]["name"])
    if "loss" in cfg:  # runs saved before the loss group existed trained on mse
        _check_loss(cfg["loss"], cfg.get("intervals"))
    device = cfg["trainer"]["device"]
    _check(
        bool(DEVICE_PATTERN.match(device)),
        "trainer.device",
        device,
        "choose one of auto, cpu, cuda, cuda:N, mps",
    )

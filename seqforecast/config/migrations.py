"""Saved runs' configs, read as the current version: one ordered list of migrations.

Every run writes `config_version` (schema.py's CONFIG_VERSION) into its saved config. A saved
config is migrated once, when it is loaded (saved.py's `saved_config`, a resumed
checkpoint's config): each migration from its version on rewrites it to the next version, so
every other module reads only current configs. A config without the key is version 0: it
was written before versions were counted, by one of the releases whose keys version 1 fills in.

A migration fills a key with the behaviour runs had before the key existed (not today's
default, where the two differ), and renames former keys and option values; each renamed value
is reported once a process, in one line (a moved key is not: the run meant the same thing).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable

from ..options import ConfigError
from .schema import CONFIG_VERSION

log = logging.getLogger("seqforecast")

# (key, former value) -> current value (version 0 -> 1)
RENAMED = {
    ("data.name", "sigmoid_seed"): "sigmoid_pair",
    ("model.name", "patchtst"): "encoder",  # the published PatchTST is experiment=patchtst
    ("attention.head_layout", "seed"): "wide",
    ("attention.decay_form", "seed"): "reciprocal",
    ("pos_encoding.decay_form", "seed"): "reciprocal",
}

# Former key -> (current key, current names of former values) (version 0 -> 1).
MOVED = {
    "model.attention_dropout": ("model.attention_output_dropout", {}),
    "data.stride": ("data.window_stride", {}),
    "model.channels": ("data.columns", {"independent": "series", "mixed": "channels"}),
}

# What a version-0 config lacks where it was written before the key existed: the behaviour
# runs had then. `None` as a group's value: the group itself was missing.
BEFORE_THE_KEY = {
    "model.name": "transformer",
    "model.norm": "layer",
    "model.revin_affine": True,
    "model.linear_path": "none",
    "model.linear_path_input": "normalized",
    "model.linear_path_trainable": True,
    "model.linear_init": "zero",
    "model.decomposition_kernel": 25,
    "model.channel_independent": False,
    "embedding": {"name": "point", "patch_len": 1, "stride": 1, "padding": "start"},
    "embedding.padding": "start",
    "trainer.drop_last": False,
    "trainer.log_every": 1,  # synced every step
    "trainer.selection_blocks": 0,
    "trainer.select_on": "mse",
    "trainer.schedule": "warmup_cosine",
    "trainer.optimizer": "adamw",
    "trainer.pct_start": 0.3,
    "trainer.validate_initial": False,
    "trainer.min_improvement": 0.0,
    "trainer.kernels": "auto",  # the C kernels where they built, as those runs had them
    "log.figures": True,
    "intervals": {"method": "none", "levels": [], "quantiles": [], "gamma": 0.005},
    "intervals.gamma": 0.005,
    "loss": {"name": "mse"},
    "dataset": None,  # data.path named the file
    "data_dir": "data",
}
# Keys only some options have: filled where the option is the one named.
BEFORE_THE_KEY_OF = {
    ("model", "encoder"): {"attention_output_dropout": 0.0, "attention_init": "mha",
                            "res_attention": False, "official_weights": None,
                            "final_norm": "auto"},
    ("pos_encoding", "learned"): {"init": "normal"},
    ("data", "csv"): {"targets": None, "id_column": None, "columns": "series",
                      "time_features": False, "time_freq": "h", "duplicate_times": "error"},
}

_said: set[tuple[str, str]] = set()  # each renaming is reported once per process


def _version_0_to_1(cfg: dict) -> None:
    for former, (key, names) in MOVED.items():
        group, _, name = former.partition(".")
        if isinstance(cfg.get(group), dict) and name in cfg[group]:
            value = cfg[group].pop(name)
            new_group, _, new_name = key.partition(".")
            if new_group != "data" or cfg["data"].get("name") == "csv":  # only CSV data's
                cfg[new_group][new_name] = names.get(value, value)
    for (key, former), current in RENAMED.items():
        group, _, name = key.partition(".")
        node = cfg.get(group)
        if isinstance(node, dict) and node.get(name) == former:
            node[name] = current
            shown = group if name == "name" else key  # data.name is the group option data=...
            if (key, former) not in _said:
                _said.add((key, former))
                log.warning("%s=%s is now called %s=%s; read as %s", shown, former, shown,
                            current, current)
    for key, value in BEFORE_THE_KEY.items():
        group, _, name = key.partition(".")
        if not name:
            cfg.setdefault(group, copy.deepcopy(value))
        elif isinstance(cfg.get(group), dict):
            cfg[group].setdefault(name, value)
    for (group, option), values in BEFORE_THE_KEY_OF.items():
        node = cfg.get(group)
        if isinstance(node, dict) and node.get("name") == option:
            for name, value in values.items():
                node.setdefault(name, value)


# A group's former option that is now another group's (version 1 -> 2): (group, option) ->
# what to write instead, in words.
REPLACED_OPTIONS = {("embedding", "variate"): "model=itransformer"}


def _version_1_to_2(cfg: dict) -> None:
    """Model families: the encoder-only model over variate tokens (model=encoder
    embedding=variate) is the iTransformer family; every attention has its kernel option."""
    embedding, model = cfg.get("embedding"), cfg.get("model")
    if isinstance(embedding, dict) and embedding.get("name") == "variate":
        embedding["name"] = "point"
        embedding.update(patch_len=1, stride=1, padding="start")
        if isinstance(model, dict) and model.get("name") == "encoder":
            model["name"] = "itransformer"
    if isinstance(cfg.get("attention"), dict):
        cfg["attention"].setdefault("kernel", "auto")


def _version_2_to_3(cfg: dict) -> None:
    """Every attention has its output gate (none before), the trainer its compile mode and its
    float32 product precision (torch's own default before the key: highest)."""
    for group in ("attention", "variate_attention"):
        if isinstance(cfg.get(group), dict):
            cfg[group].setdefault("gate", "none")
    if isinstance(cfg.get("trainer"), dict):
        cfg["trainer"].setdefault("compile_mode", "default")
        cfg["trainer"].setdefault("matmul_precision", "highest")


def _version_3_to_4(cfg: dict) -> None:
    """The root's attention_dropout, which every attention config reads: the attention
    group's own dropout, which the run had (a variate-axis backend keeps its own)."""
    attention = cfg.get("attention")
    dropout = attention.get("dropout", 0.0) if isinstance(attention, dict) else 0.0
    cfg.setdefault("attention_dropout", dropout)


def _version_4_to_5(cfg: dict) -> None:
    """A CSV file's time column is checked for missing time steps (data.missing_times): runs
    before it read the rows as they were (keep). The root's `published` (the published model
    whose settings an experiment takes): runs before it named none."""
    cfg.setdefault("published", None)
    data = cfg.get("data")
    if isinstance(data, dict) and data.get("name") == "csv":
        data.setdefault("missing_times", "keep")


def _version_5_to_6(cfg: dict) -> None:
    """A CSV file's known-future columns (data.futr): runs before it read none."""
    data = cfg.get("data")
    if isinstance(data, dict) and data.get("name") == "csv":
        data.setdefault("futr", [])


def _version_6_to_7(cfg: dict) -> None:
    """A long panel's static covariates (data.static): runs before it read none."""
    data = cfg.get("data")
    if isinstance(data, dict) and data.get("name") == "csv":
        data.setdefault("static", [])


# MIGRATIONS[v] turns a version-v config into version v + 1.
MIGRATIONS: list[Callable[[dict], None]] = [_version_0_to_1, _version_1_to_2, _version_2_to_3,
                                            _version_3_to_4, _version_4_to_5, _version_5_to_6,
                                            _version_6_to_7]
assert len(MIGRATIONS) == CONFIG_VERSION


def migrate(cfg: dict) -> dict:
    """A saved config (a plain dict, resolved or not) as the current version: a new dict."""
    cfg = copy.deepcopy(cfg)
    version = cfg.get("config_version", 0)
    if not isinstance(version, int) or not 0 <= version <= CONFIG_VERSION:
        raise ConfigError(f"config_version={version!r} is not allowed: this seqforecast reads "
                          f"versions 0 to {CONFIG_VERSION} (a newer one wrote it?)")
    for step in MIGRATIONS[version:]:
        step(cfg)
    cfg["config_version"] = CONFIG_VERSION
    return cfg


def former_name(key: str, value) -> str | None:
    """The current name of a former option value, if `value` is one for `key` (or what
    replaced it, where another group's option did)."""
    group, _, name = key.partition(".")
    if name == "name" and (group, value) in REPLACED_OPTIONS:
        return REPLACED_OPTIONS[(group, value)]
    return RENAMED.get((key, value))


def moved_key(key: str) -> str | None:
    """The current name of a former key, if `key` is one."""
    return MOVED[key][0] if key in MOVED else None

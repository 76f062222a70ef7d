"""Checking a config, composed or saved: every failure one line naming the key, the value and
what is allowed (ConfigError), whether composition refused it (a type, a Choice, a key no
schema has: `composition_error` words Hydra's and OmegaConf's errors so) or the checks below.

`validate_config` takes a current config (a composed one, or a saved one after
migrations.migrate): each node typed by its schema (schema.py), each group's options checked
(their Checks), the data source's own rules (DataSource.check) and those between the loop's
options and the data (rules.py), group by group in ORDER; then the model is built on the meta
device through exactly the code a run uses (`check_model`), so whatever a component cannot be
is refused by that component, in its constructor, in one line naming the keys (a loss's
levels that miss an interval level: its output, built with the model).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from functools import cache

import torch
from hydra.errors import MissingConfigException
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .. import native
from ..data import config_channels
from ..model import build_model
from ..options import ConfigError, check_options
from .migrations import former_name, moved_key
from .rules import RULES
from .schema import CONFIG_VERSION, DatasetConfig, TrainConfig, schema_of

ORDER = ("model", "embedding", "attention", "pos_encoding", "ffn", "data", "trainer", "log",
         "intervals", "loss")
# What a required key (??? in the schema) is for, in the line that says it is missing.
REQUIRED_HINTS = {"data.path": "the CSV file to read", "data.target": "the column to forecast"}


def validate_config(cfg: DictConfig | Mapping, trains: bool = True) -> None:
    """Raise ConfigError for the first value out of range, or the first rule broken.
    `trains`: the config is one to train (not a saved run read to be evaluated)."""
    if isinstance(cfg, DictConfig):
        # read from an unresolved copy ("???" where a value is missing): OmegaConf.missing_keys
        # resolves every node (half a validation), and fails on an interpolation of a missing
        # value instead of naming it
        missing = sorted(_missing(OmegaConf.to_container(cfg, resolve=False)))
        if missing:
            key = missing[0]
            hint = f" ({REQUIRED_HINTS[key]})" if key in REQUIRED_HINTS else ""
            raise ConfigError(f"{key} is required{hint}: set {key}=<value>")
    plain = resolved(cfg)
    version = plain.get("config_version")
    if version != CONFIG_VERSION:
        raise ConfigError(f"config_version={version!r} is not allowed: a saved config is read "
                          f"through migrations.migrate first (this seqforecast writes "
                          f"{CONFIG_VERSION})")
    check_types(plain, cfg if isinstance(cfg, DictConfig) else None)
    check_options(TrainConfig, {k: v for k, v in plain.items() if k not in ORDER})
    if plain["dataset"] is not None:  # the one optional group
        check_options(DatasetConfig, plain["dataset"], "dataset.")
    for group in ORDER:
        check_options(schema_of(group, plain[group]), plain[group], f"{group}.")
    for group in ORDER:
        for check in RULES.get(group, []):
            check(plain)
    check_model(plain, trains)


def check_model(plain: Mapping, trains: bool = True) -> None:
    """Build the model a resolved config describes on the meta device (no memory, no
    arithmetic), through the code a run builds it with, for windows of the channels the config
    tells (data.config_channels) and the kernel set the run would take: ConfigError, in one
    line naming the keys, from whichever component cannot be built so."""
    trainer = plain["trainer"]
    device = trainer["device"]  # as the run would resolve it, unchecked here: a saved run is
    # checked where it is read, which may lack its device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kernels = native.resolve(trainer["kernels"], device.partition(":")[0],
                                 trainer["precision"])
    except native.KernelsUnavailable:  # said when the run starts, where the device is known
        kernels = "torch"
    n_features, n_targets = config_channels(plain["data"], plain.get("dataset"))
    with torch.device("meta"):
        build_model(plain, n_features, n_targets, kernels,
                    device.partition(":")[0] if trains else None)


def _missing(node, path: str = ""):
    """The dotted keys (list items as key[i]) whose value is MISSING ("???") in a plain copy,
    as OmegaConf.missing_keys names them."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _missing(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _missing(value, f"{path}[{i}]")
    elif node == MISSING:
        yield path


def resolved(cfg: DictConfig | Mapping) -> dict:
    """A config as plain dicts, interpolations resolved, Choices as their names."""
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    try:
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as err:
        raise ConfigError(str(err).splitlines()[0]) from None


def check_types(plain: Mapping, typed: DictConfig | None = None) -> None:
    """Merge the config into its schemas (the root's and each group's by its option), so a
    saved value of the wrong type, a name no option has or a key no schema has is one line.
    Each merged node is checked and dropped: the root's schema types its groups as Any, so one
    tree of them would check nothing more (and copying it took a quarter of a validation).
    A node of `typed` (the DictConfig `plain` came from) that already is its schema's, struct
    (no key beyond the schema's), is not merged again: a composed config's nodes are, and
    OmegaConf checked every value against that schema when it was set (a saved config read back
    is plain YAML, and merged). The merges were 60% of a validation."""
    for group in ORDER:
        if group not in plain:
            raise ConfigError(f"the config has no {group} (config_version={CONFIG_VERSION} "
                              f"configs have every group)")
        if schema_of(group, plain[group]) is None:
            name = plain[group].get("name") if isinstance(plain[group], Mapping) else None
            raise ConfigError(f"{group}={name!r} is not allowed: no such option")
    try:
        for group in ORDER:
            schema = schema_of(group, plain[group])
            if not _already(typed, group, schema):
                OmegaConf.merge(_structured(schema), plain[group])
        if not _already(typed, None, TrainConfig):
            OmegaConf.merge(_structured(TrainConfig),
                            {k: v for k, v in plain.items() if k not in ORDER})
    except OmegaConfBaseException as err:
        raise ConfigError(composition_error(err)) from None
    for group in ORDER:  # a current config has every key (migrations fill older ones)
        absent = [f.name for f in fields(schema_of(group, plain[group]))
                  if f.name not in plain[group]]
        if absent:
            raise ConfigError(f"the config has no {group}.{absent[0]} (written by an older "
                              f"seqforecast without its config_version?)")


def _already(typed: DictConfig | None, group: str | None, schema: type) -> bool:
    """Whether `typed`'s node `group` (None: the root) is a struct node of `schema`."""
    if typed is None:
        return False
    node = typed if group is None else typed._get_node(group)
    return (isinstance(node, DictConfig) and OmegaConf.get_type(node) is schema
            and OmegaConf.is_struct(node))


@cache
def _structured(schema: type) -> DictConfig:
    """A schema's typed node, made once (OmegaConf.merge copies it, never changes it)."""
    return OmegaConf.structured(schema)


_TYPES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false",
          "String": "a string"}


def composition_error(err: BaseException) -> str:
    """Hydra's or OmegaConf's refusal of a config as one line: `key=value is not allowed:
    what is allowed`, or `key ...` for a key no schema has."""
    if isinstance(err, MissingConfigException) and err.options is not None:
        group, _, wanted = (err.missing_cfg_file or "").rpartition("/")
        hint = former_name(f"{group}.name", wanted)
        now = "" if not hint else (f" ({wanted} is now {hint})" if "=" in hint
                                   else f" ({wanted} is now called {hint})")
        return f"{group}={wanted} is not allowed: choose one of {', '.join(err.options)}{now}"
    chain, cause = [], err
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    found = next((e for e in chain if isinstance(e, OmegaConfBaseException)
                  and getattr(e, "full_key", None)), None)
    if found is None:
        return str(err).strip().splitlines()[0]
    key, message = found.full_key, str(getattr(found, "msg", found)).strip().splitlines()[0]
    value = getattr(found, "value", None)
    choices = re.search(r"expected one of \[(.*)\]", message)
    if choices:
        hint = former_name(key, value)
        allowed = f"choose one of {choices.group(1)}" + (
            f" ({value} is now called {hint})" if hint else "")
        return f"{key}={value!r} is not allowed: {allowed}"
    converted = re.search(r"could not be converted to (\w+)|is not a valid (bool)", message)
    if converted:
        kind = converted.group(1) or "Boolean"
        return f"{key}={value!r} is not allowed: {_TYPES.get(kind, kind)}"
    unknown = re.search(r"Key '(.+)' not in '(\w+)'", message)
    if unknown:
        node = key.rpartition(".")[0] or "the config's root"
        moved = moved_key(key)
        schema = getattr(found, "object_type", None)
        keys = ("its keys: " + ", ".join(f.name for f in fields(schema) if f.name != "name")
                if schema is not None and is_dataclass(schema) else
                "its keys: --cfg job prints them")
        return (f"{key} is not allowed: {node} has no key {unknown.group(1)} ("
                + (f"it is now {moved})" if moved else f"{keys})"))
    return f"{key}: {message}"

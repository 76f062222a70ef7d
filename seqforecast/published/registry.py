"""The published models by name (their modules register here), their settings as a config reads
them (`${published:<key>,<preset>}`), and the official weights of a run's family."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import yaml
from omegaconf import OmegaConf
from torch import Tensor, nn

from ..options import ConfigError
from .common import OfficialWeightsError

HORIZONS = (96, 192, 336, 720)


class Published(NamedTuple):
    name: str  # its experiment (experiment=<name>) and the `published` key's value
    title: str  # as its authors write it (PatchTST)
    family: str  # the model family it is (model=<family>)
    settings: Mapping[str, Mapping[int, tuple[str, ...]]]  # dataset -> horizon -> overrides
    load: Callable[[nn.Module, Mapping[str, Tensor]], None]  # official weights into a model
    preset: str  # the cell the experiment's own values are (e.g. "etth1-96")


_PUBLISHED: dict[str, Published] = {}


def register_published(entry: Published) -> Published:
    if entry.name in _PUBLISHED:
        raise ValueError(f"published model {entry.name!r} is registered twice")
    _PUBLISHED[entry.name] = entry
    return entry


def published(name: str) -> Published:
    try:
        return _PUBLISHED[name]
    except KeyError:
        raise ConfigError(f"published settings exist for {', '.join(_PUBLISHED)}, not "
                          f"{name!r}") from None


def models() -> tuple[str, ...]:
    """The published models' names."""
    return tuple(_PUBLISHED)


def horizons(model: str, dataset: str) -> tuple[int, ...]:
    """The horizons the published scripts run `model` at on `dataset`."""
    return tuple(published(model).settings.get(dataset, {}))


def published_overrides(model: str, dataset: str, horizon: int) -> list[str]:
    """The overrides of `experiment=<model>` for `dataset` at `horizon`; a model, dataset or
    horizon the published scripts do not cover is refused in one line (ConfigError)."""
    table = published(model).settings
    if dataset not in table:
        raise ConfigError(f"the published {model} has no setting for dataset={dataset}: "
                          f"choose from {', '.join(table)}")
    if horizon not in table[dataset]:
        raise ConfigError(f"the published {model} has no setting for out_len={horizon} on "
                          f"{dataset}: choose from {', '.join(map(str, table[dataset]))}")
    return list(table[dataset][horizon])


def _cell(root) -> tuple[Published | None, str | None, int | None]:
    """(the published model a config names, its dataset's name or None, its horizon)."""
    name = root.get("published")
    if not name:
        return None, None, None
    dataset = root.get("dataset")
    return published(name), (dataset.get("name") if dataset else None), root.get("out_len")


def _setting(root) -> dict[str, object]:
    """key -> value of the cell a config names; empty where it has none."""
    entry, dataset, horizon = _cell(root)
    if entry is None:
        return {}
    found = entry.settings.get(dataset, {}).get(horizon, ())
    return {key: yaml.safe_load(value) for key, _, value in
            (item.partition("=") for item in found)}


def _resolve(key: str, preset, *, _root_):
    """`${published:<key>,<preset>}`: the value of `key` in the cell the config names (its
    published model, dataset and horizon), else the preset's."""
    return _setting(_root_).get(key, preset)


OmegaConf.register_new_resolver("published", _resolve, replace=True)


def describe(cfg: Mapping) -> str | None:
    """The run's line on its published setting (a resolved config, plain values), or None for
    a config that names no published model."""
    entry, dataset, horizon = _cell(cfg)
    if entry is None:
        return None
    where = f"the published {entry.title}"
    if dataset is None:
        return (f"{where}, experiment={entry.name}'s preset ({entry.preset}'s setting): no "
                f"dataset entry, so no published cell")
    if horizon not in entry.settings.get(dataset, {}):
        cells = entry.settings.get(dataset)
        what = (f"out_len={horizon} on {dataset} (its horizons: {', '.join(map(str, cells))})"
                if cells else f"dataset={dataset}")
        return f"{where} has no setting for {what}: experiment={entry.name}'s preset values"
    setting = _setting(cfg)
    yours = [key for key, value in setting.items() if _get(cfg, key) != value]
    shown = " ".join(f"{key}={value}" for key, value in setting.items()) or "the preset's own"
    return (f"{where}'s setting for {dataset} at out_len={horizon}: {shown}"
            + (f" (yours instead: {', '.join(f'{k}={_get(cfg, k)}' for k in yours)})"
               if yours else ""))


def _get(cfg: Mapping, key: str):
    node = cfg
    for part in key.split("."):
        node = node[part]
    return node


def official_for(model: nn.Module) -> Published | None:
    """The published model whose official weights load into `model` (by its family)."""
    family = getattr(model, "family", None)
    return next((p for p in _PUBLISHED.values() if p.family == family), None)


def load_official_weights(model: nn.Module, state_dict: Mapping[str, Tensor]) -> None:
    """Copy an official state dict into `model` in place, or refuse it whole in one line
    (OfficialWeightsError)."""
    entry = official_for(model)
    if entry is None:
        raise OfficialWeightsError(f"no official weights load into {type(model).__name__}: "
                                   f"its family publishes none")
    entry.load(model, state_dict)

"""Name -> model family (its class and its options), as attention backends are registered.

A family is a `WindowForecaster` subclass (model/forecaster.py) registered with the dataclass of
its options (a `ModelOptions` subclass: their types, defaults and checks, the options' one home,
which the config's `model=<name>` node is too). It is built as `cls(options, kit)`, from the
shared layers (model/kit.py). A published model (seqforecast/published/) is a family whose
options default to the published ones, with its experiment's recipe and its settings per
dataset and horizon.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import NamedTuple

from ..options import ModelOptions


class Family(NamedTuple):
    cls: type  # a WindowForecaster subclass
    options: type[ModelOptions]


_FAMILIES: dict[str, Family] = {}


def register_family(name: str, options: type[ModelOptions]):
    """Class decorator: make a family buildable by `name` (model=<name>), with `options`."""

    def decorate(cls: type) -> type:
        if name in _FAMILIES:
            raise ValueError(f"model family {name!r} is registered twice")
        _FAMILIES[name] = Family(cls, options)
        return cls

    return decorate


@cache
def _plugins() -> None:
    """Register the families other packages declare (entry-point group seqforecast.families),
    once, at the first lookup."""
    for plugin in entry_points(group="seqforecast.families"):
        plugin.load()


def available_families() -> list[str]:
    """Registered family names, sorted."""
    _plugins()
    return sorted(_FAMILIES)


def family(name: str) -> Family:
    _plugins()
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r}; allowed: {', '.join(available_families())}") from None


def family_schema(name: str) -> type[ModelOptions]:
    """The dataclass of family `name`'s options."""
    return family(name).options


def family_options(cfg) -> ModelOptions:
    """A composed config's model node as its family's options (plain values)."""
    node = dict(cfg["model"])
    return family_schema(node["name"])(**node)

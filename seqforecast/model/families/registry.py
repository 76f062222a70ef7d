"""Name -> model family (its class and its options), as attention backends are registered.

A family is a `WindowForecaster` subclass (model/forecaster.py) registered with the dataclass of
its options (a `ModelOptions` subclass: their types, defaults and checks, the options' one home,
which the config's `model=<name>` node is too). It is built as `cls(options, kit)`, from the
shared layers (model/kit.py). A published model (seqforecast/published/) is a family whose
options default to the published ones, with its experiment's recipe and its settings per
dataset and horizon.
"""

from __future__ import annotations

from ...plugins import Entry, Registry
from ..options import ModelOptions

FAMILIES = Registry("model", "seqforecast.families")


# @register_family(name, Options) on a WindowForecaster subclass: model=<name>, configured by
# Options (a ModelOptions subclass)
register_family = FAMILIES.register
available_families = FAMILIES.names
family_schema = FAMILIES.schema  # the dataclass of model=<name>'s options


def family(name: str) -> Entry:
    """The family `name`: its class (`cls`) and its options' dataclass (`options`)."""
    return FAMILIES[name]


def family_options(cfg) -> ModelOptions:
    """A composed config's model node as its family's options (plain values)."""
    node = dict(cfg["model"])
    return family_schema(node["name"])(**node)

"""Compose the training config from Python, as the CLI would (Hydra's compose API)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ..options import ConfigError
from .check import composition_error
from .schema import register_schemas

# The configs travel inside the package (seqforecast/configs links to the top-level configs/,
# their one source; the wheel carries them as package data).
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def settle_dataset(overrides: Sequence[str]) -> list[str]:
    """The overrides with the dataset entry settled as a user means it: `dataset=null` or
    `dataset=none` drops it (Hydra's own spelling is `~dataset`), and a data source chosen on
    the command line (`data=csv`, with no `dataset=`) replaces the dataset entry a preset
    brings (experiment=timexer's ETTh1): your own file needs no entry of the field's."""
    settled, data_at, named_dataset = [], None, False
    for item in overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key == "dataset":
            named_dataset = True
            if value in ("null", "none"):
                item = "~dataset"
        if key == "data" and data_at is None:
            data_at = len(settled)
        settled.append(item)
    if data_at is None or named_dataset:
        return settled
    # just before data=: the overrides stay together wherever command-line flags (--cfg job,
    # --multirun, --config-dir d) stand among them
    return [*settled[:data_at], "~dataset", *settled[data_at:]]


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """The composed config for `overrides` (e.g. ["attention=diff", "block_size=16"]), the
    dataset entry settled (`settle_dataset`) as the CLI does; a value or key composition
    refuses is a ConfigError in one line."""
    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        try:
            return compose(config_name, overrides=settle_dataset(overrides))
        except (HydraException, OmegaConfBaseException) as err:
            raise ConfigError(override_error(err)) from None


# Hydra's refusal of `key=a,b` outside --multirun: a first line, then its three fixes on others
_AMBIGUOUS = re.compile(r"Ambiguous value for argument '(.*)'")


def override_error(err: BaseException) -> str:
    """`composition_error`, but a `key=a,b` outside --multirun keeps Hydra's fixes in its one
    line, the list's first: `data.features=a,b` is a sweep over two values or a mistyped list."""
    found = _AMBIGUOUS.match(str(err).strip().splitlines()[0]) if str(err).strip() else None
    if found is None:
        return composition_error(err)
    key, _, value = found.group(1).partition("=")
    return (f"{key}={value} is ambiguous: write {key}=[{value}] for a list, add --multirun to "
            f"sweep over its values, or quote it for one string: {key}='{value}'")

"""The catalog: each file of the field's benchmark is an entry of configs/dataset/<name>.yaml
(its `dataset` node: file, rows, channels, licence, source, download address, checksum), the
one home of what `dataset=<name>` trains on and what `seqforecast-data` lists, gets and checks.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from ..config.compose import CONFIG_DIR
from ..config.schema import DatasetConfig, TrainConfig
from ..data.csv_series import DataError


class DatasetError(DataError):
    """A dataset that cannot be used or got; str(err) is the one line to show."""


def entries() -> dict[str, DatasetConfig]:
    """Name -> entry, in name order."""
    found = {}
    for path in sorted((Path(CONFIG_DIR) / "dataset").glob("*.yaml")):
        node = OmegaConf.merge(OmegaConf.structured(DatasetConfig),
                               OmegaConf.load(path)["dataset"])
        found[path.stem] = OmegaConf.to_object(node)
    return found


def entry(name: str) -> DatasetConfig:
    known = entries()
    if name not in known:
        raise DatasetError(f"dataset {name!r} does not exist: choose one of {', '.join(known)}")
    return known[name]


def data_dir(given: str | None = None) -> Path:
    """The folder dataset files live in: `given`, else the root config's data_dir (the
    SEQFORECAST_DATA environment variable, or ./data)."""
    if given:
        return Path(given)
    return Path(OmegaConf.create({"dir": TrainConfig.data_dir}).dir)

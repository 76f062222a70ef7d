"""Data sources: what a run trains and is scored on (`data=<name>`), one registered class each,
with its options' dataclass (`register_source`): synthetic sigmoid series (source_sigmoid.py)
and your own CSV file (source_csv.py); other packages' under the entry-point group
`seqforecast.data`. A source states here what a config of it tells before any file is read,
so nothing outside its module asks for its name: the rules between its keys, the channels its
windows carry, its calendar features, its seasonal period, whether it has scaled units and
whether its test windows follow one another in time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from ..plugins import Registry

if TYPE_CHECKING:
    import torch

    from .splits import ForecastData


SOURCES = Registry("data", "seqforecast.data")
# @register_source(name, Options) on a DataSource subclass: data=<name>, configured by Options
register_source = SOURCES.register
available_sources = SOURCES.names
source_schema = SOURCES.schema  # the dataclass of data=<name>'s options


def data_source(cfg: Mapping) -> DataSource:
    """The source a resolved `data` node names."""
    return SOURCES[cfg["name"]].cls(cfg)


class DataSource:
    """One data config (`cfg`: its resolved `data` node, plain values)."""

    # Its test windows follow one another in time, so a method that learns from each
    # arrived error (intervals.method=adaptive) can run over them.
    ordered_in_time: ClassVar[bool] = False

    def __init__(self, cfg: Mapping):
        self.cfg = cfg

    def check(self, root: Mapping) -> None:
        """The rules between its keys (and the root's `seed`): ConfigError in one line."""

    def channels(self, dataset: Mapping | None = None) -> tuple[int, int]:
        """(input channels, forecast channels) of a window, as far as the config tells without
        reading a file: what a config's model is built for when it is checked. `dataset`: the
        dataset entry (dataset=<name>), whose channel count may stand for a file's."""
        return 1, 1

    def calendar_features(self) -> list[str]:
        """The calendar features it adds to each input step, last among the channels."""
        return []

    def known_ahead(self) -> list[str]:
        """The columns known in advance, read led by out_len rows (data/covariates.py): the
        channels just before the plain ones, their last out_len steps the horizon's values."""
        return []

    def plain_channels(self) -> list[str]:
        """The last channels, which the model reads as they are, no instance norm: static
        covariates (constant over a window: a norm would make them 0), then the calendar
        features."""
        return self.calendar_features()

    def season(self) -> int | list[int]:
        """The seasonal naive baseline's period in steps (a list: one each); 0: none."""
        return 0

    def scaled_units(self) -> bool:
        """Its values are scaled on its training rows, so `*_scaled` metrics have units."""
        return False

    def build(self, seed: int, device: torch.device, saved: dict | None = None,
              allow_changed: bool = False) -> ForecastData:
        """Its training, validation and test windows on `device`. `saved` (a checkpoint's
        data_state): the same rows and scalers again (allow_changed: a changed file read
        anyway)."""
        raise NotImplementedError


"""Data sources are registered (data/sources.py): what a config of one tells before a file is
read is asked of it, so a source of one's own is its class and its options, and the rules
between data and the loop read what it declares, never its name."""

from dataclasses import dataclass

import pytest
import torch

from seqforecast.config.rules import check_intervals
from seqforecast.data import (
    DataSource,
    Split,
    available_sources,
    build_data,
    config_channels,
    data_source,
    register_source,
)
from seqforecast.data.sources import SOURCES
from seqforecast.data.splits import ForecastData
from seqforecast.options import ConfigError, refuse


@dataclass
class RampOptions:
    name: str = "ramp_test"
    in_len: int = 4
    out_len: int = 2
    slope: float = 1.0


@pytest.fixture
def ramp():
    @register_source("ramp_test", RampOptions)
    class Ramp(DataSource):
        def check(self, root):
            if self.cfg["slope"] == 0:
                raise refuse("data.slope", 0, "a ramp rises: give a slope other than 0")

        def channels(self, dataset=None):
            return 2, 1

        def build(self, seed, device, saved=None, allow_changed=False):
            steps = torch.arange(self.cfg["in_len"] + self.cfg["out_len"], dtype=torch.float32)
            values = (self.cfg["slope"] * steps).expand(3, -1)
            src = torch.stack([values[:, : self.cfg["in_len"]]] * 2, dim=-1)
            split = Split(src, values[:, self.cfg["in_len"]:, None])
            return ForecastData(train=split, val=split, test=split, n_features=2)

    yield Ramp
    SOURCES.unregister("ramp_test")


def test_a_registered_source_is_built_and_asked_by_its_name(ramp):
    cfg = {"name": "ramp_test", "in_len": 4, "out_len": 2, "slope": 2.0}
    assert "ramp_test" in available_sources()
    assert isinstance(data_source(cfg), ramp)
    assert config_channels(cfg) == (2, 1)
    data = build_data(cfg, seed=0, device=torch.device("cpu"))
    assert data.test.target[0, :, 0].tolist() == [8.0, 10.0]
    with pytest.raises(ConfigError, match=r"^data.slope=0 is not allowed: a ramp rises"):
        data_source({**cfg, "slope": 0}).check({"seed": 0})
    # adaptive intervals ask whether its test windows follow one another in time: no
    intervals = {"method": "adaptive", "levels": [0.8], "quantiles": [0.1, 0.5, 0.9]}
    with pytest.raises(ConfigError, match="intervals.method=adaptive conflicts with "
                                          "data.name=ramp_test"):
        check_intervals(intervals, cfg)


def test_the_project_s_sources_say_what_their_configs_tell():
    csv = {"name": "csv", "features": ["wind"], "futr": ["load"], "static": [],
           "targets": ["a", "b"],
           "columns": "channels",
           "id_column": None, "time_features": True, "time_freq": "h", "season": 24,
           "scale": "none"}
    source = data_source(csv)
    assert source.ordered_in_time and not source.scaled_units()
    # targets, the past and the known-future covariate, 4 hourly calendar ones
    assert source.channels() == (2 + 1 + 1 + 4, 2)
    assert source.season() == 24 and source.calendar_features()[0].startswith("time:")
    assert source.plain_channels() == source.calendar_features()  # read as they are
    # a long panel: its target, past, known-future and static covariates; the static read as
    # they are (no instance norm)
    panel = data_source({**csv, "id_column": "id", "target": "y", "targets": None,
                         "columns": "series", "time_features": False, "static": ["size"]})
    assert panel.channels() == (4, 1) and panel.plain_channels() == ["size"]
    sigmoid = data_source({"name": "sigmoid"})
    assert not sigmoid.ordered_in_time and sigmoid.season() == 0 and sigmoid.channels() == (1, 1)
    with pytest.raises(ValueError, match="unknown data 'tsv'; allowed: csv, sigmoid"):
        data_source({"name": "tsv"})

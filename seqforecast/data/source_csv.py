"""data=csv: your own series from a CSV file: one series (data.target), a wide file's columns
(data.targets: each its own series, or the channels of one), or a long panel (data.id_column);
read by csv_data.py (one series, or channels) and panel_data.py (a panel)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from ..options import Check, ConfigError, choice, conflict, option, positive, refuse
from .csv_data import csv_data
from .dates import DateOrder
from .gaps import FILLS
from .panel_data import panel_data
from .scaling import SCALERS
from .sources import DataSource, register_source
from .time_features import TIME_FREQS, feature_names
from .time_grid import MissingTimes
from .windows import PROTOCOLS

# wide CSV data (data.columns): each column its own series, or the channels of one series
COLUMNS = ("series", "channels")
Columns = choice("Columns", COLUMNS)
Protocol = choice("Protocol", PROTOCOLS)
Scale = choice("Scale", SCALERS)
Fill = choice("Fill", FILLS)
TimeFreq = choice("TimeFreq", TIME_FREQS)
DuplicateTimes = choice("DuplicateTimes", ("error", "keep"))  # csv_series.py

column = Check(lambda v: bool(str(v).strip()), "a column name")
columns = Check(lambda v: v == "all" or (isinstance(v, list) and bool(v) and len(set(v)) == len(v)
                                         and all(str(c).strip() for c in v)),
                "a list of distinct column names, or all")
seasons = Check(lambda v: (type(v) is int and v == 0) or (
    (periods := v if isinstance(v, list) else [v]) and len(set(periods)) == len(periods)
    and all(isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in periods)),
    "a period in rows (>= 1), or a list of distinct periods (e.g. [48, 336]: a seasonal naive "
    "each); 0 = no seasonal baseline")


@dataclass
class CsvOptions:  # data=csv: your own series (csv_data.py, panel_data.py)
    name: str = "csv"
    path: str = option(MISSING, Check(lambda v: bool(str(v).strip()), "the CSV file to read"))
    target: str | None = option(None, column)  # the column to forecast (or data.targets)
    targets: Any = option(None, columns)  # wide: [col, ...] or all, the columns to forecast
    columns: Columns = Columns.series  # wide (data.targets): series: each column its own series
    # (own scaler, windows, metrics) | channels: the channels of one series, windows carrying all
    id_column: str | None = option(None, column)  # long panel: the column naming each row's
    # series
    features: list[str] = option([], factory=True)  # past covariates (hist): further columns
    # read over the input steps only
    futr: list[str] = option([], factory=True)  # known-future covariates: columns whose values
    # over the forecast steps are known in advance (calendar, a published load forecast); each
    # window reads them led by out_len rows, so its last out_len input steps hold the horizon's
    # values (covariates.py); predict takes those values from future=<csv>
    static: list[str] = option([], factory=True)  # static covariates of a long panel: columns
    # holding one value per series (a store's size), scaled across the series and read as
    # channels the instance norm leaves as they are
    time_column: str | None = None  # times, checked sorted and unique: ISO 8601, or a date
    # such as 2013/1/31 0:00, 31/1/2013 or 1/31/2013 (data/dates.py)
    date_order: DateOrder = DateOrder.auto  # a date with its year last: auto (the file shows
    # it: a first field above 12 is a day, a second above 12 a month) | dayfirst | monthfirst
    duplicate_times: DuplicateTimes = DuplicateTimes.error  # keep: a timestamp repeated on
    # consecutive rows is read as it is (dataset=weather: the published loaders read its one)
    missing_times: MissingTimes = MissingTimes.error  # a step longer than the file's interval
    # (its most common step) is refused, naming it | keep: the rows read as they are, windows
    # spanning the gap (dataset=<name>: as the published loaders read them; data/time_grid.py)
    in_len: int = option(MISSING, positive)
    out_len: int = option(MISSING, positive)
    window_stride: int = option(1, positive)  # rows between consecutive windows
    protocol: Protocol = Protocol.standard  # standard: a split's windows forecast its rows,
    # inputs may reach back into earlier rows; strict: windows lie wholly inside their split
    split: list[float] = option([0.7, 0.15, 0.15], Check(
        lambda v: len(v) == 3 and all(f > 0 for f in v) and abs(sum(v) - 1) < 1e-6,
        "three positive fractions (train, val, test) summing to 1"), factory=True)
    val_start: str | None = None  # or explicit borders: a row number or a timestamp (with
    test_start: str | None = None  # test_start: both or none)
    test_end: str | None = None  # ends the test split (exclusive); later rows unused
    scale: Scale = Scale.standard  # none | standard | minmax, fit on the training rows only
    fill: Fill = Fill.error  # empty/NaN cells: error | ffill | interpolate
    season: Any = option(0, seasons)  # > 0: a seasonal naive with this period (rows);
    # [48, 336]: one each
    time_features: bool = False  # each input step's calendar features (the published timeF,
    # each in [-0.5, 0.5]) as further input channels: variate tokens of their own
    time_freq: TimeFreq = TimeFreq.h  # which features (data/time_features.py): h (the
    # published scripts' choice for every file) | s | min | d | w | m


def check_static(data: Mapping) -> None:
    """Static columns: a long panel's (one series has nothing to tell apart), and named once."""
    static = data["static"]
    if not static:
        return
    if not data["id_column"]:
        raise refuse("data.static", static, "needs a long panel (data.id_column): a static "
                     "covariate tells the series apart, one value each")
    named = [data["target"], *data["features"], *data["futr"]]
    both = [c for c in static if c in named]
    if both:
        kind = ("forecast" if both[0] == data["target"] else "a past covariate"
                if both[0] in data["features"] else "known in advance")
        raise conflict("data.static", static, "data.target/features/futr", named,
                       f"{both[0]!r} cannot be static and {kind}; name each column once")


def check_futr(data: Mapping) -> None:
    """Known-future columns: neither forecast nor read as past covariates, and a window long
    enough to hold the horizon's values (they are read led by out_len rows)."""
    futr = data["futr"]
    if not futr:
        return
    forecast = ([data["target"]] if data["targets"] is None
                else [] if data["targets"] == "all" else list(data["targets"]))
    for key, names in (("data.target/targets", forecast), ("data.features", data["features"])):
        both = [c for c in futr if c in names]
        if both:
            raise conflict("data.futr", futr, key, names,
                           f"{', '.join(map(repr, both))} cannot be known in advance and "
                           f"{'forecast' if key != 'data.features' else 'a past covariate'}; "
                           f"name each column once")
    if data["in_len"] < data["out_len"]:
        raise refuse("data.futr", futr,
                     f"needs data.in_len >= data.out_len (here {data['in_len']} < "
                     f"{data['out_len']}): a window reads known-future columns led by out_len "
                     f"rows, its last out_len steps the horizon's values")


@register_source("csv", CsvOptions)
class CsvFile(DataSource):
    """A CSV file's series: its test windows are its last rows, in time order."""

    ordered_in_time = True

    @property
    def is_panel(self) -> bool:
        """Many series in one file: long format (data.id_column), or wide format
        (data.targets) read as series (data.columns=series)."""
        data = self.cfg
        return bool(data["id_column"] or (data["targets"] and data["columns"] == "series"))

    def check(self, root: Mapping) -> None:
        """One series (data.target), a long panel (+ data.id_column) or a wide one
        (data.targets); seasons inside the window; explicit borders both or neither."""
        data = self.cfg
        target, targets, id_column = data["target"], data["targets"], data["id_column"]
        features = data["features"]
        check_futr(data)
        check_static(data)
        covariates = [*features, *data["futr"], *data["static"]]  # each list once, too
        repeated = sorted({c for c in covariates if covariates.count(c) > 1})
        if repeated:
            raise refuse("data.features/futr/static", covariates,
                         f"names {repeated[0]!r} twice; name each column once")
        if targets is None:
            if target is None:
                raise ConfigError(
                    "data.target is required (the column to forecast): set data.target=<value>, "
                    "or data.targets=[a, b] / data.targets=all for one series per column")
            if target in features:
                raise refuse("data.features", features, f"must not repeat the target {target!r}")
        else:
            if target is not None:
                raise conflict("data.target", target, "data.targets", targets,
                               "name the columns to forecast once: data.targets for several")
            if id_column:
                raise conflict("data.id_column", id_column, "data.targets", targets,
                               "a long panel (id column) forecasts data.target; wide format "
                               "names its series in data.targets")
            both = [c for c in features if targets != "all" and c in targets]
            if both:  # an exogenous series is read, never forecast (targets=all leaves it out)
                raise conflict("data.features", features, "data.targets", targets,
                               f"{', '.join(map(repr, both))} cannot be both forecast and "
                               f"exogenous")
        if id_column:
            if id_column == target or id_column in [*features, *data["futr"]]:
                raise conflict("data.id_column", id_column, "data.target/features/futr",
                               [target, *features, *data["futr"]], "the id column names each "
                               "row's series; it cannot be forecast or read")
            if data["columns"] == "channels":
                raise conflict("data.columns", "channels", "data.id_column", id_column,
                               "a long panel has one target; channels of one series are wide "
                               "columns (data.targets)")
            if data["time_column"] is None:
                raise refuse("data.time_column", None, "a long panel (data.id_column) needs the "
                             "time column ordering each series")
        panel = self.is_panel
        if panel and data["fill"] == "interpolate":
            raise conflict("data.fill", "interpolate", "data.id_column/targets",
                           id_column or targets,
                           "a panel's windows share one buffer of rows; use data.fill=ffill")
        season = data["season"]  # its form checked by its schema; here, inside the window
        if any(p > data["in_len"] for p in (season if isinstance(season, list) else [season])):
            raise refuse("data.season", season,
                         f"a period in rows in [1, data.in_len={data['in_len']}], or a list of "
                         f"distinct periods (e.g. [48, 336]: a seasonal naive each); 0 = no "
                         f"seasonal baseline")
        if (data["val_start"] is None) != (data["test_start"] is None):
            raise refuse("data.val_start", data["val_start"],
                         "give data.val_start and data.test_start together, or neither")
        if data["time_features"] and (data["time_column"] is None or panel):
            raise conflict("data.time_features", "true", "data.time_column/columns",
                           [data["time_column"], data["columns"]], "calendar features are read "
                           "from the time column of one series (a wide file: "
                           "data.columns=channels)")

    def channels(self, dataset: Mapping | None = None) -> tuple[int, int]:
        data = self.cfg
        features = len(data["features"]) + len(data["futr"]) + len(data["static"])
        if self.is_panel:  # each window one series: its target and covariates
            return 1 + features, 1
        targets = data["targets"]
        if isinstance(targets, list):
            n_targets = len(targets)
        elif targets is not None and dataset:  # all: every column but the covariates
            n_targets = max(1, dataset["channels"] - features)
        else:
            n_targets = 1
        return n_targets + features + len(self.calendar_features()), n_targets

    def calendar_features(self) -> list[str]:
        return feature_names(self.cfg["time_freq"]) if self.cfg["time_features"] else []

    def known_ahead(self) -> list[str]:
        return list(self.cfg["futr"])

    def plain_channels(self) -> list[str]:
        return [*self.cfg["static"], *self.calendar_features()]

    def season(self) -> int | list[int]:
        return self.cfg["season"]

    def scaled_units(self) -> bool:
        return self.cfg["scale"] != "none"

    def build(self, seed, device, saved=None, allow_changed=False):
        read = panel_data if self.is_panel else csv_data
        return read(self.cfg, device, saved, allow_changed)

"""The rules between options outside the model: each one a combination that every value allows
alone but the data or the loop would reject together, refused in one line naming both keys. A
single option's type, allowed values and range are its own (schema.py), checked before these;
what the model cannot be is refused by the component that knows, when check.py builds it.
`cfg` is a resolved, current config as plain dicts."""

from __future__ import annotations

from collections.abc import Callable

from ..options import ConfigError
from ..probabilistic.quantiles import QuantileError, check_quantiles, interval_bounds

# group -> its rules, run right after that group's own options are checked (check.py), in
# the order written: a rule may read any group, but reports on the first key it names.
RULES: dict[str, list[Callable[[dict], None]]] = {}


def rule(group: str) -> Callable:
    def register(check: Callable[[dict], None]) -> Callable[[dict], None]:
        RULES.setdefault(group, []).append(check)
        return check

    return register


def _refuse(key: str, value, allowed: str) -> None:
    raise ConfigError(f"{key}={value!r} is not allowed: {allowed}")


def _conflict(key: str, value, other: str, other_value, why: str) -> None:
    raise ConfigError(f"{key}={value} conflicts with {other}={other_value}: {why}")


# ---------------------------------------------------------------- data


@rule("data")
def three_disjoint_synthetic_draws(cfg: dict) -> None:
    data, seed = cfg["data"], cfg["seed"]
    if data["name"] == "csv":
        return
    # Training from seed, selection from val_seed, test from test_seed.
    if data["val_seed"] == seed:
        _refuse("data.val_seed", data["val_seed"],
                f"must differ from seed={seed} (validation series differ from training)")
    if data["test_seed"] in (seed, data["val_seed"]):
        _refuse("data.test_seed", data["test_seed"],
                f"must differ from seed={seed} and data.val_seed={data['val_seed']} "
                f"(test series differ from training and validation)")


@rule("data")
def csv_columns_and_borders(cfg: dict) -> None:
    """One series (data.target), a long panel (+ data.id_column) or a wide one (data.targets);
    seasons inside the window; explicit borders both or neither."""
    data = cfg["data"]
    if data["name"] != "csv":
        return
    target, targets, id_column = data["target"], data["targets"], data["id_column"]
    if targets is None:
        if target is None:
            raise ConfigError(
                "data.target is required (the column to forecast): set data.target=<value>, or "
                "data.targets=[a, b] / data.targets=all for one series per column")
        if target in data["features"]:
            _refuse("data.features", data["features"], f"must not repeat the target {target!r}")
    else:
        if target is not None:
            _conflict("data.target", target, "data.targets", targets,
                      "name the columns to forecast once: data.targets for several")
        if id_column:
            _conflict("data.id_column", id_column, "data.targets", targets,
                      "a long panel (id column) forecasts data.target; wide format names its "
                      "series in data.targets")
        both = [c for c in data["features"] if targets != "all" and c in targets]
        if both:  # an exogenous series is read, never forecast (targets=all leaves it out)
            _conflict("data.features", data["features"], "data.targets", targets,
                      f"{', '.join(map(repr, both))} cannot be both forecast and exogenous")
    if id_column:
        if id_column == target or id_column in data["features"]:
            _conflict("data.id_column", id_column, "data.target/features",
                      [target, *data["features"]],
                      "the id column names each row's series; it cannot be forecast or read")
        if data["columns"] == "channels":
            _conflict("data.columns", "channels", "data.id_column", id_column,
                      "a long panel has one target; channels of one series are wide columns "
                      "(data.targets)")
        if data["time_column"] is None:
            _refuse("data.time_column", None,
                    "a long panel (data.id_column) needs the time column ordering each series")
    panel = id_column or (targets and data["columns"] == "series")
    if panel and data["fill"] == "interpolate":
        _conflict("data.fill", "interpolate", "data.id_column/targets", id_column or targets,
                  "a panel's windows share one buffer of rows; use data.fill=ffill")
    season = data["season"]  # its form checked by its schema; here, inside the window
    if any(p > data["in_len"] for p in (season if isinstance(season, list) else [season])):
        _refuse("data.season", season,
                f"a period in rows in [1, data.in_len={data['in_len']}], or a list of distinct "
                f"periods (e.g. [48, 336]: a seasonal naive each); 0 = no seasonal baseline")
    if (data["val_start"] is None) != (data["test_start"] is None):
        _refuse("data.val_start", data["val_start"],
                "give data.val_start and data.test_start together, or neither")
    if data["time_features"] and (data["time_column"] is None or panel):
        _conflict("data.time_features", "true", "data.time_column/columns",
                  [data["time_column"], data["columns"]], "calendar features are read from the "
                  "time column of one series (a wide file: data.columns=channels)")


@rule("trainer")
def scaled_units_need_scaled_data(cfg: dict) -> None:
    data = cfg["data"]
    if cfg["trainer"]["select_on"] == "mse_scaled" and (
            data["name"] != "csv" or data["scale"] == "none"):
        _conflict("trainer.select_on", "mse_scaled", "data.name/data.scale",
                  [data["name"], data.get("scale")],
                  "only CSV data scaled on its training rows (data.scale=standard or minmax) "
                  "has scaled units; select on mse")


# ---------------------------------------------------------------- intervals and the loss


def check_intervals(intervals: dict, data_name: str) -> None:
    """intervals' levels (valid quantiles holding every interval level asked for) and the
    adaptive method's needs; ConfigError in one line (evaluate's intervals= uses it too)."""
    if intervals["method"] == "none":
        return
    if intervals["method"] == "adaptive" and data_name != "csv":
        _conflict("intervals.method", "adaptive", "data.name", data_name,
                  "adaptive intervals learn from the test windows in time order; synthetic "
                  "series are independent draws: use intervals=split")
    levels = _quantile_rule("intervals.", check_quantiles, intervals["quantiles"])
    if not intervals["levels"]:
        _refuse("intervals.levels", intervals["levels"],
                "give at least one central interval level, e.g. [0.8, 0.95]")
    for level in intervals["levels"]:
        _quantile_rule("intervals.levels: ", interval_bounds, levels, level)
    if intervals["method"] == "adaptive":
        unpaired = [q for q in levels if not any(abs(q + p - 1.0) < 1e-9 for p in levels)]
        if unpaired:
            _refuse("intervals.quantiles", list(levels),
                    f"intervals.method=adaptive adapts central intervals: each level needs its "
                    f"mirror 1 - q ({unpaired[0]} has none)")


@rule("intervals")
def intervals_hold_their_levels(cfg: dict) -> None:
    check_intervals(cfg["intervals"], cfg["data"]["name"])


@rule("loss")
def quantiles_hold_the_median_and_the_intervals(cfg: dict) -> None:
    loss, intervals = cfg["loss"], cfg["intervals"]
    if loss["name"] != "quantile":
        return
    levels = _quantile_rule("loss.", check_quantiles, loss["quantiles"])
    if 0.5 not in levels:
        _refuse("loss.quantiles", list(levels), "include 0.5: the median is the point forecast")
    if intervals["method"] == "none":
        return
    for level in intervals["levels"]:
        _quantile_rule("loss.quantiles: ", interval_bounds, levels, level, then=(
            " (intervals.levels asks for it; add the levels to loss.quantiles or change "
            "intervals.levels)"))


def _quantile_rule(key: str, check: Callable, *args, then: str = ""):
    """check(*args) (probabilistic/quantiles.py); its refusal as one line, `key` before it."""
    try:
        return check(*args)
    except QuantileError as err:
        raise ConfigError(f"{key}{err}{then}") from None

"""The rules between options outside the model: each one a combination that every value allows
alone but the data or the loop would reject together, refused in one line naming both keys. A
single option's type, allowed values and range are its own (schema.py), checked before these;
what the model cannot be is refused by the component that knows, when check.py builds it.
`cfg` is a resolved, current config as plain dicts."""

from __future__ import annotations

from collections.abc import Callable

from ..data import data_source
from ..options import conflict, refuse
from ..probabilistic.quantiles import check_quantiles, interval_bounds, quantile_rule

# group -> its rules, run once every group's own options are checked (check.py), group by
# group in check.ORDER and each group's in the order written: a rule may read any group, but
# reports on the first key it names.
RULES: dict[str, list[Callable[[dict], None]]] = {}


def rule(group: str) -> Callable:
    def register(check: Callable[[dict], None]) -> Callable[[dict], None]:
        RULES.setdefault(group, []).append(check)
        return check

    return register


# ---------------------------------------------------------------- data and the loop


@rule("data")
def the_sources_own(cfg: dict) -> None:
    """The rules between a data source's keys are its own (DataSource.check)."""
    data_source(cfg["data"]).check(cfg)


@rule("trainer")
def scaled_units_need_scaled_data(cfg: dict) -> None:
    data = cfg["data"]
    if cfg["trainer"]["select_on"] == "mse_scaled" and not data_source(data).scaled_units():
        raise conflict("trainer.select_on", "mse_scaled", "data.name/data.scale",
                       [data["name"], data.get("scale")],
                       "only data scaled on its training rows (CSV data with data.scale="
                       "standard or minmax) has scaled units; select on mse")


# ---------------------------------------------------------------- intervals


def check_intervals(intervals: dict, data: dict) -> None:
    """intervals' levels (valid quantiles holding every interval level asked for) and the
    adaptive method's needs; ConfigError in one line (evaluate's intervals= uses it too).
    `data`: the run's data node."""
    if intervals["method"] == "none":
        return
    if intervals["method"] == "adaptive" and not data_source(data).ordered_in_time:
        raise conflict("intervals.method", "adaptive", "data.name", data["name"],
                       "adaptive intervals learn from the test windows in time order; these "
                       "test windows are independent draws: use intervals=split")
    levels = quantile_rule("intervals.", check_quantiles, intervals["quantiles"])
    if not intervals["levels"]:
        raise refuse("intervals.levels", intervals["levels"],
                     "give at least one central interval level, e.g. [0.8, 0.95]")
    for level in intervals["levels"]:
        quantile_rule("intervals.levels: ", interval_bounds, levels, level)
    if intervals["method"] == "adaptive":
        unpaired = [q for q in levels if not any(abs(q + p - 1.0) < 1e-9 for p in levels)]
        if unpaired:
            raise refuse("intervals.quantiles", list(levels),
                         f"intervals.method=adaptive adapts central intervals: each level needs "
                         f"its mirror 1 - q ({unpaired[0]} has none)")


@rule("intervals")
def intervals_hold_their_levels(cfg: dict) -> None:
    check_intervals(cfg["intervals"], cfg["data"])

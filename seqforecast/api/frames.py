"""DataFrames in and out of the CSV path: a long frame (neuralforecast's `unique_id, ds, y`)
or a wide one (a time column and a column a series) written as the CSV a run reads, and a
forecast CSV (`seqforecast.predict`'s) read back as a long frame in neuralforecast's column
conventions; a static_df joined onto its frame. pandas is imported by the caller (the `frames`
extra)."""

from __future__ import annotations

import re
from pathlib import Path

# predict's bound and quantile columns: <target>_lo80, <target>_hi80, <target>_q2.5
_BOUND = re.compile(r"^(?P<target>.+)_(?P<side>lo|hi|q)(?P<level>\d+(?:\.\d+)?)$")


def check_frame(df, id_col: str | None, time_col: str, columns: list[str]) -> None:
    """ValueError naming the column: one missing, a time stamp unsorted or repeated within a
    series, a value that is not a number."""
    check_columns(df, [*([id_col] if id_col else []), time_col], columns)
    column = df[time_col].reset_index(drop=True)  # each row its own label, for the moments
    moments = _moments(column)
    groups = column.groupby(df[id_col].to_numpy(), sort=False) if id_col else [(None, column)]
    for series, texts in groups:
        where = f" in series {series!r}" if id_col else ""
        times = texts if moments is None else moments.loc[texts.index]
        if times.duplicated().any():
            first = texts[times.duplicated().to_numpy()].iloc[0]
            raise ValueError(f"column {time_col!r}: time stamp {first} repeats{where}; give "
                             f"each step once")
        if moments is not None and not times.is_monotonic_increasing:
            raise ValueError(f"column {time_col!r}: time stamps are not sorted{where}; sort "
                             f"the frame by {time_col!r} first")


def _moments(times):
    """A time column as the run orders it: text read by the CSV reader's own parser, the whole
    column at once (the EPF markets' `2013/1/10 0:00` after `2013/1/9 23:00`, which text order
    puts first; a day-first series decides the order of one whose days fit both); numbers and
    datetimes as they are. None for text that parser does not read in one order (not times,
    two forms, an ambiguous day and month): the run says why, and its order is left to it."""
    import pandas as pd

    if not (pd.api.types.is_object_dtype(times) or pd.api.types.is_string_dtype(times)):
        return times
    from ..data.dates import parse_times
    from ..data.errors import DataError

    try:
        return pd.Series(parse_times([str(t) for t in times], "the frame", str(times.name)),
                         index=times.index)
    except DataError:
        return None


def check_columns(df, keys: list[str], numbers: list[str]) -> None:
    """ValueError naming the column: one of `keys` or `numbers` missing, a value of `numbers`
    that is not a number."""
    import pandas as pd

    for name in [*keys, *numbers]:
        if name not in df.columns:
            raise ValueError(f"column {name!r} is not in the frame (its columns: "
                             f"{', '.join(map(str, df.columns))})")
    for name in numbers:
        if not pd.api.types.is_numeric_dtype(df[name]):
            raise ValueError(f"column {name!r} holds values that are not numbers "
                             f"(dtype {df[name].dtype}); give numbers, NaN where missing")


def write_csv(df, path: Path, id_col: str | None, time_col: str, columns: list[str]) -> Path:
    """The frame's id (long frames), time and value columns as the CSV a run reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df[[*([id_col] if id_col else []), time_col, *columns]].to_csv(path, index=False)
    return path


def forecast_frame(path: Path, alias: str, id_col: str | None, time_col: str,
                   datetimes: bool) -> object:
    """A forecast CSV as a long frame: `unique_id` (the series' id, or a wide run's column),
    `ds`, the point forecast under `alias`, each band as `<alias>-lo-<level>` and
    `<alias>-hi-<level>` (neuralforecast's names) and the model's own quantiles as
    `<alias>-q-<level>`; `ds` as datetimes where `datetimes` (as the frame's were)."""
    import pandas as pd

    raw = pd.read_csv(path, dtype={id_col: str} if id_col else None)
    values = [c for c in raw.columns if c not in (id_col, time_col)]
    targets = [c for c in values if c not in _bounds_of(values)]
    parts = []
    # a panel run writes id, time, its target and its bounds; a wide run time, then each
    # target and its bounds: one long block per target column, the wide run's named by it
    for target in targets:
        own = [target, *(c for c in values if _target_of(c) == target)]
        part = raw[[*([id_col] if id_col else []), time_col, *own]].rename(
            columns={time_col: "ds", **{c: _renamed(c, alias, target) for c in own}})
        if id_col:
            part = part.rename(columns={id_col: "unique_id"})
        else:
            part.insert(0, "unique_id", target)
        parts.append(part)
    long = pd.concat(parts, ignore_index=True)
    if datetimes:
        long["ds"] = pd.to_datetime(long["ds"])
    return long.reset_index(drop=True)


def _target_of(column: str) -> str | None:
    found = _BOUND.match(column)
    return found["target"] if found else None


def _bounds_of(columns: list[str]) -> set[str]:
    """The columns that are another column's bound or quantile."""
    return {c for c in columns if _target_of(c) in columns}


def _renamed(column: str, alias: str, target: str) -> str:
    """`target` -> alias; its bound or quantile <target>_lo80 -> <alias>-lo-80."""
    if column == target:
        return alias
    found = _BOUND.match(column)
    return f"{alias}-{found['side']}-{found['level']}"


def with_static(df, static_df, stat_exog_list: list[str] | None, id_col: str | None):
    """(df with static_df's columns joined on id_col, the static columns' names): static_df
    one row per series (neuralforecast's); without it, stat_exog_list names df's own."""
    if static_df is None:
        return df, list(stat_exog_list or [])
    if id_col is None:
        raise ValueError("static_df gives each series' static covariates; a wide frame's "
                         "series are columns, which have none (give a long frame)")
    static = list(stat_exog_list or [c for c in static_df.columns if c != id_col])
    check_columns(static_df, [id_col], static)
    repeated = static_df[id_col][static_df[id_col].duplicated()]
    if len(repeated):
        raise ValueError(f"static_df: series {repeated.iloc[0]!r} has two rows; give each "
                         f"series one")
    missing = sorted(set(df[id_col]) - set(static_df[id_col]), key=str)
    if missing:
        raise ValueError(f"static_df: series {missing[0]!r} has no row; give each series one")
    return df.drop(columns=[c for c in static if c in df.columns]).merge(
        static_df[[id_col, *static]], on=id_col, how="left", sort=False), static

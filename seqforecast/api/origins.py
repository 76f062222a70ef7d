"""Rolling forecast origins over a DataFrame (Forecaster.cross_validation and evaluate): where
each series' origins lie, the frame's truth as a long frame, and the scores of a forecast beside
the last value."""

from __future__ import annotations


class Origins:
    """A frame's rolling forecast origins: per series, `n_windows` rows `step` apart (default
    out_len), the last out_len rows before the series' end; ValueError in one line where a
    series is too short or the counts are not positive."""

    def __init__(self, df, n_windows: int, step: int | None, out_len: int,
                 id_col: str | None, time_col: str):
        step = out_len if step is None else step
        if n_windows < 1 or step < 1:
            raise ValueError(f"n_windows={n_windows} and step={step}: give at least one "
                             f"window, a step of at least one row")
        if id_col is not None and id_col not in df.columns:
            id_col = None  # a wide frame: one block of rows, every column a series
        self.df, self.n_windows, self.out_len = df, n_windows, out_len
        self.id_col, self.time_col = id_col, time_col
        self.groups = list(df.groupby(id_col, sort=False)) if id_col else [(None, df)]
        self.rows = {}  # series -> the row (counted in the series) of each origin
        for series, rows in self.groups:
            last = len(rows) - out_len
            first = last - step * (n_windows - 1)
            if first < 1:
                where = f"series {series!r}" if id_col else "the frame"
                raise ValueError(f"{where} has {len(rows)} rows, too few for {n_windows} "
                                 f"origins {step} apart and out_len={out_len} steps after "
                                 f"the last")
            self.rows[series] = [first + step * i for i in range(n_windows)]

    def before(self, i: int, ahead: bool = False):
        """Each series' rows before its i-th origin (ahead: the out_len rows from it)."""
        import pandas as pd

        parts = []
        for series, rows in self.groups:
            o = self.rows[series][i]
            parts.append(rows.iloc[o : o + self.out_len] if ahead else rows.iloc[:o])
        return pd.concat(parts)


def scores(forecast, origins: Origins, targets: list[str]):
    """MSE and MAE of the forecast and of the last value (each origin's history's last
    value, every step), per series and over every window (`all`)."""
    import pandas as pd

    alias = forecast.columns[4]  # the forecast: after unique_id, ds, cutoff and y
    last = long_truth(origins.df, origins.id_col, origins.time_col, targets).rename(
        columns={"ds": "cutoff", "y": "last_value"})
    scored = forecast.merge(last, on=["unique_id", "cutoff"], how="left")
    rows = []
    for series, part in [*scored.groupby("unique_id", sort=False), ("all", scored)]:
        for metric, error in (("mse", lambda e: (e**2).mean()), ("mae", lambda e: e.abs().mean())):
            rows.append({"unique_id": series, "metric": metric,
                         alias: float(error(part[alias] - part["y"])),
                         "last_value": float(error(part["last_value"] - part["y"]))})
    return pd.DataFrame(rows)


def long_truth(df, id_col: str | None, time_col: str, targets: list[str]):
    """The frame's target values as a long frame: unique_id, ds, y (a wide frame's series
    named by their columns, as predict names them)."""
    import pandas as pd

    if id_col:  # the ids as predict's frame holds them (read from a CSV: text)
        return df[[id_col, time_col, targets[0]]].set_axis(["unique_id", "ds", "y"], axis=1) \
            .astype({"unique_id": str})
    return pd.concat([df[[time_col, c]].set_axis(["ds", "y"], axis=1).assign(unique_id=c)
                      for c in targets], ignore_index=True)[["unique_id", "ds", "y"]]

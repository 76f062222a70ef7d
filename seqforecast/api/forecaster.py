"""Forecast from Python on DataFrames, over the same run as the command line.

    from seqforecast import Forecaster
    fc = Forecaster("experiment=itransformer", in_len=96, out_len=24, epochs=5)
    fc.fit(df)                      # long: unique_id, ds, y; or wide: ds and a column a series
    forecast = fc.predict()         # unique_id, ds, <alias>[, <alias>-lo-80, <alias>-hi-80]
    fc.fit(df, futr_exog_list=["load"]).predict(futr_df=next_day)  # known-future covariates
    cv = fc.cross_validation(df, n_windows=3)   # rolling origins: unique_id, ds, cutoff, y, ...
    forecasts, scores = fc.evaluate(held_out)   # a held-out frame, beside the last value
    fc.metrics["test"]["model"]     # what metrics.json holds
    Forecaster.load("outputs/2026-12-06/12-00-00").predict(recent)   # a CLI run too

`fit` writes the frame into the run dir as the CSV `data=csv` reads (`input.csv`) and trains
it with `python -m seqforecast.train` in a child process, with the overrides given here: the
run dir, metrics, checkpoints and TensorBoard events are the command line's because the run is
the command line's (the same numbers on the same data and seed). A child process because a
run owns its process: Hydra's logging and working state, the signal handlers that checkpoint
on SIGINT/SIGTERM, the torch thread count. `predict` runs `seqforecast.predict`'s forecast in
this process on the run's checkpoint.

Bad input is a ValueError naming what is wrong: a frame's missing column, unsorted or repeated
time stamps, values that are not numbers; a config value or CSV the run refuses (the run's
own one line, exit 2).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from ..config.rundir import completed_record
from .frames import check_frame, forecast_frame, with_static, write_csv
from .origins import Origins, long_truth, scores

INPUT = "input.csv"  # the frame fit trained on, in the run dir
FRAME = "frame.json"  # how fit read the frame: its columns, for predict and load


def train_command(args: list[str]) -> subprocess.CompletedProcess:
    """`python -m seqforecast.train <args>` in a child process (why a child: the module's
    docstring), its streams captured: the exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "seqforecast.train", *args],
                          capture_output=True, text=True)


class Forecaster:
    """A run made from a DataFrame: the overrides of `python -m seqforecast.train` as strings
    (`"attention=diff"`) or keyword arguments (`in_len=96`, one config key each; a list is
    written as Hydra's `[a,b]`). `run_dir`: where the run goes (default: outputs/<date>/<time>
    under the working directory, as the command line's). `alias`: the forecast's column
    (default: the run's model name)."""

    def __init__(self, *overrides: str, run_dir: str | Path | None = None,
                 alias: str | None = None, **settings):
        self.overrides = [*overrides, *(f"{key}={_hydra_value(v)}" for key, v in settings.items())]
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.alias = alias
        self.frame: dict | None = None

    # ------------------------------------------------------------------ training
    def fit(self, df, id_col: str | None = "unique_id", time_col: str = "ds",
            target_col: str | list[str] = "y", hist_exog_list: list[str] | None = None,
            futr_exog_list: list[str] | None = None, static_df=None,
            stat_exog_list: list[str] | None = None) -> Forecaster:
        """Train on `df`: long (`id_col`, `time_col`, the target, `hist_exog_list`: past
        covariates, the model's inputs beside the target; `futr_exog_list`: covariates known
        in advance, whose values over the forecast steps `predict` takes from `futr_df`;
        `static_df`: one row per series, `id_col` and its static covariates, or
        `stat_exog_list` naming columns of `df` that hold one value per series) or, where the
        frame has no `id_col`, wide (`time_col` and the target columns: `target_col` a list, or
        every other column). The last rows are the validation and test splits, as data=csv
        makes them. Returns self."""
        if id_col is not None and id_col not in df.columns:
            id_col = None  # a wide frame
        if id_col is None and target_col == "y" and "y" not in df.columns:
            target_col = [c for c in df.columns if c != time_col and c not in
                          [*(hist_exog_list or []), *(futr_exog_list or [])]]
        targets = [target_col] if isinstance(target_col, str) else list(target_col)
        features, futr = list(hist_exog_list or []), list(futr_exog_list or [])
        df, static = with_static(df, static_df, stat_exog_list, id_col)
        if id_col is not None and len(targets) != 1:
            raise ValueError(f"a long frame forecasts one target column; got {targets}")
        check_frame(df, id_col, time_col, [*targets, *features, *futr, *static])
        run_dir = self.run_dir or _new_run_dir()
        if completed_record(run_dir) is not None:  # its input.csv is that run's: kept
            raise ValueError(f"{run_dir} holds a completed run; give another run_dir, or "
                             f"Forecaster.load it")
        path = write_csv(df, run_dir / INPUT, id_col, time_col,
                         [*targets, *features, *futr, *static])
        data = ["data=csv", f"data.path={_quoted(str(path.resolve()))}",
                f"data.time_column={_quoted(time_col)}"]
        if id_col is not None:
            data += [f"data.id_column={_quoted(id_col)}", f"data.target={_quoted(targets[0])}"]
        else:
            data += [f"data.targets={_hydra_value(targets)}"]
        if features:
            data += [f"data.features={_hydra_value(features)}"]
        if futr:
            data += [f"data.futr={_hydra_value(futr)}"]
        if static:
            data += [f"data.static={_hydra_value(static)}"]
        self.frame = {"id_col": id_col, "time_col": time_col, "targets": targets,
                      "features": features, "futr": futr, "static": static,
                      "datetime": _is_datetime(df[time_col])}
        (run_dir / FRAME).write_text(json.dumps(self.frame, indent=1) + "\n")
        done = train_command([*data, *self.overrides,
                              f"hydra.run.dir={_quoted(str(run_dir.resolve()))}"])
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            error = ValueError if done.returncode == 2 else RuntimeError
            raise error(f"training failed (exit {done.returncode}): {lines[-1]} "
                        f"(the run's log: {run_dir / 'train.log'})")
        self.run_dir = run_dir
        return self

    def cross_validation(self, df, n_windows: int = 1, step: int | None = None,
                         id_col: str | None = "unique_id", time_col: str = "ds",
                         target_col: str | list[str] = "y", **covariates):
        """Rolling origins, as neuralforecast's cross_validation (refit=False): `n_windows`
        forecast origins per series, `step` rows apart (default: out_len), the last one
        out_len rows before the series' end. Trains once, with `fit`, on each series' rows
        before its first origin, then forecasts out_len steps from every origin with the
        history up to it (known-future covariates from `df`'s own rows after it). Returns a
        long frame: `unique_id`, `ds`, `cutoff` (the history's last time), `y` (the truth),
        the forecast and its bands as `predict` names them. `covariates`: fit's
        hist_exog_list, futr_exog_list, static_df, stat_exog_list."""
        origins = Origins(df, n_windows, step, _composed_out_len(self.overrides), id_col,
                          time_col)
        self.fit(origins.before(0), id_col=origins.id_col or "unique_id", time_col=time_col,
                 target_col=target_col, **covariates)
        return self._forecast_origins(origins, covariates)

    def evaluate(self, df, n_windows: int = 1, step: int | None = None, **covariates):
        """The trained run on a held-out frame, nothing retrained: its rolling origins as
        `cross_validation` makes them (the last `n_windows`, `step` rows apart, each series'
        history up to each), scored beside the last value (every origin's forecast its
        history's last value). Returns (the forecasts as cross_validation returns them, a
        frame of MSE and MAE per series and over all: `unique_id` (`all` for every window),
        `metric`, the model's alias, `last_value`). `covariates`: static_df, futr_exog_list
        (the run's own known columns, taken from `df`)."""
        frame = self._trained_frame()
        origins = Origins(df, n_windows, step, self._run_out_len(), frame["id_col"],
                          frame["time_col"])
        covariates.setdefault("futr_exog_list", frame.get("futr") or [])
        forecast = self._forecast_origins(origins, covariates)
        return forecast, scores(forecast, origins, frame["targets"])

    def _forecast_origins(self, origins: Origins, covariates: dict):
        """Every origin's forecast with the history up to it, beside the truth: unique_id,
        ds, cutoff, y, the forecast and its bands."""
        import pandas as pd

        futr = list(covariates.get("futr_exog_list") or [])
        id_col, time_col = origins.id_col, origins.time_col
        parts = []
        for i in range(origins.n_windows):
            history = origins.before(i)
            futr_df = (origins.before(i, ahead=True)[[*([id_col] if id_col else []), time_col,
                                                      *futr]] if futr else None)
            forecast = self.predict(history, futr_df=futr_df,
                                    static_df=covariates.get("static_df"))
            cutoffs = (history.groupby(id_col)[time_col].max() if id_col else
                       pd.Series(history[time_col].max(), index=self.frame["targets"]))
            cutoffs.index = cutoffs.index.astype(str)  # predict's ids, as the CSV reads them
            forecast.insert(2, "cutoff", forecast["unique_id"].map(cutoffs))
            parts.append(forecast)
        result = pd.concat(parts, ignore_index=True).merge(
            long_truth(origins.df, id_col, time_col, self.frame["targets"]),
            on=["unique_id", "ds"], how="left")
        columns = ["unique_id", "ds", "cutoff", "y"]
        return result[[*columns, *(c for c in result.columns if c not in columns)]]

    # ------------------------------------------------------------------ a trained run
    @classmethod
    def load(cls, run_dir: str | Path, alias: str | None = None) -> Forecaster:
        """A trained run: one `fit` made, or a CLI run trained with data=csv."""
        run_dir = Path(run_dir)
        if not (run_dir / "metrics.json").is_file():
            raise ValueError(f"{run_dir}: not a completed run (no metrics.json)")
        forecaster = cls(run_dir=run_dir, alias=alias)
        frame = run_dir / FRAME
        forecaster.frame = json.loads(frame.read_text()) if frame.is_file() else None
        return forecaster

    def save(self, path: str | Path) -> Path:
        """Copy the run dir to `path` (what `load` reads back)."""
        path = Path(path)
        shutil.copytree(self._trained(), path)
        return path

    @property
    def metrics(self) -> dict:
        """The run's metrics.json: validation and test errors beside its baselines."""
        return json.loads((self._trained() / "metrics.json").read_text())

    def predict(self, df=None, futr_df=None, static_df=None, checkpoint: str = "best"):
        """The next out_len steps after each series' last row of `df` (default: the frame fit
        trained on), as a long frame: `unique_id`, `ds`, the forecast under the alias, and the
        run's bands (`<alias>-lo-80`, `<alias>-hi-80`) and own quantiles where it has them.
        `futr_df`: a run with known-future covariates needs their values over those steps
        (the id and time columns and those covariates, the out_len steps after each series'
        last row; neuralforecast's futr_df). `static_df`: the static covariates of `df`'s
        series, where `df` does not hold them."""
        import pandas  # noqa: F401  (the frames extra: a clear ImportError before any work)

        from ..predict import forecast_csv, forecast_panel
        from ..runs.loading import load_run

        run_dir = self._trained()
        run = load_run(run_dir, checkpoint, with_data=False)
        state = run.checkpoint.get("data_state") or {}
        panel = state.get("kind") == "panel"
        id_col, time_col = state.get("id_column"), state.get("time_column")
        if time_col is None:
            raise ValueError(f"{run_dir} was trained without a time column; predict from a "
                             f"frame needs one")
        futr = state.get("futr") or []
        if futr and futr_df is None:
            raise ValueError(f"this run reads known-future covariates ({', '.join(futr)}): give "
                             f"futr_df with their values over the next "
                             f"{run.config['data']['out_len']} steps")
        if futr_df is not None and not futr:
            raise ValueError("futr_df gives known-future covariates; this run was trained "
                             "without them (fit's futr_exog_list)")
        with tempfile.TemporaryDirectory(prefix="seqforecast-predict-") as scratch:
            future = None
            if futr:
                check_frame(futr_df, id_col, time_col, futr)
                empty = [c for c in futr if futr_df[c].isna().any()]
                if empty:
                    raise ValueError(f"futr_df: column {empty[0]!r} has an empty value; give "
                                     f"every known value over the forecast steps")
                future = write_csv(futr_df, Path(scratch) / "future.csv", id_col, time_col, futr)
            source = run_dir / INPUT
            if static_df is not None and df is None:
                raise ValueError("static_df goes with df: the run's own frame holds its "
                                 "series' static covariates")
            if df is not None:
                df, _ = with_static(df, static_df, state.get("static") or None, id_col)
                # a wide panel's series are its columns; else the run's columns, by series
                columns = list(state["ids"] if panel and id_col is None else state["columns"])
                check_frame(df, id_col, time_col, columns)
                source = write_csv(df, Path(scratch) / INPUT, id_col, time_col, columns)
            elif not source.is_file():
                raise ValueError(f"{run_dir} holds no frame of its own ({INPUT}): give df")
            out = Path(scratch) / "forecast.csv"
            if panel:  # long: id (the run's id column, or "id" for a wide file), time, value
                forecast_panel(run, source, out, None, future)
            else:  # wide: time, each target
                forecast_csv(run, source, out, future)
            alias = self.alias or run.config["model"]["name"]
            datetimes = _is_datetime(df[time_col]) if df is not None else \
                bool(self.frame and self.frame["datetime"])
            return forecast_frame(out, alias, (id_col or "id") if panel else None, time_col,
                                  datetimes)

    def _trained_frame(self) -> dict:
        """How the run read its frame (frame.json): a fit's, or a CLI run's columns."""
        self._trained()
        if self.frame is None:
            raise ValueError(f"{self.run_dir} was trained from a CSV, not a frame; evaluate "
                             f"it with python -m seqforecast.evaluate")
        return self.frame

    def _run_out_len(self) -> int:
        from ..config.saved import saved_config

        return int(saved_config(self._trained()).data.out_len)

    def _trained(self) -> Path:
        if self.run_dir is None or not (self.run_dir / "metrics.json").is_file():
            raise ValueError("this Forecaster has not been fitted: call fit(df) or "
                             "Forecaster.load(run_dir)")
        return self.run_dir


def _composed_out_len(overrides: list[str]) -> int:
    """The forecast length the run will have: its overrides composed as data=csv composes
    them (no file read)."""
    from ..config import compose_config

    cfg = compose_config(["data=csv", "data.path=unread.csv", "data.target=y", *overrides])
    return int(cfg.data.out_len)


def _new_run_dir() -> Path:
    """outputs/<date>/<time>, as the command line names a run, one not taken."""
    base = Path("outputs") / datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
    path, n = base, 1
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    return path


def _is_datetime(column) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_datetime64_any_dtype(column))


def _quoted(text: str) -> str:
    """A string as one Hydra override value, whatever characters it holds: as it is where
    Hydra reads it plainly (a group's option, a name), else quoted."""
    if re.fullmatch(r"[A-Za-z0-9_./-]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hydra_value(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return str(value)

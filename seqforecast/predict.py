"""python -m seqforecast.predict run_dir=<run> input=recent.csv output=forecast.csv
                               [future=known.csv] [checkpoint=best|last] [device=...] [ids=a,b]

Forecasts the next out_len steps after a CSV's last rows with a run trained on CSV data: the
run's config and checkpoint (loaded with weights_only=True), the last in_len rows of the
input (the run's columns, its fill policy, its training scaler), the forecast written in the
data's own units, with timestamps continuing the input's when it has a time column, and
beside each target the bounds of the run's conformal bands (<target>_lo80, <target>_hi80, ...:
bands.json, the kept model's validation errors per horizon step; for an intervals=adaptive
run, the widths its adaptive intervals reached by the end of its test windows), and for a
probabilistic run (loss=quantile|gaussian|poisson) its own quantiles (<target>_q2.5, ...).
Forecast times are written as the input writes its own (2013/1/1 0:00 continues as 2013/1/2
0:00: the fields' order, separators, padding and clock). A run with known-future covariates
(data.futr) reads their values over the forecast steps from future= (a CSV with the time
column, the id column of a panel, and those columns: the out_len steps after the input's end).

A panel run (data.id_column or data.targets) reads the input in the run's format and writes,
in long format (id, time, value), the next out_len steps of every series (or those named in
ids=), each in its own scaling and continuing its own time grid; a series the run never saw
is scaled on its own rows (a note says so), one shorter than in_len is skipped (a note too).
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .cli_args import UsageError, parse_key_values, run_tool
from .data import DataError, read_series
from .data.covariates import known_columns, window_with_future
from .data.dates import TimeStyle
from .data.gaps import GapFiller
from .data.panel_data import read_panel
from .data.panel_read import read_long, show_time
from .data.scaling import Scaler, fit_scaler
from .data.time_features import time_features
from .data.windows import window_rows
from .probabilistic.bands import is_open
from .probabilistic.sums import level_name
from .runs.loading import LoadedRun, load_run
from .training.checkpoint import RunError
from .training.files import atomic_write_text
from .training.metrics import predict as model_forecast
from .training.metrics import predict_quantiles
from .training.report import csv_cell

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
DEFAULTS = {
    "run_dir": None, "input": None, "output": None, "checkpoint": "best", "device": None,
    "ids": None, "future": None,
}


def written(moments: list[datetime], style: TimeStyle | None, times: list[datetime]
            ) -> list[str]:
    """Forecast times as the input file writes its own (`style`: its fields' order,
    separators, padding and clock; `2013/1/1 0:00` continues as `2013/1/2 0:00`), or where no
    style was learned, ISO 8601 as coarse as the input `times` allow."""
    if style is not None:
        return [style.format(t) for t in moments]
    fmt = time_format(times)
    return [t.strftime(fmt) for t in moments]


def time_format(times: list[datetime]) -> str:
    """The coarsest format that writes every input time exactly."""
    if all(t.hour == t.minute == t.second == t.microsecond == 0 for t in times):
        return "%Y-%m-%d"
    if all(t.second == t.microsecond == 0 for t in times):
        return "%Y-%m-%d %H:%M"
    return "%Y-%m-%d %H:%M:%S"


def next_times(times: list[datetime], steps: int, source: Path) -> list[datetime]:
    """Continue the input's time grid: its most common step, from its last time."""
    if len(times) < 2:
        raise DataError(f"{source}: one row cannot tell the time step; give at least two")
    step, _ = Counter(b - a for a, b in zip(times, times[1:], strict=False)).most_common(1)[0]
    return [times[-1] + step * k for k in range(1, steps + 1)]


def forecast_csv(run: LoadedRun, input_path: Path, output_path: Path,
                 future_path: Path | None = None) -> tuple[int, str]:
    """Write the forecast; returns (rows written, first forecast time or ''). `future_path`:
    the known-future columns' values over the forecast steps (a data.futr run)."""
    state = run.checkpoint.get("data_state")
    data_cfg = run.config["data"]
    if not state:
        raise RunError(
            f"{run.run_dir} was trained on data={data_cfg['name']}; predict needs a run "
            f"trained with data=csv"
        )
    if input_path.resolve() == output_path.resolve():
        raise UsageError(f"output={output_path} would overwrite the input; choose another file")
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]
    columns, time_column = state["columns"], state["time_column"]
    series = read_series(input_path, columns, time_column, data_cfg["fill"],
                         data_cfg["duplicate_times"], data_cfg.get("date_order", "auto"),
                         data_cfg.get("missing_times", "keep"))  # runs before the key: kept
    if len(series.values) < in_len:
        raise DataError(
            f"{input_path}: {len(series.values)} rows; the model reads the last in_len={in_len}"
        )
    scaler = Scaler.from_state(state["scaler"])
    # Gaps are filled as for any window's inputs: from rows before the forecast start only.
    filler = GapFiller(scaler.transform(series.values), data_cfg["fill"], columns, str(input_path))
    rows = len(series.values)
    futr = state.get("futr") or []
    last = series.times[-in_len:] if series.times else None
    future = read_future(run, future_path, last, input_path)  # [out_len, F], or None
    inputs, _ = window_rows([rows], in_len, 0)  # [1, in_len] row indices
    window = filler.inputs(inputs, np.array([rows]))  # [1, in_len, C], model units
    if futr:  # the known-future columns led: their last in_len values of history then future
        history = filler.inputs(np.arange(rows)[None], np.array([rows]))[0]  # [rows, C]
        at = known_columns(columns, futr)
        full = np.full((len(future), len(columns)), np.nan)  # the known columns' scaling
        full[:, at] = future
        window = window_with_future(history, scaler.transform(full)[:, at], at, in_len)[None]
    if data_cfg["time_features"]:  # the calendar features of the window's own steps
        marks = time_features(series.times[-in_len:], data_cfg["time_freq"])  # [in_len, k]
        window = np.concatenate([window, marks[None]], axis=-1)  # [1, in_len, C + k]
    device = next(run.model.parameters()).device
    src = torch.from_numpy(window).float().to(device)  # [1, in_len, C (+ k)]
    n_targets = state.get("n_targets", 1)
    forecast = model_forecast(run.model, src, batch_size=1).double().cpu()  # [1, out_len, T]
    # The point, each band's lower and upper bound, the model's own quantiles: [1, out_len, T]
    # each, data units.
    parts = [forecast, *(bound for pair in band_bounds(run, forecast) for bound in pair),
             *own_quantiles(run, src)]
    values = torch.cat([scaler.inverse(p, slice(0, n_targets)) for p in parts], dim=-1)
    cells = [",".join(f"{v:.10g}" for v in step) for step in values[0].tolist()]  # one per step

    targets = ",".join(column_names(columns[:n_targets], band_levels(run), own_levels(run)))
    if time_column:
        times = written(next_times(series.times[-in_len:], out_len, input_path),
                        series.time_style, series.times)
        header = f"{time_column},{targets}"
        rows = [f"{t},{c}" for t, c in zip(times, cells, strict=True)]
        first = times[0]
    else:
        header, first = targets, ""
        rows = cells
    atomic_write_text(output_path, "\n".join([header, *rows]) + "\n")
    return len(rows), first


def forecast_panel(
    run: LoadedRun, input_path: Path, output_path: Path, only: list[str] | None,
    future_path: Path | None = None,
) -> tuple[int, int, list[str]]:
    """A panel run: the next out_len steps of every series of the input (or the ids in
    `only`), in long format: id, time, value. Returns (series, rows written, notes).
    `future_path`: the known-future columns' values over each series' forecast steps (a
    data.futr run)."""
    state, data_cfg = run.checkpoint["data_state"], run.config["data"]
    if input_path.resolve() == output_path.resolve():
        raise UsageError(f"output={output_path} would overwrite the input; choose another file")
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]
    panel = read_panel({**data_cfg, "path": str(input_path)})
    position = {series_id: s for s, series_id in enumerate(panel.ids)}
    chosen = panel.ids if only is None else only
    unknown = [i for i in chosen if i not in position]
    if unknown:
        raise DataError(
            f"{input_path}: ids= names series the file does not have: "
            f"{', '.join(map(repr, unknown[:5]))}"
        )
    saved = {series_id: k for k, series_id in enumerate(state["ids"])}
    futr = state.get("futr") or []
    at = known_columns(panel.columns, futr)
    n_static = len(state.get("static") or [])
    future = read_future_panel(run, future_path, panel, chosen, input_path)
    windows, kept, notes, refitted, short, known = [], [], [], [], [], []
    for series_id in chosen:
        s = position[series_id]
        rows = panel.values[panel.rows(s)]
        if len(rows) < in_len:
            short.append(series_id)
            continue
        if series_id in saved:
            shift, scale = state["shift"][saved[series_id]], state["scale"][saved[series_id]]
        else:  # a series the run never saw: scaled on its own rows
            fitted = fit_scaler(data_cfg["scale"], rows)
            shift, scale = fitted.shift.clone(), fitted.scale.clone()
            if n_static:  # its static values as the run scaled every series' (across them)
                shift[-n_static:] = state["shift"][0, -n_static:]
                scale[-n_static:] = state["scale"][0, -n_static:]
            refitted.append(series_id)
        known.append(saved.get(series_id, -1))  # the run's own index of it (bands)
        history = (rows - shift.numpy()) / scale.numpy()  # [rows, C], model units
        ahead = None
        if futr:  # [out_len, F], scaled as the series' known-future columns
            ahead = (future[series_id] - shift.numpy()[at]) / scale.numpy()[at]
        windows.append(window_with_future(history, ahead, at, in_len))
        kept.append((s, shift[: panel.n_targets], scale[: panel.n_targets]))
    if short:
        notes.append(
            f"{len(short)} series have fewer than in_len={in_len} rows and get no "
            f"forecast: {', '.join(short[:5])}{' ...' if len(short) > 5 else ''}"
        )
    if refitted:
        notes.append(
            f"{len(refitted)} series the run never saw were scaled on their own rows: "
            f"{', '.join(refitted[:5])}"
        )
        if band_levels(run) and run.bands.radius is not None:
            notes.append(f"{len(refitted)} series the run never saw get the split bands, "
                         f"not adaptive ones")
    if not kept:
        raise DataError(f"{input_path}: no series has in_len={in_len} rows to forecast from")
    device = next(run.model.parameters()).device
    src = torch.from_numpy(np.stack(windows)).float().to(device)  # [S, in_len, C]
    forecast = model_forecast(run.model, src, batch_size=256).double().cpu()  # [S, out_len, T]
    # The point, each band's lower and upper bound, the model's own quantiles: [S, out_len, T]
    # each, model units.
    series = torch.tensor(known)  # [S], -1 for a series the run never saw
    parts = [forecast, *(bound for pair in band_bounds(run, forecast, series) for bound in pair),
             *own_quantiles(run, src, batch_size=256)]
    id_column = state.get("id_column") or "id"
    time_column = state["time_column"]
    target = panel.columns[0]
    header = [id_column, *([time_column] if time_column else ["step"]),
              *column_names([target], band_levels(run), own_levels(run))]
    lines = [",".join(header)]
    for k, (s, shift, scale) in enumerate(kept):
        values = torch.stack([p[k, :, 0] * scale[0] + shift[0] for p in parts], -1).tolist()
        times = None if panel.times is None else panel.times[panel.rows(s)][-in_len:]
        steps = future_times(times, int(panel.lengths()[s]), out_len, input_path,
                             panel.time_style)
        series_id = csv_cell(panel.ids[s])
        lines += [f"{series_id},{t}," + ",".join(f"{v:.10g}" for v in row)
                  for t, row in zip(steps, values, strict=True)]
    atomic_write_text(output_path, "\n".join(lines) + "\n")
    return len(kept), len(lines) - 1, notes


def known_ahead(run: LoadedRun, future_path: Path | None) -> list[str]:
    """The run's known-future columns (data.futr), where future= gives them: future= for a run
    without them, or none for a run with them, refused in one line."""
    futr = run.checkpoint["data_state"].get("futr") or []
    if not futr and future_path is not None:
        raise UsageError("future= gives known-future covariates; this run was trained without "
                         "them (data.futr)")
    if futr and future_path is None:
        raise UsageError(f"this run reads known-future covariates ({', '.join(futr)}); give "
                         f"their values over the next out_len={run.config['data']['out_len']} "
                         f"steps with future=<csv>")
    return futr


def read_future(run: LoadedRun, future_path: Path | None, times: list[datetime] | None,
                input_path: Path) -> np.ndarray | None:
    """A data.futr run's known-future values over the out_len steps after the input's end
    (the `future` CSV's rows after the input's last time, or its first rows without a time
    column): [out_len, F], data units; None for a run without them (future= refused)."""
    state, data_cfg = run.checkpoint["data_state"], run.config["data"]
    futr, out_len = known_ahead(run, future_path), data_cfg["out_len"]
    if not futr:
        return None
    time_column = state["time_column"]
    with given_values(future_path):
        known = read_series(future_path, futr, time_column, "error", "error",
                            data_cfg.get("date_order", "auto"), "keep")
    values, first = known.values, 0
    if time_column:
        expected = next_times(times, out_len, input_path)
        first = int(np.searchsorted(np.array(known.times, dtype="datetime64[us]"),
                                    np.datetime64(expected[0])))
        given = known.times[first : first + out_len]
        if given != expected:
            missing = [t for t in expected if t not in set(known.times)]
            off = [t for t in given if t not in set(expected)]
            detail = (f"the first missing: {missing[0]}" if missing else
                      f"a time off the grid among them: {off[0]}")
            raise DataError(
                f"{future_path}: the known-future values must cover the {out_len} steps "
                f"after the input's last time, {expected[0]} to {expected[-1]}; it has "
                f"{out_len - len(missing)} of them ({detail})")
    if len(values) - first < out_len:
        raise DataError(f"{future_path}: {len(values) - first} rows; the run forecasts "
                        f"out_len={out_len} steps and reads each one's known-future values")
    return values[first : first + out_len]


@contextmanager
def given_values(future_path: Path):
    """A future file's empty cell, said as predict's own line (data.fill does not apply)."""
    try:
        yield
    except DataError as err:
        if "empty or NaN" not in str(err):
            raise
        where = str(err).split("first at ", 1)[-1].split(";")[0]
        raise DataError(f"{future_path}: an empty known-future value ({where}); give every "
                        f"known value over the forecast steps") from None


def read_future_panel(run: LoadedRun, future_path: Path | None, panel, chosen: list[str],
                      input_path: Path) -> dict[str, np.ndarray]:
    """A panel data.futr run's known-future values: per series id forecast, its out_len
    steps after its last input time, [out_len, F] in data units ({} without data.futr)."""
    state, data_cfg = run.checkpoint["data_state"], run.config["data"]
    futr, out_len = known_ahead(run, future_path), data_cfg["out_len"]
    if not futr:
        return {}
    with given_values(future_path):
        known = read_long(future_path, state["id_column"], state["time_column"], futr,
                          "error", data_cfg.get("date_order", "auto"), "keep")
    rows_of = {series_id: known.rows(s) for s, series_id in enumerate(known.ids)}
    position = {series_id: s for s, series_id in enumerate(panel.ids)}
    future = {}
    for series_id in chosen:
        s = position[series_id]
        if series_id not in rows_of:
            raise DataError(f"{future_path}: series {series_id!r} has no known-future rows; "
                            f"give the {out_len} steps after its last time")
        times = panel.times[panel.rows(s)]
        moments = known.times[rows_of[series_id]]
        after = moments[moments > times[-1]][:out_len]
        expected = np.array(next_times(times.tolist(), out_len, input_path),
                            dtype=moments.dtype)
        if len(after) < out_len or (after != expected).any():
            raise DataError(
                f"{future_path}: series {series_id!r} needs known-future values at the "
                f"{out_len} steps after its last time {show_time(times[-1])}; it has "
                f"{int(np.isin(after, expected).sum())} of them")
        first = rows_of[series_id].start + int(np.searchsorted(moments, after[0]))
        future[series_id] = known.values[first : first + out_len]
    return future


def band_levels(run: LoadedRun) -> list[float]:
    """The interval levels of the run's bands (bands.json) for this checkpoint, else none."""
    bands = run.bands
    return bands.levels if bands is not None and bands.checkpoint == run.checkpoint_name else []


def band_bounds(
    run: LoadedRun, forecast: Tensor, series: Tensor | None = None
) -> list[tuple[Tensor, Tensor]]:
    """(lower, upper) per band level around forecast [B, out_len, T] (model units) of the
    run's series `series` [B] (None: a single-series run; -1: a series it never saw)."""
    if not band_levels(run):
        return []
    return list(run.bands.ahead(forecast, series).values())


def own_levels(run: LoadedRun) -> tuple[float, ...]:
    """The quantile levels a probabilistic run forecasts itself (none for a point run): a
    quantile loss's, a distribution's at the run's interval quantiles."""
    output = getattr(run.model, "output", None)
    if output is None or not output.probabilistic:
        return ()
    return output.own_levels(run.config["intervals"]["quantiles"])


def own_quantiles(run: LoadedRun, src: Tensor, batch_size: int = 1) -> list[Tensor]:
    """A probabilistic run's own quantiles around src [B, in_len, C], a tensor [B, out_len, T]
    per level of `own_levels` (model units); [] for a point run."""
    levels = own_levels(run)
    if not levels:
        return []
    quantiles = predict_quantiles(run.model, src, batch_size, levels).double().cpu()
    return list(quantiles.unbind(-1))


def column_names(
    targets: list[str], levels: list[float], quantiles: tuple[float, ...] = ()
) -> list[str]:
    """Each target, then per band level every target's <target>_lo<c>, then every target's
    <target>_hi<c>: the bounds of the central c% conformal interval (band_bounds' order);
    then per own quantile level q every target's <target>_q<100q>."""
    names = list(targets)
    for level in levels:
        for side in ("lo", "hi"):
            names += [f"{target}_{side}{level_name(level)}" for target in targets]
    for q in quantiles:
        names += [f"{target}_q{level_name(q)}" for target in targets]
    return names


def future_times(times: np.ndarray | None, rows: int, steps: int, source: Path,
                 style: TimeStyle | None = None) -> list[str]:
    """The next `steps` times of a series' grid (its most common step, from its last time),
    written as the file writes its times (`style`); without a time column, the row numbers
    that follow."""
    if times is None:
        return [str(rows + k) for k in range(steps)]
    if times.dtype == np.int64:
        return [str(t) for t in next_times(times.tolist(), steps, source)]
    moments = times.astype("datetime64[us]").tolist()  # datetimes
    return written(next_times(moments, steps, source), style, moments)


def parse(argv: list[str]) -> dict[str, str]:
    """The command line's key=value arguments (run_dir, input and output required)."""
    return parse_key_values(argv, DEFAULTS, ["run_dir", "input", "output"], USAGE)


def predict_command(argv: list[str]) -> None:
    args = parse(argv)
    run = load_run(Path(args["run_dir"]), args["checkpoint"], args["device"], with_data=False)
    state = run.checkpoint.get("data_state") or {}
    if state.get("kind") == "panel":
        only = [i.strip() for i in args["ids"].split(",") if i.strip()] if args["ids"] else None
        future = Path(args["future"]) if args["future"] else None
        series, rows, notes = forecast_panel(run, Path(args["input"]), Path(args["output"]),
                                             only, future)
        for note in notes:
            print(f"note: {note}")
        steps = run.config["data"]["out_len"]
        print(f"wrote {args['output']}: {steps} steps of {series} series, {rows} rows "
              f"({args['checkpoint']} checkpoint)")
        say_bands(run)
        return
    if args["ids"]:
        raise UsageError("ids= picks series of a panel run; this run read one series")
    rows, first = forecast_csv(run, Path(args["input"]), Path(args["output"]),
                               Path(args["future"]) if args["future"] else None)
    since = f" from {first}" if first else ""
    print(f"wrote {args['output']}: {rows} steps{since} ({args['checkpoint']} checkpoint)")
    say_bands(run)


def say_bands(run: LoadedRun) -> None:
    """Which columns are which band, or why there are none; and the model's own quantiles."""
    own = own_levels(run)
    if own:
        print(f"quantiles: _q{level_name(own[0])} ... _q{level_name(own[-1])} the model's own "
              f"(loss={run.model.output.name}), not calibrated")
    levels = band_levels(run)
    if not levels:
        if run.bands is not None:
            print(f"note: no bands: the run's bands belong to its {run.bands.checkpoint} "
                  f"checkpoint")
        return
    pairs = ", ".join(f"_lo{level_name(c)}/_hi{level_name(c)} the central {level_name(c)}%"
                      for c in levels)
    if run.bands.radius is not None:
        print(f"bands: {pairs} adaptive conformal interval (ACI: calibrated on the run's "
              f"{run.bands.windows} validation windows, adapted through its "
              f"{run.bands.adapted_windows} test windows)")
    else:
        print(f"bands: {pairs} conformal interval (calibrated on the run's "
              f"{run.bands.windows} validation windows)")
    if is_open(run.bands):
        print("note: some bounds are inf: too few validation windows to bound that level")


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, predict_command)


if __name__ == "__main__":
    sys.exit(main())

"""python -m seqforecast.predict run_dir=<run> input=recent.csv output=forecast.csv
                               [checkpoint=best|last] [device=...]

Forecasts the next out_len steps after a CSV's last rows with a run trained on CSV data: the
run's config and checkpoint (loaded with weights_only=True), the last in_len rows of the
input (the run's columns, its fill policy, its training scaler), the forecast written in the
data's own units, with timestamps continuing the input's when it has a time column.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from .cli_args import UsageError, parse_key_values, run_tool
from .data import DataError, read_series
from .data.gaps import GapFiller
from .data.scaling import Scaler
from .data.windows import window_rows
from .training.files import atomic_write_text
from .training.metrics import predict as model_forecast
from .training.restore import LoadedRun, RunError, load_run

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:2])
DEFAULTS = {"run_dir": None, "input": None, "output": None, "checkpoint": "best", "device": None}


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


def forecast_csv(run: LoadedRun, input_path: Path, output_path: Path) -> tuple[int, str]:
    """Write the forecast; returns (rows written, first forecast time or '')."""
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
    series = read_series(input_path, columns, time_column, data_cfg["fill"])
    if len(series.values) < in_len:
        raise DataError(
            f"{input_path}: {len(series.values)} rows; the model reads the last in_len={in_len}"
        )
    scaler = Scaler.from_state(state["scaler"])
    # Gaps are filled as for any window's inputs: from rows before the forecast start only.
    filler = GapFiller(scaler.transform(series.values), data_cfg["fill"], columns, str(input_path))
    rows = len(series.values)
    inputs, _ = window_rows([rows], in_len, 0)  # [1, in_len] row indices
    window = filler.inputs(inputs, np.array([rows]))  # [1, in_len, C], model units
    device = next(run.model.parameters()).device
    src = torch.from_numpy(window).float().to(device)  # [1, in_len, C]
    forecast = model_forecast(run.model, src, batch_size=1)  # [1, out_len, 1]
    values = scaler.inverse(forecast.double().cpu(), slice(0, 1))[0, :, 0].tolist()

    target = columns[0]
    if time_column:
        times = next_times(series.times[-in_len:], out_len, input_path)
        fmt = time_format(series.times)
        header = f"{time_column},{target}"
        rows = [f"{t.strftime(fmt)},{v:.10g}" for t, v in zip(times, values, strict=True)]
        first = times[0].strftime(fmt)
    else:
        header, first = target, ""
        rows = [f"{v:.10g}" for v in values]
    atomic_write_text(output_path, "\n".join([header, *rows]) + "\n")
    return len(rows), first


def predict_command(argv: list[str]) -> None:
    args = parse_key_values(argv, DEFAULTS, ["run_dir", "input", "output"], USAGE)
    run = load_run(Path(args["run_dir"]), args["checkpoint"], args["device"], with_data=False)
    rows, first = forecast_csv(run, Path(args["input"]), Path(args["output"]))
    since = f" from {first}" if first else ""
    print(f"wrote {args['output']}: {rows} steps{since} ({args['checkpoint']} checkpoint)")


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, predict_command)


if __name__ == "__main__":
    sys.exit(main())

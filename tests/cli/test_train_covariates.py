"""Covariates end to end. Known-future ones: train with data.futr, predict with future=<csv>
(one series and a long panel); the forecast is the model's on the window training reads at that
place, it moves with the future values, and a missing or short future file is one line. Static
ones: a panel trained with data.static predicts each series, one it never saw too."""

import json

import numpy as np
import pytest
import torch

from seqforecast.runs.loading import load_run

from ..cli_helpers import run_cli
from ..data.test_covariates import IN, OUT, write_file

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

TRAIN = ["data=csv", "data.target=y", "data.time_column=time", "data.features=[temp]",
         "data.futr=[load]", f"in_len={IN}", f"out_len={OUT}", "model.label_len=4",
         "model.d_model=16", "model.n_heads=2", "epochs=1", "log.figures=false",
         "data.window_stride=2"]


def split_file(path, tmp_path, rows_kept, id_column=False):
    """The file's rows up to `rows_kept` per series (the input) and the known column's rows
    after them, OUT per series (the future)."""
    header, *lines = path.read_text().splitlines()
    by_series = {}
    for line in lines:
        key = line.split(",")[1] if id_column else ""
        by_series.setdefault(key, []).append(line)
    kept, ahead = [header], ["time,id,load" if id_column else "time,load"]
    for rows in by_series.values():
        kept += rows[:rows_kept]
        for line in rows[rows_kept : rows_kept + OUT]:
            cells = line.split(",")
            ahead.append(",".join([cells[0], *cells[1:2]] if id_column else [cells[0]])
                         + f",{cells[-1]}")
    (tmp_path / "input.csv").write_text("\n".join(kept) + "\n")
    (tmp_path / "future.csv").write_text("\n".join(ahead) + "\n")
    return tmp_path / "input.csv", tmp_path / "future.csv"


def predict(run_dir, tmp_path, *extra, check=True):
    output = tmp_path / "forecast.csv"
    proc = run_cli([f"run_dir={run_dir}", f"input={tmp_path / 'input.csv'}", f"output={output}",
                    *extra], tmp_path, module="seqforecast.predict", check=check)
    return proc, output


def test_one_series_forecast_reads_the_future_file(tmp_path):
    path = write_file(tmp_path / "f.csv")
    run_dir = tmp_path / "run"
    # no linear path: the recipe's least-squares start would be the kept model after an epoch,
    # and it reads the target alone
    run_cli([*TRAIN, f"data.path={path}", "model.linear_path=none", "model.linear_init=zero",
             f"hydra.run.dir={run_dir}"], tmp_path)
    assert "forecasts y; covariates: temp, load (known ahead: load)" in \
        (run_dir / "train.log").read_text()
    described = json.loads((run_dir / "metrics.json").read_text())["run"]["model"]
    assert described["covariates"] == ["temp", "load"] and described["known_ahead"] == ["load"]
    _, future = split_file(path, tmp_path, 160 - OUT)
    _, output = predict(run_dir, tmp_path, f"future={future}")
    rows = output.read_text().splitlines()
    assert rows[0].startswith("time,y,") and len(rows) == 1 + OUT
    forecast = np.array([float(r.split(",")[1]) for r in rows[1:]])
    # the model on the last window training reads (its horizon: the file's last OUT rows)
    run = load_run(run_dir, "best")
    src, _ = run.data.test.take(slice(len(run.data.test) - 1, None))
    assert int(run.data.test.starts[-1]) == 160 - OUT
    with torch.no_grad():
        own = run.data.scaler.inverse(run.model(src), slice(0, 1))[0, :, 0].numpy()
    np.testing.assert_allclose(forecast, own, rtol=1e-5, atol=1e-5)
    # other known values over the horizon: another forecast
    header, *rows = future.read_text().splitlines()
    moved = [f"{r.rsplit(',', 1)[0]},{float(r.rsplit(',', 1)[1]) + 50}" for r in rows]
    future.write_text("\n".join([header, *moved]) + "\n")
    _, output = predict(run_dir, tmp_path, f"future={future}")
    assert not np.allclose([float(r.split(",")[1]) for r in output.read_text().splitlines()[1:]],
                           forecast)


def test_a_panel_forecast_reads_each_series_future(tmp_path):
    path = write_file(tmp_path / "p.csv", rows=90, ids=3)
    run_dir = tmp_path / "run"
    run_cli([*TRAIN, f"data.path={path}", "data.id_column=id", f"hydra.run.dir={run_dir}"],
            tmp_path)
    _, future = split_file(path, tmp_path, 60, id_column=True)
    proc, output = predict(run_dir, tmp_path, f"future={future}")
    rows = output.read_text().splitlines()
    assert rows[0].startswith("id,time,y") and len(rows) == 1 + 3 * OUT, proc.stdout
    # a series' known rows missing: one line naming it
    future.write_text("\n".join(line for line in future.read_text().splitlines()
                                if ",s1," not in line) + "\n")
    proc, _ = predict(run_dir, tmp_path, f"future={future}", check=False)
    assert proc.returncode == 2 and "series 's1' has no known-future rows" in proc.stderr


@pytest.mark.parametrize("future, message", [
    (None, "give their values over the next out_len=4 steps with future=<csv>"),
    ("short", "must cover the 4 steps after the input's last time, 2024-01-07 06:00:00 to "
              "2024-01-07 09:00:00; it has 2 of them (the first missing: 2024-01-07 08:00:00)"),
    ("empty", "an empty known-future value (line 3, column 'load'); give every known value"),
])
def test_a_missing_or_short_future_is_one_line(tmp_path, future, message):
    path = write_file(tmp_path / "f.csv")
    run_dir = tmp_path / "run"
    run_cli([*TRAIN, f"data.path={path}", f"hydra.run.dir={run_dir}"], tmp_path)
    _, future_path = split_file(path, tmp_path, 150)
    lines = future_path.read_text().splitlines()
    if future == "short":
        future_path.write_text("\n".join(lines[:3]) + "\n")
    if future == "empty":
        lines[2] = lines[2].rsplit(",", 1)[0] + ","
        future_path.write_text("\n".join(lines) + "\n")
    extra = [] if future is None else [f"future={future_path}"]
    proc, output = predict(run_dir, tmp_path, *extra, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and message in lines[-1] and "Traceback" not in proc.stderr
    assert not output.exists()


def test_a_panel_with_static_covariates_predicts_every_series(tmp_path):
    from ..data.test_static import SIZES, write_panel

    path = write_panel(tmp_path / "p.csv")
    run_dir = tmp_path / "run"
    run_cli(["data=csv", f"data.path={path}", "data.id_column=id", "data.target=y",
             "data.time_column=time", "data.features=[promo]", "data.static=[size]",
             f"in_len={IN}", f"out_len={OUT}", "model.label_len=4", "model.d_model=16",
             "model.n_heads=2", "epochs=1", "log.figures=false", "model.linear_path=none",
             "model.linear_init=zero", f"hydra.run.dir={run_dir}"], tmp_path)
    assert "covariates: promo, size (static: size)" in (run_dir / "train.log").read_text()
    # a fifth store the run never saw, a copy of s0 with another size: its size reaches the
    # model, scaled as the run scaled every store's (its own rows alone would make it 0)
    lines = path.read_text().splitlines()
    forecasts = []
    for size in (SIZES[0], 12.0):
        new = [line.replace(",s0,", ",s9,").rsplit(",", 1)[0] + f",{size}"
               for line in lines if ",s0," in line]
        (tmp_path / "input.csv").write_text("\n".join([*lines, *new]) + "\n")
        proc, output = predict(run_dir, tmp_path)
        assert "1 series the run never saw were scaled on their own rows: s9" in proc.stdout
        rows = [r.split(",") for r in output.read_text().splitlines()[1:]]
        assert sorted({r[0] for r in rows}) == ["s0", "s1", "s2", "s3", "s9"]
        forecasts.append([float(r[2]) for r in rows if r[0] == "s9"])
    assert len(forecasts[0]) == OUT and not np.allclose(forecasts[0], forecasts[1])

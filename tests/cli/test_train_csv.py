"""Forecasting a user's CSV end to end: train, evaluate, predict, and every bad file."""
# ruff: noqa: E501  (the bad-file table keeps each expected message on its line)

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from seqforecast.data.windows import forecast_starts

from ..cli_helpers import REPO, TINY, run_cli, run_script

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

EXAMPLE = REPO / "data" / "example.csv"
SMALL = ["epochs=2", "in_len=24", "out_len=12", "model.label_len=12", "data.window_stride=4",
         "log.figures=false"]


def test_the_example_csv_is_what_the_script_writes(tmp_path):
    out = tmp_path / "example.csv"
    run_script("make_example_csv.py", "--out", str(out), cwd=tmp_path)
    assert out.read_bytes() == EXAMPLE.read_bytes()


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("csv")
    run_dir = base / "run"
    run_cli(
        ["experiment=csv_example", *SMALL, f"data.path={EXAMPLE}", f"hydra.run.dir={run_dir}"], base
    )
    return run_dir


def test_metrics_are_in_the_data_units_over_every_test_window(csv_run):
    metrics = json.loads((csv_run / "metrics.json").read_text())
    assert set(metrics["test"]) == {"model", "last_value", "drift", "nlinear", "seasonal_naive"}
    # The last-value baseline recomputed from the raw file: same windows, same units. Test
    # rows are the last 15% of 1440 (from round(0.7 * 1440) + round(0.15 * 1440) = 1224); the
    # windows forecast from row 1224 on, every 4 rows, their inputs reaching back.
    load = np.genfromtxt(EXAMPLE, delimiter=",", names=True, dtype=None, encoding=None)["load"]
    starts = list(range(1224, 1440 - 12 + 1, 4))
    assert forecast_starts(range(1224, 1440), 24, 12, 4) == starts
    errors = [load[s : s + 12] - load[s - 1] for s in starts]
    expected = float(np.mean(np.square(errors)))
    assert metrics["test"]["last_value"]["mse"] == pytest.approx(expected, rel=1e-5)
    assert metrics["test"]["model"]["mse"] > 0
    # metrics.json says which rows each split holds and how many windows were scored.
    assert metrics["splits"]["test"]["rows"] == [1224, 1440]
    assert metrics["splits"]["test"]["windows"] == len(starts)
    assert metrics["splits"]["test"]["stride"] == 4
    assert metrics["splits"]["val"]["rows"] == [1008, 1224]
    assert metrics["splits"]["test"]["times"] == ["2024-02-21 00:00:00", "2024-02-29 23:00:00"]
    assert "test_curve" not in metrics  # a CSV has no test curve
    log = (csv_run / "train.log").read_text()
    assert "test split: rows 1224-1439 (file lines 1226-1441" in log
    assert f"{len(starts)} windows every 4 row(s)" in log


def test_evaluate_reproduces_a_csv_run(csv_run, tmp_path):
    run_cli([f"run_dir={csv_run}"], tmp_path, module="seqforecast.evaluate")
    trained = json.loads((csv_run / "metrics.json").read_text())
    again = json.loads((csv_run / "evaluate" / "best" / "metrics.json").read_text())
    assert again["test"] == trained["test"] and again["val"] == trained["val"]
    assert again["splits"] == trained["splits"]
    # the bands scored another way, nothing retrained: the points unchanged, beside the run's
    out = run_cli([f"run_dir={csv_run}", "intervals=adaptive"], tmp_path,
                  module="seqforecast.evaluate").stdout
    assert "adaptive conformal intervals on the test windows" in out
    adaptive = json.loads((csv_run / "evaluate" / "best_adaptive" / "metrics.json").read_text())
    for name, row in adaptive["test"].items():
        assert row["mse"] == trained["test"][name]["mse"]
        assert 0.0 < row["coverage_80"] <= row["coverage_95"] <= 1.0
    assert adaptive["test"]["model"]["width_80"] != trained["test"]["model"]["width_80"]
    proc = run_cli([f"run_dir={csv_run}", "intervals=bootstrap"], tmp_path,
                   module="seqforecast.evaluate", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "intervals=bootstrap is not allowed: choose one of split, adaptive, none" in proc.stderr


@pytest.fixture
def own_csv_run(tmp_path):
    """A run on a copy of the example, which the test may then change."""
    path = tmp_path / "series.csv"
    path.write_text(EXAMPLE.read_text())
    run_dir = tmp_path / "run"
    run_cli(["experiment=csv_example", *SMALL, "epochs=1", f"data.path={path}",
             f"hydra.run.dir={run_dir}"], tmp_path)
    return path, run_dir


def test_evaluate_refuses_a_changed_file_unless_asked(own_csv_run, tmp_path):
    path, run_dir = own_csv_run
    trained = json.loads((run_dir / "metrics.json").read_text())
    lines = path.read_text().splitlines()
    last = datetime.fromisoformat(lines[-1].split(",")[0])
    appended = [f"{(last + timedelta(hours=h)):%Y-%m-%d %H:%M},{100 + h},5" for h in range(1, 41)]
    path.write_text("\n".join([*lines, *appended]) + "\n")
    out = run_dir / "evaluate" / "best" / "metrics.json"

    proc = run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"error: {path} changed since the run was trained (1480 rows instead of 1440)" in (
        proc.stderr
    )
    assert "allow_changed_data=true" in proc.stderr and not out.exists()

    proc = run_cli([f"run_dir={run_dir}", "allow_changed_data=true"], tmp_path,
                   module="seqforecast.evaluate")
    assert "evaluated as it is now, with the run's split starts and scaler" in proc.stdout
    again = json.loads(out.read_text())
    # The saved boundaries and scaler: train and val score exactly as before; the test split
    # keeps its start and runs through the appended rows.
    assert again["val"] == trained["val"]
    assert again["splits"]["test"]["rows"] == [1224, 1480]
    assert again["splits"]["test"]["windows"] == trained["splits"]["test"]["windows"] + 10

    edited = path.read_text().splitlines()
    edited[5] = edited[5].rsplit(",", 2)[0] + ",999,5"  # a training row (line 6)
    path.write_text("\n".join(edited[:1441]) + "\n")  # back to 1440 rows, one changed
    proc = run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate", check=False)
    assert proc.returncode == 2
    assert "(the train rows (lines 2-1009) changed)" in proc.stderr


def test_a_resumed_run_refuses_a_changed_file(own_csv_run, tmp_path):
    path, run_dir = own_csv_run
    text = path.read_text().splitlines()
    text[1000] = text[1000].rsplit(",", 2)[0] + ",1,1"
    path.write_text("\n".join(text) + "\n")
    proc = run_cli([f"resume={run_dir}"], tmp_path, check=False)
    assert proc.returncode == 2
    assert "changed since the run was trained (the train rows (lines 2-1009) changed)" in (
        proc.stderr
    )


def test_predict_writes_the_next_steps_with_timestamps_in_data_units(csv_run, tmp_path):
    lines = EXAMPLE.read_text().splitlines()
    recent = tmp_path / "recent.csv"
    recent.write_text("\n".join([lines[0], *lines[-50:]]) + "\n")
    output = tmp_path / "forecast.csv"
    out = run_cli(
        [f"run_dir={csv_run}", f"input={recent}", f"output={output}"], tmp_path,
        module="seqforecast.predict",
    ).stdout
    assert "12 steps from 2024-03-01 00:00" in out
    rows = output.read_text().splitlines()
    assert rows[0] == "time,load,load_lo80,load_hi80,load_lo95,load_hi95" and len(rows) == 1 + 12
    assert "bands: _lo80/_hi80 the central 80%, _lo95/_hi95 the central 95% conformal" in out
    last = datetime.fromisoformat(lines[-1].split(",")[0])
    times = [datetime.fromisoformat(r.split(",")[0]) for r in rows[1:]]
    assert times == [last + timedelta(hours=h) for h in range(1, 13)]
    values = np.array([float(r.split(",")[1]) for r in rows[1:]])
    # The bands: the run's conformal offsets (model units) around the point, mapped to the
    # data's units by the same affine map: nested, and each width the offsets' times one scale.
    table = np.array([[float(c) for c in r.split(",")[1:]] for r in rows[1:]])
    point, lo80, hi80, lo95, hi95 = table.T
    assert (lo95 <= lo80).all() and (lo80 <= hi80).all() and (hi80 <= hi95).all()
    bands = json.loads((csv_run / "bands.json").read_text())["bounds"]
    offsets = np.array(bands["80"]["upper"])[:, 0] - np.array(bands["80"]["lower"])[:, 0]
    scale = (hi80 - lo80) / offsets
    np.testing.assert_allclose(scale, scale[0], rtol=1e-6)
    np.testing.assert_allclose(hi80 - point, np.array(bands["80"]["upper"])[:, 0] * scale[0],
                               rtol=1e-6, atol=1e-6)
    # The bands belong to the kept (best) checkpoint: the last one gets points only, and a note.
    out = run_cli([f"run_dir={csv_run}", f"input={recent}", f"output={output}",
                   "checkpoint=last"], tmp_path, module="seqforecast.predict").stdout
    assert output.read_text().splitlines()[0] == "time,load"
    assert "note: no bands: the run's bands belong to its best checkpoint" in out
    # A damaged bands.json: one line, exit 2, and the forecast already written stays.
    saved = (csv_run / "bands.json").read_text()
    try:
        (csv_run / "bands.json").write_text(saved[: len(saved) // 2])
        proc = run_cli([f"run_dir={csv_run}", f"input={recent}", f"output={output}"], tmp_path,
                       module="seqforecast.predict", check=False)
    finally:
        (csv_run / "bands.json").write_text(saved)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "bands.json: not readable" in proc.stderr
    assert output.read_text().splitlines()[0] == "time,load"
    recent_load = np.array([float(line.split(",")[1]) for line in lines[-50:]])
    # Raw units: the load level, not standardised values around zero.
    assert recent_load.min() - 30 < values.min() and values.max() < recent_load.max() + 30
    assert values.mean() > 50


def test_predict_writes_its_times_as_the_input_writes_them(csv_run, tmp_path):
    """An export's `2024/2/28 2:00` (year first, slashes, no zero padding) continues as
    `2024/3/1 0:00`, not as ISO 8601's `2024-03-01 00:00`."""
    lines = EXAMPLE.read_text().splitlines()
    exported = []
    for line in lines[-50:]:
        moment, rest = line.split(",", 1)
        t = datetime.fromisoformat(moment)
        exported.append(f"{t.year}/{t.month}/{t.day} {t.hour}:{t.minute:02d},{rest}")
    recent = tmp_path / "recent.csv"
    recent.write_text("\n".join([lines[0], *exported]) + "\n")
    output = tmp_path / "forecast.csv"
    out = run_cli([f"run_dir={csv_run}", f"input={recent}", f"output={output}"], tmp_path,
                  module="seqforecast.predict").stdout
    assert "12 steps from 2024/3/1 0:00" in out
    times = [row.split(",")[0] for row in output.read_text().splitlines()[1:]]
    assert times == [f"2024/3/1 {h}:00" for h in range(12)]


def test_predict_refuses_short_or_wrong_input_and_synthetic_runs(csv_run, tmp_path):
    lines = EXAMPLE.read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join([lines[0], *lines[-10:]]) + "\n")
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("time,power\n" + "\n".join(f"2024-01-01 {h:02d}:00,{h}" for h in range(24)))
    gappy = tmp_path / "gappy.csv"  # an hour missing: the forecast would start an hour late
    gappy.write_text("\n".join([lines[0], *lines[-50:-20], *lines[-19:]]) + "\n")
    cases = [
        ([f"input={short}"], "short.csv: 10 rows; the model reads the last in_len=24"),
        ([f"input={gappy}"], "gappy.csv: line 32, column 'time': 1 time step missing before "
                             "2024-02-29 05:00:00 (after 2024-02-29 03:00:00, the file's "
                             "interval being 1 h)"),
        (
            [f"input={wrong}"],
            "wrong.csv: no column 'load', 'temperature'; the file has time, power",
        ),
    ]
    for args, message in cases:
        proc = run_cli(
            [f"run_dir={csv_run}", *args, f"output={tmp_path / 'f.csv'}"], tmp_path,
            module="seqforecast.predict", check=False,
        )
        assert proc.returncode == 2 and message in proc.stderr
        assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "f.csv").exists()

    synthetic = tmp_path / "synthetic"
    run_cli([*TINY, "epochs=1", f"hydra.run.dir={synthetic}"], tmp_path)
    proc = run_cli(
        [f"run_dir={synthetic}", f"input={short}", f"output={tmp_path / 'f.csv'}"], tmp_path,
        module="seqforecast.predict", check=False,
    )
    assert proc.returncode == 2 and "predict needs a run trained with data=csv" in proc.stderr


# ----------------------------------------------------------------------------- bad files

HEADER = "time,y,x"


def _rows(n, start=0):
    """Rows at minutes start..start+n-1 of one hour, y = the minute, x = twice it."""
    return [f"2024-01-01 00:{i:02d}:00,{i},{2 * i}" for i in range(start, start + n)]


def _with_line_7(bad_row):
    """A 41-row file whose line 7 (the 6th data row) is `bad_row`."""
    return "\n".join([HEADER, *_rows(5), bad_row, *_rows(35, 10)])


TIME = ["data.time_column=time"]
BAD_FILES = {  # name: (file text or None for no file, extra args, message)
    "missing file": (None, [], "no such file"),
    "missing column": ("time,y,z\n" + "\n".join(_rows(40)), [], "no column 'x'; the file has time, y, z"),
    "non-numeric": (_with_line_7("2024-01-01 00:05:30,abc,1"), [], "line 7, column 'y': 'abc' is not a number"),
    "empty cell": (_with_line_7("2024-01-01 00:05:30,,1"), [], "1 empty or NaN cell(s), first at line 7, column 'y'; set data.fill=ffill or data.fill=interpolate"),
    "NaN cell": (_with_line_7("2024-01-01 00:05:30,3,NaN"), [], "first at line 7, column 'x'"),
    "too few rows": ("\n".join([HEADER, *_rows(4)]), [], "4 rows, fewer than one window (in_len + out_len = 6)"),
    "split too short": ("\n".join([HEADER, *_rows(20)]), ["data.split=[0.85,0.1,0.05]"], "the test split has 1 rows (lines 21-21), too few for one window: with data.protocol=standard a window needs out_len = 2 rows in the split, after in_len = 4 earlier rows"),
    "strict split too short": ("\n".join([HEADER, *_rows(20)]), ["data.protocol=strict"], "the val split has 3 rows (lines 16-18), too few for one window: with data.protocol=strict a window needs in_len + out_len = 6 rows inside the split"),
    "unknown protocol": ("\n".join([HEADER, *_rows(40)]), ["data.protocol=loose"], "data.protocol='loose' is not allowed: choose one of standard, strict"),
    "unsorted times": (_with_line_7("2024-01-01 00:02:00,3,1"), TIME, "line 7, column 'time': unsorted timestamp 2024-01-01 00:02:00"),
    "duplicate times": (_with_line_7("2024-01-01 00:04:00,3,1"), TIME, "line 7, column 'time': duplicate timestamp"),
    "bad time": (_with_line_7("yesterday,1,2"), TIME, "line 7, column 'time': 'yesterday' is not a time: expected ISO 8601 (2024-01-31 13:00) or a date such as 2024/1/31 13:00"),
    "ambiguous dates": ("\n".join(["time,y,x", *(f"{d}/1/2024 0:00,{d},1" for d in range(1, 13))]), TIME, "column 'time': dates like '1/1/2024 0:00' are ambiguous (no day above 12 shows whether the day or the month comes first); set data.date_order=dayfirst or data.date_order=monthfirst"),
    "mixed date forms": ("\n".join(["time,y,x", *(f"2024/1/1 0:{m:02d},{m},1" if m != 5 else f"2024-01-01 00:{m:02d},{m},1" for m in range(40))]), TIME, "line 7, column 'time': '2024-01-01 00:05' writes its date with '-', line 2 ('2024/1/1 0:00') with '/': one form per column"),
    "missing time steps": ("\n".join([HEADER, *_rows(5), *_rows(35, 6)]), TIME, "line 7, column 'time': 1 time step missing before 2024-01-01 00:06:00 (after 2024-01-01 00:04:00, the file's interval being 1 min): windows across it would be shifted; write the missing rows (empty cells, filled by data.fill) or set data.missing_times=keep to read the rows as they are"),
    "no such date": ("\n".join(["time,y,x", *(f"2024/2/{d} 0:00,{d},1" for d in range(1, 31))]), TIME, "line 31, column 'time': '2024/2/30 0:00' is no such time"),
    "exogenous target": ("\n".join([HEADER, *_rows(40)]), ["data.target=null", "data.targets=[y,x]", "data.columns=channels"], "data.features=['x'] conflicts with data.targets=['y', 'x']: 'x' cannot be both forecast and exogenous"),
    "unknown scaling": ("\n".join([HEADER, *_rows(40)]), ["data.scale=zscore"], "data.scale='zscore' is not allowed: choose one of none, standard, minmax"),
    "season too long": ("\n".join([HEADER, *_rows(40)]), ["data.season=9"], "data.season=9 is not allowed: a period in rows in [1, data.in_len=4]"),
    "target as feature": ("\n".join([HEADER, *_rows(40)]), ["data.features=[y]"], "data.features=['y'] is not allowed: must not repeat the target 'y'"),
}
CSV_ARGS = ["data=csv", "data.target=y", "data.features=[x]", "in_len=4", "out_len=2",
            "model.label_len=2", "epochs=1", "d_model=8", "n_heads=2", "log.figures=false"]


@pytest.fixture(scope="module")
def bad_file_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("badcsv")

    def one(item):
        index, (name, (text, extra, _)) = item
        path = base / f"file{index}.csv"
        if text is not None:
            path.write_text(text + "\n")
        args = [*CSV_ARGS, f"data.path={path}", *extra, f"hydra.run.dir={base / f'run{index}'}"]
        return name, run_cli(args, base, check=False)

    # one after another, each stopping before training
    return dict(map(one, enumerate(BAD_FILES.items())))


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_file_gets_one_line_and_exit_2(bad_file_runs, name):
    proc = bad_file_runs[name]
    assert proc.returncode == 2, proc.stderr
    assert BAD_FILES[name][2] in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert BAD_FILES[name][2] not in proc.stdout, "printed once, not again by the job log"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "drop,message",
    [("data.target=y", "error: data.target is required (the column to forecast): set "
                       "data.target=<value>, or data.targets=[a, b] / data.targets=all for one "
                       "series per column"),
     ("data.path=", "error: data.path is required (the CSV file to read): set data.path=<value>")],
)
def test_a_missing_required_key_is_named(tmp_path, drop, message):
    args = [a for a in CSV_ARGS if a != drop and not a.startswith("data.path")]
    if drop != "data.path=":
        args.append(f"data.path={tmp_path / 'x.csv'}")
    proc = run_cli([*args, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr == message + "\n"
    assert "???" not in proc.stderr + proc.stdout


def test_filled_gaps_train(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text(BAD_FILES["empty cell"][0] + "\n")
    for fill in ("ffill", "interpolate"):
        run_cli([*CSV_ARGS, f"data.path={path}", f"data.fill={fill}",
                 f"hydra.run.dir={tmp_path / fill}"], tmp_path)
        assert (tmp_path / fill / "metrics.json").is_file()

"""seqforecast.Forecaster on DataFrames: a long frame trained to the same run as the command line
on the same CSV (metrics and weights to the last digit), its forecast equal to
`seqforecast.predict`'s, a wide frame's series each its own unique_id, a CLI run loaded, and bad
frames and config values refused in one ValueError naming what is wrong."""

import csv
import json

import numpy as np
import pytest
import torch

from seqforecast import Forecaster

from ..cli_helpers import fits_in_process, run_cli

pd = pytest.importorskip("pandas")  # the dev extra installs it (the frames extra for users)
pytestmark = pytest.mark.slow  # trains: make test-fast skips it

SMALL = ["in_len=24", "out_len=6", "d_model=8", "n_heads=2", "ffn.d_ff=16", "epochs=2",
         "trainer.num_threads=1", "log.figures=false"]


def long_frame(series: int = 3, steps: int = 160) -> "pd.DataFrame":
    rng = np.random.default_rng(0)
    times = pd.date_range("2021-03-01", periods=steps, freq="h")
    return pd.concat([pd.DataFrame({
        "unique_id": f"s{s}", "ds": times,
        "y": np.sin(np.arange(steps) / 24 * 2 * np.pi + s) + s + 0.1 * rng.standard_normal(steps),
        "temp": rng.standard_normal(steps)}) for s in range(series)], ignore_index=True)


@pytest.fixture
def fits_here():
    with fits_in_process():
        yield


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A fit in its real child process, beside the command line's run of the same CSV (the
    other tests' fits train in this process: fits_here)."""
    root = tmp_path_factory.mktemp("forecaster")
    fc = Forecaster(*SMALL, seed=3, run_dir=root / "api").fit(long_frame(), hist_exog_list=["temp"])
    # the same CSV through the command line, the same overrides
    run_cli(["data=csv", f"data.path={fc.run_dir / 'input.csv'}", "data.time_column=ds",
             "data.id_column=unique_id", "data.target=y", "data.features=[temp]", *SMALL,
             "seed=3", f"hydra.run.dir={root / 'cli'}"], root)
    return fc, root


def test_a_long_frame_trains_the_command_lines_run_to_the_last_digit(fitted):
    fc, root = fitted
    cli = json.loads((root / "cli" / "metrics.json").read_text())
    assert fc.metrics["test"] == cli["test"] and fc.metrics["val"] == cli["val"]
    ours = torch.load(fc.run_dir / "checkpoints" / "best.pt", weights_only=True)["model"]
    theirs = torch.load(root / "cli" / "checkpoints" / "best.pt", weights_only=True)["model"]
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    # the frame's rows in the file as they were: series by series, in time order
    with open(fc.run_dir / "input.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    frame = long_frame()
    assert [r["unique_id"] for r in rows] == list(frame["unique_id"])
    assert np.allclose([float(r["y"]) for r in rows], frame["y"])
    # the command line's files, TensorBoard's events among them; the frame's own two beside
    def files(run_dir):
        return sorted("events" if p.name.startswith("events.out.tfevents") else
                      str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
    assert "events" in files(fc.run_dir)
    assert files(fc.run_dir) == sorted([*files(root / "cli"), "frame.json", "input.csv"])


def test_the_forecast_frame_is_predicts_csv(fitted):
    fc, root = fitted
    forecast = fc.predict()
    run_cli([f"run_dir={fc.run_dir}", f"input={fc.run_dir / 'input.csv'}",
             f"output={root / 'forecast.csv'}"], root, module="seqforecast.predict")
    written = pd.read_csv(root / "forecast.csv")
    assert list(forecast["unique_id"]) == list(written["unique_id"])
    assert np.array_equal(forecast["transformer"].to_numpy(), written["y"].to_numpy())
    for level in ("80", "95"):  # the run's conformal bands, under neuralforecast's names
        assert np.array_equal(forecast[f"transformer-lo-{level}"], written[f"y_lo{level}"])
        assert np.array_equal(forecast[f"transformer-hi-{level}"], written[f"y_hi{level}"])
    # 6 steps a series, continuing each series' hourly stamps, as datetimes like the frame's
    last = long_frame().groupby("unique_id")["ds"].max()
    for series, steps in forecast.groupby("unique_id")["ds"]:
        assert list(steps) == list(pd.date_range(last[series], periods=7, freq="h")[1:])
    # from a frame given: the forecast moves with its last rows; the run's own weights
    recent = long_frame()
    recent["y"] += 1.0
    moved = fc.predict(recent)
    assert moved.shape == forecast.shape
    assert not np.allclose(moved["transformer"], forecast["transformer"])


def test_a_saved_run_and_a_cli_run_load_to_the_same_forecast(fitted, tmp_path):
    fc, root = fitted
    saved = fc.save(tmp_path / "saved")
    again = Forecaster.load(saved).predict()
    assert again.equals(fc.predict())
    cli = Forecaster.load(root / "cli", alias="mine").predict(long_frame())
    assert np.array_equal(cli["mine"], fc.predict()["transformer"])


def test_a_wide_frame_forecasts_each_column_as_a_series(tmp_path, fits_here):
    frame = long_frame(series=2).pivot(index="ds", columns="unique_id", values="y")
    frame = frame.reset_index().rename_axis(columns=None)
    fc = Forecaster(*SMALL, run_dir=tmp_path / "wide").fit(frame)
    forecast = fc.predict()
    assert sorted(forecast["unique_id"].unique()) == ["s0", "s1"]
    assert forecast.groupby("unique_id").size().tolist() == [6, 6]
    saved = json.loads((tmp_path / "wide" / "frame.json").read_text())
    assert saved["targets"] == ["s0", "s1"] and saved["id_col"] is None


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns="y"), "column 'y' is not in the frame"),
    (lambda f: f.iloc[::-1], "column 'ds': time stamps are not sorted in series 's2'"),
    (lambda f: pd.concat([f.iloc[:2], f.iloc[1:]]), "time stamp 2021-03-01 01:00:00 repeats"),
    (lambda f: f.assign(y="high"), "column 'y' holds values that are not numbers"),
])
def test_a_bad_frame_is_one_value_error_naming_the_column(change, message, tmp_path):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Forecaster(*SMALL, run_dir=tmp_path / "bad").fit(change(long_frame()))
    assert not (tmp_path / "bad").exists()  # nothing written


def test_text_time_stamps_are_ordered_as_the_run_reads_them():
    """The EPF markets' `2013/1/9 23:00`, `2013/1/10 0:00` are in order (as text they are not);
    the whole column is read at once, so a series whose days fit day-first and month-first takes
    the order another series shows; a moment written twice is a repeat; the order of text the
    run's parser does not read is left to the run."""
    from seqforecast.api.frames import check_frame

    texts = ["2013/1/9 22:00", "2013/1/9 23:00", "2013/1/10 0:00"]
    check_frame(pd.DataFrame({"ds": texts, "y": [1.0, 2.0, 3.0]}), None, "ds", ["y"])
    with pytest.raises(ValueError, match="time stamps are not sorted"):
        check_frame(pd.DataFrame({"ds": texts[::-1], "y": [1.0, 2.0, 3.0]}), None, "ds", ["y"])
    with pytest.raises(ValueError, match="time stamp 2013/1/9 23:00 repeats"):
        check_frame(pd.DataFrame({"ds": [*texts[:2], texts[1]], "y": [1.0] * 3}),
                    None, "ds", ["y"])
    # a: 12 January, 1 February (day-first, as b shows); month-first or as text, unsorted
    panel = pd.DataFrame({"unique_id": ["a", "a", "b", "b"],
                          "ds": ["12/1/2013", "1/2/2013", "13/1/2013", "14/1/2013"],
                          "y": [1.0] * 4})
    check_frame(panel, "unique_id", "ds", ["y"])
    with pytest.raises(ValueError, match="not sorted in series 'a'"):
        check_frame(panel.iloc[[1, 0, 2, 3]], "unique_id", "ds", ["y"])
    check_frame(pd.DataFrame({"ds": ["b", "a"], "y": [1.0, 2.0]}), None, "ds", ["y"])


def test_a_config_value_the_run_refuses_is_its_one_line(tmp_path, fits_here):
    with pytest.raises(ValueError, match=r"training failed \(exit 2\): .*attention"):
        Forecaster(*SMALL, attention="nonesuch", run_dir=tmp_path / "bad").fit(long_frame())
    with pytest.raises(ValueError, match="has not been fitted"):
        Forecaster().predict()


def test_a_completed_run_is_not_trained_over(fitted):
    fc, _ = fitted
    before = (fc.run_dir / "input.csv").read_bytes()
    with pytest.raises(ValueError, match="holds a completed run"):
        Forecaster(*SMALL, run_dir=fc.run_dir).fit(long_frame(series=1))
    assert (fc.run_dir / "input.csv").read_bytes() == before


def with_load(series: int, steps: int) -> "pd.DataFrame":
    """long_frame with a known-future covariate, `load`."""
    frame = long_frame(series=series, steps=steps)
    frame["load"] = np.cos(np.arange(len(frame)) / 7)
    return frame


@pytest.fixture(scope="module")
def rolled(tmp_path_factory):
    """cross_validation over 3 origins 4 rows apart, with the known-future `load`: it fits
    once (futr_exog_list, on each series' 136 rows before the first origin), a run the
    known-future test predicts from as well (one training run for both)."""
    root = tmp_path_factory.mktemp("rolled")
    fc = Forecaster(*SMALL, run_dir=root / "cv")
    with fits_in_process():
        cv = fc.cross_validation(with_load(2, 150), n_windows=3, step=4,
                                 futr_exog_list=["load"])
    return fc, cv


def test_known_future_covariates_from_a_future_frame(rolled, tmp_path):
    """futr_exog_list trains with data.futr; predict takes their next out_len values from
    futr_df, as the command line's predict takes future=<csv>, and refuses a run without it
    or a frame missing steps in one ValueError."""
    fc, _ = rolled
    # the 6 rows after the ones the run trained on (136 a series): their load is known ahead
    ahead = with_load(2, 150).groupby("unique_id").nth(list(range(136, 142)))
    ahead = ahead[["unique_id", "ds", "load"]]
    assert json.loads((fc.run_dir / "frame.json").read_text())["futr"] == ["load"]
    forecast = fc.predict(futr_df=ahead)
    ahead.to_csv(tmp_path / "future.csv", index=False)
    run_cli([f"run_dir={fc.run_dir}", f"input={fc.run_dir / 'input.csv'}",
             f"output={tmp_path / 'forecast.csv'}", f"future={tmp_path / 'future.csv'}"],
            tmp_path, module="seqforecast.predict")
    written = pd.read_csv(tmp_path / "forecast.csv")
    assert np.array_equal(forecast["transformer"].to_numpy(), written["y"].to_numpy())
    with pytest.raises(ValueError, match=r"known-future covariates \(load\): give futr_df"):
        fc.predict()
    with pytest.raises(ValueError, match="'s1' needs known-future values at the 6 steps"):
        fc.predict(futr_df=ahead.iloc[:-1])
    with pytest.raises(ValueError, match="column 'load' is not in the frame"):
        fc.predict(futr_df=ahead.drop(columns="load"))
    with pytest.raises(ValueError, match="futr_df: column 'load' has an empty value"):
        fc.predict(futr_df=ahead.assign(load=np.where(np.arange(len(ahead)) == 3, np.nan, 1.0)))


def test_static_covariates_from_a_static_frame(tmp_path, fits_here):
    """static_df (one row a series) trains with data.static as the same columns in the frame
    would; a series without a row, or with two, one ValueError naming it."""
    frame = long_frame()
    sizes = pd.DataFrame({"unique_id": ["s2", "s0", "s1"], "size": [7.0, 3.0, 5.0],
                          "region": ["n", "s", "n"]})  # not read: stat_exog_list names size
    fc = Forecaster(*SMALL, run_dir=tmp_path / "api").fit(frame, static_df=sizes,
                                                          stat_exog_list=["size"])
    written = pd.read_csv(fc.run_dir / "input.csv")
    assert list(written.columns) == ["unique_id", "ds", "y", "size"]
    assert (written.groupby("unique_id")["size"].first() == [3.0, 5.0, 7.0]).all()
    assert "covariates: size (static: size)" in (fc.run_dir / "train.log").read_text()
    forecast = fc.predict()
    assert sorted(forecast["unique_id"].unique()) == ["s0", "s1", "s2"]
    again = fc.predict(frame, static_df=sizes)  # the run's static columns, from the frame
    assert np.array_equal(again["transformer"], forecast["transformer"])
    with pytest.raises(ValueError, match="static_df: series 's1' has no row"):
        Forecaster(*SMALL, run_dir=tmp_path / "b").fit(frame, static_df=sizes.iloc[:2, :2])
    with pytest.raises(ValueError, match="static_df: series 's0' has two rows"):
        Forecaster(*SMALL, run_dir=tmp_path / "c").fit(
            frame, static_df=pd.concat([sizes, sizes.iloc[1:2]]).drop(columns="region"))
    changing = frame.assign(size=np.arange(len(frame)) % 2)
    with pytest.raises(ValueError, match="column 'size' is static but changes within series"):
        Forecaster(*SMALL, run_dir=tmp_path / "d").fit(changing, stat_exog_list=["size"])


def test_cross_validation_scores_rolling_origins_trained_once(rolled, tmp_path):
    """n_windows origins step rows apart, the last out_len rows before each series' end: the
    run trains on the rows before the first only, and each origin's forecast is predict's on
    the history up to it, beside the truth."""
    fc, cv = rolled
    frame = with_load(2, 150)
    assert list(cv.columns[:5]) == ["unique_id", "ds", "cutoff", "y", "transformer"]
    assert len(cv) == 2 * 3 * 6 and set(cv["unique_id"]) == {"s0", "s1"}
    times = pd.date_range("2021-03-01", periods=150, freq="h")
    # origins at rows 136, 140, 144 (the last 6 rows before the end), cutoffs the row before
    assert sorted(cv["cutoff"].unique()) == [times[135], times[139], times[143]]
    trained = pd.read_csv(fc.run_dir / "input.csv", parse_dates=["ds"])
    assert (trained.groupby("unique_id")["ds"].max() == times[135]).all()  # nothing later
    truth = frame.set_index(["unique_id", "ds"])["y"]
    rows = list(zip(cv["unique_id"], cv["ds"], strict=True))
    assert np.array_equal(cv["y"], truth.loc[rows].to_numpy())
    # the second origin's forecast: predict on the history up to it
    history = frame.groupby("unique_id").head(140)
    ahead = frame.groupby("unique_id").nth(list(range(140, 146)))[["unique_id", "ds", "load"]]
    own = fc.predict(history, futr_df=ahead)
    second = cv[cv["cutoff"] == times[139]].reset_index(drop=True)
    assert np.array_equal(second["transformer"], own["transformer"])
    with pytest.raises(ValueError, match="series 's0' has 12 rows, too few for 3 origins"):
        Forecaster(*SMALL, run_dir=tmp_path / "short").cross_validation(
            long_frame(series=1, steps=12), n_windows=3, step=4)


def test_evaluate_scores_a_held_out_frame_beside_the_last_value(fitted):
    """Nothing retrained: the run's forecasts at the frame's origins, their MSE and MAE per
    series and over all, beside the last value, recomputed here from the frame."""
    fc, _ = fitted
    held_out = long_frame(series=2, steps=60)
    held_out["y"] += 0.5
    checkpoint = (fc.run_dir / "checkpoints" / "best.pt").read_bytes()
    forecast, scores = fc.evaluate(held_out, n_windows=2, step=3)
    assert (fc.run_dir / "checkpoints" / "best.pt").read_bytes() == checkpoint
    assert len(forecast) == 2 * 2 * 6
    history = held_out.groupby("unique_id").head(54 - 3)  # the first origin: 60 - 6 - 3
    own = fc.predict(history)
    first = forecast[forecast["cutoff"] == history["ds"].max()].reset_index(drop=True)
    assert np.array_equal(first["transformer"], own["transformer"])
    error = forecast["transformer"] - forecast["y"]
    overall = scores[scores["unique_id"] == "all"].set_index("metric")
    assert overall.loc["mse", "transformer"] == pytest.approx(float((error**2).mean()))
    assert overall.loc["mae", "transformer"] == pytest.approx(float(error.abs().mean()))
    # the last value: each origin's history's last y, for every step after it
    last = held_out.set_index(["unique_id", "ds"])["y"]
    origins = list(zip(forecast["unique_id"], forecast["cutoff"], strict=True))
    naive = last.loc[origins].to_numpy()
    assert overall.loc["mse", "last_value"] == pytest.approx(
        float(((naive - forecast["y"]) ** 2).mean()))
    assert set(scores["unique_id"]) == {"s0", "s1", "all"}

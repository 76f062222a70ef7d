"""The benchmark's real files by name, in their own formats: an EPF market (dates written
2013/1/1 0:00, column names after a space, the price forecast from its exogenous series) trains
end to end as TimeXer (features MS), and Exchange's file as the archive writes it reads."""

import json

import numpy as np
import pytest

from seqforecast.config import compose_config
from seqforecast.data import csv_data
from seqforecast.datasets import entry
from seqforecast.runs.loading import load_run

from ..cli_helpers import run_cli

pytestmark = pytest.mark.slow  # trains: make test-fast skips it


def write_like(path, rows: int, header: list[str], start: str, step: str, seed: int = 0):
    """A file in the benchmark archive's layout: `date` written 2013/1/1 0:00, then a
    channel per name (the last the target), hourly or daily."""
    rng = np.random.default_rng(seed)
    times = np.datetime64(start, "m") + np.arange(rows) * np.timedelta64(1, step)
    t = np.arange(rows)[:, None]
    values = 50 + 10 * np.sin(2 * np.pi * t / 24 + np.arange(len(header))) + rng.normal(
        0, 1, (rows, len(header)))
    values[:, -1] += 0.01 * values[:, 0]  # the target follows an exogenous series a little
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write(",".join(["date", *header]) + "\n")
        for moment, row in zip(times.astype(object), values, strict=True):
            day = f"{moment.year}/{moment.month}/{moment.day} {moment.hour}:{moment.minute:02d}"
            f.write(day + "," + ",".join(f"{v:.2f}" for v in row) + "\n")
    return path


def test_an_epf_market_trains_by_name_as_timexer_ms(tmp_path):
    np_entry = entry("np")
    write_like(tmp_path / "data" / np_entry.file, np_entry.rows,
               [" Grid load forecast", " Wind power forecast", "OT"], "2013-01-01", "h")
    run_dir = tmp_path / "run"
    run_cli(["experiment=timexer", "dataset=np", f"data_dir={tmp_path / 'data'}", "in_len=168",
             "out_len=24", "embedding.patch_len=24", "embedding.stride=24", "d_model=16",
             "n_heads=2", "ffn.d_ff=16", "epochs=1", "batch_size=512", "log.figures=false",
             "trainer.num_threads=1", f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    test = metrics["splits"]["test"]
    assert test["windows"] == np_entry.rows - 41933 - 24 + 1  # every test row forecast once
    assert test["times"][0] == "2017-10-14 05:00:00"  # row 41,933 of hourly rows from 2013
    assert set(metrics["test"]) >= {"model", "last_value", "nlinear"}
    # one target, the price, after it the exogenous series: read, never forecast or scored
    run = load_run(run_dir, "best", "cpu")
    assert run.data.state["columns"] == ["OT", "Grid load forecast", "Wind power forecast"]
    assert run.data.n_targets == 1 and run.data.test.target.shape[-1] == 1
    assert run.model.reads_targets is False  # features MS: the exogenous tokens are the others


def test_timexer_on_your_own_file_needs_no_dataset_entry_and_says_what_it_trained(tmp_path):
    """experiment=timexer on a price file of one's own: no dataset entry inherited (no ETTh1
    borders or targets=all), and the run's first lines and metrics.json name the family, its
    backends, the target and the covariates."""
    write_like(tmp_path / "market.csv", 1200, ["load", "wind", "price"], "2020-01-01", "h")
    run_dir = tmp_path / "run"
    done = run_cli(["experiment=timexer", "data=csv", "data.path=market.csv",
                    "data.targets=[price]", "data.features=[load,wind]", "data.time_column=date",
                    "in_len=48", "out_len=24", "embedding.patch_len=24", "embedding.stride=24",
                    "d_model=16", "n_heads=2", "ffn.d_ff=16", "epochs=1", "log.figures=false",
                    "trainer.num_threads=1", f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    log = (run_dir / "train.log").read_text()
    first = log[: log.index("train split")]  # before the data's split lines
    assert "the published TimeXer, experiment=timexer's preset" in first
    assert "no dataset entry, so no published cell" in first
    assert "model: model=timexer" in first
    assert "encoder: vanilla/" in first and "exogenous: vanilla/" in first
    assert "forecasts price; covariates: load, wind, time:hour" in first
    described = json.loads((run_dir / "metrics.json").read_text())["run"]["model"]
    assert described["family"] == "timexer" and described["targets"] == ["price"]
    assert described["covariates"][:2] == ["load", "wind"]
    assert set(described["attention"]) == {"encoder", "exogenous"}
    saved = (run_dir / ".hydra" / "config.yaml").read_text()
    assert "ETTh1" not in saved and "dataset: null" in saved
    assert "model.linear_path" not in done.stderr


def test_exchange_as_the_archive_writes_it_reads(tmp_path):
    exchange = entry("exchange")
    write_like(tmp_path / exchange.file, exchange.rows, [*map(str, range(7)), "OT"],
               "1990-01-01", "D")
    cfg = compose_config(["dataset=exchange", f"data_dir={tmp_path}", "in_len=96",
                          "out_len=96"])
    data = csv_data(cfg.data, "cpu")
    assert data.n_targets == 8
    assert data.info["test"]["times"][0] == "2006-08-16 00:00:00"  # day 6,071 from 1990
    assert data.info["test"]["windows"] == exchange.rows - 6071 - 96 + 1

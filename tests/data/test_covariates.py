"""Known-future covariates (data.futr, data/covariates.py): a window reads them led by out_len
rows (its last out_len input steps the horizon's values), the target and past covariates never
past the window's end; in one series, with gaps, and in each series of a panel."""

import csv

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.data import DataError, build_data
from seqforecast.data.covariates import lead, window_with_future
from seqforecast.model import build_model

IN, OUT = 12, 4
CPU = torch.device("cpu")


def write_file(path, rows=160, gap_at=None, ids=None):
    """time, y, temp (past), load (known in advance), each a different wave; `ids`: a long
    panel of that many series (the series' rows one after another, each its own level)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["time", *(["id"] if ids else []), "y", "temp", "load"])
        for s in range(ids or 1):
            for i in range(rows - 7 * s):
                when = str(np.datetime64("2024-01-01T00:00") + np.timedelta64(i, "h"))
                y = "" if i == gap_at else f"{10 * s + np.sin(i / 5) + i / 50:.6f}"
                writer.writerow([when.replace("T", " "), *([f"s{s}"] if ids else []), y,
                                 f"{np.cos(i / 3) + s:.6f}", f"{100 * s + i:.1f}"])
    return path


def config(path, *extra):
    cfg = compose_config(["data=csv", f"data.path={path}", "data.target=y",
                          "data.time_column=time", "data.features=[temp]",
                          "data.futr=[load]", f"in_len={IN}", f"out_len={OUT}",
                          "model.d_model=16", "model.n_heads=2", *extra])
    validate_config(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def windows(cfg):
    data = build_data(cfg["data"], 0, CPU)
    return data, {name: getattr(data, name) for name in ("train", "val", "test")}


def file_columns(path, series=None):
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if series is None or r["id"] == series]
    return {c: np.array([float(r[c]) if r[c] else np.nan for r in rows])
            for c in ("y", "temp", "load")}


def starts_of(split):
    return split.starts.tolist() if hasattr(split, "starts") else None


@pytest.mark.parametrize("gap", [None, 70], ids=["rows", "gaps"])
def test_a_window_reads_the_known_columns_led_and_the_others_up_to_its_start(tmp_path, gap):
    path = write_file(tmp_path / "f.csv", gap_at=gap)
    extra = ["data.fill=ffill"] if gap else []
    cfg = config(path, *extra)
    data, splits = windows(cfg)
    raw = file_columns(path)
    scaler = data.scaler
    assert data.n_features == 3 and data.state["futr"] == ["load"]
    for name, split in splits.items():
        src, _ = split.take(slice(None))
        first = data.info[name]["forecast_rows"][0]
        for k in range(len(split)):
            start = first + k  # one window a row (window_stride=1)
            load = (raw["load"][start - IN + OUT : start + OUT] - scaler.shift[2].item()) \
                / scaler.scale[2].item()
            np.testing.assert_allclose(src[k, :, 2].numpy(), load, rtol=1e-5, atol=1e-5)
            temp = (raw["temp"][start - IN : start] - scaler.shift[1].item()) \
                / scaler.scale[1].item()
            np.testing.assert_allclose(src[k, :, 1].numpy(), temp, rtol=1e-5, atol=1e-5)
            # the window's last out_len known values are its horizon's own
            assert np.allclose(src[k, -OUT:, 2].numpy() * scaler.scale[2].item()
                               + scaler.shift[2].item(), raw["load"][start : start + OUT],
                               atol=1e-3)


def test_changing_the_future_moves_only_the_known_columns(tmp_path):
    """Rows at and after a window's start change: its target and past covariate stay, its
    known-future column changes exactly over its last out_len steps."""
    path = write_file(tmp_path / "f.csv")
    cfg = config(path)
    _, before = windows(cfg)
    test = before["test"]
    src, _ = test.take(slice(0, 1))
    first = int(test.starts[0])
    lines = path.read_text().splitlines()
    changed = [line if i - 1 < first else ",".join(
        [line.split(",")[0], *(str(float(v) + 5) for v in line.split(",")[1:])])
        for i, line in enumerate(lines)]
    other = tmp_path / "g.csv"
    other.write_text("\n".join(changed) + "\n")
    after, _ = build_data(config(other)["data"], 0, CPU).test.take(slice(0, 1))
    assert torch.equal(after[0, :, :2], src[0, :, :2])  # y and temp: no row from `first` on
    assert torch.equal(after[0, :-OUT, 2], src[0, :-OUT, 2])
    assert (after[0, -OUT:, 2] != src[0, -OUT:, 2]).all()  # load: the horizon's values


def test_each_series_of_a_panel_is_led_within_itself(tmp_path):
    path = write_file(tmp_path / "p.csv", rows=90, ids=3)
    cfg = config(path, "data.id_column=id")
    data, splits = windows(cfg)
    shift, scale = data.state["shift"], data.state["scale"]
    for split in splits.values():
        src, _ = split.take(slice(None))
        for k in range(len(split)):
            s = int(split.series[k])
            start = int(split.starts[k]) - int(sum(90 - 7 * j for j in range(s)))
            raw = file_columns(path, f"s{s}")["load"]
            load = (raw[start - IN + OUT : start + OUT] - shift[s, 2].item()) / scale[s, 2].item()
            np.testing.assert_allclose(src[k, :, 2].numpy(), load, rtol=1e-5, atol=1e-5)


def test_lead_and_the_forecast_window_agree():
    """The window predict builds after a history and its future values is the window
    training reads there (lead over history + future)."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal((40, 3))  # y, temp, load
    led = lead(values, slice(2, 3), OUT)
    start = 40 - OUT  # the last window whose horizon the values hold
    history, future = values[:start], values[start:, 2:]
    np.testing.assert_array_equal(window_with_future(history, future, slice(2, 3), IN),
                                  led[start - IN : start])
    # two series one after another: each led within itself, none reading the next
    two = lead(values, slice(2, 3), OUT, np.array([25, 15]))
    np.testing.assert_array_equal(two[: 25 - OUT, 2], values[OUT:25, 2])
    np.testing.assert_array_equal(two[25 : 40 - OUT, 2], values[25 + OUT :, 2])


@pytest.mark.parametrize("family", ["transformer", "itransformer", "timexer"])
def test_every_family_with_covariates_reads_the_horizons_known_values(tmp_path, family):
    """Perturb the known values over the horizon: the forecast moves. Perturb the past
    covariate's and target's values after the window's end: nothing to perturb, the window
    does not hold them (above)."""
    path = write_file(tmp_path / "f.csv")
    extra = {"transformer": [], "itransformer": ["experiment=itransformer"],
             "timexer": ["experiment=timexer", "embedding.patch_len=4", "embedding.stride=4"]}
    # without the linear path, whose zeroed head would hide the Transformer at its start
    cfg = config(path, *extra[family], "model.linear_path=none", "model.linear_init=zero")
    data = build_data(cfg["data"], 0, CPU)
    torch.manual_seed(0)
    model = build_model(cfg, data.n_features, 1).eval()  # with the calendar's, where asked
    src, _ = data.test.take(slice(0, 2))
    moved = src.clone()
    moved[:, -OUT:, 2] += 1.0
    with torch.no_grad():
        assert not torch.allclose(model(src), model(moved))


@pytest.mark.parametrize("extra, message", [
    (["data.futr=[y]"], "cannot be known in advance and forecast"),
    (["data.futr=[temp]"], "cannot be known in advance and a past covariate"),
    (["in_len=3", "out_len=4", "model.label_len=2"], "needs data.in_len >= data.out_len"),
    (["data.futr=[load,load]"], "names 'load' twice; name each column once"),
    (["experiment=patchtst", "embedding.patch_len=4", "embedding.stride=4", "data.features=[]"],
     "conflicts with data.futr=['load']"),
])
def test_known_future_columns_refused_in_one_line(tmp_path, extra, message):
    path = write_file(tmp_path / "f.csv")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        cfg = config(path, *extra)
        build_model(cfg, 3, 1)


def test_an_empty_known_value_is_one_line(tmp_path):
    """data.fill fills a window's inputs from its own past; a led column's horizon is not its
    past, so an empty cell in a known column of one series is refused, naming its line."""
    path = write_file(tmp_path / "f.csv")
    lines = path.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0] + ","
    path.write_text("\n".join(lines) + "\n")
    cfg = config(path, "data.fill=ffill")
    with pytest.raises(DataError, match="column 'load' \\(data.futr, known in advance\\) is "
                                        "empty at line 6"):
        build_data(cfg["data"], 0, CPU)

"""Static covariates (data.static): one value per series of a long panel, scaled across the
series (a per-series scaler would make every one 0), read as channels the instance norm leaves
as they are, so each family that reads covariates sees them; a value that changes within a
series, and static columns without a panel, refused in one line."""

import csv

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.data import DataError, build_data
from seqforecast.model import build_model

IN, OUT = 12, 4
CPU = torch.device("cpu")
SIZES = [3.0, 5.0, 10.0, 4.0]  # each series' static value


def write_panel(path, rows=80, changed_at=None):
    """A long panel of four stores: time, id, y, promo (past), size (static)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["time", "id", "y", "promo", "size"])
        for s, size in enumerate(SIZES):
            for i in range(rows - 5 * s):
                when = str(np.datetime64("2024-01-01T00:00") + np.timedelta64(i, "h"))
                value = size + 1 if changed_at == (s, i) else size
                writer.writerow([when.replace("T", " "), f"s{s}",
                                 f"{size * (2 + np.sin(i / 4)):.5f}", i % 3, value])
    return path


def config(path, *extra):
    cfg = compose_config(["data=csv", f"data.path={path}", "data.target=y",
                          "data.id_column=id", "data.time_column=time", "data.features=[promo]",
                          "data.static=[size]", f"in_len={IN}", f"out_len={OUT}",
                          "model.d_model=16", "model.n_heads=2", *extra])
    validate_config(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def test_a_static_value_is_one_number_per_series_scaled_across_the_series(tmp_path):
    cfg = config(write_panel(tmp_path / "p.csv"))
    data = build_data(cfg["data"], 0, CPU)
    assert data.n_features == 3 and data.state["static"] == ["size"]
    mean, std = np.mean(SIZES), np.std(SIZES)
    for split in (data.train, data.val, data.test):
        src, _ = split.take(slice(None))
        for s in range(len(SIZES)):
            windows = src[split.series == s, :, 2]  # [n, in_len]: the series' size throughout
            expected = (SIZES[s] - mean) / std
            assert torch.allclose(windows, torch.full_like(windows, expected), atol=1e-6)


@pytest.mark.parametrize("family", ["transformer", "itransformer", "timexer"])
def test_every_family_with_covariates_reads_the_static_value(tmp_path, family):
    """Another static value, the same series: another forecast (an instance norm over the
    window would have made every constant channel 0)."""
    # the published experiments read a wide file's channels; a long panel's series here
    extra = {"transformer": [], "itransformer": ["experiment=itransformer", "data.columns=series"],
             "timexer": ["experiment=timexer", "embedding.patch_len=4", "embedding.stride=4",
                         "data.columns=series"]}
    cfg = config(write_panel(tmp_path / "p.csv"), *extra[family], "model.linear_path=none",
                 "model.linear_init=zero", "data.time_features=false")
    data = build_data(cfg["data"], 0, CPU)
    torch.manual_seed(0)
    model = build_model(cfg, data.n_features, 1).eval()
    src, _ = data.test.take(slice(0, 2))
    moved = src.clone()
    moved[..., 2] += 1.0
    with torch.no_grad():
        assert not torch.allclose(model(src), model(moved))


def test_a_static_value_that_changes_within_a_series_is_one_line(tmp_path):
    cfg = config(write_panel(tmp_path / "p.csv", changed_at=(2, 30)))
    with pytest.raises(DataError, match=r"column 'size' is static but changes within series "
                                        r"'s2' \(line \d+: 11 after 10\)"):
        build_data(cfg["data"], 0, CPU)


@pytest.mark.parametrize("extra, message", [
    (["data.id_column=null"], "needs a long panel (data.id_column)"),
    (["data.static=[promo]"], "cannot be static and a past covariate"),
    (["experiment=patchtst", "embedding.patch_len=4", "embedding.stride=4", "data.features=[]",
      "data.columns=series"],
     "conflicts with data.static=['size']"),
])
def test_static_columns_refused_in_one_line(tmp_path, extra, message):
    path = write_panel(tmp_path / "p.csv")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        cfg = config(path, *extra)
        build_model(cfg, 3, 1)

"""Every `experiment=` preset composes, validates, builds its data and model, and trains a
step: a preset no test composes can rot unseen."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from seqforecast.config import compose_config, validate_config
from seqforecast.data import build_data
from seqforecast.model import build_model
from seqforecast.training import train_model
from seqforecast.training.monitor import Monitor

from ..cli_helpers import REPO, load_script

PRESETS = sorted(p.stem for p in (REPO / "configs" / "experiment").glob("*.yaml"))


class OneStep(Exception):
    pass


class StopAfterOneStep(Monitor):
    def on_step(self, step, scalars):
        assert torch.isfinite(torch.tensor(scalars["mse"]))
        raise OneStep


def test_every_preset_is_listed():
    assert {"quick", "diff_local", "csv_example", "co2", "panel_example", "longhorizon"} <= set(
        PRESETS
    )


@pytest.mark.parametrize("preset", PRESETS)
def test_a_preset_composes_and_trains_one_step(preset, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # presets name their data files relative to the repository
    # Small synthetic draws: the preset's model and windows, not its data volume, are tested.
    overrides = [f"experiment={preset}"]
    composed = compose_config(overrides)
    if composed.data.name != "csv":
        overrides += ["data.train_size=64", "data.val_size=16", "data.test_size=16"]
    elif composed.dataset is not None or OmegaConf.is_missing(composed.data, "path"):
        # a benchmark dataset's recipe: a file in ETT's layout and length
        overrides.append(f"data.path={_ett_like_file(tmp_path)}")
    cfg = compose_config(overrides)
    validate_config(cfg)
    plain = OmegaConf.to_container(cfg, resolve=True)
    data = build_data(plain["data"], 0, torch.device("cpu"))
    model = build_model(plain, data.n_features, data.n_targets)
    trainer = dict(plain["trainer"], epochs=1, log_every=1, validate_initial=False)
    with pytest.raises(OneStep):
        train_model(model, data, trainer, Path(tmp_path), seed=0, config_yaml="",
                    monitor=StopAfterOneStep(), progress=False)


def _ett_like_file(tmp_path: Path) -> Path:
    """Hourly rows in ETT's layout, as many as the hourly ETT borders need (14,400)."""
    return load_script("bench_longhorizon.py").write_smoke_file(tmp_path / "ett.csv", rows=14_400)


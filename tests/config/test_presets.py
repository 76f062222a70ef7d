"""Every `experiment=` preset composes, validates, builds its data and model, and trains a
step: a preset no test composes can rot unseen."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from seqforecast.config import compose_config, validate_config
from seqforecast.config.compose import settle_dataset
from seqforecast.data import build_data
from seqforecast.model import build_model
from seqforecast.training import train_model
from seqforecast.training.monitor import Monitor

from ..cli_helpers import REPO, run_cli, write_ett_file

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
    return write_ett_file(tmp_path / "ett.csv", rows=14_400)



@pytest.mark.parametrize("overrides,expected", [
    # Exchange's script: d_model and d_ff 128 (the preset's ETTh1 256), its 336 one epoch
    (["experiment=itransformer", "dataset=exchange"],
     {"d_model": 128, "ffn.d_ff": 128, "epochs": 10, "model.encoder_layers": 2}),
    (["experiment=itransformer", "dataset=exchange", "out_len=336"],
     {"d_model": 128, "epochs": 1}),
    (["experiment=itransformer", "dataset=weather"],
     {"d_model": 512, "ffn.d_ff": 512, "model.encoder_layers": 3}),
    (["experiment=patchtst", "dataset=ettm1", "out_len=192"],
     {"d_model": 128, "n_heads": 16, "ffn.d_ff": 256, "model.dropout": 0.2,
      "trainer.schedule": "onecycle", "trainer.pct_start": 0.4, "trainer.patience": 20}),
    (["experiment=patchtst", "dataset=illness", "out_len=24"],
     {"in_len": 104, "embedding.patch_len": 24, "embedding.stride": 2}),
    (["experiment=timexer", "dataset=np", "out_len=24"],
     {"in_len": 168, "embedding.patch_len": 24, "d_model": 512, "model.encoder_layers": 3}),
    # a key given is the user's; a cell with no setting keeps the preset's values
    (["experiment=itransformer", "dataset=exchange", "d_model=64"], {"d_model": 64,
                                                                     "ffn.d_ff": 128}),
    (["experiment=itransformer", "dataset=etth1", "out_len=48"], {"d_model": 256}),
])
def test_a_published_experiment_on_a_named_dataset_takes_that_cells_setting(overrides,
                                                                          expected):
    """`experiment=<published> dataset=<name> out_len=<h>` composes the published setting of
    that cell (seqforecast/published/), and the model built has its sizes."""
    cfg = compose_config(overrides)
    validate_config(cfg)
    plain = OmegaConf.to_container(cfg, resolve=True)
    for key, value in expected.items():
        node = plain
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    if "d_model" in expected:
        model = build_model(plain, 8 + 4, 8)  # the built model is that size
        assert model.encoder[0].self_attn.d_model == expected["d_model"]


def test_the_published_setting_is_the_leaderboards():
    """The same settings the leaderboard and the studies apply by hand, one table."""
    from seqforecast.published import published_overrides

    given = published_overrides("itransformer", "exchange", 336)
    composed = OmegaConf.to_container(compose_config(
        ["experiment=itransformer", "dataset=exchange", "out_len=336"]), resolve=True)
    by_hand = OmegaConf.to_container(compose_config(
        ["experiment=itransformer", "dataset=exchange", "out_len=336", *given]), resolve=True)
    assert composed == by_hand


def test_the_dataset_entry_gives_way_just_before_data_whatever_flags_stand_around(tmp_path):
    """data= without dataset= drops the preset's entry with `~dataset` put just before data=,
    so Hydra's flags (--cfg job, --multirun, --config-dir) may stand before the overrides."""
    assert settle_dataset(["--cfg", "job", "experiment=timexer", "data=csv", "x=1"]) == [
        "--cfg", "job", "experiment=timexer", "~dataset", "data=csv", "x=1"]
    assert settle_dataset(["data=csv", "dataset=etth1"]) == ["data=csv", "dataset=etth1"]
    for flags in (["--cfg", "job"], ["--config-dir", str(tmp_path), "--cfg", "job"]):
        proc = run_cli([*flags, "experiment=timexer", "data=csv", "data.path=own.csv",
                        "data.targets=[price]"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "dataset: null" in proc.stdout and "path: own.csv" in proc.stdout


def test_your_own_file_needs_no_dataset_entry_and_a_named_model_is_the_model():
    """data=csv on the command line replaces a preset's dataset entry; dataset=null or none
    drops it; a published family takes no real-series recipe (no linear path it was not
    named with)."""
    own = ["data.path=market.csv", "data.targets=[price]", "data.features=[load,wind]",
           "data.time_column=date"]
    for overrides in (["experiment=timexer", "data=csv", *own],
                      ["experiment=timexer", "dataset=null", *own],
                      ["experiment=timexer", "dataset=none", *own]):
        cfg = compose_config(overrides)
        validate_config(cfg)
        assert cfg.dataset is None and cfg.data.test_end is None and cfg.data.targets == ["price"]
    for family in ("timexer", "itransformer"):
        cfg = compose_config([f"model={family}", "data=csv", *own])
        assert cfg.model.linear_path == "none" and cfg.trainer.validate_initial is False
    for family in ("transformer", "encoder"):  # the project's own: the recipe
        cfg = compose_config([f"model={family}", "data=csv", "data.path=x.csv", "data.target=y"])
        assert cfg.model.linear_path == "nlinear" and cfg.model.linear_init == "least_squares"

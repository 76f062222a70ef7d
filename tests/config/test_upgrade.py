"""Renamed option values: the former names are still read, each reported in one line."""

import logging

from omegaconf import OmegaConf

from seqforecast.config import compose_config, validate_config
from seqforecast.config import upgrade as upgrade_module
from seqforecast.config.upgrade import upgrade_config
from seqforecast.training.run import _current


def test_former_names_compose_validate_and_read_as_the_current_ones(caplog, monkeypatch):
    monkeypatch.setattr(upgrade_module, "_said", set())
    cfg = compose_config(["data=sigmoid_seed", "attention=diff", "attention.head_layout=seed",
                          "attention.decay_form=seed", "pos_encoding=relative",
                          "pos_encoding.decay_form=seed"])  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="seqforecast"):
        validate_config(cfg)
    assert cfg.data.name == "sigmoid_pair"
    assert cfg.attention.head_layout == "wide" and cfg.attention.decay_form == "reciprocal"
    assert cfg.pos_encoding.decay_form == "reciprocal"
    lines = [r.getMessage() for r in caplog.records]
    assert "data=sigmoid_seed is now called data=sigmoid_pair; read as sigmoid_pair" in lines
    assert len(lines) == 4
    with caplog.at_level(logging.WARNING, logger="seqforecast"):
        validate_config(compose_config(["attention=diff", "attention.head_layout=seed"]))
    assert len(caplog.records) == 4  # said once per process


def test_current_names_are_left_alone_and_plain_dicts_are_upgraded_too():
    cfg = OmegaConf.to_container(compose_config(["attention=diff"]), resolve=True)
    assert upgrade_config(cfg) == []
    cfg["attention"]["head_layout"] = "seed"
    assert upgrade_config(cfg) and cfg["attention"]["head_layout"] == "wide"


def test_a_checkpoint_saved_under_a_former_name_matches_its_upgraded_config():
    """Resume compares the checkpoint's config with the run's: an older run's checkpoint says
    head_layout=seed where its upgraded config says wide, and still resumes."""
    cfg = compose_config(["attention=diff"])
    validate_config(cfg)
    current = OmegaConf.to_yaml(cfg, resolve=True)
    old = current.replace("head_layout: paper", "head_layout: seed")
    cfg.attention.head_layout = "wide"
    assert _current(old) == OmegaConf.to_yaml(cfg, resolve=True)

"""Saved runs' configs read as the current version: one ordered list of migrations, keyed by
the config_version every run writes; former option values renamed (each said once), keys a
run was written without filled with the behaviour it had; nothing else reads old configs."""

import logging
import re
from dataclasses import fields

import pytest
from omegaconf import OmegaConf

from seqforecast.config import (
    CONFIG_VERSION,
    ConfigError,
    compose_config,
    migrate,
    validate_config,
)
from seqforecast.config import migrations as migrations_module
from seqforecast.config.check import resolved
from seqforecast.config.saved import saved_choices
from seqforecast.config.schema import schema_of
from seqforecast.runs.training import current_config


def _version_0(overrides=()) -> dict:
    """A config as the releases before config_version wrote it: no version, none of the keys
    version 1 fills in."""
    cfg = resolved(compose_config(list(overrides)))
    del cfg["config_version"]
    for key in migrations_module.BEFORE_THE_KEY:
        group, _, name = key.partition(".")
        if name:
            cfg[group].pop(name, None)
    return cfg


def test_every_run_writes_the_current_version():
    assert compose_config().config_version == CONFIG_VERSION == len(migrations_module.MIGRATIONS)


def test_a_version_0_config_reads_with_the_behaviour_it_had(caplog, monkeypatch):
    monkeypatch.setattr(migrations_module, "_said", set())
    old = _version_0(["attention=diff", "pos_encoding=relative", "attention.head_layout=wide"])
    old["attention"]["head_layout"] = "seed"
    old["pos_encoding"]["decay_form"] = "seed"
    del old["intervals"], old["loss"], old["embedding"]
    with caplog.at_level(logging.WARNING, logger="seqforecast"):
        current = migrate(old)
        migrate(old)  # said once a process
    validate_config(current)
    assert current["config_version"] == CONFIG_VERSION
    assert current["attention"]["head_layout"] == "wide"
    assert current["pos_encoding"]["decay_form"] == "reciprocal"
    assert current["trainer"]["log_every"] == 1  # they synced every step
    assert current["model"]["norm"] == "layer" and current["trainer"]["kernels"] == "auto"
    assert current["intervals"]["method"] == "none" and current["loss"] == {"name": "mse"}
    assert current["embedding"]["name"] == "point"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["attention.head_layout=seed is now called attention.head_layout=wide; "
                     "read as wide", "pos_encoding.decay_form=seed is now called "
                     "pos_encoding.decay_form=reciprocal; read as reciprocal"]
    assert "config_version" not in old  # the saved config itself is left as it was


def test_the_keys_version_1_fills_are_the_schemas_keys():
    composed = resolved(compose_config(["model=encoder"]))  # once: half a second a composition
    for key in migrations_module.BEFORE_THE_KEY:
        group, _, name = key.partition(".")
        node = composed[group]
        assert not name or name in {f.name for f in fields(schema_of(group, node))}, key
    for (group, option), values in migrations_module.BEFORE_THE_KEY_OF.items():
        assert set(values) <= {f.name for f in fields(schema_of(group, {"name": option}))}


def test_a_newer_or_unmigrated_config_is_one_line():
    newer = resolved(compose_config())
    newer["config_version"] = CONFIG_VERSION + 1
    with pytest.raises(ConfigError, match=rf"config_version={CONFIG_VERSION + 1} is not allowed: "
                                          rf"this seqforecast reads versions 0 to "
                                          rf"{CONFIG_VERSION}"):
        migrate(newer)
    old = _version_0()
    with pytest.raises(ConfigError, match="read through migrations.migrate first"):
        validate_config(old)


@pytest.mark.parametrize("missing", ["embedding", "model.linear_path", "trainer.kernels"])
def test_a_current_config_missing_a_key_is_one_line_naming_it(missing):
    cfg = resolved(compose_config())
    node, _, key = missing.rpartition(".")
    del (cfg[node] if node else cfg)[key]
    with pytest.raises(ConfigError, match=f"the config has no {missing}"):
        validate_config(cfg)


def test_a_former_value_on_the_command_line_names_the_current_one():
    with pytest.raises(ConfigError, match=r"attention.head_layout='seed' is not allowed: choose "
                                          r"one of paper, wide \(seed is now called wide\)"):
        compose_config(["attention=diff", "attention.head_layout=seed"])


def test_a_checkpoint_saved_under_a_former_name_matches_its_migrated_config():
    """Resume compares the checkpoint's config with the run's: an older run's checkpoint says
    head_layout=seed where its migrated config says wide, and still resumes."""
    old = _version_0(["attention=diff", "attention.head_layout=wide"])
    old["attention"]["head_layout"] = "seed"
    current = OmegaConf.to_yaml(OmegaConf.create(migrate(old)), resolve=True)
    assert current_config(OmegaConf.to_yaml(OmegaConf.create(old))) == current


def test_moved_keys_and_a_renamed_model_read_as_the_run_meant_them(caplog, monkeypatch):
    monkeypatch.setattr(migrations_module, "_said", set())
    old = _version_0(["data=csv", "data.path=x.csv", "data.targets=all", "model=encoder",
                      "data.window_stride=4", "model.attention_output_dropout=0.3"])
    old["model"]["name"] = "patchtst"  # model=patchtst was the encoder-only model
    old["model"]["attention_dropout"] = old["model"].pop("attention_output_dropout")
    old["data"]["stride"] = old["data"].pop("window_stride")
    del old["data"]["columns"]
    old["model"]["channels"] = "mixed"
    with caplog.at_level(logging.WARNING, logger="seqforecast"):
        current = migrate(old)
    validate_config(current)
    assert current["model"]["name"] == "encoder"
    assert current["model"]["attention_output_dropout"] == 0.3
    assert current["data"]["window_stride"] == 4 and current["data"]["columns"] == "channels"
    assert not {"attention_dropout", "channels"} & set(current["model"])
    assert "stride" not in current["data"]
    assert [r.getMessage() for r in caplog.records] == [
        "model=patchtst is now called model=encoder; read as encoder"]
    synthetic = _version_0()
    synthetic["model"]["channels"] = "independent"  # every run wrote it; only CSV data reads it
    assert "columns" not in migrate(synthetic)["data"]
    validate_config(migrate(synthetic))


@pytest.mark.parametrize("override,message", [
    ("model=patchtst", "model=patchtst is not allowed: choose one of encoder, itransformer, "
                       "timexer, transformer (patchtst is now called encoder)"),
    ("data=sigmoid_seed", "(sigmoid_seed is now called sigmoid_pair)"),
    ("data.stride=4", "data.stride is not allowed: data has no key stride (it is now "
                      "data.window_stride)"),
])
def test_a_former_option_or_key_on_the_command_line_names_the_current_one(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        compose_config(["data=csv", override] if override.startswith("data.") else [override])


def test_a_saved_runs_choices_read_by_their_current_names(tmp_path):
    (tmp_path / ".hydra").mkdir()
    OmegaConf.save({"hydra": {"runtime": {"choices": {
        "model": "patchtst", "data": "sigmoid_seed", "attention": "diff",
        "schema/model": "patchtst", "hydra/launcher": "basic"}}}},
        tmp_path / ".hydra" / "hydra.yaml")
    assert saved_choices(tmp_path) == {"model": "encoder", "data": "sigmoid_pair",
                                       "attention": "diff"}


def test_a_version_1_itransformer_run_reads_as_the_family_and_builds_the_same_model():
    """Version 1 wrote the iTransformer as model=encoder embedding=variate, and no attention
    had a kernel option: it reads as model=itransformer, and its checkpoint's keys are the
    family's."""
    from seqforecast import build_model

    current = resolved(compose_config(["experiment=itransformer", "data.path=x.csv"]))
    old = resolved(compose_config(["experiment=itransformer", "data.path=x.csv"]))
    old["config_version"] = 1
    old["model"]["name"] = "encoder"
    old["embedding"] = {"name": "variate", "patch_len": 16, "stride": 8, "padding": "start"}
    del old["attention"]["kernel"]
    migrated = migrate(old)
    validate_config(migrated)
    assert migrated["model"] == current["model"]
    assert migrated["attention"] == current["attention"]
    assert migrated["embedding"]["name"] == "point"
    keys = set(build_model(migrated, 11, 7).state_dict())
    assert keys == set(build_model(current, 11, 7).state_dict())


def test_a_version_2_run_reads_without_a_gate_and_with_the_precision_it_had():
    """Version 2 had no output gate, no compile mode and no matmul precision: it reads as
    attention.gate=none (at both positions), compile_mode=default, and the float32 products
    torch gave it (highest), and its model's keys are today's ungated ones."""
    from seqforecast import build_model

    overrides = ["experiment=timexer", "attention@variate_attention=einsum", "data.path=x.csv"]
    current = resolved(compose_config(overrides))
    old = resolved(compose_config(overrides))
    old["config_version"] = 2
    for group in ("attention", "variate_attention"):
        del old[group]["gate"]
    del old["trainer"]["compile_mode"], old["trainer"]["matmul_precision"]
    migrated = migrate(old)
    validate_config(migrated)
    assert migrated["attention"]["gate"] == migrated["variate_attention"]["gate"] == "none"
    assert migrated["trainer"]["compile_mode"] == "default"
    assert migrated["trainer"]["matmul_precision"] == "highest"
    assert set(build_model(migrated, 8, 7).state_dict()) == \
        set(build_model(current, 8, 7).state_dict())


def test_a_version_3_run_reads_with_the_root_attention_dropout_its_attention_had():
    """Version 3 had no root attention_dropout (every attention config reads it now): it reads
    as its attention group's dropout, and a variate-axis backend keeps its own."""
    overrides = ["experiment=timexer", "attention@variate_attention=einsum",
                 "variate_attention.dropout=0.0", "data.path=x.csv"]
    current = resolved(compose_config(overrides))
    old = resolved(compose_config(overrides))
    old["config_version"] = 3
    del old["attention_dropout"]
    migrated = migrate(old)
    validate_config(migrated)
    assert migrated == current
    assert migrated["attention_dropout"] == migrated["attention"]["dropout"] == 0.1
    assert migrated["variate_attention"]["dropout"] == 0.0


def test_a_csv_run_saved_before_the_time_steps_check_reads_its_rows_as_it_did():
    """data.missing_times (config_version 5): a run saved before read a file's rows as they
    were, gaps in its time column included; it still does, and validates."""
    old = resolved(compose_config(["data=csv", "data.path=x.csv", "data.target=y"]))
    old["config_version"] = 4
    del old["data"]["missing_times"]
    current = migrate(old)
    validate_config(current)
    assert current["data"]["missing_times"] == "keep"
    assert "missing_times" not in migrate(resolved(compose_config()))["data"]  # synthetic data


def test_a_run_saved_before_the_published_key_migrates_to_the_config_composed_today():
    """The root's `published` (with config_version 5): a run saved before it named none, so its
    migrated config is the one composed now, and resume= and skip_completed= accept it."""
    old = resolved(compose_config())
    old["config_version"] = 4
    del old["published"]
    assert migrate(old) == resolved(compose_config())


@pytest.mark.parametrize("key, version", [("futr", 5), ("static", 6)])
def test_a_csv_run_saved_before_known_future_or_static_columns_read_none(key, version):
    """data.futr (config_version 6), data.static (7): a CSV run saved before read no such
    column; its migrated config is the one composed now, and validates."""
    new = resolved(compose_config(["data=csv", "data.path=x.csv", "data.target=y"]))
    old = {**new, "config_version": version,
           "data": {k: v for k, v in new["data"].items() if k not in ("futr", "static")[
               ("futr", "static").index(key):]}}
    current = migrate(old)
    validate_config(current)
    assert current == new and current["data"][key] == []
    assert key not in migrate(resolved(compose_config()))["data"]  # synthetic data

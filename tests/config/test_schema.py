"""Each option's default has one home, its schema: no option file under configs/ repeats one.
An option file sets only what makes it that option (ffn/glu.yaml: a gated sigmoid), a
preset's recipe, or the root's shorthands by interpolation."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from seqforecast.config import CONFIG_DIR, compose_config
from seqforecast.config.check import ORDER, resolved
from seqforecast.config.schema import schema_of

OPTION_FILES = sorted(p for group in ORDER for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def _default(field: dataclasses.Field):
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _nodes(path: Path) -> dict:
    """group -> the keys this file sets in that group."""
    text = path.read_text()
    raw = yaml.safe_load(text) or {}
    raw.pop("defaults", None)
    if "@package _global_" in text:
        return {group: node for group, node in raw.items() if group in ORDER}
    return {path.parent.name: raw}


def test_every_group_has_option_files():
    assert {p.parent.name for p in OPTION_FILES} == set(ORDER)


@pytest.mark.parametrize("path", OPTION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_option_file_repeats_a_default(path):
    group, option = path.parent.name, path.stem
    composed = resolved(compose_config([f"{group}={option}"]))
    for node_group, node in _nodes(path).items():
        schema = schema_of(node_group, composed[node_group])
        fields = {f.name: f for f in dataclasses.fields(schema)}
        for key, value in node.items():
            assert key in fields, f"{path}: {node_group}.{key} is no key of {schema.__name__}"
            if key == "name" or value == option or str(value).startswith("${"):
                continue  # names the option itself, or reads a shorthand
            assert value != _default(fields[key]), (
                f"{path}: {node_group}.{key}={value!r} repeats {schema.__name__}'s default")

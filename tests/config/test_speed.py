"""Hydra's composition made cheaper (seqforecast/config/speed.py) composes what Hydra composes
without it: the same configs, a config file read again when it changes, the ConfigStore's nodes
left as they were."""

import copy
import os

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from seqforecast.config import compose_config
from seqforecast.config.speed import REPLACED, installed

# the default, a backend's options, a preset, a family with the variate position, and data=csv
# (its interpolated default, `optional recipe: ${data}_${model}`, picks the real-series recipe)
OVERRIDES = [[], ["attention=diff", "block_size=4"], ["experiment=itransformer"],
             ["model=timexer", "data=sigmoid_pair", "attention@variate_attention=einsum"],
             ["data=csv", "data.path=x.csv", "model=encoder"]]


def _stored_nodes() -> dict[str, str]:
    def walk(tree, path=""):
        for key, value in tree.items():
            if isinstance(value, dict):
                yield from walk(value, f"{path}{key}/")
            else:
                yield f"{path}{key}", OmegaConf.to_yaml(value.node)
    return dict(walk(ConfigStore.instance().repo))


def _without_speed_ups(monkeypatch):
    for (owner, name), original in REPLACED.items():
        if original is None:
            monkeypatch.delattr(owner, name)
        else:
            monkeypatch.setattr(owner, name, original)


def test_every_speed_up_applies_to_this_hydra():
    compose_config([])
    assert installed() == ["store", "yaml", "interpolation"]


def test_compositions_are_the_ones_hydra_makes_without_the_speed_ups(monkeypatch):
    compose_config([])
    store = ConfigStore.instance()
    assert copy.deepcopy({"store": store})["store"] is store
    before = _stored_nodes()
    fast = [OmegaConf.to_yaml(compose_config(o)) for o in OVERRIDES]
    assert "linear_init: least_squares" in fast[4]  # csv_encoder.yaml, the recipe it picked
    assert _stored_nodes() == before  # the shared store comes out as it went in
    _without_speed_ups(monkeypatch)
    assert copy.deepcopy({"store": store})["store"] is not store
    assert [OmegaConf.to_yaml(compose_config(o)) for o in OVERRIDES] == fast


def test_a_config_file_that_changes_is_read_again(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\n")

    def load():
        with open(path, encoding="utf-8") as f:
            return OmegaConf.load(f)

    assert load() == {"a": 1}
    first = load()
    first.a = 5  # a loaded config is its own: changing it changes no later load
    assert load() == {"a": 1}
    path.write_text("a: 22\n")  # another size
    assert load() == {"a": 22}
    stat = os.stat(path)
    path.write_text("a: 33\n")  # the same size, a later modification time
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load() == {"a": 33}
    path.write_text("- 1\n- 2\n")
    assert load() == [1, 2]
    path.write_text("5\n")
    with pytest.raises(IOError, match="Invalid loaded object type: int"):
        load()

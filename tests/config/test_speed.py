"""Hydra's composition made cheaper (seqforecast/config/speed.py) composes what Hydra composes
without it: the same configs, a config file read again when it changes, the ConfigStore's nodes
left as they were."""

import copy
import os
import time

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from seqforecast.config import compose_config
from seqforecast.config.speed import REPLACED, installed, without

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


def test_every_speed_up_applies_to_this_hydra():
    compose_config([])
    assert installed() == ["store", "yaml", "interpolation"]


def test_compositions_are_the_ones_hydra_makes_without_the_speed_ups(monkeypatch):
    from hydra._internal.config_repository import CachingConfigRepository

    compose_config([])
    store = ConfigStore.instance()
    assert copy.deepcopy({"store": store})["store"] is not store  # a snapshot copies it
    copies = []
    made = CachingConfigRepository.__init__

    def spied(self, delegate):
        made(self, delegate)
        copies.append(self.delegate)

    monkeypatch.setattr(CachingConfigRepository, "__init__", spied)
    before = _stored_nodes()
    fast = [OmegaConf.to_yaml(compose_config(o)) for o in OVERRIDES]
    assert "linear_init: least_squares" in fast[4]  # csv_encoder.yaml, the recipe it picked
    assert _stored_nodes() == before  # the shared store comes out as it went in
    # the repository's copy holds the one store (its structured source's)
    assert copies and all(any(getattr(source, "store", None) is store
                              for source in repository.sources) for repository in copies)
    monkeypatch.undo()
    with without():
        assert [OmegaConf.to_yaml(compose_config(o)) for o in OVERRIDES] == fast
    assert all(vars(owner)[name] is not original for (owner, name), original in REPLACED.items())


def _aged(path, seconds_ago=60, plus_ns=0):
    """Set `path`'s modification time `seconds_ago` (old enough for its parse to be kept)."""
    stamp = time.time_ns() - seconds_ago * 1_000_000_000 + plus_ns
    os.utime(path, ns=(stamp, stamp))


def _load(path):
    with open(path, encoding="utf-8") as f:
        return OmegaConf.load(f)


def test_a_config_file_that_changes_is_read_again(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\n")
    _aged(path)
    assert _load(path) == {"a": 1}
    first = _load(path)  # from the kept parse
    first.a = 5  # a loaded config is its own: changing it changes no later load
    assert _load(path) == {"a": 1}
    path.write_text("a: 22\n")  # another size
    _aged(path, 50)
    assert _load(path) == {"a": 22}
    path.write_text("a: 33\n")  # the same size, a later modification time
    _aged(path, 50, plus_ns=1_000)
    assert _load(path) == {"a": 33}
    path.write_text("- 1\n- 2\n")
    _aged(path, 40)
    assert _load(path) == [1, 2]
    path.write_text("5\n")
    _aged(path, 30)
    with pytest.raises(IOError, match="Invalid loaded object type: int"):
        _load(path)


def test_a_file_changed_within_the_clocks_tick_is_not_kept(tmp_path):
    """A same-size rewrite with the same modification time (a coarse clock) is read again:
    a file changed in the last seconds is parsed at each load."""
    path = tmp_path / "c.yaml"
    path.write_text("a: 44\n")
    stamp = os.stat(path).st_mtime_ns
    assert _load(path) == {"a": 44}
    path.write_text("a: 55\n")
    os.utime(path, ns=(stamp, stamp))
    assert _load(path) == {"a": 55}


def test_an_open_file_replaced_by_another_reads_its_own_text(tmp_path):
    path, other = tmp_path / "c.yaml", tmp_path / "new.yaml"
    path.write_text("a: 1\n")
    _aged(path)
    with open(path, encoding="utf-8") as f:
        other.write_text("a: 2\n")
        _aged(other, 30)
        os.replace(other, path)  # as an editor saves
        assert OmegaConf.load(f) == {"a": 1}  # the file it has open
    assert _load(path) == {"a": 2}


def test_a_pipe_loads_as_omegaconf_loads_it():
    read, write = os.pipe()
    os.write(write, b"a: 3\n")
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as f:
        assert OmegaConf.load(f) == {"a": 3}

"""Hydra's composition made cheaper (seqforecast/config/speed.py) composes what Hydra composes
without it: the same configs, a config file read again when it changes, the ConfigStore's nodes
left as they were, a composition kept by its group choices given this call's values and made
again when a file, a folder or the ConfigStore changes."""

import copy
import os
import time
from dataclasses import dataclass

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError

from seqforecast.config import compose_config, speed
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
    assert installed() == ["store", "yaml", "interpolation", "choices"]


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


# the same group choices with other values, and choices that pick other files
KEPT = [["attention=diff", "block_size=4"], ["attention=diff", "block_size=8", "d_model=32"],
        ["attention=diff", "block_size=4"], ["model=encoder", "attention=einsum"],
        ["experiment=itransformer", "epochs=3"], ["experiment=itransformer", "epochs=4"],
        ["data=csv", "data.path=x.csv", "model=encoder", "hydra/launcher=joblib"]]


def test_a_kept_composition_takes_each_calls_values_and_is_its_own():
    fast = [compose_config(o) for o in KEPT * 2]
    assert [cfg.block_size for cfg in fast[:3]] == [4, 8, 4] and fast[1].d_model == 32
    assert [cfg.epochs for cfg in fast[4:6]] == [3, 4]
    launched = [_with_hydra(o) for o in (KEPT[6], KEPT[6][:3])]
    assert launched[0].hydra.launcher._target_.endswith("JoblibLauncher")
    assert "joblib" not in launched[1].hydra.launcher._target_.lower()
    # this call's overrides, not a kept one's
    assert list(launched[1].hydra.overrides.task) == KEPT[6][:3]
    with without():
        slow = [compose_config(o) for o in KEPT]
    assert [OmegaConf.to_yaml(c) for c in fast] == [OmegaConf.to_yaml(c) for c in slow * 2]
    assert [_nodes(c) for c in fast] == [_nodes(c) for c in slow * 2]
    fast[0].d_model = 999  # a handed-out config is its own
    assert compose_config(KEPT[0]).d_model != 999
    for cfg in (fast[2], slow[2]):  # struct mode as Hydra sets it, on the schema's type
        with pytest.raises(ConfigAttributeError, match="Key 'nope' not in 'TrainConfig'"):
            cfg.nope = 1


def _nodes(cfg, path=""):
    """Every node's path, class, schema type, declared type and flags: what a copy must keep."""
    meta = cfg._metadata
    rows = [(path, type(cfg).__name__, meta.object_type, meta.ref_type, meta.optional,
             dict(meta.flags or {}))]
    if isinstance(cfg, DictConfig) and not (cfg._is_none() or cfg._is_missing()):
        for key in cfg.keys():
            rows += _nodes(cfg._get_node(key), f"{path}.{key}")
    elif isinstance(cfg, ListConfig) and not (cfg._is_none() or cfg._is_missing()):
        for i in range(len(cfg)):
            rows += _nodes(cfg._get_node(i), f"{path}[{i}]")
    return rows


def _with_hydra(overrides):
    """The training config as the CLI composes it, with its `hydra` node."""
    from hydra import compose, initialize_config_dir

    from seqforecast.config.compose import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=True)


def _compose_from(folder, overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(folder), version_base="1.3"):
        return compose("main", overrides=overrides)


def _write_aged(path, text, seconds_ago=60):
    path.write_text(text)
    _aged(path, seconds_ago)


@pytest.fixture
def stamp_now(monkeypatch):
    """Files stamped however recent their change (what a test writes changed in the last
    seconds, and its change time cannot be set back, so none of its compositions would be kept
    otherwise); YAML parses kept however recent too."""
    monkeypatch.setattr(speed, "KEEP_AFTER_SECONDS", 0)


def test_a_kept_composition_is_made_again_when_its_files_change(tmp_path, stamp_now,
                                                                monkeypatch):
    """A changed file, a file added to a group, and a node stored in the ConfigStore each make
    the composition again; a file changed in the last seconds is never kept."""
    group = tmp_path / "size"
    group.mkdir()
    _write_aged(tmp_path / "main.yaml", "defaults:\n  - size: small\n  - _self_\nname: a\n")
    _write_aged(group / "small.yaml", "width: 1\n")
    assert _compose_from(tmp_path, ["name=b"]).size.width == 1
    assert _compose_from(tmp_path, ["name=c"]).name == "c"
    _write_aged(group / "small.yaml", "width: 2\n", 50)  # the same size
    assert _compose_from(tmp_path, []).size.width == 2
    _write_aged(group / "large.yaml", "width: 30\n", 40)  # a new choice in the group
    assert _compose_from(tmp_path, ["size=large"]).size.width == 30
    ConfigStore.instance().store(name="tiny", node={"width": 5}, group="size")
    assert _compose_from(tmp_path, ["size=tiny"]).size.width == 5

    @dataclass
    class Local:  # a schema pickle cannot name: its merge is made each time, not kept
        width: int = 6

    ConfigStore.instance().store(name="local", node=Local, group="size")
    assert [_compose_from(tmp_path, ["size=local", f"name={n}"]).size.width
            for n in "ab"] == [6, 6]
    monkeypatch.setattr(speed, "KEEP_AFTER_SECONDS", 2)
    (group / "small.yaml").write_text("width: 7\n")  # now, so within the clock's tick
    assert _compose_from(tmp_path, []).size.width == 7
    (group / "small.yaml").write_text("width: 8\n")
    assert _compose_from(tmp_path, []).size.width == 8


def test_each_composition_resolves_its_own_time():
    """A kept merge holds nothing it resolved: `${now:...}` in hydra.sweep.dir is each
    composition's time, not the first's (the one after a second reads a later second)."""
    first = _with_hydra(["d_model=8"]).hydra.sweep.dir
    time.sleep(1.05)
    later = _with_hydra(["d_model=16"]).hydra.sweep.dir
    assert later != first


def test_defaults_picked_by_a_resolver_are_picked_again(tmp_path, stamp_now, monkeypatch):
    """A default interpolated with a resolver (`${oc.env:...}`) depends on more than the
    group choices: its defaults list is made at each composition."""
    group = tmp_path / "size"
    group.mkdir()
    (tmp_path / "main.yaml").write_text(
        "defaults:\n  - size: ${oc.env:SEQF_SIZE,small}\n  - _self_\n")
    (group / "small.yaml").write_text("width: 1\n")
    (group / "large.yaml").write_text("width: 30\n")
    widths = []
    for size in ("small", "large", "small"):
        monkeypatch.setenv("SEQF_SIZE", size)
        widths.append(_compose_from(tmp_path, []).size.width)
    assert widths == [1, 30, 1]


def test_a_folder_the_stamp_cannot_walk_composes_as_hydra_does(tmp_path, stamp_now):
    """A dangling link and a link to a folder above (a loop) in a config folder: composed as
    Hydra composes it, without a stamp (a walk would fail on either)."""
    group = tmp_path / "size"
    group.mkdir()
    (tmp_path / "main.yaml").write_text("defaults:\n  - size: small\n  - _self_\n")
    (group / "small.yaml").write_text("width: 1\n")
    (group / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    (group / "up").symlink_to(tmp_path)
    assert [_compose_from(tmp_path, [f"+n={i}"]).size.width for i in range(2)] == [1, 1]

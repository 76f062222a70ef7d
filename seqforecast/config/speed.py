"""Hydra's composition at about 60% of its cost: three things it redoes at every composition
that give the same result each time, done once per process (install(), called before any
composition by register_schemas). Measured by scripts/bench_compose.py (docs/development.md).
A training run composes once (the kept YAML serves only a later composition); a sweep composes
once a job, the docs' checks and the test suite thousands of times (28% of the suite's time was
Hydra's composition).

- The ConfigStore: Hydra deep-copies its config repository at every composition
  (CachingConfigRepository), and with it the ConfigStore singleton its structured source holds,
  every stored node, ours and Hydra's. Nothing changes the store through that copy (a load
  hands out a deep copy of its node), so the copy shares the one store.
- The YAML files: OmegaConf.load parses a config file with PyYAML's pure-Python loader at every
  load. A file's parse is kept per path, modification time and size (a file that changes is
  parsed again), and each load builds its config from a copy of it, as OmegaConf.load builds it
  from a fresh parse.
- The defaults' interpolation map: Hydra builds the map of every group's choice (an OmegaConf
  config) for each config's defaults list, to resolve interpolated defaults such as
  `optional recipe: ${data}_${model}`, which one list of the ~30 it builds holds; the others' maps
  are never read. A list without an interpolated default gets none.

Each is applied only where this Hydra and OmegaConf have what it replaces (`installed()` says
which were; tests/config/test_speed.py expects all three with the pinned ones and holds the
compositions to what Hydra composes without them).
"""

from __future__ import annotations

import copy
import os
from typing import Any

_INSTALLED: list[str] = []  # the speed-ups applied
_TRIED: list[bool] = []
# What each replaced: (owner, attribute) -> the original (None: an attribute it did not have)
REPLACED: dict[tuple[Any, str], Any] = {}
_PARSED: dict[tuple[str, int, int], Any] = {}  # (path, mtime_ns, size) -> the YAML's objects


def install() -> None:
    """Apply each speed-up this Hydra allows, once per process."""
    if _TRIED:
        return
    _TRIED.append(True)
    _share_the_store()
    _keep_parsed_yaml()
    _interpolation_maps_where_read()


def installed() -> list[str]:
    """The speed-ups in effect: 'store', 'yaml', 'interpolation'."""
    return list(_INSTALLED)


def _the_store(store, memo):
    return store


def _share_the_store() -> None:
    from hydra.core.config_store import ConfigStore

    REPLACED[(ConfigStore, "__deepcopy__")] = None
    ConfigStore.__deepcopy__ = _the_store
    _INSTALLED.append("store")


def _keep_parsed_yaml() -> None:
    import yaml
    from omegaconf import OmegaConf

    try:
        from omegaconf._utils import get_yaml_loader
    except ImportError:  # an OmegaConf whose loader is elsewhere: its own load, each time
        return
    original = OmegaConf.load

    def load(file_):
        """OmegaConf.load, a file object at its start (Hydra's loads) parsed once per version."""
        name = getattr(file_, "name", None)
        if not isinstance(name, str) or not hasattr(file_, "tell") or file_.tell() != 0:
            return original(file_)
        try:
            stat = os.stat(name)
        except OSError:
            return original(file_)
        key = (os.path.realpath(name), stat.st_mtime_ns, stat.st_size)
        if key not in _PARSED:
            _PARSED[key] = yaml.load(file_, Loader=get_yaml_loader())
        parsed = copy.deepcopy(_PARSED[key])  # plain lists and dicts: a copy is cheap
        if parsed is not None and not isinstance(parsed, (list, dict, str)):
            file_.seek(0)
            return original(file_)  # OmegaConf's own refusal
        return OmegaConf.create() if parsed is None else OmegaConf.create(parsed)

    REPLACED[(OmegaConf, "load")] = staticmethod(original)
    OmegaConf.load = staticmethod(load)
    _INSTALLED.append("yaml")


def _interpolation_maps_where_read() -> None:
    from hydra._internal import defaults_list

    original = getattr(defaults_list, "_create_interpolation_map", None)
    if original is None:
        return

    def create_interpolation_map(overrides, defaults, self_added):
        if not any(d.is_interpolation() for d in defaults):
            return None  # read only to resolve an interpolated default, which this list lacks
        return original(overrides, defaults, self_added)

    REPLACED[(defaults_list, "_create_interpolation_map")] = original
    defaults_list._create_interpolation_map = create_interpolation_map
    _INSTALLED.append("interpolation")

"""Hydra's composition at about 60% of its cost: three things it redoes at every composition
that give the same result each time, done once per process (install(), called before any
composition by register_schemas). Measured by scripts/bench_compose.py (docs/development.md).
A training run composes once (the kept YAML serves only a later composition); a sweep composes
once a job, the docs' checks and the test suite thousands of times (28% of the suite's time was
Hydra's composition).

- The ConfigStore: Hydra deep-copies its config repository at every composition
  (CachingConfigRepository), and with it the ConfigStore singleton its structured source holds,
  every stored node, ours and Hydra's. Nothing changes the store through that copy (a load
  hands out a deep copy of its node), so that copy, and only that one, shares the one store.
- The YAML files: OmegaConf.load parses a config file with PyYAML's pure-Python loader at every
  load. A file's parse is kept per file (device and inode of the open file), modification time,
  size and encoding (a file that changes is parsed again; one changed in the last two seconds,
  which a same-size rewrite within the clock's tick could hide, is not kept), and each load
  builds its config from it as OmegaConf.load does from a fresh parse (OmegaConf.create copies
  the lists and dicts). A stream that is not a seekable file at its start (a pipe, a member of
  a zip) is OmegaConf's own load.
- The defaults' interpolation map: Hydra builds the map of every group's choice (an OmegaConf
  config) for each of the ~30 defaults lists of a composition, to resolve interpolated defaults
  such as `optional recipe: ${data}_${model}`, though only one list holds one; the others' maps
  are never read. A list without an interpolated default gets none.

The first and the last replace Hydra 1.3's internals, so they apply to Hydra 1.3 only (another
composes as Hydra does, at its cost); `installed()` says which applied, and
tests/config/test_speed.py expects all three with the Hydra installed here and holds the
compositions to what Hydra composes without them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

_INSTALLED: list[str] = []  # the speed-ups applied
_TRIED: list[bool] = []
# What each replaced: (owner, attribute) -> the original
REPLACED: dict[tuple[Any, str], Any] = {}
# (st_dev, st_ino) -> ((mtime_ns, size, encoding), the YAML's objects): a file's latest version
_PARSED: dict[tuple[int, int], tuple[tuple, Any]] = {}


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


@contextlib.contextmanager
def without() -> Iterator[None]:
    """Hydra and OmegaConf as they are without the speed-ups, inside the block (what each
    replaced put back; the speed-ups again after it): what the tests and the benchmark compare
    them with."""
    kept = [(owner, name, vars(owner)[name]) for owner, name in REPLACED]
    try:
        for (owner, name), original in REPLACED.items():
            setattr(owner, name, original)
        yield
    finally:
        for owner, name, value in kept:
            setattr(owner, name, value)


def _hydra_1_3() -> bool:
    import hydra

    return hydra.__version__.startswith("1.3.")


def _the_store(store, memo):
    return store


def _share_the_store() -> None:
    if not _hydra_1_3():
        return
    from hydra._internal.config_repository import CachingConfigRepository
    from hydra.core.config_store import ConfigStore

    original = CachingConfigRepository.__init__

    def __init__(self, delegate):
        # Hydra's own copy of `delegate`, sharing the store: only while it copies (a snapshot of
        # the singletons, Singleton.get_state, still copies the store)
        ConfigStore.__deepcopy__ = _the_store
        try:
            original(self, delegate)
        finally:
            del ConfigStore.__deepcopy__

    REPLACED[(CachingConfigRepository, "__init__")] = original
    CachingConfigRepository.__init__ = __init__
    _INSTALLED.append("store")


KEEP_AFTER_SECONDS = 2  # a file changed more recently is parsed each time (see the docstring)


def _keep_parsed_yaml() -> None:
    import yaml
    from omegaconf import OmegaConf

    try:
        from omegaconf._utils import get_yaml_loader
    except ImportError:  # an OmegaConf whose loader is elsewhere: its own load, each time
        return
    original = OmegaConf.load

    def load(file_):
        """OmegaConf.load; a file object at its start (Hydra's loads) parsed once a version."""
        try:
            if not file_.seekable() or file_.tell() != 0:
                return original(file_)
            stat = os.fstat(file_.fileno())
        except (AttributeError, OSError, ValueError):  # not an open file of the disk's
            return original(file_)
        if time.time_ns() - stat.st_mtime_ns < KEEP_AFTER_SECONDS * 1_000_000_000:
            return original(file_)
        version = (stat.st_mtime_ns, stat.st_size, getattr(file_, "encoding", None))
        kept = _PARSED.get((stat.st_dev, stat.st_ino))
        if kept is None or kept[0] != version:
            kept = _PARSED[stat.st_dev, stat.st_ino] = (
                version, yaml.load(file_, Loader=get_yaml_loader()))
        parsed = kept[1]
        if parsed is not None and not isinstance(parsed, (list, dict, str)):
            file_.seek(0)
            return original(file_)  # OmegaConf's own refusal
        return OmegaConf.create() if parsed is None else OmegaConf.create(parsed)

    REPLACED[(OmegaConf, "load")] = staticmethod(original)
    OmegaConf.load = staticmethod(load)
    _INSTALLED.append("yaml")


def _interpolation_maps_where_read() -> None:
    if not _hydra_1_3():
        return
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

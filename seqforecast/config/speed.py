"""Hydra's composition at about half of its cost, and a tenth when its group choices were
composed before in the process: four things it redoes at every composition that give the same
result each time, done once per process (install(), called before any composition by
register_schemas). Measured by scripts/bench_compose.py (docs/development.md).
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
- The group choices: the defaults list and the merge of its files depend on the choices
  (`attention=diff`), not on the values (`d_model=8`), which Hydra applies after the merge; both
  are kept by choice, search path and a stamp of the files and the ConfigStore (below).

All but the YAML files replace Hydra 1.3's internals, so they apply to Hydra 1.3 only (another
composes as Hydra does, at its cost); `installed()` says which applied, and
tests/config/test_speed.py expects all four with the Hydra installed here and holds the
compositions to what Hydra composes without them.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import OrderedDict
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
    _compositions_kept_by_choice()


def installed() -> list[str]:
    """The speed-ups in effect: 'store', 'yaml', 'interpolation', 'choices'."""
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
        forget_compositions()  # the block's stores went uncounted


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


_RESOLVER = re.compile(r"\$\{\s*[\w.\-]+\s*:")  # `${name:` opens a resolver's call
_RESOLVED_DEFAULTS = [0]  # defaults lists resolved with a resolver's call, so far


def _interpolation_maps_where_read() -> None:
    if not _hydra_1_3():
        return
    from hydra._internal import defaults_list

    original = getattr(defaults_list, "_create_interpolation_map", None)
    if original is None:
        return

    def create_interpolation_map(overrides, defaults, self_added):
        interpolated = [d for d in defaults if d.is_interpolation()]
        if not interpolated:
            return None  # read only to resolve an interpolated default, which this list lacks
        # `${data}_${model}` reads the group choices; `${oc.env:SIZE}` more than them: a
        # composition that resolves one is not kept by its choices (below)
        if any(_RESOLVER.search(str(getattr(d, "value", None) or getattr(d, "path", "")))
               for d in interpolated):
            _RESOLVED_DEFAULTS[0] += 1
        return original(overrides, defaults, self_added)

    REPLACED[(defaults_list, "_create_interpolation_map")] = original
    defaults_list._create_interpolation_map = create_interpolation_map
    _INSTALLED.append("interpolation")


# -- compositions kept by their group choices ---------------------------------------------------
#
# Hydra composes in two steps: the defaults list (which file of which group, in which package)
# from the group choices (`attention=diff`, `hydra/launcher=joblib`), and the merge of those
# files; only then does it apply the value overrides (`d_model=8`) to the merged config. The
# first two depend on the group choices, the search path and what the files and the
# ConfigStore hold, never on the value overrides, and they are most of a composition's cost:
# a test suite or a sweep composes the same choices with other values hundreds of times.
# Both are kept per process, keyed by the choices, the sources and a stamp of every config file
# and folder the sources read (_tree_stamp) and of the ConfigStore; a merged config is kept
# pickled, without what the merge resolved, and each composition gets its own copy (Hydra then
# sets its flags and the values on it). A source that cannot be stamped (a package inside a zip,
# a file changed in the last seconds: _tree_stamp), or a default a resolver picks, composes as
# Hydra does.

KEPT_COMPOSITIONS = 64  # choices kept, most recently used first out of this many
_DEFAULTS: OrderedDict[tuple, Any] = OrderedDict()  # choices -> Hydra's DefaultsList
_MERGED: OrderedDict[tuple, Any] = OrderedDict()  # defaults list -> the merged files
_STORE_CHANGES = [0]  # ConfigStore.store calls, so a node stored later changes every key


def forget_compositions() -> None:
    """Drop the kept compositions: the next composition of any choices is made anew (what the
    benchmark times as a first composition)."""
    _DEFAULTS.clear()
    _MERGED.clear()


STAMPED_ENTRIES = 2000  # a source folder holding more is composed as Hydra does, unstamped


def _tree_stamp(root: str) -> tuple | None:
    """(path, inode, modification and change times, size) of every entry under `root` (the
    change time moves with any rewrite, one that keeps an old modification time too); None,
    composed as Hydra does, where an entry changed in the last KEEP_AFTER_SECONDS (a same-size
    rewrite within the clock's tick could hide), where a folder inside is a link (it may loop),
    where an entry cannot be read, or past STAMPED_ENTRIES."""
    recent = time.time_ns() - KEEP_AFTER_SECONDS * 1_000_000_000
    entries, folders = [], [root]
    try:
        while folders:
            with os.scandir(folders.pop()) as listing:
                for entry in listing:
                    stat = entry.stat()  # a linked file: its target's
                    if max(stat.st_mtime_ns, stat.st_ctime_ns) > recent:
                        return None
                    entries.append((entry.path, stat.st_ino, stat.st_mtime_ns,
                                    stat.st_ctime_ns, stat.st_size))
                    if entry.is_dir():
                        if entry.is_symlink():
                            return None
                        folders.append(entry.path)
                    if len(entries) > STAMPED_ENTRIES:
                        return None
    except OSError:  # gone, unreadable or a dangling link: Hydra says what it says of it
        return None
    return tuple(sorted(entries))


def _sources_stamp(repo) -> tuple | None:
    """What the repository's sources hold, as a hashable stamp; None: not to be kept."""
    import importlib.resources
    from pathlib import Path

    from hydra.core.config_store import ConfigStore

    stamp: list = [ConfigStore.instance(), _STORE_CHANGES[0]]
    for source in repo.get_sources():
        scheme = source.scheme()
        if scheme == "structured":  # the ConfigStore, stamped above
            stamp.append((scheme, source.path))
            continue
        if scheme == "file":
            folder = source.path
        elif scheme == "pkg":
            try:
                folder = importlib.resources.files(source.path)
            except (ImportError, TypeError, ValueError):
                return None
            if not isinstance(folder, Path):  # a package inside a zip
                return None
        else:
            return None
        if not os.path.isdir(folder):
            return None
        tree = _tree_stamp(str(folder))
        if tree is None:
            return None
        stamp.append((scheme, str(folder), tree))
    return tuple(stamp)


def _kept(memo, key):
    value = memo.get(key)
    if value is not None:
        with contextlib.suppress(KeyError):  # dropped meanwhile by another thread's composition
            memo.move_to_end(key)
    return value


def _keep(memo, key, value) -> None:
    memo[key] = value
    while len(memo) > KEPT_COMPOSITIONS:
        memo.popitem(last=False)


def _compositions_kept_by_choice() -> None:
    if not _hydra_1_3():
        return
    import copy
    import pickle
    import weakref

    from hydra._internal import config_loader_impl
    from hydra._internal.defaults_list import DefaultsList
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    if "interpolation" not in _INSTALLED:  # it tells which defaults a resolver picked
        return

    stamps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a repository's, once

    def stamp_of(repo):
        if repo not in stamps:
            stamps[repo] = _sources_stamp(repo)
        return stamps[repo]

    original_store = ConfigStore.store

    def store(self, *args, **kwargs):
        _STORE_CHANGES[0] += 1
        return original_store(self, *args, **kwargs)

    original_defaults = config_loader_impl.create_defaults_list

    def create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing):
        stamp = stamp_of(repo)
        if stamp is None:
            return original_defaults(repo, config_name, overrides_list, prepend_hydra,
                                     skip_missing)
        # as hydra's Overrides sorts them: a sweep is skipped, a dict or a non-group a value
        choices, values = [], []
        for override in overrides_list:
            if override.is_sweep_override():
                continue
            if isinstance(override.value(), dict) or not repo.group_exists(
                    override.key_or_group):
                values.append(override)
            else:
                choices.append(override.input_line)
        key = (config_name, tuple(choices), prepend_hydra, skip_missing, stamp)
        kept = _kept(_DEFAULTS, key)
        if kept is None:
            resolved = _RESOLVED_DEFAULTS[0]
            made = original_defaults(repo, config_name, overrides_list, prepend_hydra,
                                     skip_missing)
            if _RESOLVED_DEFAULTS[0] == resolved:  # its files follow from the choices alone
                _keep(_DEFAULTS, key, made)
            return made
        overrides = copy.copy(kept.overrides)  # its choices as made; the values this call's
        overrides.config_overrides = values
        return DefaultsList(defaults=list(kept.defaults), defaults_tree=kept.defaults_tree,
                            config_overrides=values, overrides=overrides)

    loader = config_loader_impl.ConfigLoaderImpl
    original_merge = loader._compose_config_from_defaults_list

    def compose_config_from_defaults_list(self, defaults, repo):
        stamp = stamp_of(repo)
        if stamp is None:
            return original_merge(self, defaults, repo)
        key = (tuple((d.config_path, d.parent, d.package, d.is_self, d.primary,
                      d.override_key) for d in defaults), stamp)
        kept = _kept(_MERGED, key)
        if kept is not None:  # its own copy: Hydra sets its flags and the values on it
            return pickle.loads(kept)
        merged = original_merge(self, defaults, repo)
        # kept pickled (a copy half a deep copy's cost to make again, a tenth to keep), without
        # what the merge resolved: `${now:...}` is the time of each composition, not the first's
        resolved = OmegaConf.get_cache(merged)
        OmegaConf.clear_cache(merged)
        try:
            _keep(_MERGED, key, pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, AttributeError, TypeError):  # a schema not importable
            pass  # by its name (defined in a function): composed each time
        finally:
            OmegaConf.set_cache(merged, resolved)
        return merged

    REPLACED[(ConfigStore, "store")] = original_store
    REPLACED[(config_loader_impl, "create_defaults_list")] = original_defaults
    REPLACED[(loader, "_compose_config_from_defaults_list")] = original_merge
    ConfigStore.store = store
    config_loader_impl.create_defaults_list = create_defaults_list
    loader._compose_config_from_defaults_list = compose_config_from_defaults_list
    _INSTALLED.append("choices")

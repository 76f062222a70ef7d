"""Registries of components by name, and the components other packages ship.

A `Registry` holds one kind's names, each a class and its options' dataclass; it loads its
entry-point group once, at its first lookup: seqforecast.families, seqforecast.positions,
seqforecast.losses and seqforecast.data (the attention backends and kernels load theirs,
seqforecast.attention and seqforecast.kernels, when attention/ is imported; docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from typing import NamedTuple


@cache
def load_plugins(group: str) -> None:
    """Import every module other packages declare under entry-point `group` (importing one
    registers what it defines)."""
    for plugin in entry_points(group=group):
        plugin.load()


class Entry(NamedTuple):
    cls: type  # the component
    options: type  # the dataclass of its options (the config node's schema)


class Registry:
    """Name -> Entry for one kind of component: `key` is its config group (`model`, `data`,
    ...), named in the one line that refuses an unknown name; `group` its entry-point group."""

    def __init__(self, key: str, group: str):
        self.key, self.group = key, group
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, options: type) -> Callable[[type], type]:
        """Class decorator: `<key>=<name>` builds the class, configured by `options`."""

        def decorate(cls: type) -> type:
            if name in self._entries:
                raise ValueError(f"{self.key}={name} is registered twice")
            self._entries[name] = Entry(cls, options)
            return cls

        return decorate

    def unregister(self, name: str) -> None:
        """Forget `name` (a test's own component, once the test is done)."""
        del self._entries[name]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        load_plugins(self.group)
        return sorted(self._entries)

    def schema(self, name: str) -> type:
        """The dataclass of `name`'s options."""
        return self[name].options

    def __getitem__(self, name: str) -> Entry:
        load_plugins(self.group)
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.key} {name!r}; allowed: "
                             f"{', '.join(self.names())}") from None

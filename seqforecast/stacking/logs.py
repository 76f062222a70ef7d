"""Each stacked member's lines in its own train.log.

One process trains every member, so the logging is routed: while the stack works on member k
(`member(k)`), records go to k's train.log and reach the console prefixed with k's tag; lines
of the stack as a whole (outside any `member`) go to every member's log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_CURRENT: ContextVar[int | None] = ContextVar("stacked_member", default=None)


@contextmanager
def member(k: int) -> Iterator[None]:
    """Records logged inside are member k's."""
    token = _CURRENT.set(k)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class _MemberOnly(logging.Filter):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def filter(self, record: logging.LogRecord) -> bool:
        current = _CURRENT.get()
        return current is None or current == self.k


class _Tagged(logging.Formatter):
    """A console formatter that prefixes a member's lines with its tag (there they
    interleave); the files keep their lines as a solo run writes them."""

    def __init__(self, inner: logging.Formatter | None, tags: list[str]):
        super().__init__()
        self.inner, self.tags = inner or logging.Formatter(), tags

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        current = _CURRENT.get()
        return line if current is None else f"[{self.tags[current]}] {line}"


@contextmanager
def routed(run_dirs: list[Path], tags: list[str], filename: str = "train.log") -> Iterator[None]:
    """Replace the root logger's file handlers (Hydra's job log) by one per member, appending
    to <run dir>/`filename` with the same format, and tag the console's member lines. Undone
    on exit."""
    root = logging.getLogger()
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]
    formatter = files[0].formatter if files else logging.Formatter(
        "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    level = files[0].level if files else logging.NOTSET
    for handler in files:
        root.removeHandler(handler)
        handler.close()
    added = []
    for k, run_dir in enumerate(run_dirs):
        handler = logging.FileHandler(Path(run_dir) / filename, mode="a")
        handler.setFormatter(formatter)
        handler.setLevel(level)
        handler.addFilter(_MemberOnly(k))
        root.addHandler(handler)
        added.append(handler)
    consoles = {h: h.formatter for h in root.handlers if h not in added}
    for handler, formatter in consoles.items():
        handler.setFormatter(_Tagged(formatter, tags))
    try:
        yield
    finally:
        for handler in added:
            root.removeHandler(handler)
            handler.close()
        for handler, formatter in consoles.items():
            handler.setFormatter(formatter)

"""key=value arguments for the small CLIs (evaluate, predict), checked in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class UsageError(ValueError):
    """A wrong command line; str(err) names the argument and shows the usage."""


def parse_key_values(
    argv: Sequence[str], defaults: Mapping[str, str | None], required: Sequence[str], usage: str
) -> dict:
    args = dict(defaults)
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep or key not in defaults:
            raise UsageError(f"unexpected argument {item!r}; usage: {usage}")
        args[key] = value
    for key in required:
        if not args.get(key):
            raise UsageError(f"{key} is required; usage: {usage}")
    return args

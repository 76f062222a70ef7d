"""What the command-line tools share: key=value arguments, and bad input as one line.

`BAD_INPUT` are the errors a user causes (a config value, a data file, a checkpoint, a run
dir, a command line); each str() is one line naming the culprit. `run_tool` gives evaluate and
predict the same behaviour: --help prints the module doc, bad input prints `error: <line>`
and exits 2, anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from .data.csv_series import DataError
from .native import KernelsUnavailable
from .options import ConfigError
from .training.checkpoint import CheckpointError, RunError


class UsageError(ValueError):
    """A wrong command line; str(err) names the argument and shows the usage."""


BAD_INPUT = (ConfigError, DataError, CheckpointError, RunError, UsageError, KernelsUnavailable)


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


def parse_bool(args: Mapping[str, str | None], key: str, usage: str) -> bool:
    """A true/false argument (also 1/0, yes/no)."""
    value = str(args[key]).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise UsageError(f"{key}={args[key]!r} is not allowed: true or false; usage: {usage}")


def run_tool(argv: list[str] | None, doc: str, action: Callable[[list[str]], None]) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(doc.strip())
        return 0
    try:
        action(argv)
    except BAD_INPUT as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0

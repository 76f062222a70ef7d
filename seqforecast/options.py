"""Declaring options: each one a dataclass field holding its type, its default and its check,
written once (config/schema.py; an attention backend's options in its own module).

    dropout: float = option(0.0, probability)        # in [0, 1)
    lambda_mode: LambdaMode = LambdaMode.reparam     # a Choice: composition refuses the rest

A `Choice` is a str Enum (its members compare equal to their names); `choice("Norm", NORMS)`
makes one from the names a component implements, so the allowed values stay where the code that
implements them is. A check is a `Check`: a predicate and the words for what it allows, run by
`check_options` on every field of a node and reported as one line naming the key, the value and
what is allowed. Nothing here imports the rest of the package.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, NamedTuple


class ConfigError(ValueError):
    """A config value out of its allowed range; str(err) is the one line to show."""


class Choice(str, Enum):
    """An option with a fixed set of values: a str Enum whose values are its members' names."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def names(cls) -> list[str]:
        return [member.value for member in cls]


def choice(name: str, names: Iterable[str]) -> type[Choice]:
    """A Choice named `name` with one member per name, in order, belonging to the calling
    module (assign it to `name` there: a config holding it then pickles, for launchers)."""
    module = sys._getframe(1).f_globals["__name__"]
    return Choice(name, [(n, n) for n in names], module=module, qualname=name)


class Check(NamedTuple):
    """`ok(value)` must hold; `allowed` says what is allowed (after "is not allowed: "): a
    string, or a function giving it where the allowed values are registered, not fixed."""

    ok: Callable[[Any], bool]
    allowed: str | Callable[[], str]

    def words(self) -> str:
        return self.allowed() if callable(self.allowed) else self.allowed


def at_least(low: float) -> Check:
    return Check(lambda v: v >= low, f"must be >= {low}")


def above(low: float) -> Check:
    return Check(lambda v: v > low, f"must be > {low}")


def within(low: float, high: float, *, closed: str = "[]") -> Check:
    """low <= v <= high, each end open or closed as `closed` writes it: "[]", "[)", "(]", "()"."""
    left, right = closed

    def ok(v) -> bool:
        return (v >= low if left == "[" else v > low) and (v <= high if right == "]" else v < high)

    return Check(ok, f"must be in {left}{low}, {high}{right}")


probability = within(0, 1, closed="[)")
positive = at_least(1)
count = at_least(0)


def option(default, check: Check | None = None, *, factory: bool = False):
    """A dataclass field with its default and its check (a list default: factory=True)."""
    metadata = {} if check is None else {"check": check}
    if factory:
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def check_options(schema: type, values: Mapping, prefix: str = "") -> None:
    """Check every field of dataclass `schema` in `values` (a plain mapping of the node): a
    Choice's value among its names, then the field's Check; nested dataclass fields too.
    ConfigError in one line for the first failure. None passes (a field typed `X | None`
    allows it; composition refuses it elsewhere)."""
    types = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        if field.name not in values or values[field.name] is None:
            continue
        value, key, kind = values[field.name], f"{prefix}{field.name}", types[field.name]
        if isinstance(kind, type) and issubclass(kind, Choice) and value not in kind.names():
            raise refuse(key, value, "choose one of " + ", ".join(kind.names()))
        check = field.metadata.get("check")
        if check is not None and not check.ok(value):
            raise refuse(key, value, check.words())
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            check_options(kind, value, f"{key}.")


def refuse(key: str, value, allowed: str) -> ConfigError:
    """The one-line error for `key`=`value` (a Choice shown as its name)."""
    shown = str(value) if isinstance(value, Choice) else value
    return ConfigError(f"{key}={shown!r} is not allowed: {allowed}")


def conflict(key: str, value, other: str, other_value, why: str) -> ConfigError:
    """The one-line error for two settings that cannot go together."""
    return ConfigError(f"{key}={value} conflicts with {other}={other_value}: {why}")

"""Name -> attention backend (its class and its options), and the one builder every caller uses.

A backend is an `Attention` (core.py) registered with the dataclass of its options (their
types, defaults and checks: the options' one home, which the config's `attention=<name>` node is
too). It is constructed as `cls(d_model, n_heads, options, **context)`, the context being what
the model tells each layer where the class takes it: `layer` (1-based depth in its stack),
`cross_attention`, `position` (a rotary or relative module), `lengths` (its query and key token
counts), `window_keys` (whether its keys are the window's own tokens, the encoder's). Its kernel
is then chosen once (kernels.py).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import NamedTuple

from ..options import ConfigError, check_options
from .core import Attention

CONTEXT = ("layer", "cross_attention", "position", "lengths", "window_keys")


class Backend(NamedTuple):
    cls: type[Attention]
    options: type  # a dataclass (base.AttentionOptions or a subclass)


_BACKENDS: dict[str, Backend] = {}


def register_attention(name: str, options: type):
    """Class decorator: make a backend buildable by `name`, with `options` (a dataclass)."""

    def decorate(cls: type[Attention]) -> type[Attention]:
        if not (isinstance(cls, type) and issubclass(cls, Attention)):
            raise TypeError(f"attention backend {name!r} must subclass "
                            f"seqforecast.attention.Attention (docs/extending.md)")
        if name in _BACKENDS:
            raise ValueError(f"attention backend {name!r} is registered twice")
        _BACKENDS[name] = Backend(cls, options)
        return cls

    return decorate


def available_attention() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_BACKENDS)


def attention_schema(name: str) -> type:
    """The dataclass of backend `name`'s options."""
    return _lookup(name).options


def attention_context(name: str) -> list[str]:
    """The context values (CONTEXT) backend `name` takes."""
    params = inspect.signature(_lookup(name).cls.__init__).parameters
    return [p for p in CONTEXT if p in params]


def build_attention(name: str, d_model: int, n_heads: int, *, kernels: str = "torch",
                    residual: bool = False, **options) -> Attention:
    """Build backend `name` with its options (and context) as keywords, the rest at their
    defaults, and choose its kernel: `kernels` is the run's set (torch, or native: the CPU's C
    kernels), `residual` whether its stack carries residual attention. Unknown names or
    options, values their checks refuse and a kernel that cannot serve raise ValueError
    (ConfigError) in one line naming what is allowed."""
    backend = _lookup(name)
    check_heads(d_model, n_heads)
    context = {k: options.pop(k) for k in attention_context(name) if k in options}
    fields = [f.name for f in dataclasses.fields(backend.options) if f.name != "name"]
    unknown = sorted(set(options) - set(fields) - {"name"})
    if unknown:
        raise ValueError(f"attention {name!r} has no option(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join([*fields, *attention_context(name)])}")
    options.pop("name", None)
    chosen = backend.options(name=name, **options)
    check_options(backend.options, dataclasses.asdict(chosen))
    conflict = chosen.shape_conflict(d_model, n_heads)
    if conflict:
        key, why = conflict
        raise ConfigError(f"attention {name!r}: {key}={getattr(chosen, key)}: {why}")
    attn = backend.cls(d_model, n_heads, chosen, **context)
    attn.use_kernel(str(chosen.kernel), kernels, residual)
    return attn


def check_heads(d_model: int, n_heads: int) -> None:
    if not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads={n_heads!r} must be a positive integer")
    if not isinstance(d_model, int) or d_model < 1 or d_model % n_heads:
        raise ValueError(f"d_model={d_model!r} must be a positive multiple of n_heads={n_heads}")


def _lookup(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown attention {name!r}; allowed: {', '.join(available_attention())}"
        ) from None

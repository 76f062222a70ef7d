"""Name -> attention backend class, and the one builder every caller goes through."""

from __future__ import annotations

import inspect

from torch import nn

_BACKENDS: dict[str, type[nn.Module]] = {}


def register_attention(name: str):
    """Class decorator: make a backend buildable by `name`."""

    def decorate(cls: type[nn.Module]) -> type[nn.Module]:
        if name in _BACKENDS:
            raise ValueError(f"attention backend {name!r} is registered twice")
        _BACKENDS[name] = cls
        return cls

    return decorate


def available_attention() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_BACKENDS)


def attention_options(name: str) -> list[str]:
    """The keyword options backend `name` accepts besides d_model and n_heads."""
    cls = _lookup(name)
    params = inspect.signature(cls.__init__).parameters
    return [p for p in params if p not in ("self", "d_model", "n_heads")]


def build_attention(name: str, d_model: int, n_heads: int, **options) -> nn.Module:
    """Build backend `name`. Unknown names and options raise ValueError naming what is allowed."""
    cls = _lookup(name)
    allowed = attention_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"attention {name!r} has no option(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(allowed)}"
        )
    check_heads(d_model, n_heads)
    return cls(d_model, n_heads, **options)


def check_heads(d_model: int, n_heads: int) -> None:
    if not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads={n_heads!r} must be a positive integer")
    if not isinstance(d_model, int) or d_model < 1 or d_model % n_heads:
        raise ValueError(f"d_model={d_model!r} must be a positive multiple of n_heads={n_heads}")


def _lookup(name: str) -> type[nn.Module]:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown attention {name!r}; allowed: {', '.join(available_attention())}"
        ) from None

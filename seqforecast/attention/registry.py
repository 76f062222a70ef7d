"""Name -> attention backend (its class and its options), and the one builder every caller uses.

A backend is an `Attention` (core.py) registered with the dataclass of its options (their
types, defaults and checks: the options' one home, which the config's `attention=<name>` node is
too). It is constructed as `cls(d_model, n_heads, options, site)`, the site (site.py) being
where the model puts the layer: every backend receives it, reads what it needs and refuses, in
its constructor, what it cannot serve. A position module acting inside attention (rotary, or
relative terms: `pos_encoding=rope|relative`) is handed over as `position=` to a backend whose
constructor takes one, and refused for one whose does not. Its kernel is then chosen once
(kernels.py).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import NamedTuple

from ..options import ConfigError, check_options
from .core import Attention
from .site import ALONE, Site, conflict

# What a layer built alone (not by a model) may be told of its site, by keyword.
SITE_WORDS = {"layer": "layer", "cross_attention": "cross", "window_keys": "window_keys",
              "residual": "residual"}


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


def takes_position(name: str) -> bool:
    """Whether backend `name` takes a position module inside it (`position=`)."""
    return "position" in inspect.signature(_lookup(name).cls.__init__).parameters


def build_attention(name: str, d_model: int, n_heads: int, *, kernels: str = "torch",
                    trains_on: str | None = None,
                    site: Site | None = None, position=None, lengths=None, **options
                    ) -> Attention:
    """Build backend `name` with its options as keywords, the rest at their defaults, at
    `site` (where the model puts it; a layer built alone may give `lengths=(Lq, Lk)`, `layer`,
    `cross_attention`, `window_keys` and `residual` instead), with a `position` module inside
    it if given, and choose its kernel: `kernels` is the run's set (torch, or native: the CPU's
    C kernels), `trains_on` the device type a run trains it on (None: not trained here).
    Unknown names or options, values their checks refuse, a site or position the backend
    cannot serve and a kernel that cannot serve raise ConfigError in one line naming what is
    allowed."""
    backend = _lookup(name)
    check_heads(d_model, n_heads)
    site = site or ALONE
    told = {SITE_WORDS[k]: options.pop(k) for k in list(options) if k in SITE_WORDS}
    if lengths is not None:
        told["q_len"], told["k_len"] = lengths
    site = site._replace(**told)
    fields = [f.name for f in dataclasses.fields(backend.options) if f.name != "name"]
    unknown = sorted(set(options) - set(fields) - {"name"})
    if unknown:
        raise ConfigError(f"attention {name!r} has no option(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join(fields)}")
    options.pop("name", None)
    chosen = backend.options(name=name, **options)
    check_options(backend.options, dataclasses.asdict(chosen), f"{site.key}.")
    context = {}
    if position is not None:
        if not takes_position(name):
            label = getattr(position, "label", type(position).__name__)
            raise conflict("pos_encoding", label, site.key, name,
                           f"{name} attention takes no position module inside it, so {label} "
                           f"would act nowhere; use sinusoidal, learned or none")
        context["position"] = position
    attn = backend.cls(d_model, n_heads, chosen, site, **context)
    attn.use_kernel(str(chosen.kernel), kernels, trains_on)
    return attn


def check_heads(d_model: int, n_heads: int) -> None:
    if not isinstance(n_heads, int) or n_heads < 1:
        raise ConfigError(f"n_heads={n_heads!r} must be a positive integer")
    if not isinstance(d_model, int) or d_model < 1 or d_model % n_heads:
        raise ConfigError(f"d_model={d_model!r} must be a positive multiple of "
                          f"n_heads={n_heads}")


def _lookup(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown attention {name!r}; allowed: {', '.join(available_attention())}"
        ) from None

"""Where an attention layer sits in its model: what the model tells every backend it builds.

A family declares its attention positions as `Site`s (the stack each serves, the token axis,
the tokens its queries and keys number, whether it masks the future, ...); the kit hands each
layer's backend its site (`layer`: its depth, `key`: the config node it was built from). A
backend reads what it needs (diff's λ schedule its depth, fourier's modes its lengths) and
refuses, in its constructor, a site it cannot serve (`Site.refuse`): the one statement of what
a mechanism cannot do, so building a model is the check of its config.
"""

from __future__ import annotations

from typing import NamedTuple

from ..options import ConfigError, conflict  # noqa: F401  conflict: re-exported for the backends

TIME, VARIATE = "time", "variate"  # the token axes an attention can serve


class Site(NamedTuple):
    """One attention position of a model (every layer of a stack shares it but `layer`)."""

    stack: str = "encoder"  # its stack's name: maps and TensorBoard tags (attention/<stack>/...)
    axis: str = TIME  # TIME: tokens along time | VARIATE: a token per channel, in no order
    q_len: int | None = None  # tokens its queries number (None: not known, a layer built alone)
    k_len: int | None = None  # and its keys
    layers: int = 1  # in the stack
    cross: bool = False  # queries and keys from different sequences
    causal: bool = False  # the future masked (a decoder generating step by step)
    stepwise: str | None = None  # "key=value" of the option that generates its queries one
    # step at a time (no query may read a later one), or None
    residual: bool = False  # the stack carries residual attention (model.res_attention)
    window_keys: bool = True  # its keys are the window's own tokens (the encoder's)
    layer: int = 1  # this layer's depth in its stack, from 1
    key: str = "attention"  # the config node its backend comes from (or variate_attention)
    model: str = ""  # the family's name, model=<name> ("" for a layer built alone)
    apart: str = ""  # how a variate site can take another backend than the time axis's

    def option(self, name: str) -> str:
        """The config key of its backend's option `name` (attention.block_size, ...)."""
        return f"{self.key}.{name}"

    def refuse(self, backend: str, *, time_axis: str | None = None, causal: str | None = None,
               mixes_queries: str | None = None, cross: str | None = None,
               residual: str | None = None, along_time: tuple[tuple[str, object], ...] = ()
               ) -> None:
        """Raise ConfigError, in one line naming both settings, if backend `backend` cannot
        serve this site for the reason given: `time_axis`, why its tokens must lie along time;
        `causal`, why it cannot mask the future; `mixes_queries`, why one query's output reads
        the other queries (a decoder generating step by step cannot have that); `cross`, why it
        cannot attend to another sequence; `residual`, why it cannot carry residual scores;
        `along_time`, its options set (key, value) that assume tokens along time."""
        why = (causal if self.causal else None) or (mixes_queries if self.stepwise else None)
        if why:
            key, _, value = self.stepwise.partition("=")
            raise conflict(self.key, backend, key, value,
                           f"a decoder step may read only the steps before it, and {why}; use "
                           f"model.decoding=oneshot or a backend that can be causal")
        if self.cross and cross:
            raise conflict(self.key, backend, "model", self.model,
                           f"its {self.stack} position is cross-attention, and {cross}")
        if self.axis == VARIATE:
            if time_axis:
                raise conflict("model", self.model, self.key, backend,
                               f"{time_axis}, and its {self.stack} tokens are channels, in no "
                               f"order{self.apart}")
            for option, value in along_time:
                raise conflict("model", self.model, self.option(option), str(value).lower(),
                               f"it assumes tokens along time; the {self.stack} tokens are "
                               f"channels, in no order{self.apart}")
        if self.residual and residual:
            raise ConfigError(f"model.res_attention=true conflicts: {residual}")

    def fewest_tokens(self) -> int | None:
        """The fewer of its query and key counts (None where not known)."""
        known = [n for n in (self.q_len, self.k_len) if n]
        return min(known) if known else None


ALONE = Site()  # the site of a layer built alone, outside a model (nothing known of its tokens)

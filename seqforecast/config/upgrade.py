"""Option values that were renamed: still read, each reported once in one line.

A config typed on the command line or saved by an older run may carry a former name; it is
rewritten to the current one before the config is checked, so old run dirs keep evaluating,
predicting, resuming and comparing with the runs made since.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping

from omegaconf import DictConfig, open_dict

log = logging.getLogger("seqforecast")

# (key, former value) -> current value
RENAMED = {
    ("data.name", "sigmoid_seed"): "sigmoid_pair",
    ("attention.head_layout", "seed"): "wide",
    ("attention.decay_form", "seed"): "reciprocal",
    ("pos_encoding.decay_form", "seed"): "reciprocal",
}
_said: set[tuple[str, str]] = set()  # each renaming is reported once per process


def upgrade_config(cfg: MutableMapping) -> list[str]:
    """Rewrite former option values in `cfg` (a DictConfig or a plain dict) in place; return
    one note per value rewritten."""
    notes = []
    for (key, former), current in RENAMED.items():
        group, _, name = key.partition(".")
        node = cfg.get(group)
        if not isinstance(node, MutableMapping) or node.get(name) != former:
            continue
        if isinstance(node, DictConfig):
            with open_dict(node):
                node[name] = current
        else:
            node[name] = current
        shown = group if name == "name" else key  # data.name is the group option data=...
        note = f"{shown}={former} is now called {shown}={current}; read as {current}"
        notes.append(note)
        if (key, former) not in _said:
            _said.add((key, former))
            log.warning(note)
    return notes

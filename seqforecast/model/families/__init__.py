"""Model families, found by name: one module a family, built from the shared layers (model/kit.py).

    transformer   the encoder-decoder (transformer.py)
    encoder       the encoder with a flatten head, PatchTST's design (encoder.py)
    itransformer  iTransformer: a token per channel (itransformer.py)
    timexer       TimeXer: the targets' patches and a global token attend to the exogenous
                  series' variate tokens (timexer.py)

Importing a family's module registers it: every module of this folder here, then, at the
first lookup by name, those other packages declare under the entry-point group
`seqforecast.families` (docs/extending.md; at the first lookup, so that a plugin can import
`seqforecast.model` whole).
"""

import importlib
import pkgutil

from .registry import (
    available_families,
    family,
    family_options,
    family_schema,
    register_family,
)

__all__ = ["available_families", "family", "family_options", "family_schema",
           "register_family"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

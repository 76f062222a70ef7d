"""The published models, one module each: its settings per dataset and horizon, as the authors'
scripts give them, and the key map that loads its official weights into this package's model.

    patchtst.py      PatchTST (model=encoder; experiment=patchtst)
    itransformer.py  iTransformer (model=itransformer; experiment=itransformer)
    timexer.py       TimeXer (model=timexer; experiment=timexer)
    results.py       the published tables' results, which studies show beside their rows

A published model's experiment names it (`published: <name>` in its YAML) and writes each key a
setting may change as `${published:<key>,<the preset's value>}`: composing `experiment=<name>
dataset=<file> out_len=<horizon>` then takes that cell's setting, whatever the cell (a sweep's
jobs each their own), and a key given on the command line is the user's. `describe` says which,
in the run's first lines. The leaderboard script and the study grids read the same settings
(`published_overrides`). `model.official_weights=checkpoint.pth` loads the official weights of
the published model whose family the run builds (`load_official_weights`).

    published_overrides("itransformer", "weather", 96)
    # ['d_model=512', 'ffn.d_ff=512', 'model.encoder_layers=3']
"""

import importlib
import pkgutil

from .common import OfficialWeightsError
from .registry import (
    HORIZONS,
    Published,
    describe,
    horizons,
    load_official_weights,
    models,
    official_for,
    published,
    published_overrides,
    register_published,
)

for _module in pkgutil.iter_modules(__path__):  # each published model registers itself
    if _module.name not in ("common", "registry", "results"):
        importlib.import_module(f"{__name__}.{_module.name}")

from .itransformer import load_itransformer_weights, load_official_itransformer  # noqa: E402
from .patchtst import load_official_patchtst, load_patchtst_weights  # noqa: E402
from .timexer import load_official_timexer, load_timexer_weights  # noqa: E402

__all__ = ["HORIZONS", "OfficialWeightsError", "Published", "describe", "horizons",
           "load_itransformer_weights", "load_official_itransformer", "load_official_patchtst",
           "load_official_timexer", "load_official_weights", "load_patchtst_weights",
           "load_timexer_weights", "models", "official_for", "published",
           "published_overrides", "register_published"]

"""The published models' settings per dataset and horizon, as the authors' scripts give them:
the overrides of `experiment=<model>` that, with `dataset=<name> out_len=<horizon>`, make the
run the published row's. The one home of these settings: the leaderboard script and the study
grids (`published: <model>` in a study file) read them from here.

    published_overrides("itransformer", "weather", 96)
    # ['d_model=512', 'ffn.d_ff=512', 'model.encoder_layers=3']
"""

from __future__ import annotations

from .options import ConfigError

HORIZONS = (96, 192, 336, 720)
HORIZONS_WEEKLY = (24, 36, 48, 60)  # illness: weekly rows, input 104

# iTransformer (thuml/iTransformer, scripts/multivariate_forecasting/, input 96): dataset ->
# horizon -> overrides; the preset (experiment=itransformer) is ETTh1's setting at 96 and 192.
_D128 = ("d_model=128", "ffn.d_ff=128")
_D512 = ("d_model=512", "ffn.d_ff=512")
ITRANSFORMER: dict[str, dict[int, tuple[str, ...]]] = {
    "etth1": {96: (), 192: (), 336: _D512, 720: _D512},
    **{name: dict.fromkeys(HORIZONS, _D128) for name in ("etth2", "ettm1", "ettm2")},
    # Exchange/iTransformer.sh trains its 336 for one epoch
    "exchange": {**dict.fromkeys(HORIZONS, _D128), 336: (*_D128, "epochs=1")},
    "weather": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=3")),
    "electricity": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=3", "batch_size=16",
                                            "lr=0.0005")),
    "traffic": dict.fromkeys(HORIZONS, (*_D512, "model.encoder_layers=4", "batch_size=16",
                                        "lr=0.001")),
}

# PatchTST (yuqinie98/PatchTST, PatchTST_supervised/scripts/PatchTST/<dataset>.sh, input 336;
# docs/patchtst.md): dataset -> overrides at every horizon; the preset is ETTh1's and ETTh2's.
_WIDE = ("d_model=128", "n_heads=16", "ffn.d_ff=256", "model.dropout=0.2")
PATCHTST: dict[str, tuple[str, ...]] = {
    "etth1": (),
    "etth2": (),
    **dict.fromkeys(("ettm1", "ettm2"), (
        *_WIDE, "trainer.schedule=onecycle", "trainer.pct_start=0.4", "trainer.patience=20")),
    "weather": (*_WIDE, "trainer.patience=20"),
    "electricity": (*_WIDE, "batch_size=32", "trainer.schedule=onecycle",
                    "trainer.pct_start=0.2", "trainer.patience=10"),
    "traffic": (*_WIDE, "batch_size=24", "trainer.schedule=onecycle", "trainer.pct_start=0.2",
                "trainer.patience=10"),
    "illness": ("in_len=104", "embedding.patch_len=24", "embedding.stride=2", "batch_size=16",
                "lr=0.0025", "trainer.schedule=constant"),
}



def _timexer(d_model=512, d_ff=2048, layers=2, batch=32, lr=0.0001, patch=16) -> tuple[str, ...]:
    """A TimeXer script's arguments (run.py's defaults where it gives none) as the overrides of
    experiment=timexer, whose preset is ETTh1-96's: d_model 256, layers 1, batches of 4."""
    found = {"d_model": (d_model, 256), "ffn.d_ff": (d_ff, 2048),
             "model.encoder_layers": (layers, 1), "batch_size": (batch, 4), "lr": (lr, 0.0001),
             "embedding.patch_len": (patch, 16), "embedding.stride": (patch, 16)}
    return tuple(f"{key}={value}" for key, (value, preset) in found.items() if value != preset)


# TimeXer (thuml/TimeXer, scripts/multivariate/, features M, input 96): dataset -> horizon ->
# overrides; the preset (experiment=timexer) is ETTh1's setting at 96.
TIMEXER: dict[str, dict[int, tuple[str, ...]]] = {
    "etth1": {96: _timexer(256, layers=1, batch=4), 192: _timexer(128, batch=4),
              336: _timexer(512, 1024, 1, 16), 720: _timexer(256, 1024, 1, 16)},
    "etth2": {96: _timexer(256, 1024, 1, 16), 192: _timexer(256, 1024, 1),
              336: _timexer(512, 1024, 2, 4), 720: _timexer(256, 1024, 2, 16)},
    "ettm1": {96: _timexer(256, layers=1, batch=4), 192: _timexer(256, 256, 1, 4),
              336: _timexer(256, 1024, 1, 4), 720: _timexer(256, 512, 1, 4)},
    "ettm2": {96: _timexer(256, layers=1), 192: _timexer(256, 1024, 1, 16),
              336: _timexer(512, 1024, 1), 720: _timexer(512, layers=1)},
    "weather": {96: _timexer(256, 512, 1, 4), 192: _timexer(128, 1024, 3, 4),
                336: _timexer(256, layers=1, batch=4), 720: _timexer(128, layers=1, batch=4)},
    "electricity": {96: _timexer(d_ff=512, layers=4, batch=4), 192: _timexer(layers=3, batch=4),
                    336: _timexer(layers=4, batch=4), 720: _timexer(layers=3, batch=4)},
    "traffic": {96: _timexer(512, 512, 3, 16, 0.001), 192: _timexer(512, 512, 3, 16, 0.001),
                336: _timexer(512, 512, 2, 16, 0.001), 720: _timexer(512, 512, 2, 16, 0.001)},
}


def _epf(d_ff: int, layers: int, batch: int) -> tuple[str, ...]:
    """TimeXer's EPF script (scripts/forecast_exogenous/EPF/TimeXer.sh: features MS, input
    168, horizon 24, patches of 24, d_model 512) for one market."""
    return ("in_len=168", *_timexer(512, d_ff, layers, batch, patch=24))


# The EPF markets (dataset=np|pjm|be|fr|de: the price OT from its own past and the market's
# two exogenous series, features MS), at their one horizon: the next day.
TIMEXER.update({"np": {24: _epf(512, 3, 4)}, "pjm": {24: _epf(2048, 3, 16)},
                "be": {24: _epf(512, 2, 16)}, "fr": {24: _epf(2048, 2, 16)},
                "de": {24: _epf(2048, 1, 4)}})


TABLES = {"itransformer": ITRANSFORMER, "patchtst": PATCHTST,  # experiment=<model>'s settings
          "timexer": TIMEXER}
MODELS = tuple(TABLES)


def horizons(model: str, dataset: str) -> tuple[int, ...]:
    """The horizons the published scripts run `model` at on `dataset`."""
    found = TABLES[model].get(dataset)
    if isinstance(found, dict):  # a setting per horizon: those horizons
        return tuple(found)
    return HORIZONS_WEEKLY if model == "patchtst" and dataset == "illness" else HORIZONS


def published_overrides(model: str, dataset: str, horizon: int) -> list[str]:
    """The overrides of `experiment=<model>` for `dataset` at `horizon`; a model, dataset or
    horizon the published scripts do not cover is refused in one line (ConfigError)."""
    if model not in MODELS:
        raise ConfigError(f"published settings exist for {', '.join(MODELS)}, not {model!r}")
    table = TABLES[model]
    if dataset not in table:
        raise ConfigError(f"the published {model} has no setting for dataset={dataset}: "
                          f"choose from {', '.join(table)}")
    if horizon not in horizons(model, dataset):
        raise ConfigError(f"the published {model} has no setting for out_len={horizon} on "
                          f"{dataset}: choose from {', '.join(map(str, horizons(model, dataset)))}")
    found = table[dataset]
    return list(found[horizon] if isinstance(found, dict) else found)

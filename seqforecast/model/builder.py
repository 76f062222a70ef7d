"""`build_model(cfg)`: a composed config in, a forecaster out: the family `model=<name>` names
(families/: the encoder-decoder `transformer`, the flatten-head `encoder`, `itransformer`, or one
registered from a package of yours), built from the shared layers the other groups pick
(kit.py), forecasting a point, quantiles or a distribution (`loss`: probabilistic/outputs.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from .families import family, family_options
from .forecaster import WindowForecaster
from .kit import Kit


def _plain(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    return dict(cfg)


def build_model(cfg: Mapping, n_features: int = 1, n_targets: int = 1, kernels: str = "torch",
                trains_on: str | None = None) -> WindowForecaster:
    """Build the forecaster from a composed, checked config (groups model, attention,
    pos_encoding, ffn, embedding, data, loss: config/check.py). `n_features`: input
    channels (targets first, then covariates); `n_targets`: channels forecast (1 and 1 for the
    sigmoids). `kernels`: the set it runs, `torch` (stock PyTorch) or `native` (the CPU's C
    kernels: `native.resolve` picks a run's); each piece with a kernel (attention, dropout,
    the FFN, the residual blocks) is built from it. `trains_on`: the device type a run trains
    it on (cpu, cuda), for the kernels that train on some only; None: it is not trained here
    (a saved run evaluated, or a model built alone). Every component refuses, when built, what
    it cannot be: ConfigError in one line naming the keys (config/check.py builds the model on
    the meta device to check a config so)."""
    cfg = _plain(cfg)
    options = family_options(cfg)
    kit = Kit(cfg, options, n_features, n_targets, kernels, trains_on)
    model = family(options.name).cls(options, kit)
    kit.check_used()
    return model

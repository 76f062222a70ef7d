"""Published models' official weights in this package's model: PatchTST's (time tokens, patches)
and iTransformer's (variate tokens). `model.official_weights=checkpoint.pth` loads the one that
fits the run's model."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from ..embedding import VariateTokens
from ..encoder import EncoderForecaster
from .common import OfficialWeightsError
from .itransformer import load_itransformer_weights, load_official_itransformer
from .patchtst import load_official_patchtst, load_patchtst_weights

__all__ = ["OfficialWeightsError", "load_official_itransformer", "load_official_patchtst",
           "load_official_weights", "published_model"]


def published_model(model: EncoderForecaster) -> str:
    """Whose official checkpoints fit `model`: iTransformer's for variate tokens, else
    PatchTST's."""
    return "iTransformer" if isinstance(model.tokens, VariateTokens) else "PatchTST"


def load_official_weights(model: EncoderForecaster, state_dict: Mapping[str, Tensor]) -> None:
    """Copy an official state dict (the one `published_model` names) into `model` in place,
    or refuse it whole in one line (OfficialWeightsError)."""
    if published_model(model) == "iTransformer":
        load_itransformer_weights(model, state_dict)
    else:
        load_patchtst_weights(model, state_dict)

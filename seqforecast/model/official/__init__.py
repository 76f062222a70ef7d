"""Published models' official weights in this package's model: PatchTST's (model=encoder),
iTransformer's (model=itransformer) and TimeXer's (model=timexer).
`model.official_weights=checkpoint.pth` loads the one the run's family publishes (its
`load_official`)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from .common import OfficialWeightsError
from .itransformer import load_itransformer_weights, load_official_itransformer
from .patchtst import load_official_patchtst, load_patchtst_weights
from .timexer import load_official_timexer, load_timexer_weights

__all__ = ["OfficialWeightsError", "load_itransformer_weights", "load_official_itransformer",
           "load_official_patchtst", "load_official_timexer", "load_official_weights",
           "load_patchtst_weights", "load_timexer_weights", "published_model"]


def published_model(model: nn.Module) -> str | None:
    """Whose official checkpoints fit `model` (its family's PUBLISHED), or None."""
    return getattr(model, "PUBLISHED", None)


def load_official_weights(model: nn.Module, state_dict: Mapping[str, Tensor]) -> None:
    """Copy an official state dict (the one `published_model` names) into `model` in place,
    or refuse it whole in one line (OfficialWeightsError)."""
    if published_model(model) is None:
        raise OfficialWeightsError(f"no official weights load into {type(model).__name__}: "
                                   f"its family publishes none")
    model.load_official(state_dict)

"""seqforecast: config-driven encoder-decoder Transformer forecasting."""

from .model import build_model

__version__ = "0.1.0"
__all__ = ["build_model"]

"""seqforecast: config-driven encoder-decoder Transformer forecasting."""

__version__ = "0.1.0"

"""The forecasters (encoder-decoder, encoder-only), their parts and the builder."""

from .builder import MODELS, build_model
from .encoder import EncoderForecaster
from .ffn import ACTIVATIONS, FeedForward
from .forecaster import WindowForecaster
from .layers import DecoderLayer, EncoderLayer
from .normalization import INSTANCE_NORMS
from .positional import POSITIONAL_ENCODINGS, build_input_encoding
from .transformer import DECODING, ForecastTransformer

__all__ = [
    "ACTIVATIONS",
    "DECODING",
    "INSTANCE_NORMS",
    "MODELS",
    "POSITIONAL_ENCODINGS",
    "DecoderLayer",
    "EncoderForecaster",
    "EncoderLayer",
    "FeedForward",
    "ForecastTransformer",
    "WindowForecaster",
    "build_input_encoding",
    "build_model",
]

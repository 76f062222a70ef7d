"""The forecaster: positional encodings, FFN, layers, the Transformer and its builder."""

from .builder import build_model
from .ffn import ACTIVATIONS, FeedForward
from .layers import DecoderLayer, EncoderLayer
from .normalization import INSTANCE_NORMS
from .positional import POSITIONAL_ENCODINGS, build_input_encoding
from .transformer import DECODING, ForecastTransformer

__all__ = [
    "ACTIVATIONS",
    "DECODING",
    "INSTANCE_NORMS",
    "POSITIONAL_ENCODINGS",
    "DecoderLayer",
    "EncoderLayer",
    "FeedForward",
    "ForecastTransformer",
    "build_input_encoding",
    "build_model",
]

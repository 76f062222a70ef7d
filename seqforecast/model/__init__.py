"""The forecaster: positional encodings, FFN, layers, the Transformer and its builder."""

from .builder import build_model
from .ffn import ACTIVATIONS, FeedForward
from .layers import DecoderLayer, EncoderLayer
from .positional import POSITIONAL_ENCODINGS, build_input_encoding
from .transformer import DECODING, INSTANCE_NORMS, ForecastTransformer

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

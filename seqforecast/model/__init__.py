"""The forecasters: model families (families/) built from shared layers (kit.py), and the
builder."""

from .builder import build_model
from .families import available_families, family_schema, register_family
from .families.encoder import EncoderForecaster
from .families.itransformer import Itransformer
from .families.transformer import ForecastTransformer
from .ffn import ACTIVATIONS, FeedForward
from .forecaster import WindowForecaster
from .kit import Kit
from .layers import DecoderLayer, EncoderLayer
from .normalization import INSTANCE_NORMS
from .options import EncoderOptions, ModelOptions, Site
from .positional import POSITIONAL_ENCODINGS, build_input_encoding

__all__ = [
    "ACTIVATIONS",
    "INSTANCE_NORMS",
    "POSITIONAL_ENCODINGS",
    "DecoderLayer",
    "EncoderForecaster",
    "EncoderLayer",
    "EncoderOptions",
    "FeedForward",
    "ForecastTransformer",
    "Itransformer",
    "Kit",
    "ModelOptions",
    "Site",
    "WindowForecaster",
    "available_families",
    "build_input_encoding",
    "build_model",
    "family_schema",
    "register_family",
]

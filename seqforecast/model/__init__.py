"""The forecasters: model families (families/) built from shared layers (kit.py), and the
builder."""

from ..attention import TIME, VARIATE, Site
from .builder import build_model
from .families import available_families, family_schema, register_family
from .families.encoder import EncoderForecaster
from .families.itransformer import Itransformer
from .families.timexer import Timexer
from .families.transformer import ForecastTransformer
from .ffn import ACTIVATIONS, FeedForward
from .forecaster import WindowForecaster
from .kit import Kit
from .layers import DecoderLayer, EncoderLayer
from .normalization import INSTANCE_NORMS
from .options import EncoderOptions, ModelOptions
from .parts import Parts, kernel_set, register_parts
from .positional import Positions, available_positions, build_positions, register_position

__all__ = [
    "ACTIVATIONS",
    "INSTANCE_NORMS",
    "TIME",
    "VARIATE",
    "DecoderLayer",
    "EncoderForecaster",
    "EncoderLayer",
    "EncoderOptions",
    "FeedForward",
    "ForecastTransformer",
    "Itransformer",
    "Kit",
    "ModelOptions",
    "Parts",
    "Positions",
    "Site",
    "Timexer",
    "WindowForecaster",
    "available_families",
    "available_positions",
    "build_model",
    "build_positions",
    "family_schema",
    "kernel_set",
    "register_family",
    "register_parts",
    "register_position",
]

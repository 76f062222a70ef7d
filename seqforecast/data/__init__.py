"""Data: the sigmoid-series generators, the test curve, splits and batches."""

from .splits import ForecastData, Split, generator_options, synthetic_data
from .synthetic import GENERATORS, sigmoid, sigmoid_seed, test_curve

__all__ = [
    "GENERATORS",
    "ForecastData",
    "Split",
    "generator_options",
    "sigmoid",
    "sigmoid_seed",
    "synthetic_data",
    "test_curve",
]

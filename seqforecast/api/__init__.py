"""The Python API on DataFrames: `Forecaster` (forecaster.py) over the command line's run, and
the frames' way in and out of its CSV path (frames.py). Needs pandas (the `frames` extra)."""

from .forecaster import Forecaster

__all__ = ["Forecaster"]

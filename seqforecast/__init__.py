"""seqforecast: config-driven Transformer forecasting (encoder-decoder or encoder-only) with
swappable attention backends, scored beside baselines on held-out data."""

from . import native  # noqa: F401  registers the CPU's C kernels as a kernel set
from .model import build_model

__version__ = "0.1.0"
__all__ = ["Forecaster", "build_model"]


def __getattr__(name: str):
    # Forecaster on first use: its frames need pandas, which `import seqforecast` does not
    if name == "Forecaster":
        from .api import Forecaster

        return Forecaster
    raise AttributeError(f"module 'seqforecast' has no attribute {name!r}")

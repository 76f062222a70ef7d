"""Process set-up: seeds, device, threads."""

from __future__ import annotations

import random

import numpy as np
import torch

from ..config.validate import ConfigError


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (every device), so a seed fixes a CPU run's numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def resolve_device(name: str) -> torch.device:
    """`auto` -> cuda, else mps, else cpu. An explicit device that is absent is an error."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name!r}: CUDA is not available here; use auto or cpu")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("trainer.device='mps': MPS is not available here; use auto or cpu")
    return torch.device(name)


def configure_threads(num_threads: int) -> None:
    if num_threads > 0:
        torch.set_num_threads(num_threads)

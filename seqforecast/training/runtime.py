"""Process set-up: seeds, device, threads."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch
from torch import nn

from ..config.validate import ConfigError

log = logging.getLogger(__name__)


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


def compile_model(model: nn.Module) -> bool:
    """torch.compile `model` in place (state-dict keys unchanged). Where torch.compile cannot
    work (no C++ toolchain, an unsupported platform), say so once and train eagerly; a part of
    the model it cannot compile runs eagerly too. Returns whether compiling is on."""
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(4))  # the toolchain works at all
    except Exception as err:  # whatever the backend raises: compiling is an optimisation
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        log.warning("trainer.compile=true: torch.compile is unavailable here (%s); "
                    "training without it", reason)  # fmt: skip
        return False
    torch._dynamo.config.suppress_errors = True
    model.compile()
    return True

"""Column scaling fit on the training rows only: none, standard, minmax.

`fit_scaler` sees only the rows it is given (the caller passes the training range); the
scaler maps raw values to model units (`transform`) and back (`inverse`), column by column.
Its state is two tensors, saved in checkpoints so `predict` scales new data the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

SCALERS = ("none", "standard", "minmax")


@dataclass
class Scaler:
    kind: str
    shift: Tensor  # [C]
    scale: Tensor  # [C]

    def transform(self, values: np.ndarray) -> np.ndarray:
        return (values - self.shift.numpy()) / self.scale.numpy()

    def inverse(self, x: Tensor, columns: slice = slice(None)) -> Tensor:
        """Model units -> raw units for a tensor [..., C'] holding `columns` of the data."""
        shift = self.shift[columns].to(x.device, x.dtype)
        scale = self.scale[columns].to(x.device, x.dtype)
        return x * scale + shift

    def state(self) -> dict:
        return {"kind": self.kind, "shift": self.shift, "scale": self.scale}

    @classmethod
    def from_state(cls, state: dict) -> Scaler:
        return cls(state["kind"], state["shift"], state["scale"])


def fit_scaler(kind: str, train_values: np.ndarray) -> Scaler:
    """Fit on `train_values` [rows, C] (the training range, nothing else), on its observed
    values: empty cells (NaN) are left out rather than filled first."""
    columns = train_values.shape[1]
    if kind == "none":
        shift, scale = np.zeros(columns), np.ones(columns)
    elif kind == "standard":
        shift, scale = np.nanmean(train_values, axis=0), np.nanstd(train_values, axis=0)
    elif kind == "minmax":
        shift = np.nanmin(train_values, axis=0)
        scale = np.nanmax(train_values, axis=0) - shift
    else:
        raise ValueError(f"data.scale={kind!r} is not allowed: choose one of {', '.join(SCALERS)}")
    scale = np.where(scale > 0, scale, 1.0)  # a constant column stays put instead of dividing by 0
    return Scaler(kind, torch.from_numpy(shift).double(), torch.from_numpy(scale).double())

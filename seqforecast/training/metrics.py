"""Forecast error metrics, and running a model in evaluation mode."""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import Tensor

METRICS = ("mse", "mae", "rmse")


def forecast_metrics(prediction: Tensor, target: Tensor) -> dict[str, float]:
    """MSE, MAE and RMSE over every value, accumulated in float64."""
    if prediction.shape != target.shape:
        raise ValueError(f"prediction {tuple(prediction.shape)} vs target {tuple(target.shape)}")
    error = prediction.detach().double() - target.detach().double()
    mse = error.square().mean().item()
    return {"mse": mse, "mae": error.abs().mean().item(), "rmse": math.sqrt(mse)}


@contextmanager
def evaluation(model):
    """Eval mode and no autograd for the block; the model's own mode comes back after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def predict(model, src: Tensor, batch_size: int) -> Tensor:
    """Model forecasts for every window of `src` (eval mode, no window dropped)."""
    with evaluation(model):
        return torch.cat([model(src[i : i + batch_size]) for i in range(0, len(src), batch_size)])

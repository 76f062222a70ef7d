"""The loop's own guarantees, in-process: divergence never overwrites a good checkpoint."""

import math

import pytest
import torch
from torch import nn

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.data import synthetic_data
from seqforecast.training import load_checkpoint, train_model
from seqforecast.training.loop import NonFiniteLoss


class BreaksAtStep(nn.Module):
    """The wrapped model, whose forecasts turn NaN from training step `step` on."""

    def __init__(self, model, step):
        super().__init__()
        self.model, self.step, self.calls = model, step, 0

    def forward(self, src, tgt=None):
        out = self.model(src, tgt)
        if self.training:
            self.calls += 1
            if self.calls >= self.step:
                return out * math.nan
        return out


def test_a_non_finite_loss_stops_training_and_keeps_the_best_checkpoint(tmp_path):
    cfg = compose_config(["experiment=quick", "data.train_size=64", "batch_size=16"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    model = BreaksAtStep(build_model(cfg), step=4 * 2 + 3)  # 4 steps per epoch: dies in epoch 3
    trainer = dict(cfg.trainer, epochs=5, patience=0)
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss nan at epoch 3, step 11"):
        train_model(model, data, trainer, tmp_path, seed=0, config_yaml="x")
    best = load_checkpoint(tmp_path / "best.pt")
    last = load_checkpoint(tmp_path / "last.pt")
    assert best["epoch"] <= 2 and last["epoch"] == 2
    for state in (best, last):
        assert all(t.isfinite().all() for t in state["model"].values())

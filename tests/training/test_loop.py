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


SYNCING = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")


def test_a_training_step_never_waits_on_the_device(tmp_path, monkeypatch):
    """Inside a step no seqforecast code reads a tensor back to the host (a GPU would stall):
    the numbers stay on the device until the interval's one flush."""
    import inspect

    from seqforecast.training import loop as loop_module
    from seqforecast.training import tally as tally_module

    cfg = compose_config(["experiment=quick", "data.train_size=160", "batch_size=16",
                          "attention=diff", "model.instance_norm=revin",
                          "model.linear_path=nlinear"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    calls, inside = [], [False]
    for name in SYNCING:
        original = getattr(torch.Tensor, name)

        def patched(self, *args, _original=original, _name=name, **kwargs):
            caller = inspect.currentframe().f_back.f_code.co_filename
            if inside[0] and "seqforecast" in caller:
                calls.append((_name, caller))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, patched)
    step, flush = loop_module.RunLoop.step, tally_module.StepTally.flush
    flushes = []

    def watched_step(self, batch):
        inside[0] = True
        try:
            return step(self, batch)
        finally:
            inside[0] = False

    def counted_flush(self, stop):
        flushes.append(self.steps)
        return flush(self, stop)

    monkeypatch.setattr(loop_module.RunLoop, "step", watched_step)
    monkeypatch.setattr(tally_module.StepTally, "flush", counted_flush)
    trainer = dict(cfg.trainer, epochs=2, patience=0, log_every=4)
    train_model(build_model(cfg), data, trainer, tmp_path, seed=0, config_yaml="x")
    assert calls == []
    # 10 steps per epoch, flushed after 4, 8 and the epoch's last: 3 syncs per epoch.
    assert flushes == [4, 4, 2, 4, 4, 2]

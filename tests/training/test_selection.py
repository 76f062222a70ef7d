"""Which epoch a run keeps: the selection metric (data or scaled units, or the model's own
training loss), and a trained epoch replacing the best only when it is lower beyond noise over
stretches of validation time."""

import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.data import synthetic_data
from seqforecast.data.splits import Split, WindowSplit
from seqforecast.training import train_model
from seqforecast.training.evaluation import Evaluator
from seqforecast.training.loop import beyond_noise


def test_beyond_noise_needs_every_stretch_to_agree():
    assert beyond_noise([0.90, 0.91, 0.89, 0.90], [1.0, 1.0, 1.0, 1.0])
    # Lower on the sum, carried by one stretch: not beyond noise.
    assert not beyond_noise([0.60, 1.05, 0.98, 1.02], [1.0, 1.0, 1.0, 1.0])
    assert not beyond_noise([1.1, 1.1, 1.1], [1.0, 1.0, 1.0])
    # Empty stretches (NaN) are left out; fewer than two pairs decide nothing.
    assert beyond_noise([0.9, float("nan"), 0.9, 0.91], [1.0, 1.0, 1.0, 1.0])
    assert not beyond_noise([0.5, float("nan")], [1.0, 1.0])


def test_time_blocks_cut_each_series_into_contiguous_stretches():
    values = torch.arange(100, dtype=torch.float32)[:, None]
    # Two series of 10 and 7 windows, each in time order.
    starts = torch.tensor([*range(20, 30), *range(60, 67)])
    series = torch.tensor([0] * 10 + [1] * 7)
    split = WindowSplit(values, starts, 4, 2, 1, series)
    data = synthetic_data(compose_config(["experiment=quick"]).data, 0, torch.device("cpu"))
    data.val = split
    evaluator = Evaluator(data, {}, batch_size=4)
    evaluator.splits["val"] = split
    blocks = evaluator.time_blocks("val", 3).tolist()
    assert blocks == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2] + [0, 0, 0, 1, 1, 2, 2]
    one = Split(torch.zeros(9, 4, 1), torch.zeros(9, 2, 1))
    evaluator.splits["test"] = one
    assert evaluator.time_blocks("test", 3).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


class Scripted(Evaluator):
    """Validation numbers by epoch, as given: (overall MSE, MSE per stretch of time[, loss])."""

    def __init__(self, data, script):
        super().__init__(data, {}, batch_size=64)
        self.script, self.calls = script, 0

    def model_metrics(self, model, split, blocks=0):
        self.current = self.script[self.calls]
        self.calls += 1
        loss = {"loss": self.current[2]} if len(self.current) > 2 else {}
        return {"mse": self.current[0], "mae": 0.0, **loss}

    def block_mse(self, split, metric="mse"):
        return self.current[1]


@pytest.mark.parametrize("blocks,kept", [(0, 1), (4, 2)])
def test_a_trained_epoch_replaces_the_best_only_beyond_noise(tmp_path, blocks, kept):
    cfg = compose_config(["experiment=quick", "data.train_size=32", "batch_size=16"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    script = [
        (1.00, [1.0, 1.0, 1.0, 1.0]),  # epoch 0: the start
        (0.95, [0.70, 1.05, 1.02, 1.03]),  # lower overall, from one stretch only
        (0.96, [0.96, 0.95, 0.97, 0.96]),  # lower in every stretch
    ]
    trainer = dict(cfg.trainer, epochs=2, patience=0, validate_initial=True,
                   selection_blocks=blocks)
    result = train_model(
        build_model(cfg), data, trainer, tmp_path, seed=0, config_yaml="x",
        evaluator=Scripted(data, script),
    )
    assert result.best_epoch == kept
    assert result.best_val_mse == script[kept][0]


@pytest.mark.parametrize("select_on,kept", [("mse", 1), ("loss", 2)])
def test_select_on_loss_keeps_the_epoch_with_the_lowest_validation_loss(tmp_path, select_on,
                                                                       kept):
    cfg = compose_config(["experiment=quick", "loss=quantile", "data.train_size=32",
                          "batch_size=16"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    script = [(1.0, [], 0.50), (0.90, [], 0.45), (0.95, [], 0.40)]  # the best median != loss's
    trainer = dict(cfg.trainer, epochs=2, patience=0, validate_initial=True, select_on=select_on)
    result = train_model(
        build_model(cfg), data, trainer, tmp_path, seed=0, config_yaml="x",
        evaluator=Scripted(data, script),
    )
    assert result.best_epoch == kept


@pytest.mark.parametrize("loss", ["mse", "quantile", "gaussian"])
def test_the_validation_loss_is_the_models_own_loss_over_the_validation_windows(loss):
    cfg = compose_config(["experiment=quick", f"loss={loss}", "data.train_size=32",
                          "data.val_size=24"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    for p in model.parameters():  # away from the start, where every quantile is one value
        p.data.add_(0.05 * torch.randn_like(p))
    evaluator = Evaluator(data, {}, batch_size=10)  # batches of 10: the sums must add up
    val = evaluator.model_metrics(model, "val", blocks=3)
    src, target = evaluator.splits["val"].take(slice(None))
    with torch.no_grad():
        params = model(src, distribution=True)  # [N, out_len, T, K]
        point = model(src)
    expected = model.output.loss(params, target).mean()
    assert val["loss"] == pytest.approx(float(expected), rel=1e-5)
    assert torch.allclose(model.output.point(params), point, atol=1e-6)  # one forward, same point
    if loss == "mse":  # a point's loss is its squared error in model units
        assert val["loss"] == pytest.approx(float((point - target).square().mean()), rel=1e-5)
    # per stretch of time too (selection_blocks), each stretch's mean, equal stretches here
    blocks = evaluator.block_mse("val", "loss")
    assert len(blocks) == 3 and sum(blocks) / 3 == pytest.approx(val["loss"], rel=1e-5)

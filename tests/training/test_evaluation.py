"""The one evaluation path, and one unit for every logged error."""

import copy

import numpy as np
import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.data import csv_data, synthetic_data
from seqforecast.training import forecast_metrics, train_model
from seqforecast.training.evaluation import Evaluator, ratios
from seqforecast.training.monitor import Monitor


class Recorder(Monitor):
    def __init__(self):
        self.steps, self.epochs = [], []

    def on_step(self, step, scalars):
        self.steps.append(dict(scalars))

    def on_epoch_end(self, epoch, step, model, val):
        self.epochs.append(dict(val))


def test_the_evaluator_scores_model_and_baselines_on_the_same_windows():
    cfg = compose_config(["experiment=quick", "data.test_size=300"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    model = build_model(cfg).eval()
    evaluator = Evaluator.for_run(data, cfg)
    results = evaluator.evaluate(model)
    assert list(results) == ["test", "test_curve", "val"]
    for split_name, split in data.eval_splits().items():
        rows = results[split_name]
        assert list(rows) == ["model", "last_value", "drift", "nlinear"]
        model_row = dict(rows["model"])
        loss = model_row.pop("loss")  # the model's own training loss, beside its errors
        with torch.no_grad():
            assert model_row == forecast_metrics(model(split.src), split.target)
        assert loss == pytest.approx(model_row["mse"])  # a point's: its squared error (unscaled)
        for name, forecast in evaluator.baselines.items():
            assert rows[name] == forecast_metrics(forecast(split.src), split.target)
    assert len(data.test) == 300 and len(data.test_curve) == 1
    ratio = ratios(results)["test"]["nlinear"]
    assert ratio == results["test"]["model"]["mse"] / results["test"]["nlinear"]["mse"]


def test_train_mse_is_logged_in_the_data_units_like_validation(tmp_path):
    """A CSV in the thousands, standard-scaled: the logged training MSE is the error of the
    forecasts in the file's units, not in the scaled units the loss is optimised in."""
    t = np.arange(300)
    load = 5000 + 800 * np.sin(2 * np.pi * t / 24) + 3 * t
    path = tmp_path / "load.csv"
    path.write_text("load\n" + "\n".join(f"{v:.3f}" for v in load) + "\n")
    cfg = compose_config(["data=csv", f"data.path={path}", "data.target=load", "in_len=12",
                          "out_len=6", "d_model=16", "n_heads=2", "model.label_len=4",
                          "trainer.validate_initial=false"])
    data = csv_data(cfg.data, torch.device("cpu"))
    assert data.scaler.scale[0] > 100  # scaled units differ from the data's by a factor > 1e4
    model = build_model(cfg, data.n_features)
    before = copy.deepcopy(model)
    trainer = dict(cfg.trainer, epochs=1, batch_size=len(data.train), patience=0)
    recorder = Recorder()
    train_model(model, data, trainer, tmp_path, seed=0, config_yaml="x", monitor=recorder)
    # One step over every training window: its error is the untrained model's, in load units.
    before.train()
    with torch.no_grad():
        prediction = before(data.train.src, data.train.target)
    expected = forecast_metrics(data.to_raw(prediction), data.to_raw(data.train.target))["mse"]
    assert len(recorder.steps) == 1
    assert recorder.steps[0]["mse"] == pytest.approx(expected, rel=1e-4)
    scaled = forecast_metrics(prediction, data.train.target)["mse"]
    assert recorder.steps[0]["mse"] > 1e3 * scaled
    # The validation MSE the loop logs comes from the same evaluator, in the same units.
    val = Evaluator(data, {}, 64).model_metrics(model, "val")
    assert recorder.epochs[0] == val


def test_interval_scores_of_a_batch_scored_in_slices_are_those_of_the_whole_batch(monkeypatch):
    """A batch's conformal quantiles are scored a slice of windows at a time (quantile_parts:
    at the field's large files a batch's quantiles are gigabytes): every interval score and the
    calibration predict draws from are those of the batch scored whole, to the bit."""
    from seqforecast.training import evaluation

    cfg = compose_config(["experiment=quick", "data.test_size=300"])
    data = synthetic_data(cfg.data, 0, torch.device("cpu"))
    model = build_model(cfg).eval()
    intervals = dict(cfg.intervals)
    whole = Evaluator.for_run(data, cfg)
    expected = whole.interval_metrics(model, intervals)
    point = torch.zeros(1, cfg.out_len, 1)
    monkeypatch.setattr(evaluation, "QUANTILE_VALUES", 7 * point.numel() * len(
        intervals["quantiles"]))  # 7 windows a slice: batches of 256 in 37 slices
    assert len(evaluation.quantile_parts(torch.zeros(256, cfg.out_len, 1),
                                         len(intervals["quantiles"]))) == 37
    sliced = Evaluator.for_run(data, cfg)
    assert sliced.interval_metrics(model, intervals) == expected
    assert torch.equal(sliced.calibration["model"].sorted, whole.calibration["model"].sorted)
    assert set(expected) == {"model", "last_value", "drift", "nlinear"}
    assert expected["model"]["coverage_80"] > 0

"""The run monitor's pieces: figures, flattening, and events that survive a failed run."""

import os
import socket
import time

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

import seqforecast.runs.training as run_module
from seqforecast.config import compose_config
from seqforecast.training.figures import attention_figure, forecast_figure, render
from seqforecast.training.monitor import RunMonitor, flatten
from seqforecast.training.probe import probe


def test_signed_maps_use_a_diverging_colour_map_centred_on_zero():
    weights = np.array([[[0.5, -0.25], [0.0, 0.1]]])
    fig = attention_figure(weights, [(0, 0), (1, 1)], [(0, 0), (1, 1)], "t", signed=True)
    image = fig.axes[0].images[0]
    assert image.get_cmap().name == "RdBu_r"
    assert image.norm.vcenter == 0.0 and image.norm.vmin == -0.5 and image.norm.vmax == 0.5
    assert len(fig.axes) == 2  # one head panel and the colour bar
    assert fig.axes[0].get_xlabel() == "key time step"
    assert fig.axes[0].get_ylabel() == "query time step"
    plain = attention_figure(
        np.abs(weights).repeat(3, 0), [(5, 5), (6, 6)], [(0, 0), (1, 1)], "t", signed=False
    )
    assert plain.axes[0].images[0].get_cmap().name == "viridis"
    assert len(plain.axes) == 4
    # Axes show time steps: query rows 5 and 6.
    assert plain.axes[0].images[0].get_extent() == [-0.5, 1.5, 6.5, 4.5]


def test_variate_maps_are_labelled_by_channel():
    """Variate tokens each read the whole window: one cell per channel, integer ticks."""
    weights = np.full((2, 5, 5), 0.2)
    fig = attention_figure(weights, [(0, 95)] * 5, [(0, 95)] * 5, "t", signed=False)
    assert fig.axes[0].get_xlabel() == "key channel"
    assert fig.axes[0].get_ylabel() == "query channel"
    assert fig.axes[0].images[0].get_extent() == [-0.5, 4.5, 4.5, -0.5]
    patches = attention_figure(weights, [(0, 15), (8, 23)] * 2 + [(16, 31)],
                               [(0, 15), (8, 23)] * 2 + [(16, 31)], "t", signed=False)
    assert patches.axes[0].get_xlabel() == "key patch (time steps)"


def test_forecast_figure_draws_every_forecaster_and_renders():
    fig = forecast_figure(
        np.zeros(6), np.ones(3), {"model": np.ones(3), "drift": np.zeros(3)}, "title"
    )
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels[:4] == ["input", "truth", "model", "drift"]
    png, width, height = render(fig)
    assert png.startswith(b"\x89PNG") and (width, height) == (700, 360)
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (700, 360)


def test_flatten_gives_hparam_friendly_values():
    flat = flatten({"a": {"b": 1, "c": [1, 2], "d": None}, "e": "x"})
    assert flat == {"a.b": 1, "a.c": "[1, 2]", "a.d": "None", "e": "x"}


def test_a_resumed_session_in_the_same_second_is_read_after_the_stopped_one(tmp_path):
    """TensorBoard reads a run dir's event files in name order; a resumed session that starts
    within its stopped one's second would otherwise sort by pid and counter as strings."""
    stopped = SummaryWriter(log_dir=str(tmp_path))
    for step in (1, 2):
        stopped.add_scalar("train/mse", 1.0, step)
    stopped.close()
    (old,) = tmp_path.glob("events.out.tfevents.*")
    # this second, this host and process, a counter that sorts after any a session takes
    name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.999999"
    old.rename(tmp_path / name)
    resumed = RunMonitor(tmp_path, evaluator=None, attention_every=0, purge_step=3)
    resumed.on_step(3, {"mse": 0.5})
    resumed.writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [e.step for e in events.Scalars("train/mse")] == [1, 2, 3]


def test_probe_time_axes():
    from seqforecast import build_model

    cfg = compose_config(["experiment=quick"])
    model = build_model(cfg)
    src = torch.randn(1, 12, 1)
    forecast, maps = probe(model, src)
    assert forecast.shape == (1, 6, 1)
    by_name = {m.name: m for m in maps}
    assert by_name["encoder_layer1"].query_steps == list(range(12))
    assert by_name["cross_layer1"].query_steps == list(range(8, 18))  # label_len 4, out_len 6
    assert by_name["cross_layer1"].key_steps == list(range(12))
    assert by_name["decoder_self_layer1"].key_steps == list(range(8, 18))


def test_a_failing_run_still_leaves_readable_events(tmp_path, monkeypatch):
    def broken_evaluate(*args, **kwargs):
        raise RuntimeError("evaluation failed")

    monkeypatch.setattr(run_module.Evaluator, "evaluate", broken_evaluate)
    cfg = compose_config(["experiment=quick", "epochs=1", "data.train_size=32"])
    with pytest.raises(RuntimeError, match="evaluation failed"):
        run_module.run_training(cfg, tmp_path)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert "train/mse" in events.Tags()["scalars"]
    assert "val/mse" in events.Tags()["scalars"]
    assert (tmp_path / "checkpoints" / "best.pt").is_file()

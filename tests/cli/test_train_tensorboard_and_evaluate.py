"""What a run shows (TensorBoard events, maps, figures) and re-evaluating a run, end to end."""

import json
import math
import shutil

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from ..cli_helpers import TINY_WITH_FIGURES, run_cli

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

BLOCK = 4
HEADS = 2  # experiment=quick


# One tiny diff run with block-local windows and causal (autoregressive) decoding; dropout,
# so that anything drawing a random number between steps would change what is trained.
RUN = [*TINY_WITH_FIGURES, "attention=diff", f"block_size={BLOCK}",
       "model.decoding=autoregressive", "model.dropout=0.1", "log.attention_every=1",
       "log.test_every=2"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("tb")
    run_dir = base / "run"
    run_cli([*RUN, f"hydra.run.dir={run_dir}"], cwd=base)
    return run_dir


@pytest.fixture(scope="module")
def events(run_dir):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


SCALARS = [
    "train/mse", "train/lr", "train/grad_norm", "train/tokens_per_s",
    "val/mse", "val/mae", "test/mse", "test/mae", "test_curve/mse", "test_curve/mae",
    "baseline/last_value/test_mse", "baseline/drift/test_mse", "baseline/nlinear/test_mse",
    "baseline/nlinear/test_curve_mse", "baseline/nlinear/val_mse",
    "lambda/encoder/layer1", "lambda/decoder_self/layer1", "lambda/cross/layer1",
    "final/test_mse", "final/test_curve_mse", "final/val_mse",
    "final/test_coverage_80", "final/test_width_80",  # the test bands' scores (finite ones)
]


def test_scalars_exist_and_are_finite(events):
    tags = set(events.Tags()["scalars"])
    missing = [t for t in SCALARS if t not in tags]
    assert not missing
    for tag in SCALARS:
        values = [e.value for e in events.Scalars(tag)]
        assert values and all(math.isfinite(v) for v in values), tag
    # Per step: 64 windows at batch size 64 is one step per epoch, for 2 epochs.
    assert [e.step for e in events.Scalars("train/mse")] == [1, 2]
    assert len(events.Scalars("val/mse")) == len(events.Scalars("test_curve/mse")) == 2
    # The large held-out test set: every log.test_every=2 epochs (here the second).
    assert [e.step for e in events.Scalars("test/mse")] == [2]


def test_one_image_per_attention_layer_and_stack(events):
    images = set(events.Tags()["images"])
    for stack in ("encoder", "decoder_self", "cross"):
        tag = f"attention/{stack}/layer1"
        assert tag in images
        shots = events.Images(tag)
        assert [s.step for s in shots][0] == 0  # before training, then each epoch, then final
        assert len(shots) == 4
        assert shots[0].width >= 300 and shots[0].height >= 150
    assert len(events.Images("test/forecast")) == 4


def test_figures_and_test_scalars_off_keep_every_number(run_dir, events, tmp_path):
    """Drawing the figures and scoring the held-out test set for TensorBoard during training
    touch nothing trained or scored: the same run without them has the same metrics to the last
    digit (so a test of the numbers alone may leave them off)."""
    bare = tmp_path / "run"
    run_cli([*RUN, "log.figures=false", "log.test_every=0", f"hydra.run.dir={bare}"],
            cwd=tmp_path)
    assert not (bare / "figures").exists()
    acc = EventAccumulator(str(bare), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    assert acc.Tags()["images"] == []
    scalars = set(acc.Tags()["scalars"])
    assert {"train/mse", "val/mse", "test_curve/mse", "final/test_mse"} <= scalars
    assert "test/mse" in events.Tags()["scalars"] and "test/mse" not in scalars
    drawn, plain = (json.loads((d / "metrics.json").read_text()) for d in (run_dir, bare))
    assert plain["test"]["model"]["mse"] > 0
    for split in ("val", "test"):
        assert plain[split] == drawn[split], split


def test_hparams_live_in_the_run_dir_itself(run_dir, events):
    nested = [p for p in run_dir.rglob("events.out.tfevents*") if p.parent != run_dir]
    assert nested == [], "no extra sub-run"
    content = events.PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    metrics = {m.name.tag for m in experiment.experiment.metric_infos}
    assert {"final/test_mse", "final/test_curve_mse", "final/val_mse"} <= metrics
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = start.session_start_info.hparams
    assert hparams["attention"].string_value == "diff"
    assert hparams["attention.block_size"].number_value == BLOCK
    assert hparams["ffn"].string_value == "gelu"
    final = events.Scalars("final/test_mse")[0].value
    metrics_json = json.loads((run_dir / "metrics.json").read_text())
    assert final == pytest.approx(metrics_json["test"]["model"]["mse"], rel=1e-6)


def test_config_text_is_logged(events):
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "block_size: 4" in text and "name: diff" in text


def test_npz_maps_have_head_query_key_shapes_and_respect_masks(run_dir):
    for point in ("epoch_000", "epoch_001", "epoch_002", "final"):
        maps = np.load(run_dir / "figures" / point / "attention.npz")
        assert sorted(maps.files) == ["cross_layer1", "decoder_self_layer1", "encoder_layer1"]
        encoder, dec_self, cross = (
            maps["encoder_layer1"],
            maps["decoder_self_layer1"],
            maps["cross_layer1"],
        )
        in_len, label_len, out_len = 12, 4, 6
        assert encoder.shape == (HEADS, in_len, in_len)
        # The last generation step reads label_len + out_len - 1 values.
        assert dec_self.shape == (HEADS, label_len + out_len - 1, label_len + out_len - 1)
        assert cross.shape == (HEADS, label_len + out_len - 1, in_len)
        # Causal decoder self-attention: nothing above the diagonal.
        assert (np.triu(dec_self, k=1) == 0).all()
        assert (np.tril(dec_self) != 0).any()
        # Block-local encoder: zero outside each query block's window.
        block = np.arange(in_len) // BLOCK
        outside = np.abs(block[:, None] - block[None, :]) > 1
        assert (encoder[:, outside] == 0).all() and (encoder[:, ~outside] != 0).any()
        for name in ("encoder_layer1", "decoder_self_layer1", "cross_layer1", "forecast"):
            assert (run_dir / "figures" / point / f"{name}.png").stat().st_size > 1000


def test_evaluate_reproduces_metrics_exactly(run_dir, tmp_path):
    proc = run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate")
    trained = json.loads((run_dir / "metrics.json").read_text())
    again = json.loads((run_dir / "evaluate" / "best" / "metrics.json").read_text())
    for split in ("test", "test_curve", "val"):
        assert again[split] == trained[split]
    assert again["splits"] == trained["splits"]
    assert f"{trained['test']['model']['mse']:>13.6g}" in proc.stdout
    assert "test (held out): 1024 sigmoid series, seed 2000003" in proc.stdout
    assert (run_dir / "evaluate" / "best" / "attention.npz").is_file()
    assert (run_dir / "evaluate" / "best" / "forecast.png").is_file()
    last = run_cli(
        [f"run_dir={run_dir}", "checkpoint=last"], tmp_path, module="seqforecast.evaluate"
    )
    assert "last checkpoint (epoch 2)" in last.stdout


def test_evaluate_refuses_a_run_without_checkpoint_or_with_a_mismatch(run_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / "checkpoints" / "best.pt").unlink()
    proc = run_cli([f"run_dir={broken}"], tmp_path, module="seqforecast.evaluate", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "best.pt: no best checkpoint in this run dir" in proc.stderr

    config = broken / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("d_model: 16", "d_model: 32"))
    proc = run_cli(
        [f"run_dir={broken}", "checkpoint=last"],
        tmp_path,
        module="seqforecast.evaluate",
        check=False,
    )
    assert proc.returncode == 2
    assert "last.pt does not match" in proc.stderr and "config.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr

    proc = run_cli(
        [f"run_dir={tmp_path / 'nope'}"], tmp_path, module="seqforecast.evaluate", check=False
    )
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    proc = run_cli(
        [f"run_dir={run_dir}", "checkpoint=worst"],
        tmp_path,
        module="seqforecast.evaluate",
        check=False,
    )
    assert proc.returncode == 2 and "checkpoint='worst' is not allowed" in proc.stderr

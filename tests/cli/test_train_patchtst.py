"""experiment=patchtst from the command line: the published recipe trains on an ETT-shaped
file (batches of time windows with every channel, the last incomplete one dropped), official
weights are evaluated through `model.official_weights` to the number a reference computes, and
bad input (a foreign state dict, a patch longer than the input, an unknown schedule) is one
line and exit 2 with nothing written."""

import json

import numpy as np
import pytest
import torch

from seqforecast import build_model
from seqforecast.config import compose_config

from ..cli_helpers import assert_refused, run_cli, trained
from ..model.official_reference import official_forward, official_state_dict

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

IN, OUT, VAL, TEST, END = 96, 24, 400, 530, 660
SMALL = ["experiment=patchtst", f"in_len={IN}", f"out_len={OUT}", "batch_size=32",
         "trainer.num_threads=1", f"data.val_start={VAL}", f"data.test_start={TEST}",
         f"data.test_end={END}", "log.figures=false"]
# channels, in, out, patch, stride, d_model, heads, d_ff, layers
SETTING = (3, IN, OUT, 16, 8, 16, 4, 128, 3)


def test_the_preset_trains_on_windows_of_time_dropping_the_last_batch(ett_file, tmp_path):
    run_dir, metrics = trained([*SMALL, f"data.path={ett_file}", "epochs=2"], tmp_path)
    assert metrics["splits"]["test"]["windows"] == END - TEST - OUT + 1  # windows of time
    assert 0 < metrics["test"]["model"]["mse_scaled"] < 5
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    train_windows = VAL - IN - OUT + 1
    assert last["step"] == 2 * (train_windows // 32)  # drop_last: whole batches only
    # Adam, no decay; the model has no RevIN affine and 42-style end-padded patches.
    assert last["optimizer"]["param_groups"][0]["weight_decay"] == 0
    assert not any(key.startswith("norm.") for key in last["model"])
    assert last["model"]["input_encoding.embedding"].abs().max() < 0.05


def _z_windows(path, in_len, out_len, first, end):
    """Every window forecasting rows [first, end), in the training rows' z units."""
    table = np.genfromtxt(path, delimiter=",", skip_header=1, usecols=(1, 2, 3))
    train = table[:VAL]
    z = (table - train.mean(0)) / train.std(0)
    starts = range(first - in_len, end - in_len - out_len + 1)
    src = np.stack([z[s : s + in_len] for s in starts])
    target = np.stack([z[s + in_len : s + in_len + out_len] for s in starts])
    return torch.tensor(src, dtype=torch.float32), torch.tensor(target, dtype=torch.float32)


def test_official_weights_are_evaluated_to_the_reference_number(ett_file, tmp_path):
    state = official_state_dict(*SETTING)
    weights = tmp_path / "checkpoint.pth"
    torch.save(state, weights)
    run_dir = tmp_path / "run"
    run_cli([*SMALL, f"data.path={ett_file}", "epochs=0", f"model.official_weights={weights}",
             f"hydra.run.dir={run_dir}"], tmp_path)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["run"]["epochs_run"] == 0
    src, target = _z_windows(ett_file, IN, OUT, TEST, END)
    with torch.no_grad():
        forecast = official_forward(state, src, 16, 8, 4, 3)
    expected = (forecast - target).square().mean().item()
    assert metrics["test"]["model"]["mse_scaled"] == pytest.approx(expected, rel=1e-5)


def test_a_state_dict_from_another_model_is_one_line_and_exit_2(ett_file, tmp_path):
    cfg = compose_config([*SMALL, "data.path=x.csv"])
    weights = tmp_path / "ours.pth"
    torch.save(build_model(cfg, 3, 3).state_dict(), weights)  # seqforecast's keys, not theirs
    assert_refused([*SMALL, f"data.path={ett_file}", f"model.official_weights={weights}"],
                   tmp_path, "not an official PatchTST state dict for this config: key "
                   "'model.backbone.W_P.weight' is missing")


def test_a_patch_longer_than_the_input_is_one_line_and_exit_2(ett_file, tmp_path):
    assert_refused([*SMALL, f"data.path={ett_file}", "embedding.patch_len=120"], tmp_path,
                   f"embedding.patch_len=120 is not allowed: must be in [1, data.in_len={IN}]")


def test_an_unknown_schedule_is_one_line_and_exit_2(ett_file, tmp_path):
    assert_refused([*SMALL, f"data.path={ett_file}", "trainer.schedule=type9"], tmp_path,
                   "trainer.schedule='type9' is not allowed: choose one of warmup_cosine, "
                   "type3, type1, constant, onecycle")

"""experiment=itransformer from the command line: the published recipe trains on an ETT-shaped
file with its calendar features as tokens and scores every test window; evaluate and predict
read the run back (predict computing the features of the steps it is given); official weights
are evaluated through `model.official_weights` to the number a reference computes; bad input
is one line and exit 2 with nothing written."""

import json
from datetime import datetime, timedelta

import numpy as np
import pytest
import torch

from seqforecast.data.time_features import time_features

from ..cli_helpers import assert_refused, run_cli, trained
from ..model.itransformer_reference import official_forward, official_state_dict

pytestmark = pytest.mark.slow  # trains: make test-fast skips it

IN, OUT, VAL, TEST, END, D, FF = 48, 12, 400, 530, 660, 16, 32
SMALL = ["experiment=itransformer", f"in_len={IN}", f"out_len={OUT}", f"d_model={D}",
         f"ffn.d_ff={FF}", "n_heads=2", "model.encoder_layers=1", "trainer.num_threads=1",
         f"data.val_start={VAL}", f"data.test_start={TEST}", f"data.test_end={END}",
         "log.figures=false"]


def test_the_preset_trains_and_evaluate_and_predict_read_it_back(ett_file, tmp_path):
    run_dir, metrics = trained([*SMALL, f"data.path={ett_file}", "epochs=2"], tmp_path)
    assert metrics["splits"]["test"]["windows"] == END - TEST - OUT + 1  # every test window
    assert 0 < metrics["test"]["model"]["mse_scaled"] < 5
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert last["model"]["src_embed.weight"].shape == (D, IN)  # a token reads a whole window
    assert last["data_state"]["time_features"] == ["time:hour", "time:weekday", "time:day",
                                                   "time:yearday"]
    run_cli([f"run_dir={run_dir}"], tmp_path, module="seqforecast.evaluate")
    again = json.loads((run_dir / "evaluate" / "best" / "metrics.json").read_text())
    assert again["test"]["model"]["mse"] == metrics["test"]["model"]["mse"]
    out = tmp_path / "forecast.csv"
    run_cli([f"run_dir={run_dir}", f"input={ett_file}", f"output={out}"], tmp_path,
            module="seqforecast.predict")
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + OUT and lines[0].startswith("date,HUFL,MUFL,OT")


def _z_windows(path, first, end):
    """Every window forecasting rows [first, end) in the training rows' z units, and the
    calendar features of its input steps."""
    table = np.genfromtxt(path, delimiter=",", skip_header=1, usecols=(1, 2, 3))
    z = (table - table[:VAL].mean(0)) / table[:VAL].std(0)
    times = [datetime(2016, 7, 1) + timedelta(hours=i) for i in range(len(table))]
    marks = time_features(times, "h")
    starts = range(first - IN, end - IN - OUT + 1)
    src = np.stack([z[s : s + IN] for s in starts])
    target = np.stack([z[s + IN : s + IN + OUT] for s in starts])
    stamp = np.stack([marks[s : s + IN] for s in starts])
    return (torch.tensor(a, dtype=torch.float32) for a in (src, stamp, target))


def test_official_weights_are_evaluated_to_the_reference_number(ett_file, tmp_path):
    state = official_state_dict(IN, OUT, D, FF, 1)
    weights = tmp_path / "checkpoint.pth"
    torch.save(state, weights)
    _, metrics = trained([*SMALL, f"data.path={ett_file}", "epochs=0",
                          f"model.official_weights={weights}"], tmp_path)
    src, stamp, target = _z_windows(ett_file, TEST, END)
    with torch.no_grad():
        forecast = official_forward(state, src, stamp, n_heads=2, layers=1)
    expected = (forecast - target).square().mean().item()
    assert metrics["test"]["model"]["mse_scaled"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("args,expected", [
    (["pos_encoding=sinusoidal"], "model=itransformer conflicts with pos_encoding=sinusoidal"),
    (["attention=diff", "block_size=4"],
     "model=itransformer conflicts with attention.block_size=4"),
    (["model.official_weights=WEIGHTS"], "not an official iTransformer state dict for this "
     "config: key 'projector.weight' has shape (7, 16), this config needs (12, 16)"),
])
def test_bad_input_is_one_line_and_exit_2(ett_file, tmp_path, args, expected):
    weights = tmp_path / "checkpoint.pth"
    torch.save(official_state_dict(IN, 7, D, FF, 1), weights)  # another horizon's
    args = [a.replace("WEIGHTS", str(weights)) for a in args]
    assert_refused([*SMALL, f"data.path={ett_file}", *args], tmp_path, expected)

"""The driver that runs an official repository's code (bench_common.timed_official): a run
stopped after an epoch and started again ends with the numbers of a run never stopped.

The official repositories are not in the suite; a stand-in written here has the shape the
driver patches (the Time-Series-Library's: a `train` that loops over epochs, calling `vali`
twice, `EarlyStopping` and `adjust_learning_rate` once an epoch; dropout and a shuffled
loader, so every RNG matters)."""

import os
import re
import subprocess
import sys
import textwrap

from ..cli_helpers import load_script

TOOLS = """
import numpy as np
import torch

class EarlyStopping:
    def __init__(self, patience=7, verbose=False):
        self.patience, self.counter, self.best_score = patience, 0, None
        self.early_stop, self.val_loss_min = False, np.Inf

    def __call__(self, val_loss, model, path):
        if self.best_score is not None and -val_loss < self.best_score:
            self.counter += 1
            self.early_stop = self.counter >= self.patience
            return
        self.best_score, self.counter, self.val_loss_min = -val_loss, 0, val_loss
        torch.save(model.state_dict(), path + "/checkpoint.pth")

def adjust_learning_rate(optimizer, epoch, args):
    for group in optimizer.param_groups:
        group["lr"] = 0.05 * 0.5 ** epoch
    print("Updating learning rate")
"""

EXP = """
import os
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset
from utils.tools import EarlyStopping, adjust_learning_rate

class Exp_Long_Term_Forecast:
    def __init__(self, args):
        self.args = args
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.3),
                                         torch.nn.Linear(32, 1))

    def _get_data(self, flag):
        g = torch.Generator().manual_seed({"train": 0, "val": 1, "test": 2}[flag])
        x = torch.randn(96, 8, generator=g)
        data = TensorDataset(x, x.sin().sum(1, keepdim=True))
        return data, DataLoader(data, batch_size=8, shuffle=flag == "train")

    def vali(self, data, loader, criterion):
        self.model.eval()
        with torch.no_grad():
            losses = [criterion(self.model(x), y).item() for x, y in loader]
        self.model.train()
        return float(np.average(losses))

    def train(self, setting):
        _, train_loader = self._get_data("train")
        vali_data, vali_loader = self._get_data("val")
        test_data, test_loader = self._get_data("test")
        path = os.path.join(self.args.checkpoints, setting)
        os.makedirs(path, exist_ok=True)
        stopping = EarlyStopping(patience=self.args.patience)
        optimizer = torch.optim.Adam(self.model.parameters(), lr=0.05)
        criterion = torch.nn.MSELoss()
        for epoch in range(self.args.train_epochs):
            if epoch == int(os.environ.get("DIE_AT_EPOCH", -1)):
                os._exit(9)  # killed: no handler, nothing saved
            losses = []
            for x, y in train_loader:
                optimizer.zero_grad()
                loss = criterion(self.model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            print("Epoch: {} cost time: {}".format(epoch + 1, 0.5))
            vali_loss = self.vali(vali_data, vali_loader, criterion)
            test_loss = self.vali(test_data, test_loader, criterion)
            print("Epoch: {}, Train Loss: {:.9f} Vali Loss: {:.9f} Test Loss: {:.9f}".format(
                epoch + 1, np.average(losses), vali_loss, test_loss))
            stopping(vali_loss, self.model, path)
            if stopping.early_stop:
                break
            adjust_learning_rate(optimizer, epoch + 1, self.args)
        self.model.load_state_dict(torch.load(path + "/checkpoint.pth"))
        return self.model

    def test(self, setting):
        _, loader = self._get_data("test")
        self.model.eval()
        with torch.no_grad():
            error = torch.cat([self.model(x) - y for x, y in loader])
        print("mse:{}, mae:{}".format(error.square().mean().item(), error.abs().mean().item()))
"""

RUN = """  # run.py's part: the seeds, the experiment, train then test
import argparse
import random
import numpy as np
import torch
from exp.exp_long_term_forecasting import Exp_Long_Term_Forecast
parser = argparse.ArgumentParser()
parser.add_argument("--train_epochs", type=int)
parser.add_argument("--patience", type=int)
parser.add_argument("--checkpoints")
args = parser.parse_args()
random.seed(2021)  # as run.py does (the driver's OFFICIAL_SEED replaces the value)
np.random.seed(2021)
torch.manual_seed(2021)
exp = Exp_Long_Term_Forecast(args)
exp.train("setting")
exp.test("setting")
"""


def stand_in(root):
    for name, text in (("utils/tools.py", TOOLS), ("exp/exp_long_term_forecasting.py", EXP),
                       ("run.py", RUN)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def run(code, root, checkpoints, state=None, die_at=None):
    env = dict(os.environ, OFFICIAL_SEED="7", OMP_NUM_THREADS="1")
    env.pop("OFFICIAL_RESUME_STATE", None)
    env.pop("DIE_AT_EPOCH", None)
    if state:
        env["OFFICIAL_RESUME_STATE"] = str(state)
    if die_at is not None:
        env["DIE_AT_EPOCH"] = str(die_at)
    return subprocess.run([sys.executable, "-c", code, "--train_epochs", "8", "--patience", "2",
                           "--checkpoints", str(checkpoints)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def scores(out: str) -> list[str]:
    return re.findall(r"Epoch: \d+, Train.*|mse:.*", out)


def test_a_stopped_official_run_goes_on_from_its_last_epoch_to_the_same_numbers(tmp_path):
    code = load_script("bench_common.py").timed_official(
        "exp.exp_long_term_forecasting", "Exp_Long_Term_Forecast", "run.py", resumable=True)
    stand_in(tmp_path)
    whole = run(code, tmp_path, tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    state, printed = tmp_path / "state.pt", []
    for die_at in (3, 5):  # killed at the start of epoch 4, then of epoch 6
        stopped = run(code, tmp_path, tmp_path / "stopped", state, die_at)
        assert stopped.returncode == 9 and state.is_file()
        printed += scores(stopped.stdout)
    # elsewhere: the best checkpoint (epoch 4's) comes from the state, not the stopped run's dir
    resumed = run(code, tmp_path, tmp_path / "elsewhere", state)
    assert resumed.returncode == 0, resumed.stderr
    assert "[resumed after epoch 5" in resumed.stdout
    assert not state.is_file()  # gone once train returned
    # the three attempts' epochs, each once, and the test score: as the unstopped run's
    assert printed + scores(resumed.stdout) == scores(whole.stdout)
    # the best epoch was replayed (the test score is its model's), and early stopping's count
    # went on from the state: patience 2 ended the run at epoch 6
    vali = [float(v) for v in re.findall(r"Vali Loss: ([0-9.]+)", whole.stdout)]
    assert 3 < vali.index(min(vali)) + 1 <= 5 and len(vali) == 6

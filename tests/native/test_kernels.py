"""trainer.kernels, the one seam between stock PyTorch and the C kernels: what each choice
resolves to, what its kernel set builds and which attention kernel each layer is built with (and
what `torch` leaves stock), and, end to end, that a
torch-kernels run repeats bit for bit where no compiler exists, that `native` is refused there
in one line, and that a resume under another set says so."""

import json

import pytest
import torch
from torch import nn

from seqforecast.config import compose_config
from seqforecast.model import build_model
from seqforecast.native import KernelsUnavailable, build, resolve
from seqforecast.training.checkpoint import load_checkpoint, save_checkpoint
from tests.cli_helpers import TINY, run_cli, run_fresh, write_ett_file

from .helpers import needs_kernels

C = 3


def _preset():
    return compose_config(["experiment=patchtst", "data.path=x.csv", "in_len=48", "out_len=6"])


@needs_kernels
def test_auto_takes_the_kernels_for_a_float32_cpu_run_only():
    assert resolve("auto", "cpu") == "native"
    assert resolve("native", "cpu") == "native"
    assert resolve("auto", "cuda") == "torch"
    assert resolve("auto", "cpu", "bf16") == "torch"
    assert resolve("torch", "cpu") == "torch"


def test_native_is_refused_in_one_line_where_it_cannot_run(monkeypatch):
    with pytest.raises(KernelsUnavailable, match="the device is cuda; use trainer.kernels=auto"):
        resolve("native", "cuda")
    with pytest.raises(KernelsUnavailable, match="trainer.precision=bf16"):
        resolve("native", "cpu", "bf16")
    monkeypatch.setattr(build, "unavailable", lambda: "no C compiler found")
    with pytest.raises(KernelsUnavailable, match="cannot run here: no C compiler found"):
        resolve("native", "cpu")
    assert resolve("auto", "cpu") == "torch"


def test_torch_builds_stock_modules_and_runs_no_project_kernel(monkeypatch):
    def no_kernel(*args, **kwargs):
        raise AssertionError("a project kernel was loaded")

    monkeypatch.setattr(build, "load", no_kernel)
    model = build_model(_preset(), C, C, "torch").train()
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m) is nn.Dropout for m in dropouts)
    assert not [m for m in model.modules() if type(m).__module__.startswith("seqforecast.native")]
    assert {a.kernel.name for a in model.attention_stacks()["encoder"]} == {"explicit"}
    model(torch.randn(4, 48, C)).sum().backward()  # training: dropout, BatchNorm, attention


@needs_kernels
def test_native_swaps_three_pieces_chooses_its_attention_kernel_and_keeps_the_state_dict():
    torch.manual_seed(0)
    stock = build_model(_preset(), C, C, "torch")
    torch.manual_seed(0)
    native = build_model(_preset(), C, C, "native")
    names = {type(m).__name__ for m in native.modules()}
    assert {"HashDropout", "SlicedFeedForward", "BatchNormResidual"} <= names
    # residual attention (the published PatchTST's): the C kernel, chosen when built
    assert {a.kernel.name for a in native.attention_stacks()["encoder"]} == {"native"}
    assert stock.state_dict().keys() == native.state_dict().keys()
    for key, value in stock.state_dict().items():
        assert torch.equal(value, native.state_dict()[key])  # the same draws, the same weights
    x = torch.randn(4, 48, C)
    with torch.no_grad():  # eval: no dropout, so the same function to rounding
        torch.testing.assert_close(native.eval()(x), stock.eval()(x), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def ett_file(tmp_path_factory):
    return write_ett_file(tmp_path_factory.mktemp("ett") / "ett.csv")


SMALL = ["experiment=patchtst", "in_len=96", "out_len=24", "batch_size=32", "epochs=1",
         "trainer.num_threads=1", "data.val_start=400", "data.test_start=530",
         "data.test_end=660", "log.figures=false"]


def _without_a_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("SEQFORECAST_CACHE", str(tmp_path / "empty-cache"))


@pytest.mark.slow
def test_a_torch_kernels_run_repeats_bit_for_bit_without_a_compiler(ett_file, tmp_path,
                                                                     monkeypatch):
    args = [*SMALL, f"data.path={ett_file}", "trainer.kernels=torch"]
    run_cli([*args, "hydra.run.dir=here"], tmp_path)
    _without_a_compiler(monkeypatch, tmp_path)
    # a fresh process (one for both commands): this one has loaded the kernels already
    bare, proc = run_fresh([[*args, "hydra.run.dir=bare"],
                            [*SMALL, f"data.path={ett_file}", "trainer.kernels=native",
                             "hydra.run.dir=refused"]], tmp_path)
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert "torch kernels" in bare.stdout
    here, bare = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("here", "bare"))
    assert here["test"] == bare["test"] and here["run"]["kernels"] == bare["run"]["kernels"]
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "trainer.kernels=native cannot run here: no C compiler found" in proc.stderr
    assert not (tmp_path / "refused" / "checkpoints").exists()


@needs_kernels
@pytest.mark.slow
def test_a_resume_under_another_kernel_set_says_so(tmp_path):
    run_dir = tmp_path / "run"
    run_cli([*TINY, "epochs=1", f"hydra.run.dir={run_dir}"], tmp_path)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["run"]["kernels"] == "native"  # auto, on the CPU, with a compiler
    last = run_dir / "checkpoints" / "last.pt"
    state = load_checkpoint(last)
    assert state["kernels"] == "native"
    state.pop("format")
    save_checkpoint(last, {**state, "kernels": "torch"})  # as if trained without a compiler
    out = run_cli([f"resume={run_dir}"], tmp_path).stdout
    assert "resuming a run trained with the torch kernels on the native ones" in out

"""trainer.precision=bf16 and trainer.compile: what they change, and the fallback."""

import logging

import pytest
import torch
from omegaconf import OmegaConf

from seqforecast import build_model
from seqforecast.config import compose_config
from seqforecast.data import synthetic_data
from seqforecast.training import runtime, train_model


def _tiny(precision):
    cfg = compose_config(
        ["experiment=quick", "data.train_size=64", f"trainer.precision={precision}"]
    )
    plain = OmegaConf.to_container(cfg, resolve=True)
    torch.manual_seed(0)
    return plain, synthetic_data(plain["data"], 0, torch.device("cpu")), build_model(plain)


def test_bf16_autocasts_the_training_forward_and_stays_close(tmp_path):
    results, dtypes = {}, set()
    for precision in ("fp32", "bf16"):
        plain, data, model = _tiny(precision)

        def record(module, inputs, output, precision=precision):
            if module.training:
                dtypes.add((precision, output.dtype))

        hook = model.head.register_forward_hook(record)
        out = train_model(model, data, plain["trainer"], tmp_path / precision, 0, "x")
        hook.remove()
        results[precision] = out.best_val_mse
    assert ("fp32", torch.float32) in dtypes and ("bf16", torch.bfloat16) in dtypes
    # measured: 2.6e-4 relative (bf16 keeps about 3 significant digits of each product)
    assert results["bf16"] == pytest.approx(results["fp32"], rel=2e-3)


def test_compile_falls_back_with_one_warning_where_unsupported(monkeypatch, caplog):
    def unavailable(*args, **kwargs):
        raise RuntimeError("no working C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", unavailable)
    model = torch.nn.Linear(2, 2)
    with caplog.at_level(logging.WARNING):
        assert runtime.compile_model(model) is False
    assert "torch.compile is unavailable here (no working C++ compiler found)" in caplog.text
    assert model(torch.ones(1, 2)).shape == (1, 2)  # still a working, eager model


@pytest.fixture
def matmul_settings():
    """torch's global float32 product settings, restored after the test."""
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    yield
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]


def test_float32_products_take_tf32_on_a_gpu_and_leave_the_cpu_alone(matmul_settings):
    """trainer.matmul_precision (default high): TF32 tensor cores on a CUDA device, full fp32
    with `highest`; the CPU's products are never touched. (torch keeps the setting globally, so
    a device object is enough to check it here without a GPU.)"""
    torch.set_float32_matmul_precision("highest")
    assert runtime.float32_products(torch.device("cpu"), "high") is None
    assert torch.get_float32_matmul_precision() == "highest"
    said = runtime.float32_products(torch.device("cuda"), "high")
    assert "matmul precision high" in said
    assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    runtime.float32_products(torch.device("cuda"), "highest")
    assert torch.get_float32_matmul_precision() == "highest"
    assert not torch.backends.cudnn.allow_tf32
    assert compose_config([]).trainer.matmul_precision == "high"
    with pytest.raises(Exception, match="matmul_precision"):
        compose_config(["trainer.matmul_precision=tf32"])


def test_bf16_on_a_cpu_without_bf16_products_warns_once_and_still_runs(tmp_path, monkeypatch,
                                                                      caplog):
    """Without AVX512-BF16 or AMX torch's bf16 products take a slow fallback: the run goes on
    (the config may serve a GPU or another CPU) with one warning naming the faster setting;
    fp32, a GPU, or a CPU that has the instructions hear nothing."""
    from seqforecast.runs.training import prepare_run

    monkeypatch.setattr(runtime, "cpu_has_bf16_products", lambda: False)
    cpu = torch.device("cpu")
    said = runtime.slow_bf16(cpu, "bf16")
    assert said.startswith("trainer.precision=bf16 on a CPU without bf16 matrix instructions")
    assert said.endswith("trainer.precision=fp32 trains faster here")
    assert runtime.slow_bf16(cpu, "fp32") is None
    assert runtime.slow_bf16(torch.device("cuda"), "bf16") is None
    cfg = compose_config(["experiment=quick", "data.train_size=64", "trainer.precision=bf16",
                          "log.figures=false"])
    with caplog.at_level(logging.WARNING):
        prepare_run(cfg, tmp_path / "run").monitor.close()
    assert [r.message for r in caplog.records if r.levelno == logging.WARNING] == [said]
    monkeypatch.setattr(runtime, "cpu_has_bf16_products", lambda: True)
    assert runtime.slow_bf16(cpu, "bf16") is None
    monkeypatch.undo()
    assert isinstance(runtime.cpu_has_bf16_products(), bool)  # torch's own probe answers

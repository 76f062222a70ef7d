"""The post-norm residual with BatchNorm by seqforecast/native/residual_norm.c against the same
layers op by op: outputs, gradients and running statistics, with and without dropout."""

import pytest
import torch

from seqforecast.model import residual_norm_cpu
from seqforecast.model.layers import Residual

pytestmark = pytest.mark.skipif(
    residual_norm_cpu._library() is None, reason="no C compiler to build the kernel"
)


def _run(fused: bool, p: float, monkeypatch):
    torch.manual_seed(1)
    residual = Residual(16, p, norm_first=False, norm="batch").train()
    with torch.no_grad():  # away from the init's ones and zeros, so that both act
        residual.norm.weight.uniform_(0.5, 1.5)
        residual.norm.bias.uniform_(-0.5, 0.5)
    sublayer = torch.nn.Linear(16, 16)
    x = torch.randn(30, 42, 16, requires_grad=True)
    calls = []
    with monkeypatch.context() as patch:
        original = residual_norm_cpu.residual_norm
        patch.setattr(residual_norm_cpu, "residual_norm",
                      lambda *a: calls.append(1) or original(*a))  # fmt: skip
        if not fused:
            patch.setattr(residual_norm_cpu, "applies", lambda *args: False)
        torch.manual_seed(5)  # the same dropout key both ways
        out = residual(x, sublayer)
        out.backward(torch.randn_like(out))
    assert len(calls) == int(fused)
    norm = residual.norm
    return [out.detach(), x.grad, sublayer.weight.grad, sublayer.bias.grad, norm.weight.grad,
            norm.bias.grad, norm.running_mean, norm.running_var, norm.num_batches_tracked]


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_equals_the_layers_op_by_op(p, monkeypatch):
    fused, plain = _run(True, p, monkeypatch), _run(False, p, monkeypatch)
    for i, (mine, theirs) in enumerate(zip(fused, plain, strict=True)):
        # the sublayer's bias gradient (3) sums 1,260 rows of BatchNorm's input gradient,
        # which cancel to 0 up to rounding, each way its own
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=2e-4 if i == 3 else 1e-5)
    if p:  # the mask acts: without it, another output
        assert not torch.allclose(_run(True, 0.0, monkeypatch)[0], fused[0])


def test_it_covers_batchnorm_in_training_only(monkeypatch):
    norm = Residual(16, 0.1, norm_first=False, norm="batch").norm
    x = torch.zeros(3, 16)
    assert residual_norm_cpu.applies(x, norm.train())
    assert not residual_norm_cpu.applies(x, norm.eval())  # eval: the running statistics
    assert not residual_norm_cpu.applies(x, Residual(16, 0.1, False, "layer").norm.train())
    assert not residual_norm_cpu.applies(x.double(), norm.train())
    monkeypatch.setenv("SEQFORECAST_NATIVE", "0")
    assert not residual_norm_cpu.applies(x, norm.train())

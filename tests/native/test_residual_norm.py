"""The post-norm residual with BatchNorm by seqforecast/native/residual_norm.c against the same
layers op by op: outputs, gradients and running statistics, with and without dropout."""

import pytest
import torch

from seqforecast.model import kernel_set
from seqforecast.model.layers import Residual
from seqforecast.native.dropout import HashDropout
from seqforecast.native.residual_norm import BatchNormResidual

from .helpers import needs_kernels

pytestmark = needs_kernels


def _run(fused: bool, p: float):
    torch.manual_seed(1)
    if fused:
        residual = kernel_set("native").residual(16, p, norm_first=False, norm="batch").train()
        assert type(residual) is BatchNormResidual
    else:  # op by op, over the same (kernel-drawn) dropout
        residual = Residual(16, HashDropout(p), norm_first=False, norm="batch").train()
    with torch.no_grad():  # away from the init's ones and zeros, so that both act
        residual.norm.weight.uniform_(0.5, 1.5)
        residual.norm.bias.uniform_(-0.5, 0.5)
    sublayer = torch.nn.Linear(16, 16)
    x = torch.randn(30, 42, 16, requires_grad=True)
    torch.manual_seed(5)  # the same dropout key both ways
    out = residual(x, sublayer)
    out.backward(torch.randn_like(out))
    norm = residual.norm
    return [out.detach(), x.grad, sublayer.weight.grad, sublayer.bias.grad, norm.weight.grad,
            norm.bias.grad, norm.running_mean, norm.running_var, norm.num_batches_tracked]


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_equals_the_layers_op_by_op(p):
    fused, plain = _run(True, p), _run(False, p)
    for i, (mine, theirs) in enumerate(zip(fused, plain, strict=True)):
        # the sublayer's bias gradient (3) sums 1,260 rows of BatchNorm's input gradient,
        # which cancel to 0 up to rounding, each way its own
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=2e-4 if i == 3 else 1e-5)
    if p:  # the mask acts: without it, another output
        assert not torch.allclose(_run(True, 0.0)[0], fused[0])


def test_it_covers_post_norm_batchnorm_and_runs_op_by_op_in_eval_mode():
    native = kernel_set("native")
    assert type(native.residual(16, 0.1, norm_first=True, norm="batch")) is Residual
    assert type(native.residual(16, 0.1, norm_first=False, norm="layer")) is Residual
    residual = native.residual(16, 0.1, norm_first=False, norm="batch").eval()
    x, sublayer = torch.randn(4, 5, 16), torch.nn.Linear(16, 16)
    expected = residual.norm(x + sublayer(x))  # eval: no dropout, the running statistics
    torch.testing.assert_close(residual(x, sublayer), expected)

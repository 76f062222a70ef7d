import math

import pytest
import torch

from seqforecast.training.schedule import warmup_cosine


def test_warmup_then_cosine_to_the_floor():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=1.0)
    sched = warmup_cosine(opt, total_steps=100, warmup_frac=0.1, min_lr_frac=0.1)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:10] == pytest.approx([(i + 1) / 10 for i in range(10)])
    assert lrs[10] == pytest.approx(1.0)
    middle = 10 + 45
    assert lrs[middle] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)

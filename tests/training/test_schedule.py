import copy
import math

import pytest
import torch

from seqforecast.training.loop import clip_gradients, make_optimizer
from seqforecast.training.schedule import build_schedule, warmup_cosine


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


# ----------------------------------------------------------- the published PatchTST's schedules


def published_rates(lradj: str, lr: float, epochs: int) -> list[float]:
    """The rate of each epoch as the published training loop sets it: a OneCycleLR is built
    first (its constructor sets the optimizer's rate), then after each epoch e its
    `adjust_learning_rate` sets type3's lr (e < 3) or lr * 0.9^(e - 3), or constant's lr."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=lr)
    torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, steps_per_epoch=5, epochs=epochs)
    rates = []
    for epoch in range(1, epochs + 1):
        rates.append(opt.param_groups[0]["lr"])
        if lradj == "type3":
            opt.param_groups[0]["lr"] = lr if epoch < 3 else lr * 0.9 ** (epoch - 3)
        else:
            opt.param_groups[0]["lr"] = lr
    return rates


def _stepped(kind: str, epochs: int, steps_per_epoch: int, lr=1e-4, pct_start=0.3):
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=lr)
    cfg = {"schedule": kind, "epochs": epochs, "lr": lr, "pct_start": pct_start}
    sched = build_schedule(opt, cfg, steps_per_epoch)
    rates, betas = [], []
    for _ in range(epochs * steps_per_epoch):
        rates.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"][0])
        opt.step()
        sched.step()
    return rates, betas


@pytest.mark.parametrize("kind", ["type3", "constant"])
def test_the_epoch_wise_schedules_are_the_published_codes(kind):
    rates, _ = _stepped(kind, epochs=12, steps_per_epoch=5)
    per_epoch = rates[::5]
    assert per_epoch == pytest.approx(published_rates(kind, 1e-4, 12), rel=1e-9)
    for epoch in range(12):  # constant within an epoch
        assert len(set(rates[epoch * 5 : epoch * 5 + 5])) == 1
    if kind == "type3":  # the published epochs: lr / 25, then lr for 2-4, then x0.9
        assert per_epoch[:6] == pytest.approx([4e-6, 1e-4, 1e-4, 1e-4, 0.9e-4, 0.81e-4])


def test_type1_is_the_time_series_librarys_halving():
    """iTransformer's loop (no OneCycleLR): after epoch e (1-based) adjust_learning_rate sets
    lr * 0.5^(e - 1) for the next epoch, so epochs 1 and 2 run at lr, then it halves."""
    rates, _ = _stepped("type1", epochs=6, steps_per_epoch=4)
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=1e-4)
    expected = []
    for epoch in range(1, 7):
        expected.append(opt.param_groups[0]["lr"])
        opt.param_groups[0]["lr"] = 1e-4 * 0.5 ** ((epoch - 1) // 1)  # the published code
    assert rates[::4] == pytest.approx(expected, rel=1e-12)
    assert rates[::4] == pytest.approx([1e-4, 1e-4, 5e-5, 2.5e-5, 1.25e-5, 6.25e-6])


def test_onecycle_is_torchs_with_cycled_momentum():
    rates, betas = _stepped("onecycle", epochs=4, steps_per_epoch=10, pct_start=0.2)
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=1e-4)
    ref = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-4, steps_per_epoch=10, epochs=4,
                                              pct_start=0.2)
    expected = []
    for _ in range(40):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        ref.step()
    assert rates == pytest.approx(expected)
    assert max(rates) == pytest.approx(1e-4) and rates.index(max(rates)) == 0.2 * 40 - 1
    assert min(betas) == pytest.approx(0.85) and max(betas) == pytest.approx(0.95)


def test_an_unknown_schedule_names_the_allowed_ones():
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    with pytest.raises(ValueError, match="warmup_cosine, type3, type1, constant, onecycle"):
        build_schedule(opt, {"schedule": "type9", "epochs": 1}, 1)


def test_adam_has_no_weight_decay_and_adamw_decays_matrices_only():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    adam = make_optimizer(model, 1e-3, 0.5, "adam")
    assert type(adam) is torch.optim.Adam
    assert all(group["weight_decay"] == 0 for group in adam.param_groups)
    adamw = make_optimizer(model, 1e-3, 0.5, "adamw")
    assert [g["weight_decay"] for g in adamw.param_groups] == [0.5, 0.0]
    assert [len(g["params"]) for g in adamw.param_groups] == [1, 3]


def test_the_fused_update_is_the_per_parameter_one():
    """make_optimizer's fused Adam/AdamW (CPU) gives the stock loop's weights, step by step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    stock = copy.deepcopy(model)
    for kind, cls in (("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)):
        fused = make_optimizer(model, 1e-2, 0.1, kind)
        assert fused.defaults["fused"] is True
        loop = cls([{"params": [p for p in stock.parameters() if p.dim() >= 2],
                     "weight_decay": 0.1 if kind == "adamw" else 0.0},
                    {"params": [p for p in stock.parameters() if p.dim() < 2],
                     "weight_decay": 0.0}], lr=1e-2, foreach=False)
        for _ in range(5):
            x = torch.randn(8, 5)
            for net, opt in ((model, fused), (stock, loop)):
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
        for mine, theirs in zip(model.parameters(), stock.parameters(), strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
            assert not torch.equal(mine, torch.zeros_like(mine))


def test_clip_gradients_measures_without_touching_and_clips_as_torch_does():
    """grad_clip=0 gives clip_grad_norm_'s norm and leaves the gradients as they are; a
    max_norm gives what clip_grad_norm_ gives, the norm and the scaled gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    unused = torch.nn.Parameter(torch.ones(2))  # no gradient: skipped, as torch skips it
    model(torch.randn(8, 5)).square().sum().backward()
    params = [*model.parameters(), unused]
    before = [p.grad.clone() for p in model.parameters()]
    reference = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    norm = clip_gradients(params, 0.0)
    torch.testing.assert_close(norm, reference)
    assert norm > 0.5  # the cap below then binds
    for p, g in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.grad, g)
    clipped = clip_gradients(params, 0.5)
    torch.testing.assert_close(clipped, reference)
    torch.testing.assert_close(torch.nn.utils.get_total_norm(
        [p.grad for p in model.parameters()]), torch.tensor(0.5), rtol=1e-5, atol=0)
    assert clip_gradients([unused], 0.0) == 0

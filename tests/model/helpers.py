"""What the model tests share."""

import copy
import itertools
from functools import cache

import pytest
import torch
import torch.nn.functional as F

from seqforecast.config import compose_config, validate_config

# Every option of the groups a model is built from, for tests over all combinations.
ATTENTION = ["vanilla", "einsum", "diff"]
POSITIONS = ["sinusoidal", "learned", "relative", "rope", "none"]
FFNS = ["relu", "gelu", "glu", "geglu", "swiglu"]
# A test's parameters (attention, position, ffn): every combination of the three groups.
every_combination = pytest.mark.parametrize(
    "attention,position,ffn", list(itertools.product(ATTENTION, POSITIONS, FFNS))
)


def forward_backward(model, features: int = 1, batch: int = 3) -> None:
    """One training forward and backward on random windows of the model's own shape: the
    forecast has its shape, every parameter gets a finite gradient, evaluation is finite."""
    src = torch.randn(batch, model.in_len, features)
    target = torch.randn(batch, model.out_len, model.n_targets)
    model.train()
    forecast = model(src, target)
    assert forecast.shape == (batch, model.out_len, model.n_targets)
    loss = F.mse_loss(forecast, target)
    assert loss.isfinite()
    loss.backward()
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        assert p.grad is not None, f"{name} got no gradient"
        assert p.grad.isfinite().all(), name
    model.eval()
    with torch.no_grad():
        assert model(src).isfinite().all()


def assert_teacher_forcing_reads_the_target(model, src, target, **kwargs):
    """In training, with a target, an autoregressive decoder's step t reads the target's step
    t - 1 (teacher forcing), not its own prediction: changing that step changes step t and
    leaves the steps before it. `model` in train mode, point tokens, no dropout."""
    forecast = model(src, target, **kwargs)
    for t in range(1, target.shape[1]):
        changed = target.clone()
        changed[:, t - 1] += 1.0
        moved = model(src, changed, **kwargs)
        torch.testing.assert_close(moved[:, :t], forecast[:, :t])
        assert not torch.allclose(moved[:, t], forecast[:, t]), f"step {t} ignores the target"


def validated(*overrides):
    """The config these overrides compose to (a copy of this process's one composition of
    them), checked as a run checks it."""
    cfg = copy.deepcopy(composed(overrides))
    validate_config(cfg)
    return cfg


@cache
def composed(overrides: tuple[str, ...]):
    """compose_config, once per list of overrides in this process (half a second each); the
    configs are only read: copy one to change it."""
    return compose_config(list(overrides))


def combination(base, attention: str, position: str, ffn: str):
    """validated(*base, attention=, pos_encoding=, ffn=) for every_combination's tests, at a
    fifth of the compositions (half a second each): each (attention, position) composed once,
    the ffn group's node from its own composition put in. The ffn options read nothing from
    the other groups (tests/model/test_model.py checks the parts give the whole)."""
    cfg = copy.deepcopy(composed((*base, f"attention={attention}", f"pos_encoding={position}")))
    cfg.ffn = copy.deepcopy(composed((*base, f"ffn={ffn}")).ffn)
    validate_config(cfg)
    return cfg

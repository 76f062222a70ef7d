"""The stacked model against its members: the vmapped forward equals each member's own, the
gradients and clipping are each member's, one optimizer over the stack is each member's."""

import copy

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from seqforecast.config.compose import compose_config
from seqforecast.data import build_data
from seqforecast.model import build_model
from seqforecast.stacking.model import StackedModel, clip_member_gradients, member_grad_norms
from seqforecast.training.loop import make_optimizer

TINY = ["d_model=16", "n_heads=2", "data.train_size=32", "data.val_size=8", "data.test_size=8"]
CONFIGS = {
    "default": [],
    "diff_block": ["attention=diff", "block_size=4", "in_len=16"],
    "gaussian": ["loss=gaussian"],
    "dropout": ["model.dropout=0.1"],
    "itransformer": ["model=itransformer", "pos_encoding=none"],
    "patch_batchnorm": ["model=encoder", "embedding=patch", "embedding.patch_len=4",
                        "embedding.stride=4", "in_len=16", "model.norm=batch"],
}


def members(overrides, k=3):
    cfg = compose_config([*TINY, *overrides])
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    data = build_data(plain["data"], 0, torch.device("cpu"))
    models = []
    for seed in range(k):
        torch.manual_seed(seed)
        models.append(build_model(plain, data.n_features, data.n_targets, "torch"))
    return models, data


def windows(data, k, b=4):
    src, target = zip(*(data.train.take(torch.arange(i, i + b)) for i in range(k)), strict=True)
    return torch.stack(src), torch.stack(target)


@pytest.mark.parametrize("name", CONFIGS)
def test_the_stacked_forward_is_each_members_forward(name):
    models, data = members(CONFIGS[name])
    stack = StackedModel(models).train(False)
    src, target = windows(data, len(models))
    for m in models:
        m.eval()
    with torch.no_grad():
        out = stack(src, target)
        for k, model in enumerate(models):
            own = model(src[k], target[k])
            scale = own.abs().max()
            assert (out[k] - own).abs().max() <= 1e-6 * scale, name


def test_members_differ_and_sync_hands_back_a_members_weights():
    models, data = members([])
    stack = StackedModel(models)
    first = {n: p.clone() for n, p in models[1].named_parameters()}
    with torch.no_grad():
        for p in stack.parameters():
            p.add_(1.0)
    synced = stack.sync(1)
    assert synced is models[1]
    for name, p in synced.named_parameters():
        torch.testing.assert_close(p, first[name] + 1.0)
    name = next(iter(stack.params))  # built from their own seeds: the members differ
    assert not torch.equal(stack.params[name][0], stack.params[name][1])


def test_members_with_dropout_draw_their_own_masks():
    # identical members on identical windows: in training only their dropout masks can tell
    # them apart, so each member's own draw (vmap's randomness="different") shows as outputs
    # that differ; in eval (no dropout) they are one
    (model,), data = members(CONFIGS["dropout"], k=1)
    k = 3
    stack = StackedModel([copy.deepcopy(model) for _ in range(k)])
    src, target = windows(data, 1)
    src, target = src.expand(k, *src.shape[1:]), target.expand(k, *target.shape[1:])
    torch.manual_seed(0)
    with torch.no_grad():
        trained = stack.train(True)(src, target)
        evaluated = stack.train(False)(src, target)
    for m in range(1, k):
        torch.testing.assert_close(evaluated[m], evaluated[0], rtol=0, atol=0)
        assert not torch.allclose(trained[m], trained[0]), (
            f"members 0 and {m} drew one dropout mask")
    assert not torch.allclose(trained[0], evaluated[0]), "no dropout in training"


def test_batchnorm_running_statistics_are_each_members():
    models, data = members(CONFIGS["patch_batchnorm"])
    stack = StackedModel(models).train(True)
    src, target = windows(data, len(models))
    with torch.no_grad():
        stack(src, target)
        for k, model in enumerate(models):
            model.train()(src[k], target[k])
            stats = dict(model.named_buffers())
            assert any("running_mean" in name for name in stats)
            for name, value in stats.items():
                torch.testing.assert_close(stack.buffers[name][k], value, rtol=1e-5, atol=1e-6)


def test_gradients_norms_and_clipping_are_each_members_own():
    models, data = members([])
    stack = StackedModel(models).train(True)
    src, target = windows(data, len(models))
    (stack(src, target) - target).square().mean(dim=(1, 2, 3)).sum().backward()
    norms = member_grad_norms(stack.parameters())
    for k, model in enumerate(models):
        loss = (model(src[k], target[k]) - target[k]).square().mean()
        grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
        for g, stacked in zip(grads, stack.parameters(), strict=True):
            if g is not None:
                torch.testing.assert_close(stacked.grad[k], g, rtol=1e-4, atol=1e-6)
        for p, g in zip(model.parameters(), grads, strict=True):
            p.grad = None if g is None else g.clone()
        own_norm = nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        torch.testing.assert_close(norms[k], own_norm, rtol=1e-4, atol=0)
    clip_member_gradients(stack.parameters(), 0.05)
    for k, model in enumerate(models):  # each clipped by its own norm, to 0.05
        for p, stacked in zip(model.parameters(), stack.parameters(), strict=True):
            if p.grad is not None:
                torch.testing.assert_close(stacked.grad[k], p.grad, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("kind", ["adamw", "adam"])
def test_one_optimizer_over_the_stack_is_each_members_update(kind):
    models, data = members([])
    stack = StackedModel(models)
    stacked_opt = make_optimizer(models[0], 1e-2, 0.1, kind, stacked=stack.parameters())
    own_opts = [make_optimizer(m, 1e-2, 0.1, kind) for m in models]
    # the groups are the members' (decay on matrices only), whatever the stack's shapes
    assert [len(g["params"]) for g in stacked_opt.param_groups] == [
        len(g["params"]) for g in own_opts[0].param_groups]
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        for k, model in enumerate(models):
            for p, stacked in zip(model.parameters(), stack.parameters(), strict=True):
                g = torch.randn(p.shape, generator=generator)
                p.grad = g
                if stacked.grad is None:
                    stacked.grad = torch.zeros_like(stacked)
                stacked.grad[k] = g
        stacked_opt.step()
        for opt in own_opts:
            opt.step()
    for k, model in enumerate(models):
        for p, stacked in zip(model.parameters(), stack.parameters(), strict=True):
            torch.testing.assert_close(stacked.detach()[k], p.detach(), rtol=1e-6, atol=1e-7)

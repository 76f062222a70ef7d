"""Several members of one architecture as one batched model.

Each member is built as its solo run builds it (its seed, its initial weights); `StackedModel`
copies their parameters and buffers into tensors with a leading member axis ([K, ...]) and runs
the members' forward as one call through `torch.func.vmap` over that axis: every matrix product
becomes one batched product over the K members, every elementwise step one pass. The stacked
parameters are the leaves the optimizer steps; the member modules stay as they were built and
are refreshed from the stack (`sync`) when a member is scored or written, so the evaluator, the
monitor and the checkpoints see an ordinary solo model.

Members are independent: the loss is the sum of the members' losses, so each member's gradient
is its own; Adam's update is elementwise, so one optimizer over the stack is each member's own.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

# vmap has no batching rule for the CPU's fused SDPA kernel: it runs it once per member, which
# is what a solo run pays anyway; the warning says so on every stacked run.
warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet "
                        "implemented the batching rule")


class StackedModel:
    """`members` (same class, same shapes) as one model over a leading member axis."""

    def __init__(self, members: list[nn.Module]):
        if len({type(m) for m in members}) != 1:
            raise ValueError("stacked members must be one architecture")
        self.members = members
        # params: name -> [K, ...] leaves that require grad; buffers: name -> [K, ...]
        self.params, self.buffers = stack_module_state(members)
        # The module whose forward runs, with each member's tensors swapped in by
        # functional_call (a copy, so that the members' own modules are never rebound).
        self.template = copy.deepcopy(members[0])

    def __len__(self) -> int:
        return len(self.members)

    def parameters(self) -> list[Tensor]:
        """The stacked parameters, in the members' parameters() order."""
        return list(self.params.values())

    def train(self, mode: bool = True) -> StackedModel:
        self.template.train(mode)
        return self

    def __call__(self, src: Tensor, target: Tensor, **kwargs) -> Tensor:
        """src [K, b, in_len, C], target [K, b, out_len, T] -> each member's forecast of its
        own windows, [K, b, ...] (dropout draws differ between members)."""
        template = self.template

        def one(params, buffers, member_src, member_target):
            return functional_call(template, (params, buffers), (member_src, member_target),
                                   kwargs)

        return vmap(one, randomness="different")(self.params, self.buffers, src, target)

    @torch.no_grad()
    def keep(self, positions: list[int]) -> None:
        """Drop every member but those at `positions` (in that order) from the stack: the
        stacked tensors become new leaves holding only their slices, and the members'
        modules the kept ones (an optimizer over the old parameters must be rebuilt over
        parameters())."""
        index = torch.tensor(positions, dtype=torch.long)
        self.members = [self.members[k] for k in positions]
        self.params = {name: p.index_select(0, index.to(p.device)).requires_grad_(True)
                       for name, p in self.params.items()}
        self.buffers = {name: b.index_select(0, index.to(b.device))
                        for name, b in self.buffers.items()}

    @torch.no_grad()
    def sync(self, k: int) -> nn.Module:
        """Member k's module holding its current weights (and buffers); returns it."""
        member = self.members[k]
        for name, tensor in member.named_parameters():
            tensor.copy_(self.params[name][k])
        for name, tensor in member.named_buffers():
            tensor.copy_(self.buffers[name][k])
        return member


def member_grad_norms(params: list[Tensor]) -> Tensor:
    """Each member's total gradient 2-norm over `params` (stacked, [K, ...]): [K]."""
    squares = [p.grad.square().flatten(1).sum(1) for p in params if p.grad is not None]
    return torch.stack(squares).sum(0).sqrt()


def clip_member_gradients(params: list[Tensor], max_norm: float) -> Tensor:
    """clip_gradients for each member apart: [K] norms before clipping, each member's
    gradients scaled down to `max_norm` where it is > 0 (clip_grad_norm_'s rule)."""
    norms = member_grad_norms(params)
    if max_norm:
        scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale.view(-1, *([1] * (p.dim() - 1))))
    return norms

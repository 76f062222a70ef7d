"""One run on many processes: torchrun + DistributedDataParallel.

    torchrun --nproc_per_node=N -m seqforecast.train trainer.strategy=ddp ...

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT. Before Hydra
starts, `init_from_env` joins the default process group (gloo: small coordination messages,
on every machine), and rank 0 chooses the run dir for everyone, so all ranks share one dir and
only rank 0 writes to it. The gradient all-reduce runs on `gradient_group`: the default gloo
group on CPU, an NCCL group when training on CUDA.

How the data is split so that N ranks with per-rank batch b compute what one process with
batch N*b computes: every rank holds the same training windows and the same epoch
permutation (seeded by `seed`); global batch k is permutation[k*N*b : (k+1)*N*b] and rank r
takes its r-th slice of b windows. Each rank scales its summed squared error by
N / (windows in the global batch), so DDP's gradient average is the global batch's mean,
even for a ragged last batch.
"""

from __future__ import annotations

import gc
import hashlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn

STRATEGIES = ("single", "ddp")  # trainer.strategy: one process, or DDP under torchrun


@dataclass(frozen=True)
class Distributed:
    """This process's place in the run (world_size 1 when not under torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def broadcast(self, value):
        """Rank 0's `value` on every rank (any picklable object)."""
        if not self.enabled:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value) -> list:
        """Every rank's `value`, in rank order, on every rank."""
        if not self.enabled:
            return [value]
        out = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def sum(self, values: Tensor) -> Tensor:
        """Element-wise sum over ranks of a small float64 CPU tensor (on the gloo group)."""
        if self.enabled:
            dist.all_reduce(values, op=dist.ReduceOp.SUM)
        return values

    def shard(self, index: Tensor) -> Tensor:
        """This rank's share of a global batch of window indices (N slices of equal size but
        the last, which may be short or empty)."""
        per_rank = -(-len(index) // self.world_size)
        return index[self.rank * per_rank : (self.rank + 1) * per_rank]


SINGLE = Distributed()  # a run in one process


def from_env() -> Distributed:
    return Distributed(
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
    )


def init_from_env() -> Distributed:
    """Join the default (gloo) process group when torchrun started us with several ranks."""
    ctx = from_env()
    if ctx.enabled and not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    return ctx


def shutdown(ctx: Distributed) -> None:
    """Leave the process group before the interpreter exits. DDP's reducer holds the group
    in reference cycles: collect them first, or the group's threads outlive it and the
    process aborts at exit ("terminate called without an active exception")."""
    if ctx.enabled and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def gradient_group(device: torch.device):
    """The process group for DDP's all-reduce: NCCL on CUDA, the default gloo group on CPU."""
    if device.type == "cuda":
        return dist.new_group(backend="nccl")
    return None  # DDP's default: the default group


def wrap(model: nn.Module, ctx: Distributed, device: torch.device) -> nn.Module:
    if not ctx.enabled:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(
        model, device_ids=device_ids, process_group=gradient_group(device)
    )


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def parameter_digest(model: nn.Module) -> str:
    """A hash of every parameter's bytes: equal digests mean bit-identical weights."""
    digest = hashlib.sha256()
    for name, param in sorted(unwrap(model).state_dict().items()):
        digest.update(name.encode())
        digest.update(param.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()

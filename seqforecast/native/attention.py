"""Short-sequence attention on the CPU by the C kernel `attention.c`: the `native` attention
kernel (attention/kernels.py), which the builder chooses for residual attention.

    out = softmax(q k^T * scale) v       q [B, H, Lq, w], k [B, H, Lk, w], v [B, H, Lk, dv]

One (batch, head) window at a time with its scores in cache and every inner loop a whole vector of
queries or keys, exponentials included (torch's ops run PatchTST's 42 x 42 score matrices as
thousands of tiny products, copies and softmaxes, and torch's fused kernel runs q and k wider than
v, residual attention's, only on its slow generic path). q, k, v are read where they lie through
their strides (no folding of heads into a batch), q and k may come in pieces along the width
(residual attention's layers: no concatenation), the output is written as [B, Lq, H, dv] (the layout
out_proj reads, so unfolding the heads is free), and the backward recomputes the weights from each
query's saved log-sum-exp. With more than one torch thread, the batch is split over that many
threads (ctypes releases the GIL).
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import torch
from torch import Tensor

from . import build
from .build import Signature, pointer

_i64 = ctypes.c_int64
_p64 = ctypes.POINTER(_i64)
# The keys (and, for the mask by key, the queries) padded to whole vectors of 16 float32 (one
# AVX-512 register): the kernel's lanes.
LANES = 16
MAX_SCORES = 128 * 128  # longer sequences: the backends' own paths
MAX_WIDTH = 128  # of q and k (all pieces) and of v: a window's vectors stay on the stack


def padded(length: int) -> int:
    """length rounded up to a multiple of LANES."""
    return -(-length // LANES) * LANES


class _Problem(ctypes.Structure):
    _fields_ = [  # attention.c's Problem
        *[(name, _i64) for name in ("heads", "q_len", "k_len", "wq", "dv", "pieces")],
        *[(name, ctypes.POINTER(_i64)) for name in ("q", "k", "qs", "ks", "widths")],
        ("v", ctypes.c_void_p),
        ("vs", ctypes.POINTER(_i64)),
        ("bias_by_key", ctypes.c_void_p),
        ("bias_by_query", ctypes.c_void_p),
        ("bias_per_query", ctypes.c_int),
        ("scale", ctypes.c_float),
    ]


def applies(q: Sequence[Tensor], k: Sequence[Tensor], v: Tensor) -> bool:
    """Float32 [B, H, L, w] CPU tensors whose last dim is contiguous, short sequences, q and k
    no wider than MAX_WIDTH in all."""
    return (all(t.dtype == torch.float32 and t.device.type == "cpu" and t.dim() == 4
                and t.stride(-1) == 1 for t in (*q, *k, v))
            and q[0].shape[-2] * k[0].shape[-2] <= MAX_SCORES
            and max(sum(t.shape[-1] for t in q), v.shape[-1]) <= MAX_WIDTH)


def attention(q: Sequence[Tensor], k: Sequence[Tensor], v: Tensor, scale: float,
              blocked: Tensor | None = None) -> Tensor:
    """softmax(q k^T * scale) v over q [B, H, Lq, w], k [B, H, Lk, w], v [B, H, Lk, dv], the
    pairs where `blocked` [Lq, Lk] is True left out (every query must keep a key) ->
    [B, H, Lq, dv], a view of [B, Lq, H, dv] storage. q and k are given as pieces along w
    (q = cat(q pieces, -1), the same widths in k): one piece each, or a residual stack's layers."""
    if len(q) != len(k) or any(a.shape[-1] != b.shape[-1] for a, b in zip(q, k, strict=True)):
        raise ValueError("native attention: q and k need pieces of the same widths")
    biases = _Biases(q[0].shape[2], k[0].shape[2], blocked)
    return _NativeAttention.apply(scale, biases, len(q), *q, *k, v)


class _Biases:
    """The mask as 0 / -inf scores, in the two layouts the kernel reads (attention.c's Problem):
    by key [Lk, pad(Lq)] (None without a mask) and by query [Lq, pad(Lk)] (one row without a
    mask), -inf on the padding keys."""

    def __init__(self, q_len: int, k_len: int, blocked: Tensor | None):
        by_query = torch.full((q_len if blocked is not None else 1, padded(k_len)), float("-inf"))
        by_query[:, :k_len] = 0.0
        self.by_key = None
        if blocked is not None:
            blocked = blocked.cpu()
            by_query[:, :k_len].masked_fill_(blocked, float("-inf"))
            self.by_key = torch.zeros(k_len, padded(q_len))
            self.by_key[:, :q_len] = by_query[:, :k_len].t()
        self.by_query = by_query


_SIGNATURES = {  # both return 0, or 1: no memory for a window's scratch
    "attention_forward": Signature(ctypes.c_int, [
        ctypes.POINTER(_Problem), _i64, _i64, ctypes.c_void_p, _p64, ctypes.c_void_p,
    ]),
    "attention_backward": Signature(ctypes.c_int, [
        ctypes.POINTER(_Problem), _i64, _i64, ctypes.c_void_p, _p64, ctypes.c_void_p, _p64,
        ctypes.c_void_p, _p64, _p64, _p64, _p64, ctypes.c_void_p, _p64,
    ]),
}


def _library():
    return build.load("attention", _SIGNATURES)


def _array(values) -> ctypes.Array:
    values = list(values)
    return (_i64 * len(values))(*values)


def _strides(*tensors: Tensor) -> ctypes.Array:
    """The (b, h, i) strides of [B, H, L, w] tensors, 3 a tensor."""
    return _array(s for t in tensors for s in t.stride()[:3])


def _addresses(tensors: Sequence[Tensor]) -> ctypes.Array:
    return _array(t.data_ptr() for t in tensors)


def _problem(q, k, v: Tensor, scale: float, biases: _Biases) -> _Problem:
    """The kernel's problem struct (it keeps its arrays alive: ctypes' _objects)."""
    widths = [t.shape[3] for t in q]
    by_key = None if biases.by_key is None else biases.by_key.data_ptr()
    return _Problem(
        q[0].shape[1], q[0].shape[2], k[0].shape[2], sum(widths), v.shape[3], len(q),
        _addresses(q), _addresses(k), _strides(*q), _strides(*k), _array(widths),
        v.data_ptr(), _strides(v), by_key, biases.by_query.data_ptr(),
        int(biases.by_query.shape[0] > 1), scale,
    )


def _run(function, batch: int, problem: _Problem, *args) -> None:
    """function(problem, b0, b1, *args) over the batch, split over torch's thread count."""
    threads = min(torch.get_num_threads(), batch)
    bounds = [batch * t // threads for t in range(threads + 1)]
    calls = [(ctypes.byref(problem), _i64(b0), _i64(b1), *args)
             for b0, b1 in itertools.pairwise(bounds) if b1 > b0]
    if len(calls) == 1:
        failed = [function(*calls[0])]
    else:
        failed = [f.result() for f in [_pool(threads).submit(function, *call) for call in calls]]
    if any(failed):
        raise MemoryError("native attention: no memory for a window's scratch")


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, thread_name_prefix="seqforecast-attention")


class _NativeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scale: float, biases: _Biases, pieces: int, *qkv: Tensor) -> Tensor:
        q, k, v = qkv[:pieces], qkv[pieces : 2 * pieces], qkv[-1]
        batch, heads, q_len, _ = q[0].shape
        out = v.new_empty(batch, q_len, heads, v.shape[3]).transpose(1, 2)  # [B, H, Lq, dv]
        lse = v.new_empty(batch, heads, q_len)
        _run(_library().attention_forward, batch, _problem(q, k, v, scale, biases),
             pointer(out), _strides(out), pointer(lse))
        ctx.save_for_backward(*qkv, out, lse)
        ctx.scale, ctx.biases, ctx.pieces = scale, biases, pieces
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        *qkv, out, lse = ctx.saved_tensors
        pieces = ctx.pieces
        q, k, v = qkv[:pieces], qkv[pieces : 2 * pieces], qkv[-1]
        if grad_out.stride(-1) != 1:
            grad_out = grad_out.contiguous()
        # Each gradient in its input's layout (empty_like keeps dense strides).
        grad_q, grad_k = [torch.empty_like(t) for t in q], [torch.empty_like(t) for t in k]
        grad_v = torch.empty_like(v)
        _run(
            _library().attention_backward, v.shape[0], _problem(q, k, v, ctx.scale, ctx.biases),
            pointer(out), _strides(out), pointer(grad_out), _strides(grad_out),
            pointer(lse), _addresses(grad_q),
            _strides(*grad_q), _addresses(grad_k), _strides(*grad_k),
            pointer(grad_v), _strides(grad_v),
        )
        return (None, None, None, *grad_q, *grad_k, grad_v)

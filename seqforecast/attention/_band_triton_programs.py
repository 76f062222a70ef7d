"""The Triton programs of `attention.kernel=triton` (band_triton.py says what they compute and
launches them). Imported on the kernels' first launch, not with the package: importing Triton
costs each process about 0.2 s of CPU, and most runs never launch these."""

import triton
import triton.language as tl


@triton.jit
def _band(n, length, block, window, CAUSAL: tl.constexpr, BM: tl.constexpr,
          BN: tl.constexpr):
    """Query block n's positions and its window's keys, which exist (`q_ok`, `k_ok`), and
    which pairs may attend: (q_pos [BM], k_pos [BN], q_ok, k_ok, allowed [BM, BN])."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    q_pos = n * block + rows
    k_pos = n * block - block + cols
    q_ok = (rows < block) & (q_pos >= 0) & (q_pos < length)
    k_ok = (cols < window) & (k_pos >= 0) & (k_pos < length)
    allowed = q_ok[:, None] & k_ok[None, :]
    if CAUSAL:
        allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
    return q_pos, k_pos, q_ok, k_ok, allowed


@triton.jit
def _dot(a, b, DOT: tl.constexpr):
    """a @ b accumulated in float32; DOT: "ieee" for float32 inputs (a GPU's default, tf32,
    rounds them to 10 bits), "tf32" (unused) for 16-bit ones."""
    return tl.dot(a, b, input_precision=DOT)


@triton.jit
def _rows(base, pos, ok, width, B: tl.constexpr):
    """Rows `pos` of a [length, width] matrix at `base` as a [len(pos), B] tile, zero where
    a row is not `ok` or past the width."""
    cols = tl.arange(0, B)
    return tl.load(base + pos[:, None] * width + cols[None, :],
                   mask=ok[:, None] & (cols[None, :] < width), other=0.0)


@triton.jit
def _store_rows(base, tile, pos, ok, width, B: tl.constexpr):
    cols = tl.arange(0, B)
    tl.store(base + pos[:, None] * width + cols[None, :], tile.to(base.dtype.element_ty),
             mask=ok[:, None] & (cols[None, :] < width))


@triton.jit
def band_forward(Q, K, V, OUT, LSE, scale, length, block, window, width, value_width,
                 S: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BW: tl.constexpr, BD: tl.constexpr, DOT: tl.constexpr):
    n = tl.program_id(0)
    bv = tl.program_id(1)  # batch * values + value
    q_pos, k_pos, q_ok, k_ok, allowed = _band(n, length, block, window, CAUSAL, BM, BN)
    v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
    for s in tl.static_range(S):
        g = (bv * S + s) * length  # the group's first row over batch x groups
        q = _rows(Q + g * width, q_pos, q_ok, width, BW)
        k = _rows(K + g * width, k_pos, k_ok, width, BW)
        scores = tl.where(allowed, _dot(q, tl.trans(k), DOT) * scale, float("-inf"))
        top = tl.where(q_ok, tl.max(scores, 1), 0.0)  # rows past the end: no inf - inf
        p = tl.exp(scores - top[:, None])
        total = tl.where(q_ok, tl.sum(p, 1), 1.0)
        p = p / total[:, None]
        _store_rows(OUT + g * value_width, _dot(p.to(v.dtype), v, DOT), q_pos, q_ok,
                    value_width, BD)
        tl.store(LSE + g + q_pos, top + tl.log(total), mask=q_ok)


@triton.jit
def _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT: tl.constexpr):
    """A window's probabilities again (from the log-sum-exp) and the scores' gradient."""
    p = tl.where(allowed, tl.exp(_dot(q, tl.trans(k), DOT) * scale - lse[:, None]), 0.0)
    ds = p * (_dot(do, tl.trans(v), DOT) - delta[:, None])
    return p, ds


@triton.jit
def band_backward_keys(Q, K, V, DO, LSE, DELTA, DK, DV, scale, length, block, window,
                       width, value_width, S: tl.constexpr, CAUSAL: tl.constexpr,
                       LOOKAHEAD: tl.constexpr, BM: tl.constexpr, BW: tl.constexpr,
                       BD: tl.constexpr, DOT: tl.constexpr):
    m = tl.program_id(0)  # the key block
    bv = tl.program_id(1)
    k_pos, _, k_ok, _, _ = _band(m, length, block, window, CAUSAL, BM, BM)
    v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
    dv = tl.zeros((BM, BD), dtype=tl.float32)
    for s in tl.static_range(S):
        g = (bv * S + s) * length
        k = _rows(K + g * width, k_pos, k_ok, width, BW)
        dk = tl.zeros((BM, BW), dtype=tl.float32)
        # the query blocks whose window holds key block m: m - LOOKAHEAD .. m + 1
        for i in tl.static_range(2 + LOOKAHEAD):
            q_pos, _, q_ok, _, _ = _band(m - LOOKAHEAD + i, length, block, window, CAUSAL,
                                         BM, BM)
            allowed = q_ok[:, None] & k_ok[None, :]
            if CAUSAL:
                allowed = allowed & (k_pos[None, :] <= q_pos[:, None])
            q = _rows(Q + g * width, q_pos, q_ok, width, BW)
            do = _rows(DO + g * value_width, q_pos, q_ok, value_width, BD)
            lse = tl.load(LSE + g + q_pos, mask=q_ok, other=0.0)
            delta = tl.load(DELTA + g + q_pos, mask=q_ok, other=0.0)
            p, ds = _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT)
            dv += _dot(tl.trans(p.to(do.dtype)), do, DOT)
            dk += _dot(tl.trans(ds.to(q.dtype)), q, DOT)
        _store_rows(DK + g * width, dk * scale, k_pos, k_ok, width, BW)
    _store_rows(DV + bv * length * value_width, dv, k_pos, k_ok, value_width, BD)


@triton.jit
def band_backward_queries(Q, K, V, DO, LSE, DELTA, DQ, scale, length, block, window,
                          width, value_width, S: tl.constexpr, CAUSAL: tl.constexpr,
                          BM: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr,
                          BD: tl.constexpr, DOT: tl.constexpr):
    n = tl.program_id(0)
    bv = tl.program_id(1)
    q_pos, k_pos, q_ok, k_ok, allowed = _band(n, length, block, window, CAUSAL, BM, BN)
    v = _rows(V + bv * length * value_width, k_pos, k_ok, value_width, BD)
    for s in tl.static_range(S):
        g = (bv * S + s) * length
        q = _rows(Q + g * width, q_pos, q_ok, width, BW)
        k = _rows(K + g * width, k_pos, k_ok, width, BW)
        do = _rows(DO + g * value_width, q_pos, q_ok, value_width, BD)
        lse = tl.load(LSE + g + q_pos, mask=q_ok, other=0.0)
        delta = tl.load(DELTA + g + q_pos, mask=q_ok, other=0.0)
        _, ds = _probabilities(q, k, do, v, lse, delta, allowed, scale, DOT)
        _store_rows(DQ + g * width, _dot(ds.to(k.dtype), k, DOT) * scale, q_pos, q_ok, width,
                    BW)

/* Attention over short sequences, forward and backward, one (batch, head) window at a time.

   out = softmax(q k^T * scale + bias) v      q [Lq, wq], k [Lk, wq], v [Lk, dv] per window

   Built and loaded by seqforecast/native/build.py; called through
   seqforecast/native/attention.py, which says why. Every inner loop works on 16 floats at once
   (vectors.h) and keeps its sums in registers: the forward runs along 16 queries at a time, the
   backward along 16 keys. A window's scores never leave the cache; the forward saves each
   query's log-sum-exp and the backward recomputes the weights from it (as flash attention
   does). The common widths (wq, dv) get their own compiled copy, whose loops over the width
   unroll into registers; other widths take the same code with runtime bounds.

   q and k may come in pieces along the width (residual attention's layers, residual.py):
   scores are the sum of the pieces' products, read without concatenating them. Tensors are
   read and written where they lie through strides (the last dim contiguous): element
   (b, h, i, c) of a tensor t lies at t[b * ts[0] + h * ts[1] + i * ts[2] + c]. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vectors.h"

#define KERNEL static inline __attribute__((always_inline))

static inline int64_t padded(int64_t n) { return (n + LANES - 1) / LANES * LANES; }

static inline vec max_vec(vec a, vec b) {
    ivec a_wins = a > b;
    return (vec)(((ivec)a & a_wins) | ((ivec)b & ~a_wins));
}

/* t[r][c] -> t[c][r] for 16 vectors of 16: for each bit k of the index, rows r and r + 2^k
   (bit k of r clear) swap the off-diagonal halves of their 2^k x 2^k blocks: lanes (a_lanes,
   b_lanes) of the pair, 16 and up meaning the second row's (64 two-vector permutes in all,
   against 256 scalar loads and stores). */
#define UNPAREN(...) __VA_ARGS__
#define TRANSPOSE_STAGE(t, k, a_lanes, b_lanes)                                                \
    for (int r = 0; r < LANES; r++)                                                           \
        if (!(r & (1 << (k)))) {                                                              \
            const vec a = t[r], b = t[r + (1 << (k))];                                        \
            t[r] = SHUFFLE2(a, b, UNPAREN a_lanes);                                            \
            t[r + (1 << (k))] = SHUFFLE2(a, b, UNPAREN b_lanes);                               \
        }

static inline void transpose16(vec t[LANES]) {
    TRANSPOSE_STAGE(t, 0, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                    (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
    TRANSPOSE_STAGE(t, 1, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                    (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
    TRANSPOSE_STAGE(t, 2, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                    (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
    TRANSPOSE_STAGE(t, 3, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                    (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
}

/* exp(x) for x <= 0 (up to rounding): x = n ln 2 + r with |r| <= ln 2 / 2, e^r by a polynomial
   of degree 6 (fitted to the relative error there: under 1e-7), 2^n written into the exponent
   bits; exactly 0 below -87.3 and for -inf (those lanes are clamped, then cleared). */
static inline vec exp_vec(vec x) {
    const ivec below = x < splat(-87.3365448f);
    x = (vec)(((ivec)x & ~below) | ((ivec)splat(-87.3365448f) & below)); /* one blend */
    const vec magic = splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    const vec n = (x * 1.44269504088896341f + magic) - magic;
    vec r = x - n * 0.693359375f; /* ln 2 in two parts: the first exact in float */
    r = r - n * -2.12194440e-4f;
    vec p = splat(1.3843652559444308e-3f);
    p = p * r + 8.374156430363655e-3f;
    p = p * r + 4.166800156235695e-2f;
    p = p * r + 1.6666431725025177e-1f;
    p = p * r + 4.999999403953552e-1f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uvec two_n = (uvec)(__builtin_convertvector(n, ivec) + 127) << 23;
    return (vec)((ivec)(p * (vec)two_n) & ~below);
}

typedef struct {
    int64_t heads, q_len, k_len, wq, dv, pieces;
    const int64_t *q, *k;            /* addresses of the q and k pieces */
    const int64_t *qs, *ks;          /* their strides, 3 a piece */
    const int64_t *widths;           /* a piece's width, the same in q and k */
    const float *v;
    const int64_t *vs;
    /* The mask as 0 / -inf, both ways round: [Lk, pad(Lq)] for the forward, or NULL for none;
       [Lq, pad(Lk)] (or one row [pad(Lk)] for every query) for the backward, -inf on the
       padding keys. */
    const float *bias_by_key, *bias_by_query;
    int bias_per_query;
    float scale;
} Problem;

/* Window (b, h) of the pieces of t (q or k) -> rows [len, wq] (transposed == 0) or columns
   [wq, padded] with zeros past len (transposed == 1). */
static void gather(const Problem *pr, const int64_t *ptrs, const int64_t *strides, int64_t b,
                   int64_t h, int64_t len, int64_t padded_len, int transposed, float *out) {
    int64_t first = 0;
    for (int64_t piece = 0; piece < pr->pieces; piece++) {
        const int64_t *s = strides + 3 * piece, width = pr->widths[piece];
        const float *t = (const float *)(intptr_t)ptrs[piece] + b * s[0] + h * s[1];
        for (int64_t i = 0; i < len; i++)
            for (int64_t c = 0; c < width; c++) {
                const float x = t[i * s[2] + c];
                if (transposed)
                    out[(first + c) * padded_len + i] = x;
                else
                    out[i * pr->wq + first + c] = x;
            }
        if (transposed)
            for (int64_t c = 0; c < width; c++)
                for (int64_t i = len; i < padded_len; i++) out[(first + c) * padded_len + i] = 0;
        first += width;
    }
}

/* rows [len, wq] -> window (b, h) of the pieces' gradients (strides as given). */
static void scatter(const Problem *pr, const int64_t *ptrs, const int64_t *strides, int64_t b,
                    int64_t h, int64_t len, const float *rows) {
    int64_t first = 0;
    for (int64_t piece = 0; piece < pr->pieces; piece++) {
        const int64_t *s = strides + 3 * piece, width = pr->widths[piece];
        float *t = (float *)(intptr_t)ptrs[piece] + b * s[0] + h * s[1];
        for (int64_t i = 0; i < len; i++)
            for (int64_t c = 0; c < width; c++) t[i * s[2] + c] = rows[i * pr->wq + first + c];
        first += width;
    }
}

/* One window's forward, 16 queries at a time: each key's scores for them are one vector, so
   the softmax's max and sum over the keys, and out^T = v^T P^T, are sums of vectors.
   scratch: qt [wq, pad(Lq)], k rows [Lk, wq], scores [Lk, 16]. */
KERNEL void forward_window(const Problem *pr, int64_t b, int64_t h, float *o, const int64_t *os,
                           float *l, float *scratch, const int64_t wq, const int64_t dv) {
    const int64_t n = padded(pr->q_len), k_len = pr->k_len;
    float *qt = scratch, *kr = qt + wq * n, *scores = kr + k_len * wq;
    gather(pr, pr->q, pr->qs, b, h, pr->q_len, n, 1, qt);
    for (int64_t x = 0; x < wq * n; x++) qt[x] *= pr->scale; /* scores come scaled */
    gather(pr, pr->k, pr->ks, b, h, k_len, 0, 0, kr);
    const float *v = pr->v + b * pr->vs[0] + h * pr->vs[1];
    for (int64_t i0 = 0; i0 < pr->q_len; i0 += LANES) {
        vec qv[wq];
        for (int64_t c = 0; c < wq; c++) qv[c] = load(qt + c * n + i0);
        vec top = splat(-INFINITY);
        for (int64_t j = 0; j < k_len; j++) {
            vec s = {0};
            for (int64_t c = 0; c < wq; c++) s += kr[j * wq + c] * qv[c];
            if (pr->bias_by_key) s += load(pr->bias_by_key + j * n + i0);
            store(scores + j * LANES, s);
            top = max_vec(top, s);
        }
        vec total = {0}, acc[dv];
        for (int64_t c = 0; c < dv; c++) acc[c] = (vec){0};
        for (int64_t j = 0; j < k_len; j++) {
            const vec p = exp_vec(load(scores + j * LANES) - top);
            total += p;
            for (int64_t c = 0; c < dv; c++) acc[c] += v[j * pr->vs[2] + c] * p;
        }
        const int64_t rows = pr->q_len - i0 < LANES ? pr->q_len - i0 : LANES;
        const vec inv = 1.0f / total;
        for (int64_t c = 0; c < dv; c++) {
            const vec out_c = acc[c] * inv;
            for (int64_t i = 0; i < rows; i++) o[(i0 + i) * os[2] + c] = out_c[i];
        }
        for (int64_t i = 0; i < rows; i++) l[i0 + i] = top[i] + logf(total[i]);
    }
}

/* One window's backward, 16 keys at a time: each query's weights P_i = exp(s_i - lse_i) and
   their gradient dS_i = P_i (dO_i v^T - dO_i . O_i) for those keys are one vector, and
   dV^T += dO_i^T P_i, dK^T += q_i^T dS_i are sums of vectors. dQ = dS K runs along queries:
   each 16 x 16 tile of dS is transposed in registers and summed into dQ^T. scratch: q rows
   [Lq, wq], kt [wq, pad(Lk)], dQ^T [wq, pad(Lq)], row dots [Lq], dK^T of 16 keys [wq, 16],
   grad rows [max(Lq, Lk), wq]. */
KERNEL void backward_window(const Problem *pr, int64_t b, int64_t h, const float *o,
                            const int64_t *os, const float *go, const int64_t *gos,
                            const float *l, const int64_t *gq, const int64_t *gqs,
                            const int64_t *gk, const int64_t *gks, float *gv,
                            const int64_t *gvs, float *scratch, const int64_t wq,
                            const int64_t dv) {
    const int64_t q_len = pr->q_len, k_len = pr->k_len, nk = padded(k_len), nq = padded(q_len);
    const float scale = pr->scale;
    float *qr = scratch, *kt = qr + q_len * wq, *dqt = kt + wq * nk, *row_dot = dqt + wq * nq;
    float *gkt = row_dot + q_len, *grad = gkt + wq * LANES;
    gather(pr, pr->q, pr->qs, b, h, q_len, 0, 0, qr);
    for (int64_t x = 0; x < q_len * wq; x++) qr[x] *= scale; /* so s, and dK, come scaled */
    gather(pr, pr->k, pr->ks, b, h, k_len, nk, 1, kt);
    memset(dqt, 0, sizeof(float) * wq * nq);
    const float *v = pr->v + b * pr->vs[0] + h * pr->vs[1];
    for (int64_t i = 0; i < q_len; i++) { /* rowsum(dP_i * P_i) = dO_i . O_i */
        float dot = 0.0f;
        for (int64_t c = 0; c < dv; c++) dot += go[i * gos[2] + c] * o[i * os[2] + c];
        row_dot[i] = dot;
    }
    for (int64_t j0 = 0; j0 < k_len; j0 += LANES) {
        const int64_t keys = k_len - j0 < LANES ? k_len - j0 : LANES;
        const ivec lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        const ivec live = lane < (int32_t)keys; /* no mask: only the padding keys are out */
        vec kv[wq], vv[dv], grad_v[dv];
        for (int64_t c = 0; c < wq; c++) kv[c] = load(kt + c * nk + j0);
        memset(gkt, 0, sizeof(float) * wq * LANES);
        for (int64_t c = 0; c < dv; c++) {
            for (int64_t j = 0; j < LANES; j++) vv[c][j] = j < keys ? v[(j0 + j) * pr->vs[2] + c] : 0;
            grad_v[c] = (vec){0};
        }
        for (int64_t i0 = 0; i0 < q_len; i0 += LANES) {
            const int64_t rows = q_len - i0 < LANES ? q_len - i0 : LANES;
            vec tile[LANES]; /* dS for 16 queries x these 16 keys */
            for (int64_t r = 0; r < rows; r++) {
                const int64_t i = i0 + r;
                const float *qi = qr + i * wq, *goi = go + i * gos[2];
                vec s = splat(-l[i]), dp = {0}; /* s_ij - lse_i */
                for (int64_t c = 0; c < wq; c++) s += qi[c] * kv[c];
                for (int64_t c = 0; c < dv; c++) dp += goi[c] * vv[c]; /* dP_ij = dO_i . v_j */
                vec p;
                if (pr->bias_per_query) {
                    p = exp_vec(s + load(pr->bias_by_query + i * nk + j0));
                } else {
                    p = (vec)((ivec)exp_vec(s) & live);
                }
                const vec ds = p * (dp - row_dot[i]); /* dS / scale */
                for (int64_t c = 0; c < dv; c++) grad_v[c] += goi[c] * p; /* dV_j += P_ij dO_i */
                tile[r] = ds;
            }
            /* dK_j += sum_i dS_ij q_i, a width at a time (wide q: all in registers would spill) */
            for (int64_t c = 0; c < wq; c++) {
                vec acc = load(gkt + c * LANES);
                for (int64_t r = 0; r < rows; r++) acc += qr[(i0 + r) * wq + c] * tile[r];
                store(gkt + c * LANES, acc);
            }
            for (int64_t r = rows; r < LANES; r++) tile[r] = (vec){0};
            transpose16(tile); /* tile[j]: key j0 + j's dS for the 16 queries */
            for (int64_t c = 0; c < wq; c++) { /* dQ_i / scale += sum_j dS_ij k_j */
                vec acc = load(dqt + c * nq + i0);
                for (int j = 0; j < LANES; j++) acc += kt[c * nk + j0 + j] * tile[j];
                store(dqt + c * nq + i0, acc);
            }
        }
        for (int64_t j = 0; j < keys; j++) {
            for (int64_t c = 0; c < wq; c++) grad[(j0 + j) * wq + c] = gkt[c * LANES + j];
            for (int64_t c = 0; c < dv; c++) gv[(j0 + j) * gvs[2] + c] = grad_v[c][j];
        }
    }
    scatter(pr, gk, gks, b, h, k_len, grad);
    for (int64_t i = 0; i < q_len; i++)
        for (int64_t c = 0; c < wq; c++) grad[i * wq + c] = dqt[c * nq + i] * scale;
    scatter(pr, gq, gqs, b, h, q_len, grad);
}

/* Calls body(wq, dv) with constant widths for the common ones (each its own compiled copy,
   the width loops unrolled into registers), else with the runtime ones. */
#define WITH_WIDTHS(wq, dv, body)                                                              \
    switch ((wq) * 1000 + (dv)) {                                                             \
    case 2002: body(2, 2); break;                                                             \
    case 4004: body(4, 4); break;                                                             \
    case 8004: body(8, 4); break;                                                             \
    case 12004: body(12, 4); break;                                                           \
    case 2004: body(2, 4); break;                                                             \
    case 6004: body(6, 4); break;                                                             \
    case 8008: body(8, 8); break;                                                             \
    case 16008: body(16, 8); break;                                                           \
    case 16016: body(16, 16); break;                                                          \
    default: body(wq, dv);                                                                    \
    }

/* Windows [b0, b1) x all heads. out: strides os; lse: [B, H, Lq] contiguous. Returns 0, or 1
   when there is no memory for the scratch (nothing written). */
int attention_forward(const Problem *pr, int64_t b0, int64_t b1, float *out, const int64_t *os,
                       float *lse) {
    float *scratch = malloc(sizeof(float) * (pr->wq * (padded(pr->q_len) + pr->k_len) +
                                             pr->k_len * LANES));
    if (!scratch) return 1;
    for (int64_t b = b0; b < b1; b++)
        for (int64_t h = 0; h < pr->heads; h++) {
            float *o = out + b * os[0] + h * os[1], *l = lse + (b * pr->heads + h) * pr->q_len;
#define FORWARD(wq, dv) forward_window(pr, b, h, o, os, l, scratch, wq, dv)
            WITH_WIDTHS(pr->wq, pr->dv, FORWARD)
        }
    free(scratch);
    return 0;
}

/* The gradients of the q and k pieces (addresses gq, gk; strides gqs, gks, 3 a piece) and of v
   (gv, strides gvs), written, from the gradient of out (strides gos), out itself (os) and the
   forward's lse. Returns 0, or 1 when there is no memory for the scratch (nothing written). */
int attention_backward(const Problem *pr, int64_t b0, int64_t b1, const float *out,
                        const int64_t *os, const float *grad_out, const int64_t *gos,
                        const float *lse, const int64_t *gq, const int64_t *gqs,
                        const int64_t *gk, const int64_t *gks, float *grad_v,
                        const int64_t *gvs) {
    const int64_t q_len = pr->q_len, k_len = pr->k_len, wq = pr->wq;
    const int64_t nq = padded(q_len), nk = padded(k_len);
    const int64_t longest = q_len > k_len ? q_len : k_len;
    float *scratch = malloc(sizeof(float) * (wq * (q_len + nk + nq + LANES + longest) + q_len));
    if (!scratch) return 1;
    for (int64_t b = b0; b < b1; b++)
        for (int64_t h = 0; h < pr->heads; h++) {
            const float *o = out + b * os[0] + h * os[1];
            const float *go = grad_out + b * gos[0] + h * gos[1];
            const float *l = lse + (b * pr->heads + h) * q_len;
            float *gv = grad_v + b * gvs[0] + h * gvs[1];
#define BACKWARD(wq, dv) \
    backward_window(pr, b, h, o, os, go, gos, l, gq, gqs, gk, gks, gv, gvs, scratch, wq, dv)
            WITH_WIDTHS(pr->wq, pr->dv, BACKWARD)
        }
    free(scratch);
    return 0;
}

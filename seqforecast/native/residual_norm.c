/* A post-norm residual with BatchNorm over tokens, in training, forward and backward:

       z = x + dropout(y)        out = (z - mean) / sqrt(var + eps) * weight + bias

   over [rows, channels] (the tokens as rows), mean and var (biased) per channel over the rows.
   Built and loaded by seqforecast/native/build.py; called through
   seqforecast/native/residual_norm.py, which says why. The dropout mask is dropout.py's
   (mask.h: dropped = 0 keeps every element). Sums run along the channels a row at a time (one
   vector a row at PatchTST's 16 channels), in float over blocks of 64 rows and in double
   across blocks. */

#include <math.h>
#include <stdlib.h>

#include "mask.h"

#define BLOCK 64

/* Per channel: sums[c] += sum over rows of a[r, c], and sums2[c] += sum of a[r, c] * b[r, c]
   (b may be a: squares); double across blocks of 64 rows, float within. */
static void column_sums(const float *a, const float *b, int64_t rows, int64_t channels,
                        double *sums, double *sums2, float *block, float *block2) {
    for (int64_t r0 = 0; r0 < rows; r0 += BLOCK) {
        const int64_t end = r0 + BLOCK < rows ? r0 + BLOCK : rows;
        for (int64_t c = 0; c < channels; c++) block[c] = block2[c] = 0.0f;
        for (int64_t r = r0; r < end; r++) {
            const float *ar = a + r * channels, *br = b + r * channels;
#pragma omp simd
            for (int64_t c = 0; c < channels; c++) {
                block[c] += ar[c];
                block2[c] += ar[c] * br[c];
            }
        }
        for (int64_t c = 0; c < channels; c++) {
            sums[c] += block[c];
            sums2[c] += block2[c];
        }
    }
}

/* One allocation for a call's scratch: 2 * channels doubles (the sums, zeroed), then `floats`
   floats; NULL when there is no memory. */
static double *scratch(int64_t channels, int64_t floats) {
    return calloc(2 * channels + (floats + 1) / 2, sizeof(double));
}

/* z, out [rows, channels]; mean, invstd, var (biased) [channels] written. Returns 0, or 1
   when there is no memory for the scratch (nothing written). */
int residual_norm_forward(const float *x, const float *y, uint64_t key, uint32_t dropped,
                          float scale, int64_t rows, int64_t channels, const float *weight,
                          const float *bias, float eps, float *z, float *out, float *mean,
                          float *invstd, float *var) {
    double *sums = scratch(channels, 2 * channels);
    if (!sums) return 1;
    float *block = (float *)(sums + 2 * channels);
    const int64_t n = rows * channels;
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] + (draw(key, (uint32_t)i) >= dropped ? y[i] * scale : 0.0f);
    column_sums(z, z, rows, channels, sums, sums + channels, block, block + channels);
    for (int64_t c = 0; c < channels; c++) {
        const double m = sums[c] / rows, v = fmax(sums[channels + c] / rows - m * m, 0.0);
        mean[c] = (float)m;
        var[c] = (float)v;
        invstd[c] = (float)(1.0 / sqrt(v + eps));
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *zr = z + r * channels;
        float *o = out + r * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; c++)
            o[c] = (zr[c] - mean[c]) * invstd[c] * weight[c] + bias[c];
    }
    free(sums);
    return 0;
}

/* From the gradient g of out: the gradients of x and y (gx, gy [rows, channels]) and of weight
   and bias (gw, gb [channels]), written. Returns 0, or 1 when there is no memory. */
int residual_norm_backward(const float *g, const float *z, const float *mean,
                           const float *invstd, const float *weight, uint64_t key,
                           uint32_t dropped, float scale, int64_t rows, int64_t channels,
                           float *gx, float *gy, float *gw, float *gb) {
    double *sums = scratch(channels, 5 * channels);
    if (!sums) return 1;
    float *block = (float *)(sums + 2 * channels);
    float *zhat = gx; /* gx's memory holds the normalised z until the last pass */
    for (int64_t r = 0; r < rows; r++) {
        const float *zr = z + r * channels;
        float *h = zhat + r * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; c++) h[c] = (zr[c] - mean[c]) * invstd[c];
    }
    /* sum of g (the bias's gradient) and of g * zhat (the weight's) */
    column_sums(g, zhat, rows, channels, sums, sums + channels, block, block + channels);
    /* dz = weight * invstd * (g - mean(g) - zhat * mean(g * zhat)) = a (g - b - zhat d) */
    float *a = block + 2 * channels, *b = block + 3 * channels, *d = block + 4 * channels;
    for (int64_t c = 0; c < channels; c++) {
        gb[c] = (float)sums[c];
        gw[c] = (float)sums[channels + c];
        a[c] = weight[c] * invstd[c];
        b[c] = (float)(sums[c] / rows);
        d[c] = (float)(sums[channels + c] / rows);
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * channels;
        float *h = zhat + r * channels, *yr = gy + r * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; c++) {
            const float dz = a[c] * (gr[c] - b[c] - h[c] * d[c]);
            h[c] = dz; /* gx */
            yr[c] = draw(key, (uint32_t)(r * channels + c)) >= dropped ? dz * scale : 0.0f;
        }
    }
    free(sums);
    return 0;
}

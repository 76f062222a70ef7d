/* Dropout's mask, drawn and applied in one pass: out[i] = kept(i) ? x[i] * scale : 0, an
   element kept where its 16 random bits (mask.h) are >= dropped.

   Built and loaded by seqforecast/native/build.py; called through
   seqforecast/native/dropout.py, which says why. out may be x (in place). */

#include "mask.h"

/* Elements first .. first + n - 1 of the mask; and the same for x2 into out2 unless x2 is NULL
   (the sliced FFN's backward masks two tensors with one draw). */
void mask_scale(const float *x, const float *x2, uint64_t key, int64_t first, uint32_t dropped,
                float scale, float *out, float *out2, int64_t n) {
    const uint32_t start = (uint32_t)first;
    if (x2 == 0) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            out[i] = draw(key, start + (uint32_t)i) >= dropped ? x[i] * scale : 0.0f;
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const int kept = draw(key, start + (uint32_t)i) >= dropped;
        out[i] = kept ? x[i] * scale : 0.0f;
        out2[i] = kept ? x2[i] * scale : 0.0f;
    }
}

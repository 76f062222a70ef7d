/* Dropout's mask, drawn and applied in one pass: out[i] = draw(i) >= dropped ? x[i] * scale : 0.

   Built and loaded by seqforecast/native/__init__.py; called through
   seqforecast/model/dropout.py, which says why. Element i's 16 random bits are a hash of its
   index under the mask's 64-bit key (counter-based, as Philox is: no state, so a slice of the
   mask is drawn where it is used, forward and backward alike, and nothing is stored): the
   index through an affine map set by the key (its odd multiplier and offset), then Wellons'
   lowbias32, a multiply-xorshift mixer with near-ideal avalanche. dropout.py computes the same
   bits with torch ops where this file cannot be built. out may be x (in place). */

#include <stdint.h>

/* The 16 bits of element i (its index within the whole mask, taken mod 2^32). */
static inline uint32_t draw(uint32_t offset, uint32_t multiplier, uint32_t i) {
    uint32_t x = i * multiplier + offset;
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x >> 16;
}

/* out[i] = x[i] * scale where element first + i is kept, else 0; and the same for x2 into out2
   unless x2 is NULL (the sliced FFN's backward masks two tensors with one mask). */
void mask_scale(const float *x, const float *x2, uint64_t key, int64_t first, uint32_t dropped,
                float scale, float *out, float *out2, int64_t n) {
    const uint32_t offset = (uint32_t)key, multiplier = (uint32_t)(key >> 32) | 1u;
    const uint32_t start = (uint32_t)first;
    if (x2 == 0) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            out[i] = draw(offset, multiplier, start + (uint32_t)i) >= dropped ? x[i] * scale : 0.0f;
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const int kept = draw(offset, multiplier, start + (uint32_t)i) >= dropped;
        out[i] = kept ? x[i] * scale : 0.0f;
        out2[i] = kept ? x2[i] * scale : 0.0f;
    }
}

/* Dropout's random bits, shared by the kernels that apply a dropout mask (dropout.c,
   residual_norm.c); seqforecast/native/dropout.py says how masks are keyed. */

#include <stdint.h>

/* Element i's 16 random bits under the mask's key (i: its index within the whole mask, taken
   mod 2^32): the index through an affine map set by the key (its odd multiplier and offset),
   then Wellons' lowbias32, a multiply-xorshift mixer with near-ideal avalanche. Counter-based,
   as Philox is: no state, so a slice of a mask is drawn where it is used, forward and backward
   alike, and nothing is stored. */
static inline uint32_t draw(uint64_t key, uint32_t i) {
    uint32_t x = i * ((uint32_t)(key >> 32) | 1u) + (uint32_t)key;
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x >> 16;
}

/* Vectors of 16 floats (GCC's vector extensions, which clang has too): AVX-512 registers under
   -march=native where the CPU has them, pairs or quads of narrower ones elsewhere. */

#ifndef SEQFORECAST_VECTORS_H
#define SEQFORECAST_VECTORS_H

#include <stdint.h>

#define LANES 16
typedef float vec __attribute__((vector_size(4 * LANES), aligned(4))); /* may be unaligned */
typedef int32_t ivec __attribute__((vector_size(4 * LANES), aligned(4)));
typedef uint32_t uvec __attribute__((vector_size(4 * LANES), aligned(4)));

static inline vec splat(float x) { return (vec){0} + x; }

static inline vec load(const float *p) { return *(const vec *)p; }

static inline void store(float *p, vec x) { *(vec *)p = x; }

/* Lanes of a and b (16 and up: b's) picked by 16 constant indices: clang's and GCC 12's
   __builtin_shufflevector, else GCC's older __builtin_shuffle (GCC 4.7 to 11). */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#endif
#endif
#ifndef SHUFFLE2
#define SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, (ivec){__VA_ARGS__})
#endif

#endif

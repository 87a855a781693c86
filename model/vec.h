// GCC's vector extensions for the C kernels that work 16 floats a vector
// (one AVX-512 register, two AVX2 ones, four SSE ones at the baseline):
// conv_few.c, conv_direct.c and winograd.c's row paths.
#ifndef TRAIN_VEC_H
#define TRAIN_VEC_H

typedef float vf __attribute__((vector_size(64)));
typedef float vfu __attribute__((vector_size(64), aligned(4))); // for unaligned access
typedef int vi __attribute__((vector_size(64)));                   // masks: a comparison's lanes
#define LD(p) (*(const vfu *)(p))
#define ST(p, v) (*(vfu *)(p) = (v))
// INL bodies inline into each caller (and each of its clones), where
// constant arguments unroll them.
#define INL static inline __attribute__((always_inline))

#endif

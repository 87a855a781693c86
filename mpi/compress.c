// Gradient compression on the ring's wire (--compress fp16|bf16): chunks
// travel as 16-bit floats and are reduced in float32 on arrival.
#include <string.h>
#include <mpi.h>
#include "shim.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VEC
#endif

// bf16 is a float's top 16 bits, rounded to nearest even; NaN stays NaN.
// Written as a select, not an early return, so that GCC vectorises the
// loops that call it.
static inline unsigned short to_bf16(float x) {
	unsigned u;
	memcpy(&u, &x, 4);
	unsigned rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	unsigned quiet = (u >> 16) | 0x40u;
	return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float from_bf16(unsigned short h) {
	unsigned u = (unsigned)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

// fp16 through GCC's _Float16: F16C instructions in the x86-64-v3 clone,
// libgcc's conversion otherwise. Beyond 65504 it is Inf, which the
// trainer's finite check then reports.
static inline unsigned short to_f16(float x) {
	_Float16 h = (_Float16)x;
	unsigned short u;
	memcpy(&u, &h, 2);
	return u;
}

static inline float from_f16(unsigned short u) {
	_Float16 h;
	memcpy(&h, &u, 2);
	return (float)h;
}

VEC void tr_encode16(unsigned short *dst, const float *src, long n, int kind) {
	if (kind == TR_BF16)
		for (long i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
	else
		for (long i = 0; i < n; i++) dst[i] = to_f16(src[i]);
}

// tr_decode16 sets dst = src (add == 0) or dst += src (add != 0).
VEC void tr_decode16(float *dst, const unsigned short *src, long n, int kind, int add) {
	if (kind == TR_BF16) {
		if (add)
			for (long i = 0; i < n; i++) dst[i] += from_bf16(src[i]);
		else
			for (long i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
	} else {
		if (add)
			for (long i = 0; i < n; i++) dst[i] += from_f16(src[i]);
		else
			for (long i = 0; i < n; i++) dst[i] = from_f16(src[i]);
	}
}

// tr_quantize16 rounds buf to the wire format in place: the owner of a
// reduced chunk does this before the all-gather, so that every rank ends
// with the bits the others received.
VEC void tr_quantize16(float *buf, long n, int kind) {
	if (kind == TR_BF16)
		for (long i = 0; i < n; i++) buf[i] = from_bf16(to_bf16(buf[i]));
	else
		for (long i = 0; i < n; i++) buf[i] = from_f16(to_f16(buf[i]));
}

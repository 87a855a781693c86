// fma12 for the bench harnesses (amx-swing.c, sgemm-avx512.c), compiled
// with AVX-512 on (-march=sapphirerapids or x86-64-v4).
#ifndef FMA12_H
#define FMA12_H
#include <immintrin.h>

// fma: 12 independent chains of AVX-512 FMAs (the FMA units' peak, what
// OpenBLAS's SGEMM runs on), for the same round's float32 rate. The
// empty asm statements make each chain opaque to the compiler: without
// them GCC saw that the chains starting from the same value stay equal
// and kept two (a0 and a1), so the loop ran 2 dependent FMAs where the
// rate counted 12: 1.5 times the real peak on this VM (the 40th to 42nd
// sessions' "fma12" figures).
__attribute__((noinline)) static double fma12(long n) {
	__m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
	__m512 a0 = x, a1 = y, a2 = x, a3 = y, a4 = x, a5 = y, a6 = x, a7 = y, a8 = x, a9 = y, a10 = x, a11 = y;
	for (long i = 0; i < n; i++) {
		__asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
		__asm__("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
		a0 = _mm512_fmadd_ps(a0, x, y), a1 = _mm512_fmadd_ps(a1, x, y), a2 = _mm512_fmadd_ps(a2, x, y);
		a3 = _mm512_fmadd_ps(a3, x, y), a4 = _mm512_fmadd_ps(a4, x, y), a5 = _mm512_fmadd_ps(a5, x, y);
		a6 = _mm512_fmadd_ps(a6, x, y), a7 = _mm512_fmadd_ps(a7, x, y), a8 = _mm512_fmadd_ps(a8, x, y);
		a9 = _mm512_fmadd_ps(a9, x, y), a10 = _mm512_fmadd_ps(a10, x, y), a11 = _mm512_fmadd_ps(a11, x, y);
	}
	__m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
	                         _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
	s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
	volatile float sink = _mm512_reduce_add_ps(s);
	(void)sink;
	return 12.0 * 16 * 2 * n;
}

#endif

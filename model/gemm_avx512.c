// Float32 products of our own on the AVX-512 FMA units, for k_sgemm1
// when --gemm avx512 is on (par.c).
//
// Why: the GPT's step is 86% products, and OpenBLAS 0.3.21 (Debian 12,
// Cooperlake's kernels) runs the GPT's shapes at 0.7 to 0.85 of an
// Emerald Rapids core's FMA peak (172 to 176 GFLOP/s), its packing a
// large part of the loss. This product, measured beside OpenBLAS's in
// one process (scripts/bench/sgemm-proto.c, the same code with a
// harness: `ratio 7`), ran the GPT's shapes 1.065 to 1.072 times as
// fast (geomean, three runs; 1.0 to 1.19 a shape).
//
// The product: row-major C = alpha op(A) op(B) + beta C, C in tiles of
// 12 rows by 32 columns (24 zmm accumulators: a row of B's panel is two
// loads, A's 12 values are broadcast). Loops: k blocks (all of k up to
// KMAX, else equal blocks of at most KBLK) > chunks of B's columns, each
// packed once (one L2 block of BBYTES where A is read in place, up to
// BCHUNK where A is packed) > row blocks of A (all of A's rows where read
// in place; MC where packed, each packed once a chunk) > the chunk's L2
// blocks > A's 12 rows (in L1) > B's 32-column panels, each tile's B
// prefetched PF rows ahead and its 24 lines of C asked for as it
// starts. (The GPT's head-gradient shape in scripts/bench/sgemm-avx512.c,
// 25,128 x 384 x 1,024 with A transposed, packed B again for each
// 512-row block of A, a block 2 MB past the Zen 5's 1 MB L2: 0.84 to
// 0.88 of OpenBLAS's rate; B packed once, blocks of 128 rows: 0.95 to
// 1.00.) A row-major is read in place (its 12 rows are 12 streams); A transposed is packed a row of
// A^T at a time, one page after another (packed a tile at a time, each
// 12-row panel of the GPT's head gradient touched 1,024 pages); B
// transposed is packed through 16 x 16 register transposes.
//
// Bits: an element is the sum of its k in order within each block, the
// blocks fixed by k alone, then alpha times that added to beta C (beta
// 0: C is not read) and to each later block's: the same vector
// operations in every tile, edge tiles through masks, so an element's
// bits do not depend on how the rows or columns are cut across threads.
// They differ from OpenBLAS's (another order of the k sums).
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "cpu_x86.h"

#define AVX512 __attribute__((target("avx512f")))

#define MR 12          // rows of a tile
#define NR 32          // columns of a tile: two zmm
#define KMAX 1024      // k up to this: one block
#define KBLK 768       // else equal blocks of at most this
#define BBYTES (1 << 20) // a packed block of B (L2)
#define BCHUNK (4 << 20) // a chunk of B packed once where A is packed
#define MC 128         // rows of a block of A, where packed
#define PF 16          // rows of B's panel prefetched ahead

// Per thread: the packed A block (MC x KMAX, 0.6 MB, on a thread's first
// product with A transposed) and B's block or chunk (pb_n floats: 1 to 4
// MB, grown to the largest asked for), kept.
static __thread float *pa, *pb;
static __thread size_t pb_n;

static int state; // 0 off, 1 on, -1 not available

// cpu_has_avx512: AVX-512F by CPUID and the OS saving the AVX-512
// registers (XCR0's opmask and ZMM bits).
static int cpu_has_avx512(void) {
	unsigned a, b, c, d;
	return os_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 16 & 1);
}

// k_avx512_enable turns the path on or off: 0 done, 1 not this CPU.
int k_avx512_enable(int on) {
	if (!on) {
		if (state == 1) state = 0;
		return 0;
	}
	if (state == -1 || !cpu_has_avx512()) {
		state = -1;
		return 1;
	}
	state = 1;
	return 0;
}

int k_avx512_on(void) { return state == 1; }

// tile_store puts a finished tile's sums into C's mr x nr corner: alpha
// times them, added to beta C on the first block (first; beta 0: C not
// read), to C on the others. The same operations for every element,
// masked at the edges.
AVX512 static inline void tile_store(const __m512 *c0, const __m512 *c1, float *c, size_t ldc, size_t mr, size_t nr,
                                     int first, float alpha, float beta) {
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	for (size_t i = 0; i < mr; i++) {
		float *ci = c + i * ldc;
		__m512 s0 = _mm512_mul_ps(va, c0[i]), s1 = _mm512_mul_ps(va, c1[i]);
		if (!first || beta != 0) {
			__m512 o0 = _mm512_maskz_loadu_ps(m0, ci), o1 = _mm512_maskz_loadu_ps(m1, ci + 16);
			if (first && beta != 1) o0 = _mm512_mul_ps(vb, o0), o1 = _mm512_mul_ps(vb, o1);
			s0 = _mm512_add_ps(o0, s0), s1 = _mm512_add_ps(o1, s1);
		}
		_mm512_mask_storeu_ps(ci, m0, s0);
		_mm512_mask_storeu_ps(ci + 16, m1, s1);
	}
}

// kern_at: a tile over kc of k, B's panel packed (NR a k). packed: A's
// panel packed (MR a k); else A row-major read in place, rows lda apart
// (rows past mr read row 0 again, their sums dropped). Inlined into one
// function for each.
AVX512 static inline __attribute__((always_inline)) void kern_at(size_t kc, const float *a, size_t lda, const float *b,
                                                                 float *c, size_t ldc, size_t mr, size_t nr, int first,
                                                                 float alpha, float beta, const int packed) {
	__m512 c0[MR], c1[MR];
	const float *ar[MR];
	for (int i = 0; i < MR; i++) {
		c0[i] = c1[i] = _mm512_setzero_ps();
		size_t r = (size_t)i < mr ? (size_t)i : 0;
		ar[i] = packed ? a + i : a + r * lda;
		_mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
		_mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T0);
	}
	const size_t step = packed ? MR : 1;
	for (size_t p = 0; p < kc; p++) {
		__m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
		for (int i = 0; i < MR; i++) {
			__m512 av = _mm512_set1_ps(ar[i][p * step]);
			c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
			c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
		}
		_mm_prefetch((const char *)(b + PF * NR), _MM_HINT_T0);
		_mm_prefetch((const char *)(b + PF * NR + 16), _MM_HINT_T0);
		b += NR;
	}
	tile_store(c0, c1, c, ldc, mr, nr, first, alpha, beta);
}

AVX512 static void kern_p(size_t kc, const float *a, const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                          int first, float alpha, float beta) {
	kern_at(kc, a, 0, b, c, ldc, mr, nr, first, alpha, beta, 1);
}

AVX512 static void kern_r(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, size_t mr,
                          size_t nr, int first, float alpha, float beta) {
	kern_at(kc, a, lda, b, c, ldc, mr, nr, first, alpha, beta, 0);
}

// pack_at: rows [i0, i0+mm) of op(A) = A^T and k [p0, p0+kc) into 12-row
// panels (kc x MR each), a row of A at a time; zeros past mm.
AVX512 static void pack_at(float *d, const float *a, size_t lda, size_t i0, size_t mm, size_t p0, size_t kc) {
	size_t full = (mm + MR - 1) / MR * MR;
	for (size_t p = 0; p < kc; p++) {
		const float *src = a + (p0 + p) * lda + i0;
		float *dp = d + p * MR;
		size_t i = 0;
		for (; i + MR <= mm; i += MR, dp += MR * kc)
			_mm512_mask_storeu_ps(dp, 0x0fff, _mm512_maskz_loadu_ps(0x0fff, src + i));
		if (i < full)
			for (size_t q = 0; q < MR; q++) dp[q] = i + q < mm ? src[i + q] : 0;
	}
}

// tr16: the 16 x 16 block at src (rows lds apart) transposed into dst
// (rows ldd apart).
AVX512 static void tr16(const float *src, size_t lds, float *dst, size_t ldd) {
	__m512 r[16], t[16];
	for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
	for (int i = 0; i < 16; i += 2)
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
		r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int i = 0; i < 8; i++) {
		int x = i / 4 * 8 + i % 4, y = x + 4;
		t[x] = _mm512_shuffle_f32x4(r[x], r[y], 0x88), t[y] = _mm512_shuffle_f32x4(r[x], r[y], 0xdd);
	}
	for (int i = 0; i < 8; i++)
		r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88), r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
	for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

// pack_b: columns [j0, j0+nr) of op(B) (nr <= NR) and k [p0, p0+kc) into
// a panel of kc rows of NR; zeros past nr. B transposed goes through
// tr16 where the panel is whole and kc a multiple of 16.
AVX512 static void pack_b(float *d, int tb, const float *b, size_t ldb, size_t j0, size_t nr, size_t p0, size_t kc) {
	if (tb && nr == NR && kc % 16 == 0) {
		for (size_t kk = 0; kk < kc; kk += 16)
			for (size_t jj = 0; jj < NR; jj += 16) tr16(b + (j0 + jj) * ldb + p0 + kk, ldb, d + kk * NR + jj, NR);
		return;
	}
	for (size_t p = 0; p < kc; p++) {
		float *dp = d + p * NR;
		if (!tb && nr == NR) {
			memcpy(dp, b + (p0 + p) * ldb + j0, NR * sizeof(float));
			continue;
		}
		for (size_t j = 0; j < nr; j++) dp[j] = tb ? b[(j0 + j) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + j];
		for (size_t j = nr; j < NR; j++) dp[j] = 0;
	}
}

// kc_of is the k block of a product of k: fixed by k alone.
static size_t kc_of(size_t k) {
	if (k <= KMAX) return k;
	size_t blocks = (k + KBLK - 1) / KBLK;
	return (k + blocks - 1) / blocks;
}

// k_sgemm_avx512 is row-major C = alpha op(A) op(B) + beta C on this
// thread: 0 done, 1 not (the path off, or no memory for the buffers: the
// caller falls back to OpenBLAS).
AVX512 int k_sgemm_avx512(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                          const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	if (state != 1) return 1;
	if (k == 0) { // C = beta C, as BLAS does
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
		return 0;
	}
	size_t kb = kc_of(k), nb = BBYTES / (kb * sizeof(float)) / NR * NR;
	if (nb < NR) nb = NR;
	// A read in place: all of A's rows take each block of B, packed once.
	// A packed (transposed): B in chunks of up to BCHUNK, each packed
	// once, and A's rows in blocks of MC, each packed once a chunk and
	// swept over the chunk's blocks.
	size_t mb = ta ? MC : m, cw = ta ? BCHUNK / (kb * sizeof(float)) / NR * NR : nb;
	if (cw < nb) cw = nb;
	if (ta && !pa) {
		pa = aligned_alloc(64, sizeof(float) * (MC + MR) * KMAX);
		if (!pa) return 1;
	}
	if (cw * kb > pb_n) { // grown to the largest chunk, kept
		float *p = aligned_alloc(64, sizeof(float) * cw * kb);
		if (!p) return 1;
		free(pb);
		pb = p, pb_n = cw * kb;
	}
	for (size_t pc = 0; pc < k; pc += kb) {
		size_t kc = k - pc < kb ? k - pc : kb;
		for (size_t jw = 0; jw < n; jw += cw) {
			size_t nw = n - jw < cw ? n - jw : cw;
			for (size_t j = 0; j < nw; j += NR) pack_b(pb + j * kc, tb, b, ldb, jw + j, nw - j < NR ? nw - j : NR, pc, kc);
			for (size_t ic = 0; ic < m; ic += mb) {
				size_t mc = m - ic < mb ? m - ic : mb;
				if (ta) pack_at(pa, a, lda, ic, mc, pc, kc);
				for (size_t jc = 0; jc < nw; jc += nb) {
					size_t nc = nw - jc < nb ? nw - jc : nb;
					for (size_t i = 0; i < mc; i += MR)
						for (size_t j = jc; j < jc + nc; j += NR) {
							size_t mr = mc - i < MR ? mc - i : MR, nr = jc + nc - j < NR ? jc + nc - j : NR;
							float *ct = c + (ic + i) * ldc + jw + j;
							if (ta)
								kern_p(kc, pa + i * kc, pb + j * kc, ct, ldc, mr, nr, pc == 0, alpha, beta);
							else
								kern_r(kc, a + (ic + i) * lda + pc, lda, pb + j * kc, ct, ldc, mr, nr, pc == 0,
								       alpha, beta);
						}
				}
			}
		}
	}
	return 0;
}

#else

int k_avx512_enable(int on) { return on ? 1 : 0; }
int k_avx512_on(void) { return 0; }
int k_sgemm_avx512(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	(void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
	    (void)c, (void)ldc;
	return 1;
}

#endif

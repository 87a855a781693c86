// Float32 products on Intel AMX (Sapphire Rapids and later), for
// k_sgemm1 when --gemm amx is on (par.c).
//
// Why: OpenBLAS's SGEMM runs on the AVX-512 FMA units, whose peak on an
// Emerald Rapids core is ~172 GFLOP/s (scripts/bench/machine-probe.sh);
// the GPT at np=2 needs more than that to reach twice PyTorch. The same
// core's AMX unit multiplies bf16 at ~2,100 GFLOP/s (a throwaway probe of
// TDPBF16PS, 6 accumulators). bf16 alone has 8 significant bits, so each
// float is split into three bf16 whose sum is the float to 24 bits or
// more (x = h + m + l, each the rounding of what is left: x - h and
// (x - h) - m are exact by Sterbenz's lemma), and a product is the six
// partial products whose order is above float's own rounding:
//
//   a b ~ ah bh + ah bm + am bh + ah bl + am bm + al bh
//
// dropping am bl, al bm, al bl (below 2^-24 of a b). Each partial product
// of two bf16 is exact in float; TDPBF16PS sums them in float. So the
// result is a float32 product to float's own accuracy (a throwaway
// harness: mean error 7.4e-9 of sum |a b| against 1.26e-8 for OpenBLAS's
// SGEMM on 1024 x 1024 x 384), at an effective peak of 2,100 / 6 = 350
// GFLOP/s a core: twice the FMA units'.
//
// Differences from an IEEE float32 SGEMM, stated: AMX and the bf16
// conversion treat denormal inputs as zero and flush denormal results
// (values below 1.2e-38); an infinite input, or one above bf16's
// largest (3.39e38), gives NaN (h = inf, then m = x - inf); and the sum's
// order is the tiles' (k in blocks of 32, pairs within them, chunks of
// KC), fixed by the shape, so the bits do not depend on how the rows or
// columns are cut across threads.
//
// Layout. A tile is 16 rows of 64 bytes. A's packed tiles hold 16 rows x
// 32 k of bf16; B's are in the VNNI order TDPBF16PS reads: row r holds
// k = 2r and 2r+1 for each of 16 columns. The kernel makes a 32 x 32
// block of C over a chunk of KC of k in four accumulator tiles and adds
// it to C (alpha, beta). For each chunk, A's rows in blocks and B's
// columns in blocks are packed once and multiplied (product, below): on
// the pool into buffers its threads share (k_sgemm_amx_par), or on one
// thread into its own (k_sgemm_amx: blocks of MB rows and NC columns).
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_x86.h"

#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

#define KC 384  // k per chunk: 12 blocks of 32
#define NC 256  // columns of a B panel
#define MB 1024 // rows of an A block
#define TILE 512 // bf16 in a tile

// Per thread, for k_sgemm_amx (one call's product on one thread: the
// attention's and the convolutions' parts): the packed A block (3 pieces
// of MB x KC) and B block (3 of KC x NC); allocated on a thread's first
// such product (~3 MB), kept.
struct amx_bufs {
	uint16_t *a, *b;
};
static __thread struct amx_bufs bufs;

static int amx_state; // 0 not asked, 1 on, -1 not available

// cpu_has_amx: AMX-TILE, AMX-BF16, AVX512-BF16, AVX512F and BW by CPUID,
// and the OS saving the AVX-512 registers (XCR0's opmask and ZMM bits;
// the tile state is asked of Linux apart, k_amx_enable).
static int cpu_has_amx(void) {
	unsigned a, b, c, d;
	if (!os_avx512() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
	int tile = d >> 24 & 1, bf16 = d >> 22 & 1, f = b >> 16 & 1, bw = b >> 30 & 1;
	if (!(tile && bf16 && f && bw)) return 0;
	if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
	return a >> 5 & 1;
}

// k_amx_enable asks Linux for the tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM, once for the process) and turns the AMX path on:
// 0 on, 1 not this CPU, 2 refused by the kernel.
int k_amx_enable(int on) {
	if (!on) {
		if (amx_state == 1) amx_state = 0;
		return 0;
	}
	if (amx_state == -1) return 1;
	if (!cpu_has_amx()) {
		amx_state = -1;
		return 1;
	}
	static int granted;
	if (!granted) {
		if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) return 2;
		granted = 1;
	}
	amx_state = 1;
	return 0;
}

int k_amx_on(void) { return amx_state == 1; }

struct tilecfg {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

// tiles_on loads this thread's tile configuration (tiles 0-3 the
// accumulators, 4-5 A, 6-7 B: all 16 rows of 64 bytes), and tiles_off
// releases the tiles at the end of each product or pass: Linux saves and
// restores a thread's tile data (8 KB) at every context switch while it
// is in use, and the pool's threads and MPI's sleep and wake often.
AMX static void tiles_on(void) {
	struct tilecfg cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.palette = 1;
	for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
	_tile_loadconfig(&cfg);
}

AMX static void tiles_off(void) { _tile_release(); }

// ready: this thread's buffers (for k_sgemm_amx).
AMX static int ready(void) {
	if (!bufs.a) {
		bufs.a = aligned_alloc(64, (size_t)3 * MB * KC * 2);
		bufs.b = aligned_alloc(64, (size_t)3 * NC * KC * 2);
		if (!bufs.a || !bufs.b) {
			free(bufs.a), free(bufs.b);
			bufs.a = bufs.b = NULL;
			return 0;
		}
	}
	return 1;
}

// bf16 of 16 floats (round to nearest even) and those bf16 back as floats.
AMX static inline __m256i to_bf16(__m512 x) { return (__m256i)_mm512_cvtneps_pbh(x); }
AMX static inline __m512 from_bf16(__m256i h) {
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// split: x = h + m + l (above) for 16 floats.
AMX static inline void split(__m512 x, __m256i p[3]) {
	p[0] = to_bf16(x);
	__m512 r = _mm512_sub_ps(x, from_bf16(p[0]));
	p[1] = to_bf16(r);
	p[2] = to_bf16(_mm512_sub_ps(r, from_bf16(p[1])));
}

// pair: 16 dwords, each bf16 e[i] in its low half and o[i] in its high.
AMX static inline __m512i pair(__m256i e, __m256i o) {
	return _mm512_or_si512(_mm512_cvtepu16_epi32(e), _mm512_slli_epi32(_mm512_cvtepu16_epi32(o), 16));
}

// transpose16: r[j] of the result is column j of the 16 x 16 dwords r.
AMX static void transpose16(__m512i r[16]) {
	__m512i a[16], b[16];
	for (int k = 0; k < 8; k++) {
		a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
		a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
	}
	// b[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c.
	for (int g = 0; g < 4; g++) {
		b[4 * g + 0] = _mm512_unpacklo_epi64(a[4 * g], a[4 * g + 2]);
		b[4 * g + 1] = _mm512_unpackhi_epi64(a[4 * g], a[4 * g + 2]);
		b[4 * g + 2] = _mm512_unpacklo_epi64(a[4 * g + 1], a[4 * g + 3]);
		b[4 * g + 3] = _mm512_unpackhi_epi64(a[4 * g + 1], a[4 * g + 3]);
	}
	// column 4L + c is lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
	for (int c = 0; c < 4; c++) {
		__m512i s0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), s1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
		__m512i s2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44),
		        s3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
		r[c] = _mm512_shuffle_i32x4(s0, s2, 0x88);
		r[4 + c] = _mm512_shuffle_i32x4(s0, s2, 0xdd);
		r[8 + c] = _mm512_shuffle_i32x4(s1, s3, 0x88);
		r[12 + c] = _mm512_shuffle_i32x4(s1, s3, 0xdd);
	}
}

// ZERO3 initialises the three pieces of 16 values (padding, where
// nothing is split).
#define ZERO3 {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()}

// load16: up to 16 floats from p (n of them; the rest 0).
AMX static inline __m512 load16(const float *p, size_t n) {
	if (n >= 16) return _mm512_loadu_ps(p);
	return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}

// pair_rows: rows p0 + p and p0 + p + 1 of x (row-major, ld), n values
// from column col, split and paired (pair) for each piece: what a VNNI
// tile row, or two k of a transposed A's 16 rows, hold. Rows at kc and
// past, or n = 0, are zeros.
AMX static inline void pair_rows(__m512i out[3], const float *x, size_t ld, size_t p0, size_t col, size_t p, size_t kc,
                                 size_t n) {
	__m256i e[3] = ZERO3, o[3] = ZERO3;
	if (n && p < kc) split(load16(x + (p0 + p) * ld + col, n), e);
	if (n && p + 1 < kc) split(load16(x + (p0 + p + 1) * ld + col, n), o);
	for (int q = 0; q < 3; q++) out[q] = pair(e[q], o[q]);
}

// pack_a: rows [i0, i0 + rows) and k [p0, p0 + kc) of op(A) into tiles:
// piece q, row tile t, k block kb at P + q * ps + (t * KB' + kb) * TILE,
// KB' = kc rounded up to 32 / 32, rows rounded up to 32 (zeros past the
// data). Element (i, p) of op(A) is a[i lda + p], or a[p lda + i] (ta).
AMX static void pack_a(uint16_t *P, size_t ps, const float *a, int ta, size_t lda, size_t i0, size_t rows, size_t p0,
                       size_t kc) {
	size_t kb = (kc + 31) / 32, rt = (rows + 31) / 32 * 2;
	if (!ta) {
		for (size_t i = 0; i < rt * 16; i++) {
			uint16_t *row = P + (i / 16 * kb) * TILE + i % 16 * 32;
			for (size_t b = 0; b < kb; b++) {
				uint16_t *d = row + b * TILE;
				for (int h = 0; h < 2; h++) {
					size_t p = b * 32 + h * 16, n = i < rows && p < kc ? kc - p : 0;
					__m256i s[3] = ZERO3;
					if (n) split(load16(a + (i0 + i) * lda + p0 + p, n), s);
					for (int q = 0; q < 3; q++) _mm256_storeu_si256((__m256i *)(d + q * ps + h * 16), s[q]);
				}
			}
		}
		return;
	}
	// Transposed: a[p lda + i] runs along the rows: 16 rows of 32 k are
	// read as 32 vectors along the rows, paired (k even, k odd) into 16
	// dword vectors and transposed, each dword then a row's pair of k.
	for (size_t t = 0; t < rt; t++) {
		size_t r0 = t * 16, nr = r0 < rows ? (rows - r0 < 16 ? rows - r0 : 16) : 0;
		for (size_t b = 0; b < kb; b++) {
			__m512i v[3][16];
			for (int j = 0; j < 16; j++) {
				__m512i pr[3];
				pair_rows(pr, a, lda, p0, i0 + r0, b * 32 + 2 * j, kc, nr);
				for (int q = 0; q < 3; q++) v[q][j] = pr[q];
			}
			for (int q = 0; q < 3; q++) {
				transpose16(v[q]);
				uint16_t *d = P + q * ps + (t * kb + b) * TILE;
				for (int i = 0; i < 16; i++) _mm512_storeu_si512(d + i * 32, v[q][i]);
			}
		}
	}
}

// pack_b: k [p0, p0 + kc) and columns [j0, j0 + cols) of op(B) into VNNI
// tiles: piece q, column tile t, k block kb at P + q * ps + (t * KB' + kb)
// * TILE; columns rounded up to 32. Element (p, j) of op(B) is
// b[p ldb + j], or b[j ldb + p] (tb).
AMX static void pack_b(uint16_t *P, size_t ps, const float *b, int tb, size_t ldb, size_t p0, size_t kc, size_t j0,
                       size_t cols) {
	size_t kb = (kc + 31) / 32, ct = (cols + 31) / 32 * 2;
	for (size_t t = 0; t < ct; t++) {
		size_t c0 = t * 16, nc = c0 < cols ? (cols - c0 < 16 ? cols - c0 : 16) : 0;
		for (size_t bk = 0; bk < kb; bk++) {
			uint16_t *d = P + (t * kb + bk) * TILE;
			if (!tb) {
				// rows of B run along the columns: row r of the tile
				// pairs k = 2r (low halves) and 2r + 1.
				for (int r = 0; r < 16; r++) {
					__m512i pr[3];
					pair_rows(pr, b, ldb, p0, j0 + c0, bk * 32 + 2 * r, kc, nc);
					for (int q = 0; q < 3; q++) _mm512_storeu_si512(d + q * ps + r * 32, pr[q]);
				}
				continue;
			}
			// Transposed: a column's 32 k are contiguous, and as bf16 are
			// its 16 pairs in order: one dword vector a column, then
			// transposed so that row r holds every column's pair r.
			__m512i v[3][16];
			for (int j = 0; j < 16; j++) {
				size_t p = bk * 32, n = j < (int)nc && p < kc ? kc - p : 0;
				__m256i lo[3] = ZERO3;
				__m256i hi[3] = ZERO3;
				const float *src = b + (j0 + c0 + j) * ldb + p0 + p;
				if (n) split(load16(src, n), lo);
				if (n > 16) split(load16(src + 16, n - 16), hi);
				for (int q = 0; q < 3; q++)
					v[q][j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[q]), hi[q], 1);
			}
			for (int q = 0; q < 3; q++) {
				transpose16(v[q]);
				for (int r = 0; r < 16; r++) _mm512_storeu_si512(d + q * ps + r * 32, v[q][r]);
			}
		}
	}
}

// kernel: the 32 x 32 block of row tiles ta, ta + 1 and column tiles tb,
// tb + 1 over kb blocks of k, as the six products above, into t (32 x 32
// floats). Tiles are loaded in an order that reuses them: ah against bh,
// bm, bl; am against bm, bh; al against bh.
AMX static void kernel(float *t, const uint16_t *A, size_t pa, const uint16_t *B, size_t pb, size_t kb) {
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	const uint16_t *a1 = A + kb * TILE, *b1 = B + kb * TILE;
	__asm__ volatile("" ::: "memory"); // the packed tiles are written
	for (size_t k = 0; k < kb; k++) {
		size_t o = k * TILE;
#define DP4() \
	_tile_dpbf16ps(0, 4, 6); \
	_tile_dpbf16ps(1, 4, 7); \
	_tile_dpbf16ps(2, 5, 6); \
	_tile_dpbf16ps(3, 5, 7)
		_tile_loadd(4, A + o, 64);
		_tile_loadd(5, a1 + o, 64);
		_tile_loadd(6, B + o, 64);
		_tile_loadd(7, b1 + o, 64);
		DP4();
		_tile_loadd(6, B + pb + o, 64);
		_tile_loadd(7, b1 + pb + o, 64);
		DP4();
		_tile_loadd(6, B + 2 * pb + o, 64);
		_tile_loadd(7, b1 + 2 * pb + o, 64);
		DP4();
		_tile_loadd(4, A + pa + o, 64);
		_tile_loadd(5, a1 + pa + o, 64);
		_tile_loadd(6, B + pb + o, 64);
		_tile_loadd(7, b1 + pb + o, 64);
		DP4();
		_tile_loadd(6, B + o, 64);
		_tile_loadd(7, b1 + o, 64);
		DP4();
		_tile_loadd(4, A + 2 * pa + o, 64);
		_tile_loadd(5, a1 + 2 * pa + o, 64);
		DP4();
#undef DP4
	}
	_tile_stored(0, t, 128);
	_tile_stored(1, t + 16, 128);
	_tile_stored(2, t + 16 * 32, 128);
	_tile_stored(3, t + 16 * 32 + 16, 128);
	__asm__ volatile("" ::: "memory"); // t is written
}

// put: C's block at c (rows x cols of the 32 x 32 t) becomes alpha t +
// beta C on k's first chunk (beta 0: C not read), C + alpha t after.
AMX static void put(float *c, size_t ldc, const float *t, size_t rows, size_t cols, float alpha, float beta, int first) {
	__mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
	__mmask16 m1 = cols >= 32 ? 0xffff : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1) : 0;
	__m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
	for (size_t i = 0; i < rows; i++) {
		float *ci = c + i * ldc;
		for (int h = 0; h < 2; h++) {
			__mmask16 m = h ? m1 : m0;
			if (!m) continue;
			__m512 v = _mm512_mul_ps(al, _mm512_loadu_ps(t + i * 32 + h * 16));
			if (!first || beta != 0) {
				__m512 old = _mm512_maskz_loadu_ps(m, ci + h * 16);
				v = first ? (beta == 1 ? _mm512_add_ps(old, v) : _mm512_fmadd_ps(be, old, v)) : _mm512_add_ps(old, v);
			}
			_mm512_mask_storeu_ps(ci + h * 16, m, v);
		}
	}
}

// ---- the driver: pack a block of each operand once, then multiply ----
//
// Cut by rows as par.c cuts OpenBLAS's calls, each of 16 parts packed all
// of B for its 64 rows: the GPT's products at --simulate-threads 16 did
// 1.6 times the work of OpenBLAS's (2,525 to 2,598 ms a step against
// 1,556 to 1,588), though 1.2 times faster at one thread. So a product on
// the pool (k_sgemm_amx_par) packs A's block and B's block in one pass,
// each once, 32 rows or columns a unit, into buffers its threads share,
// and multiplies them in a second pass, units of up to 128 x 128 of C. A
// product on one thread (k_sgemm_amx: a pass's own call, the attention's
// and the convolutions' parts) runs the same two steps inline on the
// thread's own smaller buffers. The chunks of k, the kernel and put are
// the same in both, so every element has the same bits at any thread
// count, cut or block size.

// SHARED_CAP: bytes of packed values a shared block holds at most (A's
// rows, or B's columns, of one chunk of k): 12 MB, 5,440 rows of KC.
#define SHARED_CAP ((size_t)12 << 20)
#define SHARED_MOST (SHARED_CAP / (3 * KC * 2) / 32 * 32)

static struct shared {
	uint16_t *p;
	size_t cap;
} sha, shb;

// grow: s holds at least bytes (its contents dropped), or 0 where it
// cannot.
static int grow(struct shared *s, size_t bytes) {
	if (s->cap >= bytes) return 1;
	free(s->p);
	s->p = aligned_alloc(64, (bytes + 63) / 64 * 64);
	s->cap = s->p ? bytes : 0;
	return s->p != NULL;
}

struct amxp {
	int ta, tb, first;
	const float *a, *b;
	float *c;
	size_t lda, ldb, ldc;
	float alpha, beta;
	uint16_t *A, *B;                           // the packed blocks
	size_t i0, mr, p0, kc, kb, j0, nr, pa, pb; // this block of C and chunk of k
	size_t at;                                 // pack step: A's units (0: A already packed), then B's
	size_t um, un, uc;                         // multiply step: a unit's rows and columns; units a row
};

static size_t min_z(size_t a, size_t b) { return a < b ? a : b; }

AMX static void t_amx_pack(void *p, size_t lo, size_t hi, int w) {
	struct amxp *g = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		if (u < g->at) {
			size_t r = u * 32;
			pack_a(g->A + r / 16 * g->kb * TILE, g->pa, g->a, g->ta, g->lda, g->i0 + r, min_z(32, g->mr - r), g->p0,
			       g->kc);
		} else {
			size_t q = (u - g->at) * 32;
			pack_b(g->B + q / 16 * g->kb * TILE, g->pb, g->b, g->tb, g->ldb, g->p0, g->kc, g->j0 + q,
			       min_z(32, g->nr - q));
		}
	}
}

AMX static void t_amx_mul(void *p, size_t lo, size_t hi, int w) {
	struct amxp *g = p;
	float t[32 * 32] __attribute__((aligned(64)));
	(void)w;
	tiles_on();
	for (size_t u = lo; u < hi; u++) {
		size_t r0 = u / g->uc * g->um, q0 = u % g->uc * g->un;
		size_t r1 = min_z(r0 + g->um, g->mr), q1 = min_z(q0 + g->un, g->nr);
		for (size_t r = r0; r < r1; r += 32)
			for (size_t q = q0; q < q1; q += 32) {
				kernel(t, g->A + r / 16 * g->kb * TILE, g->pa, g->B + q / 16 * g->kb * TILE, g->pb, g->kb);
				put(g->c + (g->i0 + r) * g->ldc + g->j0 + q, g->ldc, t, min_z(32, g->mr - r), min_z(32, g->nr - q),
				    g->alpha, g->beta, g->first);
			}
	}
	tiles_off();
}

// product: C = alpha op(A) op(B) + beta C in blocks of at most mb rows
// and nb columns (multiples of 32) packed into A and B; on the pool
// (pool) or inline on this thread.
AMX static void product(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                        const float *b, size_t ldb, float beta, float *c, size_t ldc, uint16_t *A, uint16_t *B,
                        size_t mb, size_t nb, int pool) {
	if (k == 0) {
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
		return;
	}
	size_t T = pool ? (size_t)k_pool_size() : 1;
	for (size_t p0 = 0; p0 < k; p0 += KC) {
		size_t kc = min_z(KC, k - p0), kb = (kc + 31) / 32;
		for (size_t i0 = 0; i0 < m; i0 += mb) {
			size_t mr = min_z(mb, m - i0);
			for (size_t j0 = 0; j0 < n; j0 += nb) {
				size_t nr = min_z(nb, n - j0);
				struct amxp g = {ta, tb, p0 == 0, a, b, c, lda, ldb, ldc, alpha, beta, A, B, i0, mr, p0, kc, kb, j0,
				                 nr, (mr + 31) / 32 * 2 * kb * TILE, (nr + 31) / 32 * 2 * kb * TILE,
				                 j0 == 0 ? (mr + 31) / 32 : 0, 128, 128, 0};
				size_t packs = g.at + (nr + 31) / 32;
				// Units of 128 x 128, halved (the longer side first) down
				// to 32 x 32 while there are fewer than 2 a thread.
				for (;;) {
					size_t units = (mr + g.um - 1) / g.um * ((nr + g.un - 1) / g.un);
					if (units >= 2 * T || (g.um == 32 && g.un == 32)) break;
					if (g.um >= g.un && g.um > 32)
						g.um /= 2;
					else
						g.un /= 2;
				}
				g.uc = (nr + g.un - 1) / g.un;
				size_t muls = (mr + g.um - 1) / g.um * g.uc;
				if (pool) {
					k_run(packs, t_amx_pack, &g);
					k_run(muls, t_amx_mul, &g);
				} else {
					t_amx_pack(&g, 0, packs, 0);
					t_amx_mul(&g, 0, muls, 0);
				}
			}
		}
	}
}

// k_sgemm_amx is row-major C = alpha op(A) op(B) + beta C by AMX (above)
// on this thread; it returns nonzero, having done nothing, where it
// cannot (AMX off, or its buffers not allocated), and the caller uses
// OpenBLAS.
AMX int k_sgemm_amx(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	if (amx_state != 1 || !ready()) return 1;
	product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bufs.a, bufs.b, MB, NC, 0);
	return 0;
}

// k_sgemm_amx_par is k_sgemm_amx's product across the pool, packed into
// the shared buffers; it returns nonzero, having done nothing, where it
// cannot (AMX off, or the buffers not allocated), and the caller cuts
// OpenBLAS's calls. One product at a time: the passes are the training
// goroutine's.
AMX int k_sgemm_amx_par(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                        const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	if (amx_state != 1) return 1;
	if (m == 0 || n == 0) return 0;
	size_t mb = min_z((m + 31) / 32 * 32, SHARED_MOST), nb = min_z((n + 31) / 32 * 32, SHARED_MOST);
	if (!grow(&sha, mb * 3 * KC * 2) || !grow(&shb, nb * 3 * KC * 2)) return 1;
	product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, sha.p, shb.p, mb, nb, 1);
	return 0;
}

#else
int k_amx_enable(int on) { return on ? 1 : 0; }
int k_amx_on(void) { return 0; }
int k_sgemm_amx_par(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	return k_sgemm_amx(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
int k_sgemm_amx(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda, const float *b,
                size_t ldb, float beta, float *c, size_t ldc) {
	(void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
	    (void)c, (void)ldc;
	return 1;
}
#endif

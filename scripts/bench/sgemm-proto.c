// A first float32 SGEMM of our own on AVX-512, beside OpenBLAS's in the
// same process: how far a plain BLIS-style product gets on the GPT's
// shapes, and where its time goes. Not used by train: a measurement for
// the lead "products faster than OpenBLAS" (issue 18: the GPT at 2x
// PyTorch is bounded by the products' rate, 86% of its step).
//
// The product: row-major C = op(A) op(B), C in tiles of 12 rows x 32
// columns (24 zmm accumulators; a row of B's panel two loads, A's 12
// values broadcast), loops K blocks (KC) > row blocks of A, packed (MC) >
// column blocks of B, packed to stay in L2 (NC) > A's 12-row panels (in
// L1) > B's 32-column panels, each tile's B prefetched PF rows ahead.
// Each element sums its k in the same order whatever the rows or columns
// cut, as model/par.c needs (its bits would not depend on the threads).
//
//   gcc -O3 -march=sapphirerapids scripts/bench/sgemm-proto.c -o /tmp/sgemm-proto -ldl -lm
//   OPENBLAS_CORETYPE=Cooperlake /tmp/sgemm-proto ratio [ROUNDS]   # interleaved against OpenBLAS
//   /tmp/sgemm-proto parts                                         # packing's share, kernels alone
//   /tmp/sgemm-proto peak                                          # the kernel in L1 against the FMA peak
//
// On the 2-vCPU Emerald Rapids VM (43rd session; `peak`'s fma12 155 to
// 178 GFLOP/s a core): the kernel on panels in L1 0.97 to 1.05 of the
// peak in quiet rounds, 0.76 to 0.90 in noisy ones (the neighbour's).
// `ratio 7`, one thread, medians of 7 interleaved pairs, ours over
// OpenBLAS Cooperlake: geomean 0.985, 0.991, 0.993 in three runs, a shape
// 0.95 to 1.07 but for the head's weight gradient (25128 x 384 x 1024, A
// transposed: 0.79); OpenBLAS ran them at 115 to 149 GFLOP/s, 0.7 to
// 0.85 of the peak. `parts`: packing every panel once is 7 to 17% of
// the whole product's time, and the kernels alone over packed panels ran
// 149 to 170 GFLOP/s (0.84 to 0.96 of the peak). So a product 1.1x
// OpenBLAS's needs packing at a few percent (SIMD transposes, A
// unpacked where it is row-major) and the head's shapes tuned; MKL's
// 1.2x (42nd session) is about the ceiling.

#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MR 12
#define NR 32
#define KC 384
#define NC 768
#define MC 1536
#define PF 16

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// packA: rows [i0, i0+mr) and k [p0, p0+kc) of op(A) into a panel of kc
// rows of MR, zero-padded.
static void packA(float *d, int ta, const float *a, long lda, long i0, long mr, long p0, long kc) {
	for (long p = 0; p < kc; p++) {
		for (long i = 0; i < mr; i++) d[p * MR + i] = ta ? a[(p0 + p) * lda + i0 + i] : a[(i0 + i) * lda + p0 + p];
		for (long i = mr; i < MR; i++) d[p * MR + i] = 0;
	}
}

// packB: columns [j0, j0+nr) and k [p0, p0+kc) of op(B) into a panel of
// kc rows of NR, zero-padded.
static void packB(float *d, int tb, const float *b, long ldb, long j0, long nr, long p0, long kc) {
	for (long p = 0; p < kc; p++) {
		if (!tb && nr == NR) {
			memcpy(d + p * NR, b + (p0 + p) * ldb + j0, NR * sizeof(float));
			continue;
		}
		for (long j = 0; j < nr; j++) d[p * NR + j] = tb ? b[(j0 + j) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + j];
		for (long j = nr; j < NR; j++) d[p * NR + j] = 0;
	}
}

// kern: C's mr x nr tile (of MR x NR) = (add: +=) A's panel times B's.
static void kern(long kc, const float *a, const float *b, float *c, long ldc, int add, long mr, long nr) {
	__m512 c0[MR], c1[MR];
	for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
	for (long p = 0; p < kc; p++) {
		__m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
		for (int i = 0; i < MR; i++) {
			__m512 av = _mm512_set1_ps(a[i]);
			c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
			c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
		}
		_mm_prefetch((const char *)(b + PF * NR), _MM_HINT_T0);
		_mm_prefetch((const char *)(b + PF * NR + 16), _MM_HINT_T0);
		a += MR, b += NR;
	}
	if (mr == MR && nr == NR) {
		for (int i = 0; i < MR; i++) {
			float *ci = c + i * ldc;
			if (add) {
				c0[i] = _mm512_add_ps(_mm512_loadu_ps(ci), c0[i]);
				c1[i] = _mm512_add_ps(_mm512_loadu_ps(ci + 16), c1[i]);
			}
			_mm512_storeu_ps(ci, c0[i]);
			_mm512_storeu_ps(ci + 16, c1[i]);
		}
		return;
	}
	float t[MR * NR];
	for (int i = 0; i < MR; i++) _mm512_storeu_ps(t + i * NR, c0[i]), _mm512_storeu_ps(t + i * NR + 16, c1[i]);
	for (long i = 0; i < mr; i++)
		for (long j = 0; j < nr; j++) c[i * ldc + j] = add ? c[i * ldc + j] + t[i * NR + j] : t[i * NR + j];
}

static float *pa, *pb; // packed A (MC x KC) and B (KC x NC)

static void gemm(int ta, int tb, long m, long n, long k, const float *a, long lda, const float *b, long ldb, float *c,
                 long ldc) {
	for (long pc = 0; pc < k; pc += KC) {
		long kc = k - pc < KC ? k - pc : KC;
		for (long ic = 0; ic < m; ic += MC) {
			long mc = m - ic < MC ? m - ic : MC;
			for (long i = 0; i < mc; i += MR) packA(pa + i * kc, ta, a, lda, ic + i, mc - i < MR ? mc - i : MR, pc, kc);
			for (long jc = 0; jc < n; jc += NC) {
				long nc = n - jc < NC ? n - jc : NC;
				for (long j = 0; j < nc; j += NR)
					packB(pb + j * kc, tb, b, ldb, jc + j, nc - j < NR ? nc - j : NR, pc, kc);
				for (long i = 0; i < mc; i += MR)
					for (long j = 0; j < nc; j += NR)
						kern(kc, pa + i * kc, pb + j * kc, c + (ic + i) * ldc + jc + j, ldc, pc > 0,
						     mc - i < MR ? mc - i : MR, nc - j < NR ? nc - j : NR);
			}
		}
	}
}

// fma12: 12 independent chains of AVX-512 FMAs, each made opaque to the
// compiler by the empty asm statements (chains starting equal would be
// merged), for the peak: 8 chains cover the FMA's latency on 2 units.
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
	return 12.0 * 32 * n;
}

static double fma_peak(void) {
	double best = 0;
	for (int i = 0; i < 5; i++) {
		double t = now(), f = fma12(2000000);
		t = now() - t;
		if (f / t / 1e9 > best) best = f / t / 1e9;
	}
	return best;
}

static int cmp(const void *x, const void *y) {
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

// The GPT's products (6 layers, dim 384, context 256, batch 4: 1,024
// tokens) as one thread's half of the rows at 2 threads, and the head's
// (vocabulary 50,257): ta tb m n k.
static const int shapes[][5] = {
    {0, 0, 1024, 1024, 1024}, {0, 1, 512, 1152, 384}, {0, 1, 512, 1536, 384},   {0, 1, 512, 384, 1536},
    {1, 0, 384, 1536, 512},   {0, 1, 512, 50257, 384}, {0, 0, 512, 384, 50257}, {1, 0, 25128, 384, 1024},
    {0, 0, 512, 1536, 384},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define FLOATS 60000000L

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "ratio";
	pa = aligned_alloc(64, sizeof(float) * (MC + MR) * KC);
	pb = aligned_alloc(64, sizeof(float) * (NC + NR) * KC);
	if (!strcmp(mode, "peak")) {
		float *A = aligned_alloc(64, sizeof(float) * MR * 128), *B = aligned_alloc(64, sizeof(float) * NR * 128),
		      *C = aligned_alloc(64, sizeof(float) * MR * NR);
		for (int i = 0; i < MR * 128; i++) A[i] = 0.001f * (i % 7);
		for (int i = 0; i < NR * 128; i++) B[i] = 0.001f * (i % 5);
		for (int r = 0; r < 8; r++) {
			double peak = fma_peak(), best = 0;
			for (int i = 0; i < 5; i++) {
				double t = now();
				for (int j = 0; j < 2000; j++) kern(128, A, B, C, NR, 1, MR, NR);
				t = now() - t;
				if (2.0 * MR * NR * 128 * 2000 / t / 1e9 > best) best = 2.0 * MR * NR * 128 * 2000 / t / 1e9;
			}
			printf("round %d: fma12 %.1f GFLOP/s, the kernel in L1 %.1f (%.2f)\n", r + 1, peak, best, best / peak);
		}
		return 0;
	}
	float *A = malloc(sizeof(float) * FLOATS), *B = malloc(sizeof(float) * FLOATS),
	      *C = malloc(sizeof(float) * FLOATS), *D = malloc(sizeof(float) * FLOATS);
	srand(1);
	for (long i = 0; i < FLOATS; i++) A[i] = rand() / (float)RAND_MAX - 0.5f, B[i] = rand() / (float)RAND_MAX - 0.5f;
	if (!strcmp(mode, "parts")) {
		printf("fma12 %.1f GFLOP/s\n", fma_peak());
		for (size_t s = 0; s < NSHAPES; s++) {
			int ta = shapes[s][0], tb = shapes[s][1];
			long m = shapes[s][2], n = shapes[s][3], k = shapes[s][4], lda = ta ? m : k, ldb = tb ? k : n;
			float *PA = aligned_alloc(64, sizeof(float) * ((m + MR) * k + 64)),
			      *PB = aligned_alloc(64, sizeof(float) * ((n + NR) * k + 64));
			double fl = 2.0 * m * n * k, whole = 1e9, packs = 1e9, kerns = 1e9;
			for (int r = 0; r < 5; r++) {
				double t = now();
				gemm(ta, tb, m, n, k, A, lda, B, ldb, D, n);
				t = now() - t;
				if (t < whole) whole = t;
				// every panel packed once, as the product packs it at best
				t = now();
				for (long pc = 0; pc < k; pc += KC) {
					long kc = k - pc < KC ? k - pc : KC;
					for (long i = 0; i < m; i += MR) packA(PA + i * kc, ta, A, lda, i, m - i < MR ? m - i : MR, pc, kc);
					for (long j = 0; j < n; j += NR) packB(PB + j * kc, tb, B, ldb, j, n - j < NR ? n - j : NR, pc, kc);
				}
				t = now() - t;
				if (t < packs) packs = t;
				// the kernels over the first K block's panels, in the product's
				// order, scaled to all of k
				long kc = k < KC ? k : KC;
				t = now();
				for (long ic = 0; ic < m; ic += MC)
					for (long jc = 0; jc < n; jc += NC)
						for (long i = ic; i < m && i < ic + MC; i += MR)
							for (long j = jc; j < n && j < jc + NC; j += NR)
								kern(kc, PA + i * kc, PB + j * kc, D + i * n + j, n, 0, m - i < MR ? m - i : MR,
								     n - j < NR ? n - j : NR);
				t = (now() - t) * (double)k / kc;
				if (t < kerns) kerns = t;
			}
			printf("%s%s %5ldx%5ldx%5ld whole %6.1f GFLOP/s; packing once %4.1f%% of it; the kernels alone %6.1f\n",
			       ta ? "T" : "N", tb ? "T" : "N", m, n, k, fl / whole / 1e9, 100 * packs / whole, fl / kerns / 1e9);
			free(PA), free(PB);
		}
		return 0;
	}
	void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
	sgemm_fn blas = h ? (sgemm_fn)dlsym(h, "cblas_sgemm") : NULL;
	if (!blas) {
		fprintf(stderr, "sgemm-proto: no cblas_sgemm in libopenblas.so.0 (apt-get install libopenblas0-pthread)\n");
		return 1;
	}
	void (*threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
	if (threads) threads(1);
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	if (rounds < 1 || rounds > 64) rounds = 7;
	double logsum = 0;
	for (size_t s = 0; s < NSHAPES; s++) {
		int ta = shapes[s][0], tb = shapes[s][1];
		long m = shapes[s][2], n = shapes[s][3], k = shapes[s][4], lda = ta ? m : k, ldb = tb ? k : n;
		double fl = 2.0 * m * n * k, ratio[64], ours[64], theirs[64], diff = 0, top = 0;
		blas(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1, A, lda, B, ldb, 0, C, n);
		gemm(ta, tb, m, n, k, A, lda, B, ldb, D, n);
		for (long i = 0; i < m * n; i++) {
			double d = fabs(C[i] - D[i]);
			diff = d > diff || d != d ? d : diff;
			top = fabs(C[i]) > top ? fabs(C[i]) : top;
		}
		for (int r = 0; r < rounds; r++) {
			double t = now();
			blas(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1, A, lda, B, ldb, 0, C, n);
			double tb_ = now() - t;
			t = now();
			gemm(ta, tb, m, n, k, A, lda, B, ldb, D, n);
			double to = now() - t;
			ratio[r] = tb_ / to, ours[r] = fl / to / 1e9, theirs[r] = fl / tb_ / 1e9;
		}
		qsort(ratio, rounds, sizeof(double), cmp);
		qsort(ours, rounds, sizeof(double), cmp);
		qsort(theirs, rounds, sizeof(double), cmp);
		logsum += log(ratio[rounds / 2]);
		printf("%s%s %5ldx%5ldx%5ld OpenBLAS %6.1f ours %6.1f GFLOP/s (medians); ours/OpenBLAS median %.2f "
		       "(%.2f to %.2f); largest difference %.1g of %.2g\n",
		       ta ? "T" : "N", tb ? "T" : "N", m, n, k, theirs[rounds / 2], ours[rounds / 2], ratio[rounds / 2],
		       ratio[0], ratio[rounds - 1], diff, top);
	}
	printf("geomean of the medians %.3f\n", exp(logsum / NSHAPES));
	return 0;
}

// --gemm avx512's products (model/gemm_avx512.c, included below) beside
// OpenBLAS's in the same process, on the GPT's shapes: the ratio, where
// their time goes, and the kernel's rate against the FMA units' peak.
//
//   gcc -O3 -march=x86-64-v4 scripts/bench/sgemm-avx512.c -o /tmp/sgemm-avx512 -ldl -lm
//   OPENBLAS_CORETYPE=Cooperlake /tmp/sgemm-avx512 ratio [ROUNDS]  # interleaved against OpenBLAS
//   /tmp/sgemm-avx512 parts                                        # packing's share, kernels alone
//   /tmp/sgemm-avx512 peak                                         # the kernel in L1 against the FMA peak
//
// On the 2-vCPU Emerald Rapids VM (43rd session; fma12 155 to 178 GFLOP/s
// a core, the peak): see docs/cpu-speed.md, "The 43rd session".

#include "../../model/gemm_avx512.c"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#include "fma12.h"

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

static void ours(int ta, int tb, long m, long n, long k, const float *a, long lda, const float *b, long ldb, float *c) {
	k_sgemm_avx512(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, n);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "ratio";
	if (k_avx512_enable(1) != 0) {
		fprintf(stderr, "sgemm-avx512: this CPU has no AVX-512F\n");
		return 1;
	}
	if (!strcmp(mode, "peak")) {
		float *A = aligned_alloc(64, sizeof(float) * MR * 128), *B = aligned_alloc(64, sizeof(float) * NR * 128),
		      *C = aligned_alloc(64, sizeof(float) * MR * NR);
		for (int i = 0; i < MR * 128; i++) A[i] = 0.001f * (i % 7);
		for (int i = 0; i < NR * 128; i++) B[i] = 0.001f * (i % 5);
		for (int r = 0; r < 8; r++) {
			double peak = fma_peak(), best = 0;
			for (int i = 0; i < 5; i++) {
				double t = now();
				for (int j = 0; j < 2000; j++) kern_p(128, A, B, C, NR, MR, NR, 0, 1, 1);
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
				ours(ta, tb, m, n, k, A, lda, B, ldb, D);
				t = now() - t;
				if (t < whole) whole = t;
				// every panel packed once, as the product packs it (A only
				// where transposed)
				long kb = kc_of(k), nb = BBYTES / (kb * (long)sizeof(float)) / NR * NR;
				t = now();
				for (long pc = 0; pc < k; pc += kb) {
					long kc = k - pc < kb ? k - pc : kb;
					if (ta) pack_at(PA + pc * (m + MR), A, lda, 0, m, pc, kc);
					for (long j = 0; j < n; j += NR)
						pack_b(PB + pc * (n + NR) + j * kc, tb, B, ldb, j, n - j < NR ? n - j : NR, pc, kc);
				}
				t = now() - t;
				if (t < packs) packs = t;
				// the kernels over the first k block's panels, in the
				// product's order, scaled to all of k
				long kc = k < kb ? k : kb;
				t = now();
				for (long ic = 0; ic < m; ic += MC)
					for (long jc = 0; jc < n; jc += nb)
						for (long i = ic; i < m && i < ic + MC; i += MR)
							for (long j = jc; j < n && j < jc + nb; j += NR) {
								long mr = m - i < MR ? m - i : MR, nr = n - j < NR ? n - j : NR;
								if (ta)
									kern_p(kc, PA + i * kc, PB + j * kc, D + i * n + j, n, mr, nr, 1, 1, 0);
								else
									kern_r(kc, A + i * lda, lda, PB + j * kc, D + i * n + j, n, mr, nr, 1, 1, 0);
							}
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
		fprintf(stderr, "sgemm-avx512: no cblas_sgemm in libopenblas.so.0 (apt-get install libopenblas0-pthread)\n");
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
		double fl = 2.0 * m * n * k, ratio[64], us[64], them[64], diff = 0, top = 0;
		blas(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1, A, lda, B, ldb, 0, C, n);
		ours(ta, tb, m, n, k, A, lda, B, ldb, D);
		for (long i = 0; i < m * n; i++) {
			double d = fabs(C[i] - D[i]);
			diff = d > diff || d != d ? d : diff;
			top = fabs(C[i]) > top ? fabs(C[i]) : top;
		}
		for (int r = 0; r < rounds; r++) {
			double t = now();
			blas(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1, A, lda, B, ldb, 0, C, n);
			double tt = now() - t;
			t = now();
			ours(ta, tb, m, n, k, A, lda, B, ldb, D);
			double to = now() - t;
			ratio[r] = tt / to, us[r] = fl / to / 1e9, them[r] = fl / tt / 1e9;
		}
		qsort(ratio, rounds, sizeof(double), cmp);
		qsort(us, rounds, sizeof(double), cmp);
		qsort(them, rounds, sizeof(double), cmp);
		logsum += log(ratio[rounds / 2]);
		printf("%s%s %5ldx%5ldx%5ld OpenBLAS %6.1f ours %6.1f GFLOP/s (medians); ours/OpenBLAS median %.2f "
		       "(%.2f to %.2f); largest difference %.1g of %.2g\n",
		       ta ? "T" : "N", tb ? "T" : "N", m, n, k, them[rounds / 2], us[rounds / 2], ratio[rounds / 2], ratio[0],
		       ratio[rounds - 1], diff, top);
	}
	printf("geomean of the medians %.3f\n", exp(logsum / NSHAPES));
	return 0;
}

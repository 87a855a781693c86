// Winograd's F(m x m, 3x3), m = 2 or 4, for the 3x3, stride-1, padding-1
// convolutions that are most of a ResNet's work (Lavin and Gray 2015,
// "Fast Algorithms for Convolutional Neural Networks"). Each m x m block
// of outputs comes from an a x a block of input (a = m + 2) through a*a
// element-wise products per channel pair instead of 9*m*m: 16 instead of
// 36 for F(2x2), 36 instead of 144 for F(4x4). The input's blocks and the
// kernel are taken to a transformed space (B^T d B, G g G^T), where the
// products become a*a independent matrix products over the channels (one
// SGEMM each), and the results come back through A^T m A.
//
// F(2x2)'s coefficients are 0, +-1 and 1/2, exact in binary. F(4x4)'s
// reach 8 in A^T and 1/3, 1/15 in G: fewer products, more rounding (both
// measured in winograd_test.go). Its interpolation points are 0, +-1, 2
// and -1/2, not Lavin's 0, +-1, +-2: a point and its reciprocal keep
// B^T's coefficients at or under 5/2 (5 with +-2), which measured 2 to 3
// times less rounding at 64 to 512 channels (numpy simulation first,
// then TestWinogradForward: 6.8e-6 -> 2e-6 at 64, 1.7e-5 -> 7.3e-6 at
// 512); the points of Barabasz et al. 2020, "Error analysis and
// improving the accuracy of Winograd convolution for DNNs", suggest the
// same kind of choice.
//
// A plan (below) cuts an image into classes of tiles of one shape each:
// F(4x4)'s may end a side in tiles of F(2)'s outputs, so the 2-D
// transforms take the tile's rows and columns separately (my x mx, F(my)
// along the columns and F(mx) along the rows), and each class has its own
// transformed kernels and its own (my+2)(mx+2) products.
//
// NHWC: a pixel's channels are contiguous, so every transform is a loop
// over channels that the compiler vectorises.
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels.h"
#include "vec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define X86_LEVELS 1
#define VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define V4 __attribute__((target("arch=x86-64-v4")))
#define V3 __attribute__((target("arch=x86-64-v3")))
#else
#define VEC
#define V3
#endif

// The code levels this file has: 4 AVX-512 (x86-64-v4), 3 AVX2 and FMA
// (x86-64-v3; plain C off x86), 0 the x86-64 baseline. Only the paths
// for any channel count (the pointer transforms) and the kernels'
// transforms are cloned for all three (VEC). The row transforms and the
// own products, most of the file's code, exist at levels 4 and 3 only: a
// baseline clone of them took 40 of the file's 110 s at -O3, the longest
// step of a cold build, paid again by the package's test build and by
// the fuzzers' instrumented one, for CPUs without AVX2, where the
// transforms take the pointer paths and the products go to OpenBLAS
// instead.
static int level_cap = 4;

// level is the level this call runs at: the CPU's, at most what a test
// allowed (k_wino_level). Asked at every call (a few loads of the CPU's
// feature bits): a value cached on first use would be written by
// whichever pool threads got there first, a data race.
static int level(void) {
#ifdef X86_LEVELS
	int cpu = __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 0;
#else
	int cpu = 3;
#endif
	return cpu < level_cap ? cpu : level_cap;
}

// k_wino_level caps the code level at cap (4: the CPU's choice), so that
// a test runs the AVX2 and baseline paths on a machine that has more,
// while no pass runs. It returns the CPU's own level.
int k_wino_level(int cap) {
	level_cap = 4;
	int cpu = level();
	level_cap = cap;
	return cpu;
}

// INL bodies (vec.h) take m as a constant from their callers, so each m
// gets its own fully unrolled copy.
#define AMAX 6
// UNROLL unrolls a loop over a tile's rows or columns completely, which the
// vectoriser needs before it can vectorise the loop over channels around it.
#define UNROLL _Pragma("GCC unroll 8")

// ---- the one-dimensional transforms; the 2-D ones apply them to the
// rows and then the columns ----

// BT, AT and AD are macros, not functions, so that one text serves both
// a float per call (the paths for any channel count) and a vf of 16
// channels (the row paths below, for counts that are multiples of 16).
// The temporaries take their type from the operands (__auto_type).
//
// neg is -1. The float paths pass the constant, and the compiler folds
// x * -1 + y back to y - x. The row paths pass a vector it cannot see
// through (wino_neg1), so that some of F(4x4)'s sums become FMAs by -1:
// the same rounding, but on the FMA units, which the transforms
// otherwise leave idle while they queue for the adders (AMD Zen 4 runs
// additions on two pipes and FMAs on two others). Measured on 28x28x16,
// 4 images, one thread, in a throwaway harness: the input transform 76
// -> 57 to 69 ns a tile.

// BT sets r to B^T d: a values of an input block's row or column to a.
#define BT(m, r, d, neg)                                                                                     \
	do {                                                                                                     \
		if ((m) == 2) {                                                                                      \
			/* B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */                                              \
			(r)[0] = (d)[0] - (d)[2], (r)[1] = (d)[1] + (d)[2], (r)[2] = (d)[2] - (d)[1];                      \
			(r)[3] = (d)[1] - (d)[3];                                                                        \
			break;                                                                                           \
		}                                                                                                    \
		/* B^T = [1 3/2 -2 -3/2 1 0; 0 -1 -5/2 -1/2 1 0; 0 1 1/2 -5/2 1 0;                                  \
		          0 -1/2 -1 1/2 1 0; 0 2 -1 -2 1 0; 0 1 3/2 -2 -3/2 1] */                                     \
		__auto_type s_ = (d)[2] * (neg) + (d)[4];                                                            \
		__auto_type t_ = (d)[1] * (neg) + (d)[3];                                                            \
		(r)[0] = (d)[0] + (s_ - (d)[2]) - 1.5f * t_, (r)[1] = (s_ + t_) - 1.5f * ((d)[2] + (d)[3]);           \
		(r)[2] = (s_ - t_) + 1.5f * ((d)[2] - (d)[3]), (r)[3] = s_ + 0.5f * t_, (r)[4] = s_ - 2 * t_;          \
		(r)[5] = (d)[5] - 1.5f * s_ - (t_ + (d)[3]);                                                         \
	} while (0)

// AT sets y to A^T s: a transformed values to m outputs.
#define AT(m, y, s, neg)                                                                                     \
	do {                                                                                                     \
		if ((m) == 2) {                                                                                      \
			/* A^T = [1 1 1 0; 0 1 -1 -1] */                                                                 \
			(y)[0] = (s)[0] + (s)[1] + (s)[2], (y)[1] = (s)[1] - (s)[2] - (s)[3];                              \
			break;                                                                                           \
		}                                                                                                    \
		/* A^T = [1 1 1 1 1 0; 0 1 -1 2 -1/2 0; 0 1 1 4 1/4 0; 0 1 -1 8 -1/8 1] */                           \
		__auto_type p_ = (s)[2] - (s)[1] * (neg);                                                            \
		__auto_type q_ = (s)[2] * (neg) + (s)[1];                                                            \
		(y)[0] = (s)[0] + p_ + ((s)[3] + (s)[4]), (y)[1] = q_ + (2 * (s)[3] - 0.5f * (s)[4]);                  \
		(y)[2] = p_ + (4 * (s)[3] + 0.25f * (s)[4]), (y)[3] = q_ + (8 * (s)[3] - 0.125f * (s)[4]) + (s)[5];    \
	} while (0)

// gk is G g: a kernel's 3 values to a.
INL void gk(int m, float *u, const float *g) {
	if (m == 2) {
		// G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
		u[0] = g[0], u[1] = 0.5f * (g[0] + g[1] + g[2]), u[2] = 0.5f * (g[0] - g[1] + g[2]), u[3] = g[2];
		return;
	}
	// G = [1 0 0; -1/3 -1/3 -1/3; 1/3 -1/3 1/3;
	//      1/15 2/15 4/15; -16/15 8/15 -4/15; 0 0 1]
	float e = g[0] + g[2];
	u[0] = g[0], u[1] = -(e + g[1]) / 3, u[2] = (e - g[1]) / 3, u[3] = (g[0] + 2 * g[1] + 4 * g[2]) / 15;
	u[4] = (8 * g[1] - 16 * g[0] - 4 * g[2]) / 15, u[5] = g[2];
}

// gt is G^T u: a transformed values of a kernel's gradient to 3.
INL void gt(int m, float *g, const float *u) {
	if (m == 2) {
		float p = 0.5f * (u[1] + u[2]);
		g[0] = u[0] + p, g[1] = 0.5f * (u[1] - u[2]), g[2] = p + u[3];
		return;
	}
	float p = u[2] - u[1], q = u[1] + u[2];
	g[0] = u[0] + p / 3 + (u[3] - 16 * u[4]) / 15, g[1] = (2 * u[3] + 8 * u[4]) / 15 - q / 3;
	g[2] = p / 3 + (4 * u[3] - 4 * u[4]) / 15 + u[5];
}

// AD sets s to A d: m values of an output gradient's row or column to a.
#define AD(m, s, d)                                                                                          \
	do {                                                                                                     \
		if ((m) == 2) {                                                                                      \
			/* A = [1 0; 1 1; 1 -1; 0 -1] */                                                                 \
			(s)[0] = (d)[0], (s)[1] = (d)[0] + (d)[1], (s)[2] = (d)[0] - (d)[1], (s)[3] = -(d)[1];             \
			break;                                                                                           \
		}                                                                                                    \
		/* A = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -1/2 1/4 -1/8; 0 0 0 1] */                          \
		__auto_type e_ = (d)[0] + (d)[2];                                                                    \
		__auto_type o_ = (d)[1] + (d)[3];                                                                    \
		(s)[0] = (d)[0], (s)[1] = e_ + o_, (s)[2] = e_ - o_, (s)[3] = ((d)[0] + 4 * (d)[2]) + (2 * (d)[1] + 8 * (d)[3]); \
		(s)[4] = ((d)[0] + 0.25f * (d)[2]) - (0.5f * (d)[1] + 0.125f * (d)[3]), (s)[5] = (d)[3];             \
	} while (0)

// ---- the plan ----

// runs cuts a side of L outputs into at most two runs of tiles, cnt[i]
// tiles of ms[i] outputs. F(2x2)'s pad the side to a multiple of 2, and
// so do F(4x4)'s, but where mixed and the side has three or more whole
// tiles and a remainder of 1 or 2: there it ends in one tile of F(2)'s (half of it
// padding for a remainder of 1). A side of 14 is 4+4+4+2, 22 transformed
// values against 24 for four tiles of 4, so a 14x14 image takes 484
// products per channel pair against 576: ResNet-20's 14x14 layers did
// 1.31 times their work in padding, and F(4x4)'s forward and backward of
// 64 images of 14x14x32 took 3.22 ms against 2.92 with the F(2) tiles
// (one thread, minima of 12 interleaved runs). Each class of tiles costs
// a transform of every kernel, which the few tiles of a small image do
// not repay: 7x7 as 4+3 (F(3x3)'s tiles, 121 products against 144) ran
// 3.00 ms against 2.87 padded, the same measure.
static int runs(size_t L, int m, int mixed, int ms[2], size_t cnt[2]) {
	ms[0] = m;
	if (!mixed || m != 4 || L < 12 || L % 4 == 0 || L % 4 == 3) {
		cnt[0] = (L + m - 1) / m;
		return 1;
	}
	cnt[0] = L / 4;
	ms[1] = 2;
	cnt[1] = 1;
	return 2;
}

// k_wino_plan: the F(2) tiles only up to 32 channels in and out. Measured
// like the figures above, 14x14 on 64 images ran 3.21 -> 2.93 ms at 32
// channels, 11.8 -> 11.9 at 64 and 51.5 -> 51.7 at 128, and 7.14 -> 8.37
// ms at 128 on 8 images: each class's kernels, and each part's weight
// gradient in them (the parts' sum reads 100 rows of c x o a part against
// 36), grow with the channel pairs and leave the cache, where the
// products the tiles save do not grow as fast. The rule depends on the
// layer's shape only (c and o alike, so the input gradient's plan is the
// forward's).
void k_wino_plan(struct k_wino_plan *p, size_t h, size_t w, size_t c, size_t o, int m) {
	int my[2], mx[2];
	size_t ny[2], nx[2];
	int mixed = c <= 32 && o <= 32;
	int ry = runs(h, m, mixed, my, ny), rx = runs(w, m, mixed, mx, nx);
	p->n = 0;
	for (int i = 0; i < ry; i++)
		for (int j = 0; j < rx; j++)
			p->c[p->n++] = (struct k_wino_class){.my = my[i],
			                                     .mx = mx[j],
			                                     .y0 = i ? ny[0] * (size_t)my[0] : 0,
			                                     .ny = ny[i],
			                                     .x0 = j ? nx[0] * (size_t)mx[0] : 0,
			                                     .nx = nx[j]};
}

// aa is the transformed values of a class's tile, the products per
// channel pair.
static size_t aa(const struct k_wino_class *k) { return (size_t)(k->my + 2) * (size_t)(k->mx + 2); }

// k_wino_ld is the floats from one point's c x o transformed kernels to
// the next in U and dU (k_wino_weights, the products, the weight
// gradient's parts): c*o and one cache line more. At c*o a multiple of
// 1,024 floats (64 channels: 16 KiB), the kernels' transforms write (and
// their gradient reads) a kernel's 36 or 100 points at that stride, every
// one in the same L1 set, 12 lines deep on Zen 5: a throwaway harness
// wrote 36 such rows at 10.3 GB/s, 97 with the line more (loads 45
// against 117), and k_wino_weights of a 7x7x64 layer took 81 us on one
// thread. Only the layout changes: the same values, the same bits. The
// line between two points is never written in U; in the weight
// gradient's parts it is summed with them (par.c's sum_first) and never
// read.
size_t k_wino_ld(size_t c, size_t o) { return c * o + 16; }

// k_wino_points is the sum of the classes' aa: the kernels' transformed
// values (U and dU hold that many rows of channel pairs, class by class).
size_t k_wino_points(const struct k_wino_plan *p) {
	size_t s = 0;
	for (int i = 0; i < p->n; i++) s += aa(&p->c[i]);
	return s;
}

// most is the largest class's tiles times aa, per image: the rows of
// transformed values a part holds at once.
static size_t most(const struct k_wino_plan *p) {
	size_t s = 0;
	for (int i = 0; i < p->n; i++) {
		size_t v = aa(&p->c[i]) * p->c[i].ny * p->c[i].nx;
		if (v > s) s = v;
	}
	return s;
}

// PAIRS lists the tile shapes (my, mx) that plans make.
#define PAIRS(X) X(2, 2) X(4, 4) X(4, 2) X(2, 4)

// ---- the kernel ----

// stream_rows copies n rows of WINO_BLOCK floats (a cache line, at a
// line's start) from blk to dst, ld floats apart, with non-temporal
// stores, where x86 has them: lines another core has read are written
// without first taking them from that core (see k_wino_weights).
// stream_done orders those stores before the pass's end.
INL void stream_rows(float *dst, size_t ld, const float (*blk)[WINO_BLOCK], size_t n) {
	for (size_t k = 0; k < n; k++, dst += ld) {
#if defined(__x86_64__) && defined(__SSE__)
		UNROLL
		for (size_t i = 0; i < WINO_BLOCK; i += 4) _mm_stream_ps(dst + i, _mm_load_ps(blk[k] + i));
#else
		memcpy(dst, blk[k], sizeof blk[k]);
#endif
	}
}

INL void stream_done(void) {
#if defined(__x86_64__) && defined(__SSE__)
	_mm_sfence();
#endif
}

// kernel1 writes u[k * us], k < ay*ax, from the kernel g read at w[(i * 3
// + j) * ws], rotated by 180 degrees when flip: G_y g G_x^T.
INL void kernel1(int my, int mx, float *u, size_t us, const float *w, size_t ws, int flip) {
	size_t ay = my + 2, ax = mx + 2;
	float t[AMAX][3];
	UNROLL
	for (size_t j = 0; j < 3; j++) {
		float col[3], r[AMAX];
		UNROLL
		for (size_t i = 0; i < 3; i++) col[i] = flip ? w[((2 - i) * 3 + (2 - j)) * ws] : w[(i * 3 + j) * ws];
		gk(my, r, col);
		UNROLL
		for (size_t i = 0; i < ay; i++) t[i][j] = r[i];
	}
	UNROLL
	for (size_t i = 0; i < ay; i++) {
		float r[AMAX];
		gk(mx, r, t[i]);
		UNROLL
		for (size_t j = 0; j < ax; j++) u[(i * ax + j) * us] = r[j];
	}
}

// weights sets U to G g G^T of every kernel g for tiles of my x mx: U is
// (ay*ax, c, o) for the forward; when flip, for the input gradient (the
// forward convolution of dy with the kernel rotated by 180 degrees, the
// channels' roles swapped), it is the rotated kernels' (ay*ax, o, c).
// The forward reads w (o, c, 3, 3), PyTorch's layout, and must write U
// along o, where w's kernels lie 9c apart: it copies blocks of 16 x 16
// channel pairs of the 9 kernel positions into tin transposed (o along
// the rows), then transforms them vectorised over o; from the same reads
// it writes wt (o, 3, 3, c), when given, for the input gradient's. The
// flipped loop reads that wt and writes U along c, vectorised over c.
// (Every kernel read where it lies, 9 floats apart along either channel,
// the transforms did not vectorise: 11 times slower, 699d73a. A copy
// permuted to (o, 3, 3, c) first, by Go on the caller's thread, left the
// other thread reading its blocks from the caller's core. Transposing the
// transformed values instead, ay*ax rows of the block where this
// transposes 9, made the transform half of a 7x7x512 layer's time on 8
// images.)
INL void weights(int my, int mx, float *U, const float *w, float *wt, size_t o, size_t c, int flip, size_t p0,
                 size_t p1, size_t c0, size_t c1, int stream) {
	size_t OC = k_wino_ld(c, o), a2 = (size_t)(my + 2) * (mx + 2);
	enum { B = WINO_BLOCK };
	float blk[AMAX * AMAX][B] __attribute__((aligned(64)));
	if (flip) {
		for (size_t p = p0; p < p1; p++) {
			size_t b = c0;
			if (stream && c % B == 0 && c0 % B == 0 && (c1 - c0) % B == 0)
				for (; b < c1; b += B) {
#pragma GCC ivdep
					for (size_t i = 0; i < B; i++) kernel1(my, mx, &blk[0][i], B, wt + p * 9 * c + b + i, c, 1);
					stream_rows(U + p * c + b, OC, blk, a2);
				}
#pragma GCC ivdep
			for (; b < c1; b++) kernel1(my, mx, U + p * c + b, OC, wt + p * 9 * c + b, c, 1);
		}
		return;
	}
	float tin[9][B][B];
	for (; p0 < p1; p0 += B)
		for (size_t b0 = c0; b0 < c1; b0 += B) {
			size_t np = p1 - p0 < B ? p1 - p0 : B, nb = c1 - b0 < B ? c1 - b0 : B;
			for (size_t p = 0; p < np; p++)
				for (size_t b = 0; b < nb; b++)
					for (size_t q = 0; q < 9; q++) tin[q][b][p] = w[((p0 + p) * c + b0 + b) * 9 + q];
			if (wt)
				for (size_t p = 0; p < np; p++)
					for (size_t q = 0; q < 9; q++)
						for (size_t b = 0; b < nb; b++) wt[((p0 + p) * 9 + q) * c + b0 + b] = tin[q][b][p];
			if (np == B && stream && o % B == 0)
				for (size_t b = 0; b < nb; b++) {
#pragma GCC ivdep
					for (size_t p = 0; p < B; p++) kernel1(my, mx, &blk[0][p], B, &tin[0][b][p], B * B, 0);
					stream_rows(U + (b0 + b) * o + p0, OC, blk, a2);
				}
			else if (np == B)
				for (size_t b = 0; b < nb; b++)
#pragma GCC ivdep
					for (size_t p = 0; p < B; p++)
						kernel1(my, mx, U + (b0 + b) * o + p0 + p, OC, &tin[0][b][p], B * B, 0);
			else
				for (size_t b = 0; b < nb; b++)
#pragma GCC ivdep
					for (size_t p = 0; p < np; p++)
						kernel1(my, mx, U + (b0 + b) * o + p0 + p, OC, &tin[0][b][p], B * B, 0);
		}
}

// k_wino_weights transforms the kernels of outputs [p0, p1) and inputs
// [c0, c1) (multiples of WINO_BLOCK but for the last unless flip), so
// that threads can share a layer's, for each class of the plan in turn: U holds k_wino_points(p)
// rows of c x o, k_wino_ld(c, o) apart. The forward's are w's (o, c, 3, 3), and it also sets
// those outputs' rows of wt (o, 3, 3, c) when wt is not NULL (on the
// plan's first class); the input gradient's (flip) are wt's.
// stream: U's whole lines (outputs, or the flip's inputs, in blocks of
// WINO_BLOCK on line boundaries) go out with non-temporal stores. One U
// serves every layer, and at 2 threads or more every thread's products
// read all of it, so each line a transform writes is in another core's
// cache: a store must first take it from there, which the Zen 5 VM did
// at 6.9 GB/s against 105 for its own lines (scripts/bench/machine-probe.sh).
// A throwaway harness (576 KB, the 7x7x64 layer's U, after the other core
// read it): stores 58 to 86 us, non-temporal 18 to 21, the reads after
// them 6 -> 14 us (from memory). ResNet-20 at 2 threads
// (docs/cpu-speed.md, "The 46th session"): these passes 1.02 -> 0.66 ms
// a step. A thread that made U for itself (par.c's own kernels), or the
// only thread, keeps it in its cache instead: stream 0.
VEC void k_wino_weights(float *U, const float *w, float *wt, size_t o, size_t c, int flip,
                        const struct k_wino_plan *p, size_t p0, size_t p1, size_t c0, size_t c1, int stream) {
	for (int i = 0; i < p->n; i++) {
		const struct k_wino_class *k = &p->c[i];
		float *out = !flip && i == 0 ? wt : NULL;
		switch (k->my * 10 + k->mx) {
#define W(a, b)                                                \
	case a##b:                                                 \
		weights(a, b, U, w, flip ? wt : out, o, c, flip, p0, p1, c0, c1, stream); \
		break;
			PAIRS(W)
#undef W
		default:
			abort();
		}
		U += aa(k) * k_wino_ld(c, o);
	}
	if (stream) stream_done();
}

// ---- the forward ----

// spread_ptrs writes V (T, ay*ax, C) for the T tiles of class k of x (n,
// h, w, C), through a table of pointers to each tile's pixels (zero, C
// zeros, outside the image), for any channel count:
// - grad 0, input: tile (ty, tx) is the ay x ax block at (y0 + my ty - 1,
//   x0 + mx tx - 1), and V's ay*ax rows of a tile are B_y^T d B_x;
// - grad 1, dyt for the weight gradient (below): x is dy, the block is
//   the tile's my x mx outputs at (y0 + my ty, x0 + mx tx), and its rows
//   are A_y dY A_x^T.
// A tile's rows are contiguous (the products read row k of every tile
// with stride ay*ax*C): laid out (ay*ax, T, C), a tile's 36 stores went to
// rows a whole part apart, one L1 set, and F(4x4) at 14x14x32 took 1.66
// ms against 1.21.
INL void spread_ptrs(int my, int mx, int grad, float *V, const float *x, size_t n, size_t h, size_t w, size_t C,
                     const float *zero, const struct k_wino_class *k) {
	size_t ay = my + 2, ax = mx + 2, ky = grad ? (size_t)my : ay, kx = grad ? (size_t)mx : ax;
	long off = grad ? 0 : 1;
	size_t t = 0;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < k->ny; ty++)
			for (size_t tx = 0; tx < k->nx; tx++, t++) {
				const float *p[AMAX][AMAX];
				UNROLL
				for (size_t i = 0; i < ky; i++) {
					long y = (long)(k->y0 + my * ty + i) - off;
					UNROLL
					for (size_t j = 0; j < kx; j++) {
						long xx = (long)(k->x0 + mx * tx + j) - off;
						p[i][j] = y < 0 || y >= (long)h || xx < 0 || xx >= (long)w
						              ? zero
						              : x + ((b * h + (size_t)y) * w + (size_t)xx) * C;
					}
				}
				float *v = V + t * ay * ax * C;
#pragma GCC ivdep
				for (size_t c = 0; c < C; c++) {
					float d[AMAX][AMAX], r[AMAX][AMAX];
					UNROLL
					for (size_t j = 0; j < kx; j++) {
						float col[AMAX], s[AMAX];
						UNROLL
						for (size_t i = 0; i < ky; i++) col[i] = p[i][j][c];
						if (grad)
							AD(my, s, col);
						else
							BT(my, s, col, -1.0f);
						UNROLL
						for (size_t i = 0; i < ay; i++) d[i][j] = s[i];
					}
					UNROLL
					for (size_t i = 0; i < ay; i++) {
						if (grad)
							AD(mx, r[i], d[i]);
						else
							BT(mx, r[i], d[i], -1.0f);
						UNROLL
						for (size_t j = 0; j < ax; j++) v[(i * ax + j) * C + c] = r[i][j];
					}
				}
			}
}

// tile_out sets Y to A_y^T s A_x for output channel o of the tile whose
// ay*ax values are s[k * O + o].
INL void tile_out(int my, int mx, float Y[AMAX][AMAX], const float *s, size_t O, size_t o) {
	size_t ay = my + 2, ax = mx + 2;
	float r[AMAX][AMAX];
	UNROLL
	for (size_t j = 0; j < ax; j++) {
		float col[AMAX], e[AMAX];
		UNROLL
		for (size_t i = 0; i < ay; i++) col[i] = s[(i * ax + j) * O + o];
		AT(my, e, col, -1.0f);
		UNROLL
		for (size_t i = 0; i < (size_t)my; i++) r[i][j] = e[i];
	}
	UNROLL
	for (size_t i = 0; i < (size_t)my; i++) AT(mx, Y[i], r[i], -1.0f);
}

// output writes class k's outputs of y (n, h, w, O) (added to them when
// add) from M (T, ay*ax, O): each tile's my x mx outputs are A_y^T s A_x.
// Those outside the image go to sink (O floats), so that border tiles
// take the same vectorised loop.
INL void output(int my, int mx, float *y, const float *M, size_t n, size_t h, size_t w, size_t O, int add, float *sink,
                const struct k_wino_class *k) {
	size_t a2 = (size_t)(my + 2) * (mx + 2);
	size_t t = 0;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < k->ny; ty++)
			for (size_t tx = 0; tx < k->nx; tx++, t++) {
				float *q[AMAX][AMAX];
				UNROLL
				for (size_t i = 0; i < (size_t)my; i++)
					UNROLL
					for (size_t j = 0; j < (size_t)mx; j++) {
						size_t yy = k->y0 + my * ty + i, xx = k->x0 + mx * tx + j;
						q[i][j] = yy < h && xx < w ? y + ((b * h + yy) * w + xx) * O : sink;
					}
				const float *s = M + t * a2 * O;
				if (add) {
#pragma GCC ivdep
					for (size_t o = 0; o < O; o++) {
						float Y[AMAX][AMAX];
						tile_out(my, mx, Y, s, O, o);
						UNROLL
						for (size_t i = 0; i < (size_t)my; i++)
							UNROLL
							for (size_t j = 0; j < (size_t)mx; j++) q[i][j][o] += Y[i][j];
					}
					continue;
				}
#pragma GCC ivdep
				for (size_t o = 0; o < O; o++) {
					float Y[AMAX][AMAX];
					tile_out(my, mx, Y, s, O, o);
					UNROLL
					for (size_t i = 0; i < (size_t)my; i++)
						UNROLL
						for (size_t j = 0; j < (size_t)mx; j++) q[i][j][o] = Y[i][j];
				}
			}
}

// ---- rows of tiles, 16 channels a vector ----
//
// For channel counts that are multiples of 16 (every layer of ResNet-20
// and ResNet-50 but the stem's input). A row of tiles shares its input
// rows (or output rows), so each row takes one pointer, to a row of
// zeros (or the sink) where it lies outside the image, and a tile skips
// its columns outside it. The pointer tables above cost a scalar pointer
// per pixel of a tile, loaded again for every vector of channels, which
// at 16 channels outweighed the transform: measured on ResNet-20's
// 28x28x16 layer (4 images, one thread), the output transform took 108
// ns a tile against 35 here, the input transform 88 against 76 (bound by
// its 36 vector stores a tile, 29 ns as a bare copy on this machine).
// Explicit vectors of 16, not the compiler's vectorisation of a loop
// over channels: the same row-pointer loops over float channels took 70
// ns a tile for the output.

// wino_neg1 is the row paths' neg (see BT), read once a call: volatile,
// so that the compiler cannot fold the multiplications by it away.
static volatile const float wino_neg1 = -1;

// BN_RELU sets v, 16 channels of x, to k_affine's output under its ReLU
// (the same expression, so the same FMA and the same bits), and to 0
// where keep is. A macro: a function of vf values outside the clones
// would change the ABI (-Wpsabi).
#define BN_RELU(v, mean, scale, beta, keep)                   \
	do {                                                      \
		vf t_ = ((v) - (mean)) * (scale) + (beta);            \
		(v) = (vf)((vi)t_ & (t_ > (vf){0}) & (keep));         \
	} while (0)

// spread_rows is spread_ptrs for C a multiple of 16; zrow is w*C zeros.
// aff (the input transform only): the input is pre's BatchNorm and ReLU
// of x, applied as each value is read; the padding rows and columns stay
// 0. The convolution then reads the normalisation's input, which its
// BatchNorm's backward reads anyway, and the normalised activation is
// never written: one pass over it fewer each way, and one array fewer
// (docs/cpu-speed.md, "BatchNorm fused into the next convolution").
INL void spread_rows(int my, int mx, int grad, int aff, float *V, const float *x, size_t n, size_t h, size_t w,
                     size_t C, const float *zrow, const struct k_pre *pre, const struct k_wino_class *k) {
	size_t ay = my + 2, ax = mx + 2, ky = grad ? (size_t)my : ay, kx = grad ? (size_t)mx : ax;
	long off = grad ? 0 : 1;
	float *v = V;
	const vf neg = (vf){0} + wino_neg1;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < k->ny; ty++) {
			const float *row[AMAX];
			vi keep[AMAX]; // aff: all ones where row i is inside the image
			UNROLL
			for (size_t i = 0; i < ky; i++) {
				long y = (long)(k->y0 + my * ty + i) - off;
				row[i] = y < 0 || y >= (long)h ? zrow : x + (b * h + (size_t)y) * w * C;
				if (aff) keep[i] = (vi){0} - (row[i] != zrow);
			}
			// The next tile row's rows that this one does not read, which
			// each tile prefetches above its own columns: a layer's input
			// comes from memory in a training step (a tile's transform took
			// about 270 ns there against 88 in BenchmarkConv3x3, whose input
			// stays in cache), and a row of 28 pixels is too short for the
			// hardware's stream prefetcher to get ahead. Measured with
			// `--passes`, one thread, in two sittings of four rounds: the
			// forward passes 2.5 to 4% and the step about 2% faster,
			// relative to BatchNorm's passes (3 of 4 rounds each time).
			const float *next[AMAX];
			size_t nn = 0;
			UNROLL
			for (size_t i = ky - my; i < ky; i++) {
				long y = (long)(k->y0 + my * (ty + 1) + i) - off;
				if (y >= 0 && y < (long)h) next[nn++] = x + (b * h + (size_t)y) * w * C;
			}
			for (size_t tx = 0; tx < k->nx; tx++, v += ay * ax * C) {
				// columns x0 + j for j in [jl, jr) are inside the image
				long x0 = (long)(k->x0 + mx * tx) - off;
				size_t jl = x0 < 0, jr = (long)w - x0 < (long)kx ? (size_t)((long)w - x0) : kx;
				// the columns the previous tile did not read
				for (size_t j = tx && kx - mx > jl ? kx - mx : jl; j < jr; j++)
					for (size_t i = 0; i < nn; i++)
						for (size_t c = 0; c < C; c += 16) __builtin_prefetch(next[i] + (x0 + (long)j) * (long)C + c);
				for (size_t c = 0; c < C; c += 16) {
					vf d[AMAX][AMAX], pm = {0}, ps = {0}, pb = {0};
					if (aff) pm = LD(pre->mean + c), ps = LD(pre->scale + c), pb = LD(pre->beta + c);
					UNROLL
					for (size_t j = 0; j < kx; j++) {
						vf col[AMAX], r[AMAX];
						if (j < jl || j >= jr) {
							UNROLL
							for (size_t i = 0; i < ay; i++) d[i][j] = (vf){0};
							continue;
						}
						UNROLL
						for (size_t i = 0; i < ky; i++) {
							col[i] = LD(row[i] + (x0 + (long)j) * (long)C + c);
							if (aff) BN_RELU(col[i], pm, ps, pb, keep[i]);
						}
						if (grad)
							AD(my, r, col);
						else
							BT(my, r, col, neg);
						UNROLL
						for (size_t i = 0; i < ay; i++) d[i][j] = r[i];
					}
					UNROLL
					for (size_t i = 0; i < ay; i++) {
						vf r[AMAX];
						if (grad)
							AD(mx, r, d[i]);
						else
							BT(mx, r, d[i], neg);
						UNROLL
						for (size_t j = 0; j < ax; j++) ST(v + (i * ax + j) * C + c, r[j]);
					}
				}
			}
		}
}

// output_rows is output for O a multiple of 16; srow is a sink of w*O.
INL void output_rows(int my, int mx, int add, float *y, const float *M, size_t n, size_t h, size_t w, size_t O,
                     float *srow, const struct k_wino_class *k) {
	size_t ay = my + 2, ax = mx + 2;
	const float *s = M;
	const vf neg = (vf){0} + wino_neg1;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < k->ny; ty++) {
			float *row[AMAX];
			UNROLL
			for (size_t i = 0; i < (size_t)my; i++) {
				size_t yy = k->y0 + my * ty + i;
				row[i] = yy >= h ? srow : y + (b * h + yy) * w * O;
			}
			for (size_t tx = 0; tx < k->nx; tx++, s += ay * ax * O) {
				size_t x0 = k->x0 + mx * tx, jr = w - x0 < (size_t)mx ? w - x0 : (size_t)mx;
				for (size_t o = 0; o < O; o += 16) {
					vf r[AMAX][AMAX];
					UNROLL
					for (size_t j = 0; j < ax; j++) {
						vf col[AMAX], e[AMAX];
						UNROLL
						for (size_t i = 0; i < ay; i++) col[i] = LD(s + (i * ax + j) * O + o);
						AT(my, e, col, neg);
						UNROLL
						for (size_t i = 0; i < (size_t)my; i++) r[i][j] = e[i];
					}
					UNROLL
					for (size_t i = 0; i < (size_t)my; i++) {
						vf Y[AMAX];
						AT(mx, Y, r[i], neg);
						float *q = row[i] + x0 * O + o;
						UNROLL
						for (size_t j = 0; j < (size_t)mx; j++) {
							if (j >= jr) break;
							if (add)
								ST(q + j * O, LD(q + j * O) + Y[j]);
							else
								ST(q + j * O, Y[j]);
						}
					}
				}
			}
		}
}

// BY_COUNT runs call with n, a vector-multiple channel count, as a
// constant for the counts of ResNets' layers: the compiler then unrolls
// the loop over channel vectors and folds the offsets. Measured on
// 28x28x16 (4 images, one thread), the transforms took 36 (output), 78
// (input) and 57 (output gradient) ns a tile against 58, 95 and 72 with
// the count a variable.
#define BY_COUNT(n, call)              \
	do {                               \
		switch (n) {                   \
		case 16: {                     \
			const size_t n##_ = 16;    \
			call;                      \
		} break;                       \
		case 32: {                     \
			const size_t n##_ = 32;    \
			call;                      \
		} break;                       \
		case 64: {                     \
			const size_t n##_ = 64;    \
			call;                      \
		} break;                       \
		default: {                     \
			const size_t n##_ = n;     \
			call;                      \
		}                              \
		}                              \
	} while (0)

// The transforms by tile shape and channel count, each its own function
// for each code level (one function a variant: four in one clone ran the
// output transform 1.7 times slower): CLONE for all three, ROWS for 4
// (name_v4) and 3 (name). zero and sink hold k_wino_work_floats' rows: w
// * max(C, O) floats.
#define CLONE(name, call, ...) \
	VEC static void name(__VA_ARGS__) { call; }
#ifdef X86_LEVELS
#define ROWS(name, call, ...)                       \
	V4 static void name##_v4(__VA_ARGS__) { call; } \
	V3 static void name(__VA_ARGS__) { call; }
// AT_LEVEL is the ROWS function name for level lv (4 or 3).
#define AT_LEVEL(name, lv) ((lv) == 4 ? name##_v4 : name)
#else
#define ROWS(name, call, ...) \
	static void name(__VA_ARGS__) { call; }
#define AT_LEVEL(name, lv) name
#endif
#define SPREAD_ARGS \
	float *V, const float *x, size_t n, size_t h, size_t w, size_t C, const float *z, const struct k_wino_class *k
#define OUT_ARGS \
	float *y, const float *M, size_t n, size_t h, size_t w, size_t O, float *s, const struct k_wino_class *k
#define CLONES(a, b)                                                                                           \
	ROWS(in_rows##a##b, BY_COUNT(C, spread_rows(a, b, 0, 0, V, x, n, h, w, C_, z, NULL, k)), SPREAD_ARGS)      \
	ROWS(dyt_rows##a##b, BY_COUNT(C, spread_rows(a, b, 1, 0, V, x, n, h, w, C_, z, NULL, k)), SPREAD_ARGS)     \
	CLONE(in_ptrs##a##b, spread_ptrs(a, b, 0, V, x, n, h, w, C, z, k), SPREAD_ARGS)                  \
	CLONE(dyt_ptrs##a##b, spread_ptrs(a, b, 1, V, x, n, h, w, C, z, k), SPREAD_ARGS)                 \
	ROWS(out_rows##a##b, BY_COUNT(O, output_rows(a, b, 0, y, M, n, h, w, O_, s, k)), OUT_ARGS)       \
	ROWS(out_rows##a##b##_add, BY_COUNT(O, output_rows(a, b, 1, y, M, n, h, w, O_, s, k)), OUT_ARGS) \
	CLONE(out_ptrs##a##b, output(a, b, y, M, n, h, w, O, add, s, k), OUT_ARGS, int add)
PAIRS(CLONES)
#ifdef X86_LEVELS
// The fused input transforms (k_pre), AVX-512 only (k_wino_fuses), and
// the count a constant for F(4x4)'s interior tiles only, most of the
// work: cloned like the others, for every shape and count at both
// levels, they made a cold compile of this file 1.7 times as long (152 s
// against 88).
#define PRE_ARGS SPREAD_ARGS, const struct k_pre *pre
V4 static void in_rows44_pre(PRE_ARGS) { BY_COUNT(C, spread_rows(4, 4, 0, 1, V, x, n, h, w, C_, z, pre, k)); }
V4 static void in_rows42_pre(PRE_ARGS) { spread_rows(4, 2, 0, 1, V, x, n, h, w, C, z, pre, k); }
V4 static void in_rows24_pre(PRE_ARGS) { spread_rows(2, 4, 0, 1, V, x, n, h, w, C, z, pre, k); }
V4 static void in_rows22_pre(PRE_ARGS) { spread_rows(2, 2, 0, 1, V, x, n, h, w, C, z, pre, k); }
#endif

// k_wino_fuses reports whether an input transform of C channels can
// apply a k_pre: the row paths at AVX-512 only.
int k_wino_fuses(size_t C) {
#ifdef X86_LEVELS
	return C % 16 == 0 && level() >= 4;
#else
	(void)C;
	return 0;
#endif
}

// spread is spread_ptrs or spread_rows for class k: the input transform
// (grad 0), with pre's BatchNorm and ReLU when not NULL, or the output
// gradient's (grad 1).
static void spread(int grad, float *V, const float *x, size_t n, size_t h, size_t w, size_t C, const float *zero,
                   const struct k_pre *pre, const struct k_wino_class *k) {
	int lv = level(), rows = C % 16 == 0 && lv >= 3;
	if (pre && (grad || !k_wino_fuses(C))) abort(); // the caller asks k_wino_fuses first
#ifdef X86_LEVELS
#define PRE(a, b) in_rows##a##b##_pre(V, x, n, h, w, C, zero, k, pre)
#else
#define PRE(a, b) abort()
#endif
	switch (k->my * 10 + k->mx) {
#define S(a, b)                                                                                             \
	case a##b:                                                                                              \
		if (pre)                                                                                            \
			PRE(a, b);                                                                                      \
		else if (rows)                                                                                      \
			(grad ? AT_LEVEL(dyt_rows##a##b, lv) : AT_LEVEL(in_rows##a##b, lv))(V, x, n, h, w, C, zero, k); \
		else                                                                                                \
			(grad ? dyt_ptrs##a##b : in_ptrs##a##b)(V, x, n, h, w, C, zero, k);                             \
		return;
		PAIRS(S)
#undef S
#undef PRE
	}
	abort();
}

// gather is output or output_rows for class k.
static void gather(float *y, const float *M, size_t n, size_t h, size_t w, size_t O, int add, float *sink,
                   const struct k_wino_class *k) {
	int lv = level();
	switch (k->my * 10 + k->mx) {
#define G(a, b)                                                                                                   \
	case a##b:                                                                                                    \
		if (O % 16 == 0 && lv >= 3)                                                                               \
			(add ? AT_LEVEL(out_rows##a##b##_add, lv) : AT_LEVEL(out_rows##a##b, lv))(y, M, n, h, w, O, sink, k); \
		else                                                                                                      \
			out_ptrs##a##b(y, M, n, h, w, O, sink, k, add);                                                       \
		return;
		PAIRS(G)
#undef G
	}
	abort();
}

// ---- the products ----
//
// Each point's product is T tiles by C channels in, times C x O: K = C is
// 16 to 64, too short for OpenBLAS's small-matrix kernel, which loads a
// row of U and broadcasts 6 rows of V per step, 16 steps, then stores
// and starts the next 6 rows: each accumulator is one FMA chain, so a
// step waits on the FMA's latency, and the block's set-up and stores
// come every 16 steps. Measured on ResNet-20's 28x28x16 layer (64 images,
// one thread, `perf record` of BenchmarkConv3x3): that kernel was half
// the forward. MUL_BLOCK keeps 12 rows by 2 vectors of 16 outputs in
// registers (24 chains: enough to keep both FMA pipes busy). Each output
// is the same FMA chain over c from zero as OpenBLAS's small kernels
// (SkylakeX's, Cooperlake's), so the same bits; its Haswell kernels sum
// in another order.
#define UNROLL16 _Pragma("GCC unroll 16")
// bcast is x in every lane (vbroadcastss, or an FMA's broadcast operand).
#define bcast(x) ((x) - (vf){0})
#define MUL_BLOCK(G, NB)                                                                                   \
	INL void mul_##G##_##NB(float *M, size_t ldm, const float *V, size_t ldv, const float *U, size_t C,    \
	                        size_t O) {                                                                    \
		vf acc[G][NB];                                                                                     \
		UNROLL16 for (int g = 0; g < G; g++) UNROLL16 for (int b = 0; b < NB; b++) acc[g][b] = (vf){0};    \
		for (size_t c = 0; c < C; c++) {                                                                   \
			vf u[NB];                                                                                      \
			UNROLL16 for (int b = 0; b < NB; b++) u[b] = LD(U + c * O + 16 * b);                           \
			UNROLL16 for (int g = 0; g < G; g++) {                                                         \
				vf s = bcast(V[g * ldv + c]);                                                              \
				UNROLL16 for (int b = 0; b < NB; b++) acc[g][b] += s * u[b];                               \
			}                                                                                              \
		}                                                                                                  \
		UNROLL16 for (int g = 0; g < G; g++) UNROLL16 for (int b = 0; b < NB; b++)                         \
			ST(M + g * ldm + 16 * b, acc[g][b]);                                                           \
	}
MUL_BLOCK(12, 2)
MUL_BLOCK(12, 1)
MUL_BLOCK(4, 2)
MUL_BLOCK(4, 1)
MUL_BLOCK(1, 2)
MUL_BLOCK(1, 1)

// MUL_ROWS runs M = V U by blocks of G rows (then 4, then 1), 2 vectors
// of outputs a block where they fit, with C_ channels in and rows L_
// apart in V.
#define MUL_ROWS(G)                                                                                        \
	for (size_t t = 0; t < T;) {                                                                           \
		size_t g = T - t >= G ? G : T - t >= 4 ? 4 : 1;                                                    \
		for (size_t j = 0; j < P; j++) {                                                                   \
			const float *v = V + t * L_ + j * C_, *u = U + j * ldu;                                         \
			float *m = M + t * ldm + j * O;                                                                \
			size_t o = 0;                                                                                  \
			for (; o + 32 <= O; o += 32)                                                                   \
				if (g == G)                                                                                \
					mul_##G##_2(m + o, ldm, v, L_, u + o, C_, O);                                          \
				else if (g == 4)                                                                           \
					mul_4_2(m + o, ldm, v, L_, u + o, C_, O);                                              \
				else                                                                                       \
					mul_1_2(m + o, ldm, v, L_, u + o, C_, O);                                              \
			if (o < O) {                                                                                   \
				if (g == G)                                                                                \
					mul_##G##_1(m + o, ldm, v, L_, u + o, C_, O);                                          \
				else if (g == 4)                                                                           \
					mul_4_1(m + o, ldm, v, L_, u + o, C_, O);                                              \
				else                                                                                       \
					mul_1_1(m + o, ldm, v, L_, u + o, C_, O);                                              \
			}                                                                                              \
		}                                                                                                  \
		t += g;                                                                                            \
	}

// BY_SHAPE runs call with C_ and L_ constants for the plans' shapes
// (16 to 64 channels; 16, 24 or 36 points a tile): V's rows are then
// immediate offsets from one pointer. With them variables, GCC kept the
// 12 rows' offsets on the stack and reloaded one for every FMA.
#define SHAPE(c, a, ...)                  \
	case c * 100 + a: {                   \
		const size_t C_ = c, L_ = c * a;  \
		__VA_ARGS__;                      \
	} break;
#define BY_SHAPE(...)                                                                  \
	switch (ldv % C == 0 ? C * 100 + ldv / C : 0) {                                    \
		SHAPE(16, 16, __VA_ARGS__) SHAPE(16, 24, __VA_ARGS__) SHAPE(16, 36, __VA_ARGS__) \
		SHAPE(32, 16, __VA_ARGS__) SHAPE(32, 24, __VA_ARGS__) SHAPE(32, 36, __VA_ARGS__) \
		SHAPE(64, 16, __VA_ARGS__) SHAPE(64, 24, __VA_ARGS__) SHAPE(64, 36, __VA_ARGS__) \
	default: {                                                                         \
		const size_t C_ = C, L_ = ldv;                                                 \
		__VA_ARGS__;                                                                   \
	}                                                                                  \
	}

// mul16 runs the products of 16 channels in and out (ResNet-20's first
// stage, forward and input gradient) point by point instead: U_j's 16
// rows stay in 16 registers while R16 tiles at a time stream past, each
// tile's row for point j one cache line (16 floats), read once, asked
// for MUL16_PF tiles ahead (the rows are 1,536 to 2,304 bytes apart).
// By tile blocks (MUL_ROWS), a 12 x 1 block did 192 FMAs between
// reloading U_j (1 KiB; the 36 points' U, V and M lines are 90 KiB a
// block against 48 KiB of L1) and its 12 stores. Measured on the
// Emerald Rapids core, one thread, 196 tiles (4 images) of 36 points, V
// in L2 (a throwaway harness): 115 to 129 GFLOP/s by tile blocks, 147 to
// 162 so (blocks of 8, 12, 14 and 16 tiles and prefetches 16 to 42
// tiles ahead tried: 8 and 16 best); BenchmarkConv3x3's 28x28x16
// forward, 8 rounds interleaved: 917 -> 832 us (fastest), 1,252 -> 1,057
// (median). Each output is the same FMA chain over c from zero, so the
// same bits. V's and M's rows are L_ floats apart (equal, a2 * 16), a
// constant of the switch, so a tile's row is an immediate offset from one
// pointer.
#ifndef R16
#define R16 8
#endif
#ifndef MUL16_PF
#define MUL16_PF 16
#endif
INL void mul16_blk(int R, size_t L_, float *m, const float *v, const vf *u) {
	vf acc[R16];
	UNROLL16 for (int r = 0; r < R; r++) {
		__builtin_prefetch(v + (MUL16_PF + r) * L_);
		acc[r] = (vf){0};
	}
	UNROLL16 for (int c = 0; c < 16; c++) UNROLL16 for (int r = 0; r < R; r++) acc[r] +=
	    bcast(v[r * L_ + c]) * u[c];
	UNROLL16 for (int r = 0; r < R; r++) ST(m + r * L_, acc[r]);
}
INL void mul16(size_t L_, float *M, const float *V, const float *U, size_t T, size_t P) {
	for (size_t j = 0; j < P; j++, M += 16, V += 16, U += k_wino_ld(16, 16)) {
		vf u[16];
		UNROLL16 for (int c = 0; c < 16; c++) u[c] = LD(U + 16 * c);
		size_t t = 0;
		for (; t + R16 <= T; t += R16) mul16_blk(R16, L_, M + t * L_, V + t * L_, u);
		for (; t + 4 <= T; t += 4) mul16_blk(4, L_, M + t * L_, V + t * L_, u);
		for (; t < T; t++) mul16_blk(1, L_, M + t * L_, V + t * L_, u);
	}
}

// AVX-512's 32 registers hold 12 x 2 accumulators; AVX2's 16 hold 4 x 1
// (a vf is two of its registers), so the two get their own functions:
// the *_v4 ones, and the *_v3 ones (plain C off x86). At level 0 the
// products go to OpenBLAS.
#ifdef X86_LEVELS
V4 static void mul_v4(float *M, size_t ldm, const float *V, size_t ldv, const float *U, size_t T, size_t C,
                      size_t O, size_t P) {
	size_t ldu = k_wino_ld(C, O);
	if (C == 16 && O == 16 && ldm == ldv) switch (ldv) {
		case 16 * 16: mul16(16 * 16, M, V, U, T, P); return;
		case 16 * 24: mul16(16 * 24, M, V, U, T, P); return;
		case 16 * 36: mul16(16 * 36, M, V, U, T, P); return;
		}
	BY_SHAPE(MUL_ROWS(12))
}
#endif
V3 static void mul_v3(float *M, size_t ldm, const float *V, size_t ldv, const float *U, size_t T, size_t C,
                         size_t O, size_t P) {
	size_t ldu = k_wino_ld(C, O);
	BY_SHAPE(MUL_ROWS(4))
}

// MUL_MOST: the largest C x O that takes mul_rows (16 KB of U, in L1
// beside the rows); larger products, and O not a multiple of 16, go to
// OpenBLAS.
#define MUL_MOST (64 * 64)

// MUL_ALL: the most floats of a class's transformed kernels (all its
// points) for which a call's points go tile block by tile block, every
// point of a block's rows while they are in L1 (256 KiB: in L2). More,
// point by point, each over all the tiles: a block would read them all
// again. Measured in BenchmarkConv3x3's forward, 64 images, one thread:
// 28x28x16 0.84 -> 0.71 ms, 14x14x32 0.60 -> 0.56 with it, 7x7x64 (590
// KiB) slower.
#define MUL_ALL (64 * 1024)

// k_wino_own_mul reports whether k_wino_mul multiplies C x O kernels
// with its own kernels above, which take the tiles 12 (or 4) at a time
// whatever their count, rather than OpenBLAS's.
int k_wino_own_mul(size_t C, size_t O) { return level() >= 3 && O % 16 == 0 && C * O <= MUL_MOST; }

// k_wino_mul sets P points' products: M_j = V_j U_j, T rows each, point
// j's rows at j*O into M's (ldm apart) and j*C into V's (ldv apart), U_j
// C x O at j*k_wino_ld(C, O).
void k_wino_mul(float *M, size_t ldm, const float *V, size_t ldv, const float *U, size_t T, size_t C, size_t O,
                size_t P) {
	if (P > 1 && P * C * O > MUL_ALL) {
		for (size_t j = 0; j < P; j++) k_wino_mul(M + j * O, ldm, V + j * C, ldv, U + j * k_wino_ld(C, O), T, C, O, 1);
		return;
	}
	if (!k_wino_own_mul(C, O)) {
		for (size_t j = 0; j < P; j++)
			k_sgemm1(0, 0, T, O, C, 1, V + j * C, ldv, U + j * k_wino_ld(C, O), O, 0, M + j * O, ldm);
		return;
	}
#ifdef X86_LEVELS
	if (level() == 4) {
		mul_v4(M, ldm, V, ldv, U, T, C, O, P);
		return;
	}
#endif
	mul_v3(M, ldm, V, ldv, U, T, C, O, P);
}

// The weight gradient's products, dU_j (O x C) = M_j^T V_j summed over
// T tiles, the same way: a block of OB outputs by NB vectors of 16
// channels in registers, one FMA chain each over the tiles in order from
// zero, as OpenBLAS's kernels sum them.
//
// A tile's rows are a2*C and a2*O floats apart (2,304 bytes at 16 channels
// and 36 points): past the 2 KiB that the L1 stride prefetcher follows, so
// without DW_PF every tile's two rows were misses to L2 in turn. The loop
// asks for the rows DW_PF tiles ahead (any of 3 to 12 measured the same:
// the weight gradient's passes 5 to 8% faster at one thread on the Intel
// core).
#ifndef DW_PF
#define DW_PF 4
#endif
#define DW_BLOCK(OB, NB)                                                                                   \
	INL void dw_##OB##_##NB(float *D, size_t ldd, const float *Mt, size_t lm, const float *V, size_t lv,   \
	                        size_t T, int add) {                                                           \
		vf acc[OB][NB];                                                                                    \
		UNROLL16 for (int a = 0; a < OB; a++) UNROLL16 for (int b = 0; b < NB; b++)                        \
			acc[a][b] = add ? LD(D + a * ldd + 16 * b) : (vf){0};                                          \
		for (size_t t = 0; t < T; t++, Mt += lm, V += lv) {                                                \
			__builtin_prefetch(Mt + DW_PF * lm);                                                           \
			__builtin_prefetch(V + DW_PF * lv);                                                            \
			if (NB == 2) __builtin_prefetch(V + DW_PF * lv + 16);                                          \
			vf x[NB];                                                                                      \
			UNROLL16 for (int b = 0; b < NB; b++) x[b] = LD(V + 16 * b);                                   \
			UNROLL16 for (int a = 0; a < OB; a++) {                                                        \
				vf s = bcast(Mt[a]);                                                                       \
				UNROLL16 for (int b = 0; b < NB; b++) acc[a][b] += s * x[b];                               \
			}                                                                                              \
		}                                                                                                  \
		UNROLL16 for (int a = 0; a < OB; a++) UNROLL16 for (int b = 0; b < NB; b++)                        \
			ST(D + a * ldd + 16 * b, acc[a][b]);                                                           \
	}
DW_BLOCK(16, 1)
DW_BLOCK(8, 2)
DW_BLOCK(8, 1)
DW_BLOCK(4, 1)

// DW_ROWS runs the blocks over the P points, O (a multiple of OB) and C.
// D holds P products of O x C, k_wino_ld(C, O) apart; point j's rows are j*C
// (V) and j*O (Mt) into a tile's. (Taking the points tile block by tile
// block, as the forward does, measured 1.006 of a ResNet-20 step: not
// kept.)
#define DW_ROWS(OB, NB)                                                                                    \
	for (size_t j = 0; j < P; j++) {                                                                       \
		float *d = D + j * ldp;                                                                            \
		const float *mt = Mt + j * O, *v = V + j * C;                                                      \
		for (size_t o = 0; o < O; o += OB) {                                                               \
			size_t c = 0;                                                                                  \
			if (NB == 2)                                                                                   \
				for (; c + 32 <= C; c += 32) dw_##OB##_##NB(d + o * C + c, C, mt + o, lm, v + c, lv, T, add); \
			for (; c < C; c += 16) dw_##OB##_1(d + o * C + c, C, mt + o, lm, v + c, lv, T, add);          \
		}                                                                                                  \
	}

#ifdef X86_LEVELS
V4 static void dw_v4(float *D, const float *Mt, size_t lm, const float *V, size_t lv, size_t T, size_t C,
                     size_t O, size_t P, int add) {
	size_t ldp = k_wino_ld(C, O);
	if (C == 16)
		DW_ROWS(16, 1)
	else
		DW_ROWS(8, 2)
}
#endif
V3 static void dw_v3(float *D, const float *Mt, size_t lm, const float *V, size_t lv, size_t T, size_t C,
                        size_t O, size_t P, int add) {
	size_t ldp = k_wino_ld(C, O);
	DW_ROWS(4, 1)
}

// k_wino_own_dw reports whether k_wino_dw_mul multiplies with its own
// kernels above: one FMA chain per sum, from zero or from D's value, so
// that the tiles can come in several calls and still give the bits of
// one.
int k_wino_own_dw(size_t C, size_t O) { return level() >= 3 && O % 16 == 0 && C % 16 == 0 && C * O <= MUL_MOST; }

// k_wino_dw_mul sets D (P products of O x C, k_wino_ld(C, O) apart) to Mt_j^T V_j, or adds them
// to it when add: Mt T rows of O, lm apart, V T rows of C, lv apart,
// point j's at j*O and j*C. Where k_wino_own_dw, adding continues each
// sum's chain, the same bits as one call over all the tiles; OpenBLAS's
// sums (beta 1) round differently.
void k_wino_dw_mul(float *D, const float *Mt, size_t lm, const float *V, size_t lv, size_t T, size_t C, size_t O,
                   size_t P, int add) {
	if (!k_wino_own_dw(C, O)) {
		for (size_t j = 0; j < P; j++)
			k_sgemm1(1, 0, O, C, T, 1, Mt + j * O, lm, V + j * C, lv, add ? 1 : 0, D + j * k_wino_ld(C, O), C);
		return;
	}
#ifdef X86_LEVELS
	if (level() == 4) {
		dw_v4(D, Mt, lm, V, lv, T, C, O, P, add);
		return;
	}
#endif
	dw_v3(D, Mt, lm, V, lv, T, C, O, P, add);
}

// k_wino_conv is one part of a convolution: y (n, h, w, O) = x (n, h, w,
// C) convolved with U (k_wino_points rows of C x O) from k_wino_weights,
// added to y when add; work holds k_wino_work_floats(n, w, C, O, p)
// floats. Class by class: each class's tiles are transformed, multiplied
// and brought back before the next's, so a part holds one class's values
// at a time. (The products stay NN: OpenBLAS has small-matrix kernels for
// these shapes without packing for NN, and packs for NT, measured 1.35x
// slower at 28x28x16.)
void k_wino_conv(float *y, const float *x, const float *U, size_t n, size_t h, size_t w, size_t C, size_t O, int add,
                 float *work, const struct k_wino_plan *p, const struct k_pre *pre) {
	size_t rows = most(p) * n;
	float *V = work, *M = V + rows * C, *zero = M + rows * O, *sink = zero + w * (C > O ? C : O);
	memset(zero, 0, w * C * sizeof(float));
	for (int i = 0; i < p->n; i++) {
		const struct k_wino_class *k = &p->c[i];
		size_t T = n * k->ny * k->nx, a2 = aa(k);
		spread(0, V, x, n, h, w, C, zero, pre, k);
		k_wino_mul(M, a2 * O, V, a2 * C, U, T, C, O, a2);
		gather(y, M, n, h, w, O, add, sink, k);
		U += a2 * k_wino_ld(C, O);
	}
}

size_t k_wino_work_floats(size_t n, size_t w, size_t C, size_t O, const struct k_wino_plan *p) {
	return most(p) * n * (C + O) + 2 * w * (C > O ? C : O);
}

// The pieces of k_wino_conv and k_wino_dw_part, for par.c's wide passes,
// which cut a part's work finer than its images: class i's tiles per
// image and transformed values per tile; its transform of n images into
// V (image by image, a row of k_wino_class_points * C floats a tile, so
// images [b0, b1) are rows [b0 * tiles, b1 * tiles)); and its output
// transform from M.
size_t k_wino_class_tiles(const struct k_wino_plan *p, int i) { return p->c[i].ny * p->c[i].nx; }
size_t k_wino_class_points(const struct k_wino_plan *p, int i) { return aa(&p->c[i]); }
void k_wino_spread(int grad, float *V, const float *x, size_t n, size_t h, size_t w, size_t C, const float *zero,
                   const struct k_wino_plan *p, int i, const struct k_pre *pre) {
	spread(grad, V, x, n, h, w, C, zero, pre, &p->c[i]);
}
void k_wino_gather(float *y, const float *M, size_t n, size_t h, size_t w, size_t O, int add, float *sink,
                   const struct k_wino_plan *p, int i) {
	gather(y, M, n, h, w, O, add, sink, &p->c[i]);
}

// ---- the weight gradient ----
//
// The forward is y = A^T (U . V) A per tile and channel pair, U = G g G^T,
// so the kernel's gradient is G^T dU G with dU = sum over tiles of
// (A dY A^T) . V: per transformed position k, the product dM_k^T V_k over
// the tiles, ay*ax SGEMMs again, for each class of tiles.

// k_wino_dw_part sets dU (k_wino_points rows of O x C, class by class) to
// one part's sum over its tiles of dM_k^T V_k, for x (n, h, w, C) and dy
// (n, h, w, O), transforming sub images at a time (sub < n only where
// k_wino_own_dw: the same bits as all n at once, in less cache); work
// holds k_wino_work_floats(sub, w, C, O, p) floats.
void k_wino_dw_part(float *dU, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O,
                    float *work, const struct k_wino_plan *p, size_t sub, const struct k_pre *pre) {
	size_t rows = most(p) * sub;
	float *V = work, *M = V + rows * C, *zero = M + rows * O;
	memset(zero, 0, w * (C > O ? C : O) * sizeof(float));
	for (int i = 0; i < p->n; i++) {
		const struct k_wino_class *k = &p->c[i];
		size_t a2 = aa(k);
		for (size_t b = 0; b < n; b += sub) {
			size_t nb = n - b < sub ? n - b : sub;
			spread(0, V, x + b * h * w * C, nb, h, w, C, zero, pre, k);
			spread(1, M, dy + b * h * w * O, nb, h, w, O, zero, NULL, k);
			k_wino_dw_mul(dU, M, a2 * O, V, a2 * C, nb * k->ny * k->nx, C, O, a2, b > 0);
		}
		dU += a2 * k_wino_ld(C, O);
	}
}

// weights_grad sets outputs [p0, p1) of dwt (o, 3, 3, c) to G_y^T dU G_x
// of dU (ay*ax, o, c), or adds it to them when add.
INL void weights_grad(int my, int mx, float *dwt, const float *dU, size_t o, size_t c, size_t p0, size_t p1,
                      size_t c0, size_t c1, int add) {
	size_t ay = my + 2, ax = mx + 2, OC = k_wino_ld(c, o);
	for (size_t p = p0; p < p1; p++) {
		const float *du = dU + p * c;
		float *d = dwt + p * 9 * c;
#pragma GCC ivdep
		for (size_t b = c0; b < c1; b++) {
			float t[3][AMAX];
			UNROLL
			for (size_t j = 0; j < ax; j++) {
				float col[AMAX], g[3];
				UNROLL
				for (size_t i = 0; i < ay; i++) col[i] = du[(i * ax + j) * OC + b];
				gt(my, g, col);
				UNROLL
				for (size_t i = 0; i < 3; i++) t[i][j] = g[i];
			}
			UNROLL
			for (size_t i = 0; i < 3; i++) {
				float g[3];
				gt(mx, g, t[i]);
				UNROLL
				for (size_t j = 0; j < 3; j++) {
					if (add)
						d[(i * 3 + j) * c + b] += g[j];
					else
						d[(i * 3 + j) * c + b] = g[j];
				}
			}
		}
	}
}

// k_wino_weights_grad sets outputs [p0, p1) and inputs [c0, c1) of dwt to
// the sum over the plan's classes, in order, of each one's G^T dU G.
VEC void k_wino_weights_grad(float *dwt, const float *dU, size_t o, size_t c, const struct k_wino_plan *p, size_t p0,
                             size_t p1, size_t c0, size_t c1) {
	for (int i = 0; i < p->n; i++) {
		const struct k_wino_class *k = &p->c[i];
		switch (k->my * 10 + k->mx) {
#define D(a, b)                                                 \
	case a##b:                                                  \
		weights_grad(a, b, dwt, dU, o, c, p0, p1, c0, c1, i > 0); \
		break;
			PAIRS(D)
#undef D
		default:
			abort();
		}
		dU += aa(k) * k_wino_ld(c, o);
	}
}

#include "kernels.h"

// Each function is compiled twice on x86-64, for AVX2+FMA and for the
// baseline, and the loader picks the one the CPU runs (GCC function
// multi-versioning), so one binary is fast on new machines and still runs
// on old ones. BatchNorm's two sums have an AVX-512 function besides,
// chosen at run time (wide, below).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define X86 1
#define VEC __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define X86 0
#define VEC
#endif

typedef float vf4u __attribute__((vector_size(16), aligned(4))); // 4 floats, unaligned
typedef double vd4 __attribute__((vector_size(32)));
typedef float vf8u __attribute__((vector_size(32), aligned(4))); // 8 floats, unaligned
typedef double vd8 __attribute__((vector_size(64)));

// BatchNorm's two sums (k_bn_stats, k_bn_grad_sums) also have AVX-512
// versions of their own, taken where the CPU has it (wide): the rest of
// this file stays at AVX2, since AVX-512 clones of all of it gained about
// 3% of its passes and nothing measurable in a step (the 30th session).
// In a one-thread ResNet-20 step (`train bench step --passes`, four
// rounds interleaved with the build before, Cascade Lake), per ms of the
// unchanged Winograd forward passes: the stats passes 0.141-0.144 ->
// 0.111-0.113, the gradient sums 0.174-0.185 -> 0.145-0.161, the whole
// step 2.80-2.83 -> 2.73-2.78, with the same bits. wide_off turns them
// off: k_bn_wide, for the test that checks both give the same bits.
static int wide_off;

static int has_wide;

#if X86
__attribute__((constructor)) static void find_wide(void) {
	__builtin_cpu_init();
	has_wide = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}
#endif

static int wide(void) { return has_wide && !wide_off; }

// k_bn_wide reports whether the AVX-512 sums run, and with on >= 0 first
// allows them (1) or not (0).
int k_bn_wide(int on) {
	if (on >= 0) wide_off = !on;
	return wide();
}

// s[c] += sum of x, s[C+c] += sum of x*x, per channel c, in double (the
// variance is E[x^2] - E[x]^2, which float sums would spoil).
//
// For 16 channels at a time, the sums are 8 vectors of 4 doubles held in
// registers over all rows, added to s once at the end. Adding into s
// element by element, as the general loop below does, chains every row
// through a store and a load: 2.4x slower at 28x28x16
// (BenchmarkBNKernels/stats). Vectors of 8 doubles made GCC's AVX2 clone
// pass every half through the stack.
VEC static void bn_stats_any(const float *x, size_t rows, size_t C, double *s) {
	if (C % 16 == 0) {
		for (size_t c = 0; c < C; c += 16) {
			vd4 a[4] = {0}, q[4] = {0};
			const float *xr = x + c;
			for (size_t r = 0; r < rows; r++, xr += C) {
				for (int k = 0; k < 4; k++) {
					vd4 u = __builtin_convertvector(*(const vf4u *)(xr + 4 * k), vd4);
					a[k] += u, q[k] += u * u;
				}
			}
			for (int k = 0; k < 16; k++) s[c + k] += a[k / 4][k % 4], s[C + c + k] += q[k / 4][k % 4];
		}
		return;
	}
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		for (size_t c = 0; c < C; c++) {
			double v = xr[c];
			s[c] += v;
			s[C + c] += v * v;
		}
	}
}

#if X86
// bn_stats_v4 is k_bn_stats at AVX-512 for C a multiple of 16: the same
// sums in vectors of 8 doubles, two for 16 channels. Each channel's sum
// is the same chain of additions in row order as in the 4-double
// vectors (the same bits: TestBNKernelsWideSameBits), in half the
// instructions. Its own function, not a clone: GCC's AVX2 clone of the
// 8-double code went through the stack (above). Measured alone (a C
// harness, best of 30, one thread, this machine's Cascade Lake): 0.40 ->
// 0.29 ms at 28x28x16 for 64 images, 0.23 -> 0.18 at 14x14x32, 0.12 ->
// 0.08 at 7x7x64.
__attribute__((target("arch=x86-64-v4"))) static void bn_stats_v4(const float *x, size_t rows, size_t C, double *s) {
	for (size_t c = 0; c < C; c += 16) {
		vd8 a[2] = {0}, q[2] = {0};
		const float *xr = x + c;
		for (size_t r = 0; r < rows; r++, xr += C) {
			for (int k = 0; k < 2; k++) {
				vd8 u = __builtin_convertvector(*(const vf8u *)(xr + 8 * k), vd8);
				a[k] += u, q[k] += u * u;
			}
		}
		for (int k = 0; k < 16; k++) s[c + k] += a[k / 8][k % 8], s[C + c + k] += q[k / 8][k % 8];
	}
}
#endif

void k_bn_stats(const float *x, size_t rows, size_t C, double *s) {
#if X86
	if (C % 16 == 0 && wide()) {
		bn_stats_v4(x, rows, C, s);
		return;
	}
#endif
	bn_stats_any(x, rows, C, s);
}

// bn_out is BatchNorm's output before a fused ReLU. The backward kernels
// recompute it to find where the ReLU passed (bn_out > 0, exactly where
// k_affine's output is > 0: one inline text compiled into the same
// clones, so the same bits) instead of reading that output: one array
// fewer to read in each of the two passes.
static inline __attribute__((always_inline)) float bn_out(float x, float mean, float scale, float beta) {
	return (x - mean) * scale + beta;
}

// y = (x-mean)*scale + beta per channel, then max(y, 0) under relu.
VEC void k_affine(float *y, const float *x, const float *mean, const float *scale, const float *beta, size_t rows, size_t C, int relu) {
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		float *yr = y + r * C;
		if (relu) {
			for (size_t c = 0; c < C; c++) {
				float v = bn_out(xr[c], mean[c], scale[c], beta[c]);
				yr[c] = v > 0 ? v : 0;
			}
		} else {
			for (size_t c = 0; c < C; c++) yr[c] = bn_out(xr[c], mean[c], scale[c], beta[c]);
		}
	}
}

// y = max((x-mean)*scale + beta + z', 0) per channel, z' being z, or
// (z-zmean)*zscale + zbeta when zmean is not NULL: the end of a residual
// block (its branch's last BatchNorm, the shortcut's, the sum and the
// ReLU) in one pass over the activations instead of three.
VEC void k_join(float *y, const float *x, const float *mean, const float *scale, const float *beta, const float *z,
                const float *zmean, const float *zscale, const float *zbeta, size_t rows, size_t C) {
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C, *zr = z + r * C;
		float *yr = y + r * C;
		if (zmean) {
			for (size_t c = 0; c < C; c++) {
				float u = (zr[c] - zmean[c]) * zscale[c] + zbeta[c];
				float v = (xr[c] - mean[c]) * scale[c] + beta[c] + u;
				yr[c] = v > 0 ? v : 0;
			}
		} else {
			for (size_t c = 0; c < C; c++) {
				float v = (xr[c] - mean[c]) * scale[c] + beta[c] + zr[c];
				yr[c] = v > 0 ? v : 0;
			}
		}
	}
}

// s[c] += sum of d, s[C+c] += sum of d*xhat with xhat = (x-mean)*invstd
// and d = dy where the forward's output was positive under relu (bn_out
// of x with the forward's mhi, scale and beta). The mean comes as a float pair
// hi + lo: x - hi is exact for x near the mean, so xhat keeps float's
// precision relative to the deviation, not to the mean (a float mean
// alone costs |mean|/std times that). Blocks of 32 rows are summed in
// float, then added to the double totals: summing into the double array
// element by element was four times slower (a store-to-load chain per row).
#define GRAD_SUMS_ARGS                                                                                        \
	const float *x, const float *dy, size_t rows, size_t C, const float *mhi, const float *mlo, const float *invstd, \
	const float *scale, const float *beta, int relu, double *s
static inline __attribute__((always_inline)) void grad_sums(GRAD_SUMS_ARGS) {
	float a[C], p[C];
	for (size_t r0 = 0; r0 < rows; r0 += 32) {
		size_t r1 = r0 + 32 < rows ? r0 + 32 : rows;
		for (size_t c = 0; c < C; c++) a[c] = p[c] = 0;
		for (size_t r = r0; r < r1; r++) {
			const float *xr = x + r * C, *dr = dy + r * C;
			for (size_t c = 0; c < C; c++) {
				float d = dr[c];
				if (relu) d = bn_out(xr[c], mhi[c], scale[c], beta[c]) > 0 ? d : 0;
				a[c] += d;
				p[c] += d * (((xr[c] - mhi[c]) - mlo[c]) * invstd[c]);
			}
		}
		for (size_t c = 0; c < C; c++) {
			s[c] += a[c];
			s[C + c] += p[c];
		}
	}
}

// GRAD_SUMS_16 runs grad_sums with C the constant 16 where it is: the
// compiler then keeps the 16 channels' sums and per-channel values in
// registers across the rows instead of a loop over a variable count per
// row (28x28x16, 64 images, in a C harness: 0.71 -> 0.46 ms at AVX2).
// Each channel's sum is the same chain either way.
#define GRAD_SUMS_16                                                          \
	if (C == 16)                                                              \
		grad_sums(x, dy, rows, 16, mhi, mlo, invstd, scale, beta, relu, s); \
	else                                                                      \
		grad_sums(x, dy, rows, C, mhi, mlo, invstd, scale, beta, relu, s)

VEC static void grad_sums_any(GRAD_SUMS_ARGS) { GRAD_SUMS_16; }

#if X86
// grad_sums_v4: the same at AVX-512 (one register a row of 16 channels;
// the same bits, TestBNKernelsWideSameBits). In the harness: 0.46 -> 0.39
// ms at 28x28x16, 0.19 -> 0.15 at 14x14x32, 0.09 -> 0.07 at 7x7x64.
__attribute__((target("arch=x86-64-v4"))) static void grad_sums_v4(GRAD_SUMS_ARGS) { GRAD_SUMS_16; }
#endif

void k_bn_grad_sums(GRAD_SUMS_ARGS) {
#if X86
	if (wide()) {
		grad_sums_v4(x, dy, rows, C, mhi, mlo, invstd, scale, beta, relu, s);
		return;
	}
#endif
	grad_sums_any(x, dy, rows, C, mhi, mlo, invstd, scale, beta, relu, s);
}

// dx = a*d + b*(x-mean) + c per channel, d being dy where the forward's
// output was positive under relu (bn_out of x with the forward's mean,
// scale and beta).
static inline __attribute__((always_inline)) void bn_dx(float *dx, const float *dy, const float *x, size_t rows, size_t C,
                                                        const float *mean, const float *a, const float *b, const float *c,
                                                        const float *scale, const float *beta, int relu) {
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C, *dr = dy + r * C;
		float *o = dx + r * C;
		if (relu) {
			for (size_t k = 0; k < C; k++) {
				float d = bn_out(xr[k], mean[k], scale[k], beta[k]) > 0 ? dr[k] : 0;
				o[k] = a[k] * d + b[k] * (xr[k] - mean[k]) + c[k];
			}
		} else {
			for (size_t k = 0; k < C; k++) o[k] = a[k] * dr[k] + b[k] * (xr[k] - mean[k]) + c[k];
		}
	}
}

// k_bn_dx is bn_dx with C the constant 16 where it is (no loop over a
// variable count per row; the same expression, so the same bits): in a C
// harness at 28x28x16, 64 images, 0.79 -> 0.70 ms. At 32 and 64 channels
// it made no difference, and neither did AVX-512.
VEC void k_bn_dx(float *dx, const float *dy, const float *x, size_t rows, size_t C, const float *mean,
                 const float *a, const float *b, const float *c, const float *scale, const float *beta, int relu) {
	if (C == 16)
		bn_dx(dx, dy, x, rows, 16, mean, a, b, c, scale, beta, relu);
	else
		bn_dx(dx, dy, x, rows, C, mean, a, b, c, scale, beta, relu);
}

// g = dy where y > 0, else 0: the gradient through a ReLU with output y.
VEC void k_relu_mask(float *g, const float *dy, const float *y, size_t n) {
	for (size_t i = 0; i < n; i++) g[i] = y[i] > 0 ? dy[i] : 0;
}

// im2col fills cols (n*oh*ow, k*k*C) from x (n, h, w, C), NHWC, for a
// k x k window with the given stride and zero padding. Each row of cols is
// one output pixel's window ordered (i, j, c); in NHWC the k taps of one
// kernel row are k*C contiguous values of x, so a kernel row inside the
// image is one short copy, which an inline vector loop does faster than
// a call to memmove.
VEC void k_im2col(float *cols, const float *x, size_t n, size_t C, size_t h, size_t w, size_t k,
                  size_t stride, size_t pad, size_t oh, size_t ow) {
	size_t K = k * k * C, kc = k * C, size = h * w * C;
	float *r = cols;
	for (size_t b = 0; b < n; b++) {
		const float *img = x + b * size;
		for (size_t yo = 0; yo < oh; yo++) {
			for (size_t xo = 0; xo < ow; xo++, r += K) {
				long iw0 = (long)(xo * stride) - (long)pad;
				int inside = iw0 >= 0 && iw0 + (long)k <= (long)w;
				for (size_t i = 0; i < k; i++) {
					long ih = (long)(yo * stride + i) - (long)pad;
					float *d = r + i * kc;
					if (ih < 0 || ih >= (long)h) {
						for (size_t q = 0; q < kc; q++) d[q] = 0;
					} else if (inside) {
						const float *s = img + ((size_t)ih * w + (size_t)iw0) * C;
						for (size_t q = 0; q < kc; q++) d[q] = s[q];
					} else {
						for (size_t j = 0; j < k; j++) {
							long iw = iw0 + (long)j;
							float *dj = d + j * C;
							if (iw < 0 || iw >= (long)w) {
								for (size_t q = 0; q < C; q++) dj[q] = 0;
							} else {
								const float *s = img + ((size_t)ih * w + (size_t)iw) * C;
								for (size_t q = 0; q < C; q++) dj[q] = s[q];
							}
						}
					}
				}
			}
		}
	}
}

// k_avgpool: y (n, oh, ow, C) is the mean of each kh x kw window (stride
// the window, no padding) of x (n, h, w, C): each output's values added
// from zero in the window's row order, then times inv (1/(kh kw)), as
// pool.go's loop did. Only additions and one product: no contraction can
// change a bit.
VEC void k_avgpool(float *y, const float *x, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw, size_t oh,
                   size_t ow, float inv) {
	for (size_t b = 0; b < n; b++) {
		const float *img = x + b * h * w * C;
		float *out = y + b * oh * ow * C;
		for (size_t i = 0; i < oh * ow * C; i++) out[i] = 0;
		for (size_t ih = 0; ih < oh * kh; ih++)
			for (size_t iw = 0; iw < ow * kw; iw++) {
				float *o = out + ((ih / kh) * ow + iw / kw) * C;
				const float *in = img + (ih * w + iw) * C;
				for (size_t c = 0; c < C; c++) o[c] += in[c];
			}
		for (size_t i = 0; i < oh * ow * C; i++) out[i] *= inv;
	}
}

// k_avgpool_dx spreads each of dy (n, oh, ow, C) times inv over its
// window of dx (n, h, w, C); values outside every window are 0.
VEC void k_avgpool_dx(float *dx, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw,
                      size_t oh, size_t ow, float inv) {
	for (size_t b = 0; b < n; b++) {
		float *d = dx + b * h * w * C;
		const float *g = dy + b * oh * ow * C;
		for (size_t i = 0; i < h * w * C; i++) d[i] = 0;
		for (size_t ih = 0; ih < oh * kh; ih++)
			for (size_t iw = 0; iw < ow * kw; iw++) {
				const float *o = g + ((ih / kh) * ow + iw / kw) * C;
				float *in = d + (ih * w + iw) * C;
				for (size_t c = 0; c < C; c++) in[c] = o[c] * inv;
			}
	}
}

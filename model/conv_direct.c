// Strided convolutions (any k x k kernel, stride 2 and up, any padding)
// of multiples of 16 channels in and out, computed directly on NHWC
// activations: ResNet-20's stride-2 3x3 and 1x1 layers, ResNet-50's
// stride-2 3x3 and 1x1 ones.
//
// Through im2col their products are tall and thin (ResNet-20's 3x3
// 16 -> 32: 12544 rows, an inner dimension of 144, 32 columns), where
// OpenBLAS packs both operands for little work; the input gradient's
// product writes a k*k*C-wide matrix that col2im then adds into a
// cleared dx, and the weight gradient's copies x into im2col rows again.
// Measured on the Intel core of session 26 (perf, one thread), the
// products were 47% of the 16 -> 32 layer's backward, OpenBLAS's packing
// 12%, col2im 14%, im2col 11% and clearing dx 10%.
//
// Here each pass keeps a block of outputs in registers and reads its
// inputs where they lie:
//   - forward: R output pixels x 16V output channels, the sum over the
//     taps and input channels, one broadcast input value times a weight
//     vector (o contiguous) a multiply-add;
//   - input gradient: the pixels of dx fall in stride^2 classes by their
//     coordinates modulo the stride, each reached by the same subset of
//     taps (for 3x3 stride 2: 1, 2, 2 and 4 of the 9), so R pixels of a
//     class x 16V input channels gather from dy through those taps only:
//     no col2im, no clearing (a pixel no tap reaches is set to zero);
//   - weight gradient: for each tap, 8 input channels x 16V output
//     channels of sums over the part's output pixels.
// Every sum runs in a fixed order (taps, then channels; pixels in order
// within a part), the same for any thread count; the weight gradient's
// parts are added in order by par.c.
//
// AVX-512 only (x86-64-v4: 32 vector registers hold the blocks): at
// other levels k_direct_ok is 0 and these layers keep im2col and
// OpenBLAS.
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "vec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define V4 __attribute__((target("arch=x86-64-v4")))
#define HAVE_V4 1
#else
#define V4
#define HAVE_V4 0
#endif

// ZMAX: the most channels a zero pixel stands for (the pointer to a tap
// outside the image); wider layers keep im2col.
#define ZMAX 2048
static const float zeros[ZMAX] __attribute__((aligned(64)));
// A block's pixels past the part's end store into a sink of ZMAX floats
// on the caller's stack (a shared static one would be written by every
// thread at once).
// KKMAX: the most taps (k*k) a kernel has here.
#define KKMAX 64
// UNROLL: the loops over a block's pixels and vectors unroll completely,
// so that its accumulators live in registers.
#define UNROLL _Pragma("GCC unroll 16")
// UNROLL4 unrolls a loop over channels (a multiple of 16) by 4: the
// pointer increments of a block's pixels, one each per iteration, had
// left the front end, not the multiply-adds, the bound.
#define UNROLL4 _Pragma("GCC unroll 4")

// k_direct_ok reports whether this CPU runs the direct kernels, and
// whether a layer of c channels in and o out and a k x k kernel fits them.
int k_direct_ok(size_t c, size_t o, size_t k) {
#if HAVE_V4
	if (!__builtin_cpu_supports("x86-64-v4")) return 0;
	return c % 16 == 0 && o % 16 == 0 && c <= ZMAX && o <= ZMAX && k * k <= KKMAX;
#else
	(void)c, (void)o, (void)k;
	return 0;
#endif
}

// vecs is the vectors of 16 channels a block holds: all of them up to 64
// channels, else 4, 2 or 1 of a multiple.
static size_t vecs(size_t ch) {
	if (ch <= 64) return ch / 16;
	return ch % 64 == 0 ? 4 : ch % 32 == 0 ? 2 : 1;
}

// ---- forward ----

// fwd_block sets R output pixels' channels [o0, o0 + 16V): out[r] (or
// sink) gets the sum over taps t < kk of the input pixel in[r][t]
// (zeros outside the image) times wk's rows (t, c), each O floats.
INL void fwd_block(int R, int V, float *const *out, const float *const *in, size_t kk, const float *wk, size_t C,
                   size_t O, size_t o0, int add) {
	vf acc[8][4];
	UNROLL
	for (int r = 0; r < R; r++)
		UNROLL
		for (int v = 0; v < V; v++) acc[r][v] = add ? LD(out[r] + o0 + 16 * v) : (vf){0};
	for (size_t t = 0; t < kk; t++) {
		const float *p[8];
		UNROLL
		for (int r = 0; r < R; r++) p[r] = in[r * kk + t];
		const float *wr = wk + t * C * O + o0;
		UNROLL4
		for (size_t c = 0; c < C; c++, wr += O) {
			vf wv[4];
			UNROLL
			for (int v = 0; v < V; v++) wv[v] = LD(wr + 16 * v);
			UNROLL
			for (int r = 0; r < R; r++) {
				float a = p[r][c];
				UNROLL
				for (int v = 0; v < V; v++) acc[r][v] += a * wv[v];
			}
		}
	}
	UNROLL
	for (int r = 0; r < R; r++)
		UNROLL
		for (int v = 0; v < V; v++) ST(out[r] + o0 + 16 * v, acc[r][v]);
}

// FR is the pixels a forward or input-gradient block holds for V vectors
// of channels: 8 to 24 accumulators, and at most 8 pixel pointers (with
// 12, GCC kept some on the stack and reloaded one per multiply-add).
#define FR(V) ((V) == 1 ? 8 : (V) == 2 ? 8 : 6)

// forward runs the blocks of images [0, n): pixels in order, each
// block's tap pointers made first.
INL void forward(int V, float *y, const float *x, const float *wk, const struct k_conv_shape *s, size_t n, int add) {
	enum { RM = 8 }; // FR's largest
	const int R = FR(V);
	size_t k = s->k, kk = k * k, C = s->c, O = s->o, P = n * s->oh * s->ow;
	const float *in[RM * KKMAX];
	float *out[RM], sink[ZMAX] __attribute__((aligned(64)));
	size_t b = 0, oy = 0, ox = 0;
	for (size_t p0 = 0; p0 < P; p0 += R) {
		UNROLL
		for (int r = 0; r < R; r++) {
			if (p0 + r >= P) {
				out[r] = sink;
				for (size_t t = 0; t < kk; t++) in[r * kk + t] = zeros;
				continue;
			}
			out[r] = y + (p0 + r) * O;
			long iy0 = (long)(oy * s->stride) - (long)s->pad, ix0 = (long)(ox * s->stride) - (long)s->pad;
			const float *img = x + b * s->h * s->w * C;
			const float **q = in + r * kk;
			if (iy0 >= 0 && ix0 >= 0 && iy0 + (long)k <= (long)s->h && ix0 + (long)k <= (long)s->w) {
				// The whole window inside the image (most pixels): no tests.
				const float *row = img + ((size_t)iy0 * s->w + (size_t)ix0) * C;
				for (size_t i = 0; i < k; i++, row += s->w * C)
					for (size_t j = 0; j < k; j++) *q++ = row + j * C;
			} else
				for (size_t i = 0; i < k; i++)
					for (size_t j = 0; j < k; j++) {
						long iy = iy0 + (long)i, ix = ix0 + (long)j;
						*q++ = iy < 0 || iy >= (long)s->h || ix < 0 || ix >= (long)s->w
						           ? zeros
						           : img + ((size_t)iy * s->w + (size_t)ix) * C;
					}
			if (++ox == s->ow) {
				ox = 0;
				if (++oy == s->oh) oy = 0, b++;
			}
		}
		for (size_t o0 = 0; o0 < O; o0 += 16 * (size_t)V) fwd_block(R, V, out, in, kk, wk, C, O, o0, add);
	}
}

// k_direct_forward_part: y (n, oh, ow, O) = x (n, h, w, C) convolved with
// wk (k, k, C, O), added to y when add. k*k is at most 64.
V4 void k_direct_forward_part(float *y, const float *x, const float *wk, const struct k_conv_shape *s, size_t n,
                              int add) {
	switch (vecs(s->o)) {
	case 1: forward(1, y, x, wk, s, n, add); break;
	case 2: forward(2, y, x, wk, s, n, add); break;
	case 3: forward(3, y, x, wk, s, n, add); break;
	default: forward(4, y, x, wk, s, n, add);
	}
}

// ---- input gradient ----

// dx_class sets the pixels of dx (n, h, w, C) whose coordinates are (py,
// px) modulo the stride: each is the sum over the taps (i, j) that reach
// it (i = py + pad modulo the stride, likewise j) and the output
// channels of dy at the output pixel the tap comes from (zeros outside
// it) times wd's row (i, j, o), C floats.
INL void dx_class(int V, float *dx, const float *dy, const float *wd, const struct k_conv_shape *s, size_t n, size_t py,
                  size_t px) {
	enum { RM = 8 }; // FR's largest
	const int R = FR(V);
	size_t k = s->k, st = s->stride, C = s->c, O = s->o, pad = s->pad;
	// The class's taps, and the offsets from the class pixel (cy, cx)
	// (below) to the output pixel each tap comes from: py + pad - i is
	// a multiple of the stride.
	size_t ti[KKMAX], tj[KKMAX], nt = 0;
	long dyo[KKMAX], dxo[KKMAX];
	for (size_t i = (py + pad) % st; i < k; i += st)
		for (size_t j = (px + pad) % st; j < k; j += st) {
			ti[nt] = i, tj[nt] = j;
			dyo[nt] = ((long)(py + pad) - (long)i) / (long)st, dxo[nt] = ((long)(px + pad) - (long)j) / (long)st;
			nt++;
		}
	size_t ny = py < s->h ? (s->h - py + st - 1) / st : 0, nx = px < s->w ? (s->w - px + st - 1) / st : 0;
	size_t P = n * ny * nx;
	if (nt == 0) { // no tap reaches these pixels
		for (size_t b = 0; b < n; b++)
			for (size_t yy = py; yy < s->h; yy += st)
				for (size_t xx = px; xx < s->w; xx += st) memset(dx + ((b * s->h + yy) * s->w + xx) * C, 0, C * 4);
		return;
	}
	const float *in[RM * KKMAX];
	float *out[RM], sink[ZMAX] __attribute__((aligned(64)));
	size_t b = 0, cy = 0, cx = 0; // the class's pixel (py + st cy, px + st cx) of image b
	for (size_t p0 = 0; p0 < P; p0 += R) {
		UNROLL
		for (int r = 0; r < R; r++) {
			if (p0 + r >= P) {
				out[r] = sink;
				for (size_t t = 0; t < nt; t++) in[r * nt + t] = zeros;
				continue;
			}
			size_t iy = py + st * cy, ix = px + st * cx;
			out[r] = dx + ((b * s->h + iy) * s->w + ix) * C;
			const float *img = dy + b * s->oh * s->ow * O;
			for (size_t t = 0; t < nt; t++) {
				long oy = (long)cy + dyo[t], ox = (long)cx + dxo[t];
				in[r * nt + t] = oy < 0 || oy >= (long)s->oh || ox < 0 || ox >= (long)s->ow
				                     ? zeros
				                     : img + ((size_t)oy * s->ow + (size_t)ox) * O;
			}
			if (++cx == nx) {
				cx = 0;
				if (++cy == ny) cy = 0, b++;
			}
		}
		for (size_t c0 = 0; c0 < C; c0 += 16 * (size_t)V) {
			vf acc[8][4];
			UNROLL
			for (int r = 0; r < R; r++)
				UNROLL
				for (int v = 0; v < V; v++) acc[r][v] = (vf){0};
			for (size_t t = 0; t < nt; t++) {
				const float *p[8];
				UNROLL
				for (int r = 0; r < R; r++) p[r] = in[r * nt + t];
				const float *wr = wd + (ti[t] * k + tj[t]) * O * C + c0;
				UNROLL4
				for (size_t o = 0; o < O; o++, wr += C) {
					vf wv[4];
					UNROLL
					for (int v = 0; v < V; v++) wv[v] = LD(wr + 16 * v);
					UNROLL
					for (int r = 0; r < R; r++) {
						float a = p[r][o];
						UNROLL
						for (int v = 0; v < V; v++) acc[r][v] += a * wv[v];
					}
				}
			}
			UNROLL
			for (int r = 0; r < R; r++)
				UNROLL
				for (int v = 0; v < V; v++) ST(out[r] + c0 + 16 * v, acc[r][v]);
		}
	}
}

// k_direct_dx_part sets dx (n, h, w, C) to the input gradient of images
// [0, n) from dy (n, oh, ow, O) and wd (k, k, O, C), class by class.
V4 void k_direct_dx_part(float *dx, const float *dy, const float *wd, const struct k_conv_shape *s, size_t n) {
	size_t V = vecs(s->c);
	for (size_t py = 0; py < s->stride; py++)
		for (size_t px = 0; px < s->stride; px++) switch (V) {
			case 1: dx_class(1, dx, dy, wd, s, n, py, px); break;
			case 2: dx_class(2, dx, dy, wd, s, n, py, px); break;
			case 3: dx_class(3, dx, dy, wd, s, n, py, px); break;
			default: dx_class(4, dx, dy, wd, s, n, py, px);
			}
}

// ---- weight gradient ----

// DC is the input channels a weight-gradient block holds for V vectors
// of outputs: 16 accumulators.
#define DC(V) (16 / (V))

// dw_tap sets part[o, (i, j, c)] (o < O, rows k*k*C long) for tap (i, j),
// the sums over images [0, n)'s output pixels whose tap lies inside the
// image, pixel by pixel in order.
INL void dw_tap(int V, float *part, const float *x, const float *dy, const struct k_conv_shape *s, size_t n, size_t i,
                size_t j) {
	const int D = DC(V);
	size_t st = s->stride, C = s->c, O = s->o, K = s->k * s->k * C;
	// The output rows and columns whose tap is inside the image.
	size_t y0 = i >= s->pad ? 0 : (s->pad - i + st - 1) / st, x0 = j >= s->pad ? 0 : (s->pad - j + st - 1) / st;
	size_t y1 = s->h + s->pad > i ? (s->h + s->pad - i + st - 1) / st : 0;
	size_t x1 = s->w + s->pad > j ? (s->w + s->pad - j + st - 1) / st : 0;
	if (y1 > s->oh) y1 = s->oh;
	if (x1 > s->ow) x1 = s->ow;
	for (size_t o0 = 0; o0 < O; o0 += 16 * (size_t)V)
		for (size_t c0 = 0; c0 < C; c0 += (size_t)D) {
			vf acc[16][4];
			UNROLL
			for (int c = 0; c < D; c++)
				UNROLL
				for (int v = 0; v < V; v++) acc[c][v] = (vf){0};
			for (size_t b = 0; b < n; b++)
				for (size_t oy = y0; oy < y1; oy++) {
					size_t iy = oy * st + i - s->pad;
					const float *g = dy + ((b * s->oh + oy) * s->ow + x0) * O + o0;
					const float *xp = x + ((b * s->h + iy) * s->w + x0 * st + j - s->pad) * C + c0;
					for (size_t ox = x0; ox < x1; ox++, g += O, xp += st * C) {
						vf gv[4];
						UNROLL
						for (int v = 0; v < V; v++) gv[v] = LD(g + 16 * v);
						UNROLL
						for (int c = 0; c < D; c++) {
							float a = xp[c];
							UNROLL
							for (int v = 0; v < V; v++) acc[c][v] += a * gv[v];
						}
					}
				}
			float *q = part + o0 * K + (i * s->k + j) * C + c0;
			UNROLL
			for (int v = 0; v < V; v++)
				UNROLL
				for (int l = 0; l < 16; l++)
					UNROLL
					for (int c = 0; c < D; c++) q[(16 * (size_t)v + (size_t)l) * K + (size_t)c] = acc[c][v][l];
		}
}

// k_direct_dw_part sets part (O, k, k, C) to the weight gradient over
// images [0, n) of x (n, h, w, C) and dy (n, oh, ow, O).
V4 void k_direct_dw_part(float *part, const float *x, const float *dy, const struct k_conv_shape *s, size_t n) {
	size_t V = s->o % 64 == 0 ? 4 : s->o % 32 == 0 ? 2 : 1;
	for (size_t i = 0; i < s->k; i++)
		for (size_t j = 0; j < s->k; j++) switch (V) {
			case 1: dw_tap(1, part, x, dy, s, n, i, j); break;
			case 2: dw_tap(2, part, x, dy, s, n, i, j); break;
			default: dw_tap(4, part, x, dy, s, n, i, j);
			}
}

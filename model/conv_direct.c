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
// The forward's and the input gradient's pixels go by rows: a row's
// interior in row blocks (below: one pointer a tap), its edges through
// pointer blocks (one pointer a pixel and tap). Measured against pointer
// blocks alone (BenchmarkConvStrided's direct and direct-ptr, one thread,
// 6 runs of 300, median of the runs' own ratios, Emerald Rapids): 3x3
// 16 -> 32 forward 1.20x, backward (with the unchanged weight gradient)
// 1.12x; 32 -> 64 1.09x and 1.03x; the 1x1 ones 1.04 to 1.40x (runs
// spread 0.7 to 2.1 on that noisy machine: all medians above 1). In a
// ResNet-20 step (--passes, 4 rounds interleaved, per ms of the
// unchanged Winograd passes): the input gradients' passes 0.22 -> 0.19,
// the forwards' 0.173 -> 0.154.
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

// FR is the pixels a pointer block holds for V vectors of channels: 8 to
// 24 accumulators, and at most 8 pixel pointers (with 12, GCC kept some on
// the stack and reloaded one per multiply-add).
#define FR(V) ((V) == 1 ? 8 : (V) == 2 ? 8 : 6)

// ---- the row paths ----
//
// A block of pixels of one row whose taps all lie inside the image needs
// no pointer a pixel: for each tap, its pixels' inputs are one pointer's
// constant offsets (S_ floats apart: stride * C in the forward, O in the
// input gradient, constants of the callers' switches), so a block holds
// 12 pixels (RR) with a register a tap instead of 8 with a register each,
// and its set-up is a few pointers, not kk a pixel. A row's edge pixels,
// and those left over past its blocks of RR and RR/2, go through the
// pointer blocks (pend, FR pixels, collected across rows), as every pixel
// does for shapes without a constant here. Each sum is the same chain
// (taps in order, then channels, from zero); a tap outside the image is
// left out of a row block rather than added as zeros, the same value
// (only a sum of -0 would differ). rows_off turns the row paths off
// (k_direct_rows), for the test that holds them to the pointer blocks'
// bits.
static int rows_off;
int k_direct_rows(int on) {
	int was = !rows_off;
	rows_off = !on;
	return was;
}

// RR is the pixels a row block holds for V vectors: 12 to 24
// accumulators.
#define RR(V) ((V) <= 2 ? 12 : (V) == 3 ? 8 : 6)

// pblock sets R pixels' channels [o0, o0 + 16V) at out[r] (or adds to
// them): the sum over the nt taps of in[r * nt + q]'s K values times w[q]'s
// rows, ldw floats apart: the pointer block of both the forward and the
// input gradient.
INL void pblock(int R, int V, float *const *out, const float *const *in, size_t nt, const float *const *w, size_t K,
                size_t ldw, size_t o0, int add) {
	vf acc[8][4];
	UNROLL
	for (int r = 0; r < R; r++)
		UNROLL
		for (int v = 0; v < V; v++) acc[r][v] = add ? LD(out[r] + o0 + 16 * v) : (vf){0};
	for (size_t q = 0; q < nt; q++) {
		const float *p[8];
		UNROLL
		for (int r = 0; r < R; r++) p[r] = in[r * nt + q];
		const float *wr = w[q] + o0;
		UNROLL4
		for (size_t c = 0; c < K; c++, wr += ldw) {
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

// pend collects pixels for pblock: each pixel's output and its nt input
// pointers (zeros outside the image), run when FR(V) have come.
struct pend {
	int n;
	float *out[8];
	const float *in[8 * KKMAX];
	float sink[ZMAX] __attribute__((aligned(64)));
};

// pend_run runs the pixels collected, the block's empty places writing
// to the sink; N channels out, 16V a block.
INL void pend_run(int V, struct pend *q, size_t nt, const float *const *w, size_t K, size_t ldw, size_t N, int add) {
	const int R = FR(V);
	if (q->n == 0) return;
	for (int r = q->n; r < R; r++) {
		q->out[r] = q->sink;
		for (size_t t = 0; t < nt; t++) q->in[(size_t)r * nt + t] = zeros;
	}
	for (size_t o0 = 0; o0 < N; o0 += 16 * (size_t)V) pblock(R, V, q->out, q->in, nt, w, K, ldw, o0, add);
	q->n = 0;
}

// row_block sets R pixels' channels [o0, o0 + 16V) at out + r * OS (or adds
// to them): the sum over the nt taps of base[q]'s pixels (S_ apart) times
// w[q]'s rows, K_ of them, ldw floats apart.
INL void row_block(int R, int V, size_t S_, size_t K_, float *out, size_t OS, const float *const *base,
                   const float *const *w, size_t nt, size_t ldw, size_t o0, int add) {
	vf acc[12][4];
	UNROLL
	for (int r = 0; r < R; r++)
		UNROLL
		for (int v = 0; v < V; v++) acc[r][v] = add ? LD(out + r * OS + o0 + 16 * v) : (vf){0};
	for (size_t q = 0; q < nt; q++) {
		const float *p = base[q], *wr = w[q] + o0;
		UNROLL4
		for (size_t c = 0; c < K_; c++, wr += ldw) {
			vf wv[4];
			UNROLL
			for (int v = 0; v < V; v++) wv[v] = LD(wr + 16 * v);
			UNROLL
			for (int r = 0; r < R; r++) {
				float a = p[r * S_ + c];
				UNROLL
				for (int v = 0; v < V; v++) acc[r][v] += a * wv[v];
			}
		}
	}
	UNROLL
	for (int r = 0; r < R; r++)
		UNROLL
		for (int v = 0; v < V; v++) ST(out + r * OS + o0 + 16 * v, acc[r][v]);
}

// row_run sets the first pixels of a run of np, in blocks of RR(V) and
// then RR(V)/2, base and w as row_block's for the first pixel, and
// returns how many it set (the rest go to pend).
INL size_t row_run(int V, size_t S_, size_t K_, float *out, size_t OS, const float *const *base,
                   const float *const *w, size_t nt, size_t ldw, size_t N, size_t np, int add) {
	const int R = RR(V), H = RR(V) / 2;
	const float *b[KKMAX];
	for (size_t q = 0; q < nt; q++) b[q] = base[q];
	size_t i = 0;
	for (; i + (size_t)R <= np; i += (size_t)R) {
		for (size_t o0 = 0; o0 < N; o0 += 16 * (size_t)V) row_block(R, V, S_, K_, out, OS, b, w, nt, ldw, o0, add);
		out += (size_t)R * OS;
		for (size_t q = 0; q < nt; q++) b[q] += (size_t)R * S_;
	}
	if (i + (size_t)H <= np) {
		for (size_t o0 = 0; o0 < N; o0 += 16 * (size_t)V) row_block(H, V, S_, K_, out, OS, b, w, nt, ldw, o0, add);
		i += (size_t)H;
	}
	return i;
}

// fwd_pend adds output pixel (b, oy, ox) to q, its kk taps' pointers.
INL void fwd_pend(int V, struct pend *q, float *y, const float *x, const float *const *wt,
                  const struct k_conv_shape *s, size_t b, size_t oy, size_t ox, int add) {
	size_t k = s->k, C = s->c;
	const float *img = x + b * s->h * s->w * C, **p = q->in + (size_t)q->n * k * k;
	q->out[q->n] = y + ((b * s->oh + oy) * s->ow + ox) * s->o;
	long iy0 = (long)(oy * s->stride) - (long)s->pad, ix0 = (long)(ox * s->stride) - (long)s->pad;
	for (size_t i = 0; i < k; i++)
		for (size_t j = 0; j < k; j++) {
			long iy = iy0 + (long)i, ix = ix0 + (long)j;
			*p++ = iy < 0 || iy >= (long)s->h || ix < 0 || ix >= (long)s->w ? zeros
			                                                               : img + ((size_t)iy * s->w + (size_t)ix) * C;
		}
	if (++q->n == FR(V)) pend_run(V, q, k * k, wt, C, s->o, s->o, add);
}

// forward sets images [0, n)'s outputs row by row: with rows, each row's
// pixels whose every tap column is inside (ox in [xlo, xhi)) in row
// blocks over the taps whose row is inside; the rest, and every pixel
// without rows, through pend. C_ is C, S_ stride * C.
INL void forward(int V, int rows, size_t C_, size_t S_, float *y, const float *x, const float *wk,
                 const struct k_conv_shape *s, size_t n, int add) {
	size_t k = s->k, kk = k * k, st = s->stride, pad = s->pad, O = s->o;
	size_t xlo = (pad + st - 1) / st, xhi = s->w + pad >= k ? (s->w + pad - k) / st + 1 : 0;
	if (xhi > s->ow) xhi = s->ow;
	if (xlo > xhi || !rows) xlo = xhi = 0;
	const float *wt[KKMAX];
	for (size_t t = 0; t < kk; t++) wt[t] = wk + t * C_ * O;
	struct pend q;
	q.n = 0;
	for (size_t b = 0; b < n; b++) {
		const float *img = x + b * s->h * s->w * C_;
		for (size_t oy = 0; oy < s->oh; oy++) {
			const float *base[KKMAX], *w[KKMAX];
			size_t nt = 0;
			long iy0 = (long)(oy * st) - (long)pad;
			for (size_t i = 0; i < k && xhi > xlo; i++) { // no row blocks: no pointers
				long iy = iy0 + (long)i;
				if (iy < 0 || iy >= (long)s->h) continue;
				for (size_t j = 0; j < k; j++, nt++) {
					base[nt] = img + ((size_t)iy * s->w + xlo * st + j - pad) * C_;
					w[nt] = wt[i * k + j];
				}
			}
			for (size_t ox = 0; ox < xlo; ox++) fwd_pend(V, &q, y, x, wt, s, b, oy, ox, add);
			float *row = y + (b * s->oh + oy) * s->ow * O;
			size_t done = row_run(V, S_, C_, row + xlo * O, O, base, w, nt, O, O, xhi - xlo, add);
			for (size_t ox = xlo + done; ox < s->ow; ox++) fwd_pend(V, &q, y, x, wt, s, b, oy, ox, add);
		}
	}
	pend_run(V, &q, kk, wt, C_, O, O, add);
}

// FORWARD runs forward, with the row paths where stride 2 and C (16, 32,
// 64) make S_ a constant.
#define FORWARD(V)                                                                          \
	do {                                                                                    \
		int rows = !rows_off && s->stride == 2;                                             \
		if (rows && s->c == 16) forward(V, 1, 16, 32, y, x, wk, s, n, add);                 \
		else if (rows && s->c == 32) forward(V, 1, 32, 64, y, x, wk, s, n, add);            \
		else if (rows && s->c == 64) forward(V, 1, 64, 128, y, x, wk, s, n, add);           \
		else forward(V, 0, s->c, s->stride * s->c, y, x, wk, s, n, add);                    \
	} while (0)

// k_direct_forward_part: y (n, oh, ow, O) = x (n, h, w, C) convolved with
// wk (k, k, C, O), added to y when add. k*k is at most 64.
V4 void k_direct_forward_part(float *y, const float *x, const float *wk, const struct k_conv_shape *s, size_t n,
                              int add) {
	switch (vecs(s->o)) {
	case 1: FORWARD(1); break;
	case 2: FORWARD(2); break;
	case 3: FORWARD(3); break;
	default: FORWARD(4);
	}
}

// ---- input gradient ----

// dx_class sets the pixels of dx (n, h, w, C) whose coordinates are (py,
// px) modulo the stride: each is the sum over the taps (i, j) that reach
// it (i = py + pad modulo the stride, likewise j) and the output
// channels of dy at the output pixel the tap comes from (zeros outside
// it) times wd's row (i, j, o), C floats.
// By rows of the class: with rows, the pixels whose every tap column is
// inside (cx in [lo, hi)) in row blocks over the taps whose row is
// inside; the rest, and every pixel without rows, through pend with zeros
// outside. O_ is O, the step between a tap's pixels in dy.
INL void dx_class(int V, int rows, size_t O_, float *dx, const float *dy, const float *wd,
                  const struct k_conv_shape *s, size_t n, size_t py, size_t px) {
	size_t k = s->k, st = s->stride, C = s->c, pad = s->pad;
	// The class's taps, and the offsets from the class pixel (cy, cx)
	// (below) to the output pixel each tap comes from: py + pad - i is
	// a multiple of the stride.
	size_t nt = 0;
	long dyo[KKMAX], dxo[KKMAX];
	const float *w[KKMAX];
	for (size_t i = (py + pad) % st; i < k; i += st)
		for (size_t j = (px + pad) % st; j < k; j += st) {
			dyo[nt] = ((long)(py + pad) - (long)i) / (long)st, dxo[nt] = ((long)(px + pad) - (long)j) / (long)st;
			w[nt++] = wd + (i * k + j) * O_ * C;
		}
	size_t ny = py < s->h ? (s->h - py + st - 1) / st : 0, nx = px < s->w ? (s->w - px + st - 1) / st : 0;
	if (nt == 0) { // no tap reaches these pixels
		for (size_t b = 0; b < n; b++)
			for (size_t yy = py; yy < s->h; yy += st)
				for (size_t xx = px; xx < s->w; xx += st) memset(dx + ((b * s->h + yy) * s->w + xx) * C, 0, C * 4);
		return;
	}
	long lo = 0, hi = (long)nx;
	for (size_t t = 0; t < nt; t++) {
		if (-dxo[t] > lo) lo = -dxo[t];
		if ((long)s->ow - dxo[t] < hi) hi = (long)s->ow - dxo[t];
	}
	if (lo > (long)nx) lo = (long)nx;
	if (hi < lo || !rows) lo = hi = 0;
	struct pend q;
	q.n = 0;
	for (size_t b = 0; b < n; b++) {
		const float *img = dy + b * s->oh * s->ow * O_;
		for (size_t cy = 0; cy < ny; cy++) {
			const float *base[KKMAX], *wq[KKMAX];
			size_t nq = 0;
			for (size_t t = 0; t < nt && hi > lo; t++) { // no row blocks: no pointers
				long oy = (long)cy + dyo[t];
				if (oy < 0 || oy >= (long)s->oh) continue;
				base[nq] = img + ((size_t)oy * s->ow + (size_t)(lo + dxo[t])) * O_, wq[nq++] = w[t];
			}
			float *row = dx + ((b * s->h + py + st * cy) * s->w + px) * C;
			size_t done = row_run(V, O_, O_, row + (size_t)lo * st * C, st * C, base, wq, nq, C, C, (size_t)(hi - lo), 0);
			for (long cx = 0; cx < (long)nx; cx++) {
				if (cx == lo) cx += (long)done;
				if (cx >= (long)nx) break;
				const float **p = q.in + (size_t)q.n * nt;
				q.out[q.n] = row + (size_t)cx * st * C;
				for (size_t t = 0; t < nt; t++) {
					long oy = (long)cy + dyo[t], ox = cx + dxo[t];
					*p++ = oy < 0 || oy >= (long)s->oh || ox < 0 || ox >= (long)s->ow
					           ? zeros
					           : img + ((size_t)oy * s->ow + (size_t)ox) * O_;
				}
				if (++q.n == FR(V)) pend_run(V, &q, nt, w, O_, C, C, 0);
			}
		}
	}
	pend_run(V, &q, nt, w, O_, C, C, 0);
}

// DX_CLASS runs dx_class, with the row paths where O (16, 32, 64) is a
// constant.
#define DX_CLASS(V)                                                                         \
	do {                                                                                    \
		if (!rows_off && s->o == 16) dx_class(V, 1, 16, dx, dy, wd, s, n, py, px);          \
		else if (!rows_off && s->o == 32) dx_class(V, 1, 32, dx, dy, wd, s, n, py, px);     \
		else if (!rows_off && s->o == 64) dx_class(V, 1, 64, dx, dy, wd, s, n, py, px);     \
		else dx_class(V, 0, s->o, dx, dy, wd, s, n, py, px);                                \
	} while (0)

// k_direct_dx_part sets dx (n, h, w, C) to the input gradient of images
// [0, n) from dy (n, oh, ow, O) and wd (k, k, O, C), class by class.
V4 void k_direct_dx_part(float *dx, const float *dy, const float *wd, const struct k_conv_shape *s, size_t n) {
	size_t V = vecs(s->c);
	for (size_t py = 0; py < s->stride; py++)
		for (size_t px = 0; px < s->stride; px++) switch (V) {
			case 1: DX_CLASS(1); break;
			case 2: DX_CLASS(2); break;
			case 3: DX_CLASS(3); break;
			default: DX_CLASS(4);
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

// Pillow's bilinear resample passes in C (resize.go computes the
// fixed-point coefficients; only integer arithmetic here, so the bytes are
// the Go loops' and Pillow's), and ToTensor + Normalize.
#include "resize.h"

// Built for AVX-512, AVX2 and the baseline, picked at run time.
#if defined(__x86_64__) && defined(__GNUC__)
#define MULTI __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTI
#endif

static inline uint8_t clip8(int32_t s) {
	int32_t v = s >> 22;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

// rs_horizontal: rows of pixels of c bytes (src, from row 0, stride bytes
// apart) to rows of ow pixels (dst).
MULTI void rs_horizontal(const uint8_t *src, long stride, int c, int rows, uint8_t *dst, int ow, const int *first,
                         const int *count, const int32_t *k, int ks) {
	if (c == 3) { // RGB: the three sums of a pixel together
		for (int y = 0; y < rows; y++) {
			const uint8_t *row = src + (long)y * stride;
			uint8_t *out = dst + (long)y * ow * 3;
			for (int xx = 0; xx < ow; xx++) {
				const int32_t *kk = k + (long)xx * ks;
				const uint8_t *p = row + (long)first[xx] * 3;
				int32_t s0 = 1 << 21, s1 = 1 << 21, s2 = 1 << 21;
				for (int x = 0, n = count[xx]; x < n; x++, p += 3) {
					int32_t wt = kk[x];
					s0 += (int32_t)p[0] * wt;
					s1 += (int32_t)p[1] * wt;
					s2 += (int32_t)p[2] * wt;
				}
				out[3 * xx] = clip8(s0);
				out[3 * xx + 1] = clip8(s1);
				out[3 * xx + 2] = clip8(s2);
			}
		}
		return;
	}
	for (int y = 0; y < rows; y++) {
		const uint8_t *row = src + (long)y * stride;
		uint8_t *out = dst + (long)y * ow * c;
		for (int xx = 0; xx < ow; xx++) {
			const int32_t *kk = k + (long)xx * ks;
			const uint8_t *p = row + (long)first[xx] * c;
			int n = count[xx];
			for (int ch = 0; ch < c; ch++) {
				int32_t s = 1 << 21;
				for (int x = 0; x < n; x++)
					s += (int32_t)p[x * c + ch] * kk[x];
				out[xx * c + ch] = clip8(s);
			}
		}
	}
}

// rs_vertical: oh rows of row bytes each from src's rows first[yy] - base
// onwards.
// The taps are the outer loop and the row the inner one, so the compiler
// vectorises the row (a sum per byte, in int32 as Pillow's).
MULTI void rs_vertical(const uint8_t *src, int row, int base, uint8_t *dst, int oh, const int *first,
                       const int *count, const int32_t *k, int ks) {
	int32_t acc[row];
	for (int yy = 0; yy < oh; yy++) {
		const int32_t *kk = k + (long)yy * ks;
		const uint8_t *p = src + (long)(first[yy] - base) * row;
		int n = count[yy];
		uint8_t *out = dst + (long)yy * row;
		for (int i = 0; i < row; i++)
			acc[i] = 1 << 21;
		for (int y = 0; y < n; y++) {
			const uint8_t *q = p + (long)y * row;
			int32_t w = kk[y];
			for (int i = 0; i < row; i++)
				acc[i] += (int32_t)q[i] * w;
		}
		for (int i = 0; i < row; i++)
			out[i] = clip8(acc[i]);
	}
}

// normalize_chw: n RGB pixels to 3 planes of (v/255 - mean) / std, in
// float32 as ToTensor then Normalize compute it.
MULTI void normalize_chw(float *dst, const uint8_t *img, long n, const float *mean, const float *std) {
	for (int c = 0; c < 3; c++) {
		float *plane = dst + c * n;
		float m = mean[c], s = std[c];
		for (long i = 0; i < n; i++)
			plane[i] = ((float)img[3 * i + c] / 255.0f - m) / s;
	}
}

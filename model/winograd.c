// Winograd's F(2x2, 3x3) for the 3x3, stride-1, padding-1 convolutions
// that are most of a ResNet's work (Lavin and Gray 2015, "Fast Algorithms
// for Convolutional Neural Networks"). Each 2x2 block of outputs comes
// from a 4x4 block of input through 16 element-wise products per channel
// pair instead of 36: the input's 4x4 blocks and the kernel are taken to a
// transformed space (B^T d B, G g G^T), where the products become 16
// independent matrix products over the channels (one SGEMM each), and the
// results come back through A^T m A. The transforms' coefficients are 0,
// +-1 and 1/2, exact in binary, so the error added is a few roundings of
// sums of four terms (measured in winograd_test.go).
//
// NHWC: a pixel's channels are contiguous, so every transform is a loop
// over channels that the compiler vectorises.
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VEC
#endif

// k_wino_weights sets U (16, ci, co) to G g G^T of every kernel g:
// flip 0: wt is (o, 3, 3, c), co = o and ci = c (the forward);
// flip 1: the kernel rotated by 180 degrees with the channels swapped,
// co = c and ci = o (the input gradient as a forward convolution of dy).
VEC void k_wino_weights(float *U, const float *wt, size_t o, size_t c, int flip) {
	size_t co = flip ? c : o, ci = flip ? o : c;
	for (size_t a = 0; a < co; a++)
		for (size_t b = 0; b < ci; b++) {
			float g[3][3];
			for (size_t i = 0; i < 3; i++)
				for (size_t j = 0; j < 3; j++)
					g[i][j] = flip ? wt[((b * 3 + (2 - i)) * 3 + (2 - j)) * c + a] : wt[((a * 3 + i) * 3 + j) * c + b];
			// G g: G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
			float t[4][3];
			for (size_t j = 0; j < 3; j++) {
				t[0][j] = g[0][j];
				t[1][j] = 0.5f * (g[0][j] + g[1][j] + g[2][j]);
				t[2][j] = 0.5f * (g[0][j] - g[1][j] + g[2][j]);
				t[3][j] = g[2][j];
			}
			for (size_t i = 0; i < 4; i++) {
				float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]),
				              t[i][2]};
				for (size_t j = 0; j < 4; j++) U[((i * 4 + j) * ci + b) * co + a] = u[j];
			}
		}
}

// wino_input writes V (16, T, C) for the T = n * th * tw tiles of x (n, h,
// w, C): tile (ty, tx) is the 4x4 block at (2ty-1, 2tx-1), zero outside
// the image; V's 16 rows of a tile are B^T d B, B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1]. zero is C zeros.
VEC static void wino_input(float *V, const float *x, size_t n, size_t h, size_t w, size_t C, const float *zero) {
	size_t th = (h + 1) / 2, tw = (w + 1) / 2, T = n * th * tw;
	size_t t = 0;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < th; ty++)
			for (size_t tx = 0; tx < tw; tx++, t++) {
				const float *p[4][4];
				for (size_t i = 0; i < 4; i++)
					for (size_t j = 0; j < 4; j++) {
						long y = (long)(2 * ty + i) - 1, xx = (long)(2 * tx + j) - 1;
						p[i][j] = y < 0 || y >= (long)h || xx < 0 || xx >= (long)w
						              ? zero
						              : x + ((b * h + (size_t)y) * w + (size_t)xx) * C;
					}
				float *v = V + t * C;
#pragma GCC ivdep
				for (size_t c = 0; c < C; c++) {
					float d[4][4], r[4][4];
					for (size_t i = 0; i < 4; i++)
						for (size_t j = 0; j < 4; j++) d[i][j] = p[i][j][c];
					for (size_t j = 0; j < 4; j++) {
						r[0][j] = d[0][j] - d[2][j];
						r[1][j] = d[1][j] + d[2][j];
						r[2][j] = d[2][j] - d[1][j];
						r[3][j] = d[1][j] - d[3][j];
					}
					for (size_t i = 0; i < 4; i++) {
						v[(i * 4 + 0) * T * C + c] = r[i][0] - r[i][2];
						v[(i * 4 + 1) * T * C + c] = r[i][1] + r[i][2];
						v[(i * 4 + 2) * T * C + c] = r[i][2] - r[i][1];
						v[(i * 4 + 3) * T * C + c] = r[i][1] - r[i][3];
					}
				}
			}
}

// tile_out is A^T m A for output channel o of the tile whose 16 values
// are m[k * stride + o], A^T = [1 1 1 0; 0 1 -1 -1].
static inline void tile_out(float Y[2][2], const float *m, size_t stride, size_t o) {
	float r[2][4];
	for (size_t j = 0; j < 4; j++) {
		float m0 = m[(0 * 4 + j) * stride + o], m1 = m[(1 * 4 + j) * stride + o];
		float m2 = m[(2 * 4 + j) * stride + o], m3 = m[(3 * 4 + j) * stride + o];
		r[0][j] = m0 + m1 + m2;
		r[1][j] = m1 - m2 - m3;
	}
	for (size_t i = 0; i < 2; i++) {
		Y[i][0] = r[i][0] + r[i][1] + r[i][2];
		Y[i][1] = r[i][1] - r[i][2] - r[i][3];
	}
}

// wino_output writes y (n, h, w, O) (added to it when add) from M (16, T,
// O): each tile's 2x2 outputs are A^T m A (tile_out), those outside the
// image dropped.
VEC static void wino_output(float *y, const float *M, size_t n, size_t h, size_t w, size_t O, int add) {
	size_t th = (h + 1) / 2, tw = (w + 1) / 2, T = n * th * tw;
	size_t t = 0;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < th; ty++)
			for (size_t tx = 0; tx < tw; tx++, t++) {
				float *q[2][2];
				for (size_t i = 0; i < 2; i++)
					for (size_t j = 0; j < 2; j++) {
						size_t yy = 2 * ty + i, xx = 2 * tx + j;
						q[i][j] = yy < h && xx < w ? y + ((b * h + yy) * w + xx) * O : NULL;
					}
				const float *m = M + t * O;
				if (q[1][1] && !add) {
					float *q00 = q[0][0], *q01 = q[0][1], *q10 = q[1][0], *q11 = q[1][1];
#pragma GCC ivdep
					for (size_t o = 0; o < O; o++) {
						float Y[2][2];
						tile_out(Y, m, T * O, o);
						q00[o] = Y[0][0], q01[o] = Y[0][1], q10[o] = Y[1][0], q11[o] = Y[1][1];
					}
					continue;
				}
				for (size_t o = 0; o < O; o++) {
					float Y[2][2];
					tile_out(Y, m, T * O, o);
					for (size_t i = 0; i < 2; i++)
						for (size_t j = 0; j < 2; j++)
							if (q[i][j]) q[i][j][o] = add ? q[i][j][o] + Y[i][j] : Y[i][j];
				}
			}
}

// k_wino_conv is one part of a convolution: y (n, h, w, O) = x (n, h, w,
// C) convolved with U (16, C, O) from k_wino_weights, added to y when
// add; work holds wino_work_floats(n, h, w, C, O) floats.
void k_wino_conv(float *y, const float *x, const float *U, size_t n, size_t h, size_t w, size_t C, size_t O, int add,
                 float *work) {
	size_t T = n * ((h + 1) / 2) * ((w + 1) / 2);
	float *V = work, *M = V + 16 * T * C, *zero = M + 16 * T * O;
	memset(zero, 0, C * sizeof(float));
	wino_input(V, x, n, h, w, C, zero);
	for (size_t k = 0; k < 16; k++)
		k_sgemm1(0, 0, T, O, C, 1, V + k * T * C, C, U + k * C * O, O, 0, M + k * T * O, O);
	wino_output(y, M, n, h, w, O, add);
}

size_t k_wino_work_floats(size_t n, size_t h, size_t w, size_t C, size_t O) {
	size_t T = n * ((h + 1) / 2) * ((w + 1) / 2);
	return 16 * T * (C + O) + C;
}

// ---- the weight gradient ----
//
// The forward is y = A^T (U . V) A per tile and channel pair, U = G g G^T,
// so the kernel's gradient is G^T dU G with dU = sum over tiles of
// (A dY A^T) . V: per transformed position k, the product V_k^T dM_k over
// the tiles, sixteen SGEMMs again.

// wino_dy writes dM (16, T, O) for dy (n, h, w, O): each tile's A dY A^T,
// dY its 2x2 outputs (zero outside the image), A = [1 0; 1 1; 1 -1; 0 -1].
VEC static void wino_dy(float *dM, const float *dy, size_t n, size_t h, size_t w, size_t O, const float *zero) {
	size_t th = (h + 1) / 2, tw = (w + 1) / 2, T = n * th * tw;
	size_t t = 0;
	for (size_t b = 0; b < n; b++)
		for (size_t ty = 0; ty < th; ty++)
			for (size_t tx = 0; tx < tw; tx++, t++) {
				const float *p[2][2];
				for (size_t i = 0; i < 2; i++)
					for (size_t j = 0; j < 2; j++) {
						size_t yy = 2 * ty + i, xx = 2 * tx + j;
						p[i][j] = yy < h && xx < w ? dy + ((b * h + yy) * w + xx) * O : zero;
					}
				float *m = dM + t * O;
#pragma GCC ivdep
				for (size_t o = 0; o < O; o++) {
					float d00 = p[0][0][o], d01 = p[0][1][o], d10 = p[1][0][o], d11 = p[1][1][o];
					// rows: A dY
					float s[4][2] = {{d00, d01}, {d00 + d10, d01 + d11}, {d00 - d10, d01 - d11}, {-d10, -d11}};
					for (size_t i = 0; i < 4; i++) {
						m[(i * 4 + 0) * T * O + o] = s[i][0];
						m[(i * 4 + 1) * T * O + o] = s[i][0] + s[i][1];
						m[(i * 4 + 2) * T * O + o] = s[i][0] - s[i][1];
						m[(i * 4 + 3) * T * O + o] = -s[i][1];
					}
				}
			}
}

// k_wino_dw_part sets dU (16, C, O) to one part's sum over its tiles of
// V_k^T dM_k, for x (n, h, w, C) and dy (n, h, w, O); work holds
// k_wino_work_floats(n, h, w, C, O) + O floats.
void k_wino_dw_part(float *dU, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O,
                    float *work) {
	size_t T = n * ((h + 1) / 2) * ((w + 1) / 2);
	float *V = work, *M = V + 16 * T * C, *zero = M + 16 * T * O;
	memset(zero, 0, (C > O ? C : O) * sizeof(float));
	wino_input(V, x, n, h, w, C, zero);
	wino_dy(M, dy, n, h, w, O, zero);
	for (size_t k = 0; k < 16; k++)
		k_sgemm1(1, 0, C, O, T, 1, V + k * T * C, C, M + k * T * O, O, 0, dU + k * C * O, O);
}

// k_wino_weights_grad sets dwt (o, 3, 3, c) to G^T dU G of dU (16, c, o).
VEC void k_wino_weights_grad(float *dwt, const float *dU, size_t o, size_t c) {
	for (size_t a = 0; a < o; a++)
		for (size_t b = 0; b < c; b++) {
			float u[4][4], t[3][4];
			for (size_t k = 0; k < 16; k++) u[k / 4][k % 4] = dU[(k * c + b) * o + a];
			// G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1].
			for (size_t j = 0; j < 4; j++) {
				t[0][j] = u[0][j] + 0.5f * (u[1][j] + u[2][j]);
				t[1][j] = 0.5f * (u[1][j] - u[2][j]);
				t[2][j] = 0.5f * (u[1][j] + u[2][j]) + u[3][j];
			}
			for (size_t i = 0; i < 3; i++) {
				float *d = dwt + ((a * 3 + i) * 3) * c + b;
				d[0] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
				d[c] = 0.5f * (t[i][1] - t[i][2]);
				d[2 * c] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
			}
		}
}

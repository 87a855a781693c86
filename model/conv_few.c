// A 3x3, stride-1, padding-1 convolution of 1 to 3 input channels (a
// network's stem: Fashion-MNIST's one, CIFAR's three) computed directly,
// 16 output channels a vector. Through Winograd its products have 1 to 3
// as the inner dimension and its transforms move more than they compute
// (ResNet-20's 1 -> 16 stem on 64 images of 28x28, one thread: 0.66 ms
// forward and 0.70 ms weight gradient, 1.4% of a step, for 29 MFLOP);
// directly, every weight of an output block stays in a register and each
// pixel is 9*C multiply-adds. Parts of the batch run across the pool
// (par.c); no result depends on how the batch is cut but the weight
// gradient, which par.c sums over fixed parts in order.
#include <stddef.h>

#include "kernels.h"
#include "vec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VEC
#endif

// forward writes (or adds to, when add) outputs [o0, o0+16) of images
// [0, n) of y (n, h, w, O) from x (n, h, w, C) and wv, the 9*C weight
// vectors of those outputs ordered (i, j, c). Sums run in (i, j, c) order
// over the taps inside the image.
INL void forward(float *y, const float *x, const vf *wv, size_t n, size_t h, size_t w, size_t C, size_t O,
                 size_t o0, int add) {
	for (size_t b = 0; b < n; b++)
		for (size_t yy = 0; yy < h; yy++)
			for (size_t xx = 0; xx < w; xx++) {
				float *q = y + ((b * h + yy) * w + xx) * O + o0;
				vf acc = add ? LD(q) : (vf){0};
				int inside = yy > 0 && yy + 1 < h && xx > 0 && xx + 1 < w;
				for (size_t i = 0; i < 3; i++) {
					long iy = (long)yy + (long)i - 1;
					if (!inside && (iy < 0 || iy >= (long)h)) continue;
					for (size_t j = 0; j < 3; j++) {
						long ix = (long)xx + (long)j - 1;
						if (!inside && (ix < 0 || ix >= (long)w)) continue;
						const float *p = x + ((b * h + (size_t)iy) * w + (size_t)ix) * C;
						for (size_t c = 0; c < C; c++) acc += p[c] * wv[(i * 3 + j) * C + c];
					}
				}
				ST(q, acc);
			}
}

// k_few_forward_part: y (n, h, w, O) = x (n, h, w, C) convolved with wt
// (O, 3, 3, C), added to y when add; C is 1 to 3 and O a multiple of 16.
VEC void k_few_forward_part(float *y, const float *x, const float *wt, size_t n, size_t h, size_t w, size_t C,
                            size_t O, int add) {
	for (size_t o0 = 0; o0 < O; o0 += 16) {
		vf wv[27];
		for (size_t t = 0; t < 9 * C; t++)
			for (size_t k = 0; k < 16; k++) wv[t][k] = wt[(o0 + k) * 9 * C + t];
		switch (C) { // the count as a constant, so that the tap loops unroll
		case 1: forward(y, x, wv, n, h, w, 1, O, o0, add); break;
		case 2: forward(y, x, wv, n, h, w, 2, O, o0, add); break;
		default: forward(y, x, wv, n, h, w, 3, O, o0, add);
		}
	}
}

// dw adds to acc, the 9*C sums of outputs [o0, o0+16) ordered (i, j, c),
// each tap's products of x and dy over images [0, n), pixel by pixel.
INL void dw(vf *acc, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O, size_t o0) {
	for (size_t b = 0; b < n; b++)
		for (size_t yy = 0; yy < h; yy++)
			for (size_t xx = 0; xx < w; xx++) {
				vf g = LD(dy + ((b * h + yy) * w + xx) * O + o0);
				int inside = yy > 0 && yy + 1 < h && xx > 0 && xx + 1 < w;
				for (size_t i = 0; i < 3; i++) {
					long iy = (long)yy + (long)i - 1;
					if (!inside && (iy < 0 || iy >= (long)h)) continue;
					for (size_t j = 0; j < 3; j++) {
						long ix = (long)xx + (long)j - 1;
						if (!inside && (ix < 0 || ix >= (long)w)) continue;
						const float *p = x + ((b * h + (size_t)iy) * w + (size_t)ix) * C;
						for (size_t c = 0; c < C; c++) acc[(i * 3 + j) * C + c] += p[c] * g;
					}
				}
			}
}

// k_few_dw_part sets dwt (O, 3, 3, C) to the weight gradient over images
// [0, n) of x (n, h, w, C) and dy (n, h, w, O).
VEC void k_few_dw_part(float *dwt, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O) {
	for (size_t o0 = 0; o0 < O; o0 += 16) {
		vf acc[27] = {0};
		switch (C) {
		case 1: dw(acc, x, dy, n, h, w, 1, O, o0); break;
		case 2: dw(acc, x, dy, n, h, w, 2, O, o0); break;
		default: dw(acc, x, dy, n, h, w, 3, O, o0);
		}
		for (size_t t = 0; t < 9 * C; t++)
			for (size_t k = 0; k < 16; k++) dwt[(o0 + k) * 9 * C + t] = acc[t][k];
	}
}

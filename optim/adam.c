// One run of Adam's update in C, four parameters at a time: Go's loop
// took 135 ms a step for 30M parameters. Each lane does exactly the
// float32 operations of the scalar formula, in its order, with no fused
// multiply-add (fp-contract off) and the square root correctly rounded
// (sqrtps), so the results are the Go loop's, and PyTorch's float32
// arithmetic's, bit for bit.
#pragma GCC optimize("fp-contract=off")
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "adam.h"

#define STEP(k)                                                 \
	do {                                                        \
		float g = grad[k];                                      \
		b += g - g;                                             \
		float pk = p[k] * shrink;                               \
		g += l2 * pk;                                           \
		float mk = b1 * m[k] + c1 * g;                          \
		float vk = b2 * v[k] + c2 * g * g;                      \
		m[k] = mk;                                              \
		v[k] = vk;                                              \
		p[k] = pk - step * mk / (sqrtf(vk) * rbc2 + eps);       \
	} while (0)

// p *= shrink; g += l2 p; m = b1 m + c1 g; v = b2 v + c2 g^2;
// p -= step m / (sqrt(v) rbc2 + eps). Returns the sum of g-g over the
// run: 0 unless some gradient is NaN or infinite.
float k_adam(float *p, const float *grad, float *m, float *v, size_t n, float b1, float b2, float c1, float c2,
             float step, float rbc2, float eps, float shrink, float l2) {
	float b = 0;
	size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	typedef float v4 __attribute__((vector_size(16)));
	v4 bad = {0, 0, 0, 0};
	for (; i + 4 <= n; i += 4) {
		v4 g, pk, mk, vk;
		memcpy(&g, grad + i, 16);
		memcpy(&pk, p + i, 16);
		memcpy(&mk, m + i, 16);
		memcpy(&vk, v + i, 16);
		bad += g - g;
		pk = pk * shrink;
		g += l2 * pk;
		mk = b1 * mk + c1 * g;
		vk = b2 * vk + c2 * g * g;
		memcpy(m + i, &mk, 16);
		memcpy(v + i, &vk, 16);
		pk = pk - step * mk / (__builtin_ia32_sqrtps(vk) * rbc2 + eps);
		memcpy(p + i, &pk, 16);
	}
	b = bad[0] + bad[1] + bad[2] + bad[3];
#endif
	for (; i < n; i++) STEP(i);
	return b;
}

// The sum of squares of n floats, in double, in four interleaved partial
// sums (the order is fixed): clip_grad_norm_'s norm, vectorised.
double k_sumsq(const float *x, size_t n) {
	double s[4] = {0, 0, 0, 0};
	size_t i = 0;
	for (; i + 4 <= n; i += 4)
		for (int l = 0; l < 4; l++) s[l] += (double)x[i + l] * (double)x[i + l];
	for (; i < n; i++) s[0] += (double)x[i] * (double)x[i];
	return (s[0] + s[1]) + (s[2] + s[3]);
}

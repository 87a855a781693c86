// SGD's update in C, four parameters at a time: Go's loop, one value at a
// time and every value's g-g added to one running sum, was 0.3 ms of a
// 57 ms ResNet-20 step on one thread, on the rank's one thread while the
// pool's others wait. Each lane does exactly the float32 operations of
// the scalar formula (sgd.go), in its order, with no fused multiply-add
// (fp-contract off): the same bits.
#pragma GCC optimize("fp-contract=off")
#include <stddef.h>
#include <string.h>

#include "adam.h"

// k_sgd updates p from grad at rate lr, weight decay wd and momentum mu
// into buf: mode 0 without momentum (buf unused), 1 with, 2 Nesterov's.
// It returns the sum of g-g over the run: 0 unless some gradient is NaN
// or infinite.
float k_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float wd, float mu, int mode) {
	size_t i = 0;
	float b = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	typedef float v4 __attribute__((vector_size(16)));
	v4 bad = {0, 0, 0, 0};
	for (; i + 4 <= n; i += 4) {
		v4 g, pk, bk;
		memcpy(&g, grad + i, 16);
		memcpy(&pk, p + i, 16);
		bad += g - g;
		if (mode == 0) {
			pk -= lr * (g + wd * pk);
		} else {
			memcpy(&bk, buf + i, 16);
			g += wd * pk;
			bk = mu * bk + g;
			memcpy(buf + i, &bk, 16);
			pk -= lr * (mode == 2 ? g + mu * bk : bk);
		}
		memcpy(p + i, &pk, 16);
	}
	b = bad[0] + bad[1] + bad[2] + bad[3];
#endif
	for (; i < n; i++) {
		float g = grad[i];
		b += g - g;
		if (mode == 0) {
			p[i] -= lr * (g + wd * p[i]);
			continue;
		}
		g += wd * p[i];
		float bk = mu * buf[i] + g;
		buf[i] = bk;
		p[i] -= lr * (mode == 2 ? g + mu * bk : bk);
	}
	return b;
}

// train's CUDA kernels, compiled at start-up by NVRTC for the device's
// compute capability (package gpu embeds this file). Activations are NCHW
// on the GPU (cuDNN's native layout; the CPU path is NHWC): a layer's
// per-channel work is over (n, hw) with stride C*hw between samples.
// Grid-stride loops everywhere, so any launch size is correct.

#define LOOP(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)
// LOOP32 is LOOP for kernels that divide indices: 64-bit division is emulated
// (tens of instructions), 32-bit is cheap. The Go side checks sizes fit.
#define LOOP32(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" {

__global__ void fill(float *p, float v, long long n) { LOOP(i, n) p[i] = v; }

// dst += src (the ring's reduction, residual joins); src may be mapped host memory.
__global__ void add_to(float *dst, const float *src, long long n) { LOOP(i, n) dst[i] += src[i]; }

__global__ void scale(float *p, float a, long long n) { LOOP(i, n) p[i] *= a; }

// y[r, o] += b[o]: a Linear layer's bias, rows of out values.
__global__ void bias_rows(float *y, const float *b, int rows, int out) { LOOP32(i, rows * out) y[i] += b[i % out]; }

// y[b, c, p] += bias[c]: a convolution's bias on NCHW.
__global__ void bias_chan(float *y, const float *bias, int n, int C, int hw) {
	LOOP32(i, n * C * hw) y[i] += bias[(i / hw) % C];
}

// Block-wide sum of a double; every thread gets it.
__device__ double block_sum(double v) {
	__shared__ double part[32];
	for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	__syncthreads();
	if (lane == 0) part[warp] = v;
	__syncthreads();
	int nw = (blockDim.x + 31) >> 5;
	v = threadIdx.x < nw ? part[threadIdx.x] : 0;
	if (warp == 0)
		for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
	__shared__ double total;
	if (threadIdx.x == 0) total = v;
	__syncthreads();
	return total;
}

// db[c] += sum over (b, p) of dy[b, c, p]. Grid: (blocks per channel, C).
__global__ void bias_chan_grad(float *db, const float *dy, int n, int C, int hw) {
	int c = blockIdx.y, m = n * hw;
	double s = 0;
	LOOP32(j, m) {
		int b = j / hw;
		s += dy[(b * C + c) * hw + j - b * hw];
	}
	s = block_sum(s);
	if (threadIdx.x == 0) atomicAdd(db + c, (float)s);
}

__global__ void relu_fwd(float *y, const float *x, long long n) { LOOP(i, n) y[i] = x[i] > 0 ? x[i] : 0; }

// dx = dy where the output was positive.
__global__ void relu_bwd(float *dx, const float *dy, const float *y, long long n) { LOOP(i, n) dx[i] = y[i] > 0 ? dy[i] : 0; }

// y = max(a + b, 0): the residual join.
__global__ void add_relu(float *y, const float *a, const float *b, long long n) {
	LOOP(i, n) {
		float v = a[i] + b[i];
		y[i] = v > 0 ? v : 0;
	}
}

// k x k max pooling, stride k, NCHW; arg keeps the input offset of each maximum.
__global__ void maxpool_fwd(float *y, int *arg, const float *x, int nc, int h, int w, int k) {
	int oh = h / k, ow = w / k;
	LOOP32(i, nc * oh * ow) {
		int plane = i / (oh * ow);
		int q = i - plane * (oh * ow), r = q / ow, c = q - r * ow;
		int base = plane * h * w;
		int best = base + (r * k) * w + c * k;
		float m = x[best];
		for (int a = 0; a < k; a++)
			for (int b = 0; b < k; b++) {
				int j = base + (r * k + a) * w + c * k + b;
				if (x[j] > m) m = x[j], best = j;
			}
		y[i] = m;
		arg[i] = (int)(best - base);
	}
}

// Windows do not overlap: each dy goes to its maximum's place (dx cleared first).
__global__ void maxpool_bwd(float *dx, const float *dy, const int *arg, int nc, int h, int w, int k) {
	int oh = h / k, ow = w / k;
	LOOP32(i, nc * oh * ow) dx[(i / (oh * ow)) * h * w + arg[i]] = dy[i];
}

// Average over kh x kw windows with stride (kh, kw), NCHW (global pooling: kh = h, kw = w).
__global__ void avgpool_fwd(float *y, const float *x, int nc, int h, int w, int kh, int kw) {
	int oh = h / kh, ow = w / kw;
	float inv = 1.0f / (kh * kw);
	LOOP32(i, nc * oh * ow) {
		int plane = i / (oh * ow);
		int q = i - plane * (oh * ow), r = q / ow, c = q - r * ow;
		const float *p = x + plane * h * w + (r * kh) * w + c * kw;
		float s = 0;
		for (int a = 0; a < kh; a++)
			for (int b = 0; b < kw; b++) s += p[a * w + b];
		y[i] = s * inv;
	}
}

__global__ void avgpool_bwd(float *dx, const float *dy, int nc, int h, int w, int kh, int kw) {
	int oh = h / kh, ow = w / kw;
	float inv = 1.0f / (kh * kw);
	LOOP32(i, nc * h * w) {
		int plane = i / (h * w);
		int q = i - plane * (h * w), r = q / w / kh, c = q % w / kw;
		dx[i] = (r < oh && c < ow) ? dy[plane * oh * ow + r * ow + c] * inv : 0;
	}
}

// ---- BatchNorm (NCHW): statistics in double, as the CPU path ----

// s[c] += sum x, s[C+c] += sum x^2 over (b, p). Grid (blocks per channel, C).
__global__ void bn_stats(double *s, const float *x, int n, int C, int hw) {
	int c = blockIdx.y, m = n * hw;
	double a = 0, q = 0;
	LOOP32(j, m) {
		int b = j / hw;
		double v = x[(b * C + c) * hw + j - b * hw];
		a += v, q += v * v;
	}
	a = block_sum(a);
	q = block_sum(q);
	if (threadIdx.x == 0) atomicAdd(s + c, a), atomicAdd(s + C + c, q);
}

// From the sums and the count m: the mean as a float pair hi + lo, 1/std,
// gamma/std, and the running statistics' update (unbiased variance).
__global__ void bn_finalize(const double *s, double m, const float *gamma, float *rmean, float *rvar, float *mhi, float *mlo,
                            float *invstd, float *scale, int C, double momentum, double eps) {
	LOOP(c, C) {
		double mean = s[c] / m, var = s[C + c] / m - mean * mean;
		if (var < 0) var = 0;
		double is = 1 / sqrt(var + eps);
		mhi[c] = (float)mean;
		mlo[c] = (float)(mean - (double)mhi[c]);
		invstd[c] = (float)is;
		scale[c] = (float)((double)gamma[c] * is);
		double unb = m > 1 ? var * m / (m - 1) : var;
		rmean[c] = (float)((1 - momentum) * (double)rmean[c] + momentum * mean);
		rvar[c] = (float)((1 - momentum) * (double)rvar[c] + momentum * unb);
	}
}

__global__ void inc_i64(long long *p) { *p += 1; }

// Evaluation: scale = gamma / sqrt(running_var + eps).
__global__ void bn_eval_scale(float *scale, const float *gamma, const float *rvar, int C, float eps) {
	LOOP(c, C) scale[c] = gamma[c] / (float)sqrt((double)rvar[c] + eps);
}

// y = (x - mean)*scale + beta, then ReLU if asked.
__global__ void bn_apply(float *y, const float *x, const float *mean, const float *scale, const float *beta, int n,
                         int C, int hw, int relu) {
	LOOP32(i, n * C * hw) {
		int c = (i / hw) % C;
		float v = (x[i] - mean[c]) * scale[c] + beta[c];
		y[i] = relu && v < 0 ? 0 : v;
	}
}

// s[c] += sum d, s[C+c] += sum d*xhat; d is dy masked by y > 0 under relu.
__global__ void bn_grad_sums(double *s, const float *x, const float *dy, const float *y, const float *mhi,
                             const float *mlo, const float *invstd, int n, int C, int hw, int relu) {
	int c = blockIdx.y, m = n * hw;
	float hi = mhi[c], lo = mlo[c], is = invstd[c];
	double a = 0, p = 0;
	LOOP32(j, m) {
		int b = j / hw, i = (b * C + c) * hw + j - b * hw;
		float d = dy[i];
		if (relu && !(y[i] > 0)) d = 0;
		a += d;
		p += (double)(d * (((x[i] - hi) - lo) * is));
	}
	a = block_sum(a);
	p = block_sum(p);
	if (threadIdx.x == 0) atomicAdd(s + c, a), atomicAdd(s + C + c, p);
}

// dbeta += s[c], dgamma += s[C+c]: this rank's sums, before any reduction.
__global__ void bn_param_grads(float *dgamma, float *dbeta, const double *s, int C) {
	LOOP(c, C) dbeta[c] += (float)s[c], dgamma[c] += (float)s[C + c];
}

// The per-channel terms of dx = a*d + b*(x - mean) + k from global sums; m is the count.
__global__ void bn_dx_coef(float *a, float *b, float *k, const double *s, const float *gamma, const float *invstd, int C,
                           double m) {
	LOOP(c, C) {
		double g = (double)gamma[c] * invstd[c];
		a[c] = (float)g;
		b[c] = (float)(-g * invstd[c] * (s[C + c] / m));
		k[c] = (float)(-g * (s[c] / m));
	}
}

__global__ void bn_dx(float *dx, const float *dy, const float *x, const float *y, const float *mean, const float *a,
                      const float *b, const float *k, int n, int C, int hw, int relu) {
	LOOP32(i, n * C * hw) {
		int c = (i / hw) % C;
		float d = dy[i];
		if (relu && !(y[i] > 0)) d = 0;
		dx[i] = a[c] * d + b[c] * (x[i] - mean[c]) + k[c];
	}
}

// Softmax cross-entropy, one block of XENT_THREADS per row (the GPT's rows
// have 50257 classes: a thread per row left the GPU idle, 66 ms a step):
// dlogits = (softmax - onehot)/n, out[0] += loss, out[1] += correct
// (doubles). Each thread keeps a running maximum, its first position and
// the sum of exp(x - max) over its strided share of the row (the online
// softmax); the block combines them, ties going to the lower position as
// the CPU's argmax does.
#define XENT_THREADS 256

struct softmax_part {
	float m, s; // running maximum, sum of exp(x - m)
	int at;     // the maximum's first position
};

__device__ softmax_part softmax_join(softmax_part a, softmax_part b) {
	if (b.m > a.m || (b.m == a.m && b.at < a.at)) {
		softmax_part t = a;
		a = b, b = t;
	}
	// a has the larger maximum (an empty part has s = 0).
	if (b.s > 0) a.s += b.s * expf(b.m - a.m);
	return a;
}

__global__ void xent(float *dlogits, double *out, const float *logits, const int *labels, int n, int classes) {
	__shared__ softmax_part warps[XENT_THREADS / 32];
	__shared__ float lse_row;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int i = blockIdx.x; i < n; i += gridDim.x) {
		const float *row = logits + i * (long long)classes;
		softmax_part p = {-3.0e38f, 0, classes}; // empty: below any logit
		for (int j = threadIdx.x; j < classes; j += blockDim.x) {
			float x = row[j];
			if (x > p.m) {
				p.s = p.s * expf(p.m - x) + 1, p.m = x, p.at = j;
			} else {
				p.s += expf(x - p.m);
				if (p.at == classes) p.at = j; // x is NaN: keep a position
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			softmax_part q = {__shfl_xor_sync(0xffffffff, p.m, o), __shfl_xor_sync(0xffffffff, p.s, o),
			                  __shfl_xor_sync(0xffffffff, p.at, o)};
			p = softmax_join(p, q);
		}
		if (lane == 0) warps[warp] = p;
		__syncthreads();
		if (threadIdx.x == 0) {
			softmax_part t = warps[0];
			for (int w = 1; w < (int)(blockDim.x >> 5); w++) t = softmax_join(t, warps[w]);
			int y = labels[i];
			double lse = (double)t.m + log((double)t.s);
			atomicAdd(out, lse - (double)row[y]);
			if (t.at == y) atomicAdd(out + 1, 1.0);
			lse_row = (float)lse;
		}
		__syncthreads();
		if (dlogits) {
			float *d = dlogits + i * (long long)classes, lse = lse_row, inv = 1.0f / n;
			int y = labels[i];
			for (int j = threadIdx.x; j < classes; j += blockDim.x) d[j] = expf(row[j] - lse) * inv - (j == y ? inv : 0);
		}
		__syncthreads(); // warps[] and lse_row are reused by the next row
	}
}

// ---- optimizers: torch.optim.SGD (dampening 0) and Adam/AdamW, as package optim ----

// bad[0] += g - g over the gradients: 0 unless one is NaN or Inf.
__global__ void sgd(float *p, const float *grad, float *buf, float lr, float mu, float wd, int nesterov, long long n,
                    float *bad) {
	float z = 0;
	LOOP(i, n) {
		float g = grad[i];
		z += g - g;
		g += wd * p[i];
		if (buf) {
			float b = mu * buf[i] + g;
			buf[i] = b;
			g = nesterov ? g + mu * b : b;
		}
		p[i] -= lr * g;
	}
	if (z != 0) atomicAdd(bad, z);
}

// Adam/AdamW exactly as package optim computes it: b1c = 1-beta1, b2c =
// 1-beta2 (rounded once from double), step = lr/(1-beta1^t), rbc2 =
// 1/sqrt(1-beta2^t), shrink = 1-lr*wd and wd = 0 for AdamW.
__global__ void adam(float *p, const float *grad, float *m1, float *m2, float b1, float b2, float b1c, float b2c,
                     float step, float rbc2, float eps, float wd, float shrink, long long n, float *bad) {
	float z = 0;
	LOOP(i, n) {
		float g = grad[i];
		z += g - g;
		float q = p[i] * shrink;
		g += wd * q;
		float a = b1 * m1[i] + b1c * g, v = b2 * m2[i] + b2c * g * g;
		m1[i] = a, m2[i] = v;
		p[i] = q - step * a / ((float)sqrt((double)v) * rbc2 + eps);
	}
	if (z != 0) atomicAdd(bad, z);
}

// s[0] += sum of squares (gradient clipping).
__global__ void sumsq(double *s, const float *x, long long n) {
	double a = 0;
	LOOP(i, n) a += (double)x[i] * x[i];
	a = block_sum(a);
	if (threadIdx.x == 0) atomicAdd(s, a);
}

} // extern "C"

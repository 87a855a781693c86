// The GPT's kernels (package gpu, gpt.go), compiled with kernels.cu: its
// LOOP macros come from there. Activations are rows of C values, one per
// position, as on the CPU (model/transformer_layers.go): a sample of T
// positions is (T, C), and qkv is (T, 3C) with head h's q, k and v at
// columns h*hd, C + h*hd and 2C + h*hd.

extern "C" {

__device__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
	return v;
}

// y[r, :] = wte[id[r], :] + wpe[r % T, :]; ids are float32 (exact below
// 2^24, checked by the data reader).
__global__ void embed_fwd(float *y, const float *ids, const float *wte, const float *wpe, int rows, int T, int C) {
	LOOP(i, (long long)rows * C) {
		long long r = i / C;
		int c = (int)(i - r * C);
		y[i] = wte[(long long)ids[r] * C + c] + wpe[(r % T) * C + c];
	}
}

// dwpe[t, c] += sum over samples of dy[s*T + t, c], in sample order.
__global__ void embed_bwd_pos(float *dwpe, const float *dy, int n, int T, int C) {
	LOOP32(i, T * C) {
		float s = 0;
		for (int b = 0; b < n; b++) s += dy[(long long)b * T * C + i];
		dwpe[i] += s;
	}
}

// dwte[id[r], c] += dy[r, c]. Rows with the same token add with atomics,
// in no fixed order: the last bits may differ from run to run (as
// PyTorch's embedding backward on CUDA).
__global__ void embed_bwd_tok(float *dwte, const float *dy, const float *ids, int rows, int C) {
	LOOP(i, (long long)rows * C) {
		long long r = i / C;
		int c = (int)(i - r * C);
		atomicAdd(dwte + (long long)ids[r] * C + c, dy[i]);
	}
}

// LayerNorm forward, one warp per row (blocks of 8 warps): y = (x - mean)
// rstd w + b, keeping mean and rstd per row for backward.
__global__ void ln_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int rows,
                       int C) {
	int lane = threadIdx.x & 31, r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= rows) return;
	const float *xr = x + (long long)r * C;
	float s = 0;
	for (int c = lane; c < C; c += 32) s += xr[c];
	float m = warp_sum(s) / C;
	float v = 0;
	for (int c = lane; c < C; c += 32) {
		float d = xr[c] - m;
		v += d * d;
	}
	float rs = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
	float *yr = y + (long long)r * C;
	for (int c = lane; c < C; c += 32) yr[c] = (xr[c] - m) * rs * w[c] + b[c];
	if (lane == 0) mean[r] = m, rstd[r] = rs;
}

// LayerNorm's input gradient, one warp per row: with g = dy w and xhat =
// (x - mean) rstd, dx = rstd (g - mean(g) - xhat mean(g xhat)), written,
// or added with add (a residual join's gradient).
__global__ void ln_bwd_dx(float *dx, const float *dy, const float *x, const float *w, const float *mean,
                          const float *rstd, int rows, int C, int add) {
	int lane = threadIdx.x & 31, r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (r >= rows) return;
	const float *xr = x + (long long)r * C, *dr = dy + (long long)r * C;
	float m = mean[r], rs = rstd[r], sg = 0, sgx = 0;
	for (int c = lane; c < C; c += 32) {
		float g = dr[c] * w[c];
		sg += g;
		sgx += g * (xr[c] - m) * rs;
	}
	sg = warp_sum(sg) / C;
	sgx = warp_sum(sgx) / C;
	float *o = dx + (long long)r * C;
	for (int c = lane; c < C; c += 32) {
		float v = rs * (dr[c] * w[c] - sg - (xr[c] - m) * rs * sgx);
		o[c] = add ? o[c] + v : v;
	}
}

// LayerNorm's parameter gradients, first stage: block (32, 8) sums 32
// columns over its chunk of rows; part[chunk][0][c] the weight's, part
// [chunk][1][c] the bias's. ln_param_sum adds the chunks in order, so the
// result does not depend on scheduling.
__global__ void ln_param_part(float *part, const float *dy, const float *x, const float *mean, const float *rstd,
                              int rows, int C, int per) {
	__shared__ float sw[8][33], sb[8][33];
	int tx = threadIdx.x & 31, ty = threadIdx.x >> 5, c = blockIdx.x * 32 + tx, chunk = blockIdx.y;
	int r0 = chunk * per, r1 = min(rows, r0 + per);
	float a = 0, b = 0;
	if (c < C)
		for (int r = r0 + ty; r < r1; r += 8) {
			float d = dy[(long long)r * C + c];
			a += d * (x[(long long)r * C + c] - mean[r]) * rstd[r];
			b += d;
		}
	sw[ty][tx] = a, sb[ty][tx] = b;
	__syncthreads();
	if (ty == 0 && c < C) {
		for (int k = 1; k < 8; k++) a += sw[k][tx], b += sb[k][tx];
		part[(long long)chunk * 2 * C + c] = a;
		part[(long long)chunk * 2 * C + C + c] = b;
	}
}

__global__ void ln_param_sum(float *dw, float *db, const float *part, int chunks, int C) {
	LOOP32(c, C) {
		float a = 0, b = 0;
		for (int k = 0; k < chunks; k++) a += part[k * 2 * C + c], b += part[k * 2 * C + C + c];
		dw[c] += a;
		db[c] += b;
	}
}

// GELU, the tanh approximation (torch's gelu(approximate="tanh")).
__global__ void gelu_fwd(float *y, const float *x, long long n) {
	const float k = 0.7978845608028654f; // sqrt(2/pi)
	LOOP(i, n) {
		float v = x[i];
		y[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
	}
}

__global__ void gelu_bwd(float *dx, const float *dy, const float *x, long long n) {
	const float k = 0.7978845608028654f;
	LOOP(i, n) {
		float v = x[i], th = tanhf(k * (v + 0.044715f * v * v * v));
		dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * v * v));
	}
}

// y = a + b (a residual join).
__global__ void add2(float *y, const float *a, const float *b, long long n) { LOOP(i, n) y[i] = a[i] + b[i]; }

// Causal attention in the flash-attention manner (Dao et al. 2022): the
// probabilities are never stored. One warp per (sample, query row i,
// head): an online softmax over the keys j <= i, keeping the running
// maximum and sum, and the output accumulated in registers; only the
// row's log-sum-exp is kept for backward. Lane l holds dimensions l,
// l+32, ... of the head (hd <= 128). Grid: (n*T, H), blocks of 32.
#define HD_LANES 4

__global__ void attn_fwd(float *o, float *lse, const float *qkv, int T, int C, int H, int hd, float scale) {
	int row = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
	int s = row / T, i = row - s * T;
	long long base = (long long)s * T * 3 * C;
	const float *qi = qkv + base + (long long)i * 3 * C + h * hd;
	float q[HD_LANES], acc[HD_LANES];
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32) q[k] = d < hd ? qi[d] : 0, acc[k] = 0;
	float m = -3.0e38f, l = 0;
	for (int j = 0; j <= i; j++) {
		const float *kj = qkv + base + (long long)j * 3 * C + C + h * hd, *vj = kj + C;
		float part = 0;
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) part += q[k] * kj[d];
		float sc = warp_sum(part) * scale, mn = fmaxf(m, sc), corr = expf(m - mn), p = expf(sc - mn);
		l = l * corr + p;
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) acc[k] = acc[k] * corr + p * vj[d];
		m = mn;
	}
	float *oi = o + (long long)row * C + h * hd;
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
		if (d < hd) oi[d] = acc[k] / l;
	if (lane == 0) lse[((long long)s * H + h) * T + i] = m + logf(l);
}

// Attention backward, first pass, one warp per query row: D_i = dO_i . O_i
// (= the row sum of P dP), kept for the second pass, and dQ_i = scale
// sum_j P_ij (dO_i . V_j - D_i) K_j, with P recomputed from the
// log-sum-exp.
__global__ void attn_bwd_q(float *dqkv, float *D, const float *qkv, const float *o, const float *dout,
                           const float *lse, int T, int C, int H, int hd, float scale) {
	int row = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
	int s = row / T, i = row - s * T;
	long long base = (long long)s * T * 3 * C;
	const float *qi = qkv + base + (long long)i * 3 * C + h * hd;
	const float *oi = o + (long long)row * C + h * hd, *doi = dout + (long long)row * C + h * hd;
	float q[HD_LANES], g[HD_LANES], dq[HD_LANES], dd = 0;
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32) {
		q[k] = d < hd ? qi[d] : 0, g[k] = d < hd ? doi[d] : 0, dq[k] = 0;
		if (d < hd) dd += g[k] * oi[d];
	}
	dd = warp_sum(dd);
	long long li = ((long long)s * H + h) * T + i;
	float L = lse[li];
	for (int j = 0; j <= i; j++) {
		const float *kj = qkv + base + (long long)j * 3 * C + C + h * hd, *vj = kj + C;
		float a = 0, b = 0;
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) a += q[k] * kj[d], b += g[k] * vj[d];
		float p = expf(warp_sum(a) * scale - L), ds = p * (warp_sum(b) - dd);
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) dq[k] += ds * kj[d];
	}
	float *dqi = dqkv + base + (long long)i * 3 * C + h * hd;
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
		if (d < hd) dqi[d] = dq[k] * scale;
	if (lane == 0) D[li] = dd;
}

// Attention backward, second pass, one warp per key row j: dK_j = scale
// sum_{i >= j} P_ij (dO_i . V_j - D_i) Q_i and dV_j = sum_{i >= j} P_ij
// dO_i. Each key's sums are its warp's alone: no atomics.
__global__ void attn_bwd_kv(float *dqkv, const float *D, const float *qkv, const float *dout, const float *lse, int T,
                            int C, int H, int hd, float scale) {
	int row = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
	int s = row / T, j = row - s * T;
	long long base = (long long)s * T * 3 * C;
	const float *kj = qkv + base + (long long)j * 3 * C + C + h * hd, *vj = kj + C;
	float kk[HD_LANES], vv[HD_LANES], dk[HD_LANES], dv[HD_LANES];
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
		kk[k] = d < hd ? kj[d] : 0, vv[k] = d < hd ? vj[d] : 0, dk[k] = 0, dv[k] = 0;
	for (int i = j; i < T; i++) {
		const float *qi = qkv + base + (long long)i * 3 * C + h * hd;
		const float *doi = dout + ((long long)s * T + i) * C + h * hd;
		float a = 0, b = 0;
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) a += qi[d] * kk[k], b += doi[d] * vv[k];
		long long li = ((long long)s * H + h) * T + i;
		float p = expf(warp_sum(a) * scale - lse[li]), ds = p * (warp_sum(b) - D[li]);
		for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
			if (d < hd) dk[k] += ds * qi[d], dv[k] += p * doi[d];
	}
	float *dkj = dqkv + base + (long long)j * 3 * C + C + h * hd, *dvj = dkj + C;
	for (int k = 0, d = lane; k < HD_LANES; k++, d += 32)
		if (d < hd) dkj[d] = dk[k] * scale, dvj[d] = dv[k];
}

} // extern "C"

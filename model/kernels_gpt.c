#pragma GCC optimize("no-trapping-math") // lets the clamps below vectorise (as selects)
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

// The GPT's element-wise kernels: cross-entropy over the vocabulary,
// GELU, LayerNorm, the causal softmax and its backward, bias gradients.
// Like kernels.c they are compiled for several instruction sets and
// picked at load time; here AVX-512 too (the exp of the cross-entropy ran
// 20% faster with it: BenchmarkXent, 40-47 against 51-55 ms for 1024 x
// 50257 logits). They allocate nothing.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VEC
#endif

// fexp is e^x for float x, in a form the compiler vectorises (no call,
// no table): x = n ln2 + r with |r| <= ln2/2, Cephes' degree-6 polynomial
// for e^r, and 2^n put into the exponent bits. Its error is within 2 ulp
// of expf's over [-87, 88]; below -87 it returns 0 (e^-87 is 1.6e-38, the
// smallest normal float's order), which is what a softmax wants.
static inline float fexp(float x) {
	const float lo = -87.0f, hi = 88.0f;
	int under = x < lo;
	x = x < lo ? lo : x;
	x = x > hi ? hi : x;
	float n = floorf(x * 1.44269504088896341f + 0.5f);
	float r = x - n * 0.693359375f;  // ln2 split in two: n*C1 is exact
	r = r - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	union { int32_t i; float f; } s = {((int32_t)n + 127) << 23};
	return under ? 0.0f : p * s.f;
}

// ftanh is tanh by fexp: 1 - 2/(e^2x + 1), with |x| capped at 9 where
// tanh is 1 to float precision. Near 0 its absolute error is a few 1e-8,
// which is what GELU's x/2 (1 + tanh) needs.
static inline float ftanh(float x) {
	x = x > 9.0f ? 9.0f : (x < -9.0f ? -9.0f : x);
	return 1.0f - 2.0f / (fexp(2.0f * x) + 1.0f);
}

// Reductions in LANES independent partial results, so that the compiler
// vectorises them without reordering float sums it was not allowed to
// (no -ffast-math): the order is fixed, the same on every machine.
#define LANES 16

static inline float lanes_max(const float *v, size_t n) {
	float acc[LANES];
	size_t j = 0;
	for (int l = 0; l < LANES; l++) acc[l] = v[0];
	for (; j + LANES <= n; j += LANES)
		for (int l = 0; l < LANES; l++) acc[l] = v[j + l] > acc[l] ? v[j + l] : acc[l];
	float m = acc[0];
	for (int l = 1; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
	for (; j < n; j++) m = v[j] > m ? v[j] : m;
	return m;
}

static inline float lanes_sum(const float *acc) {
	float s = 0;
	for (int l = 0; l < LANES; l++) s += acc[l];
	return s;
}

// sum of e^(v-m) over n values.
static inline float lanes_exp(const float *v, size_t n, float m) {
	float acc[LANES] = {0};
	size_t j = 0;
	for (; j + LANES <= n; j += LANES)
		for (int l = 0; l < LANES; l++) acc[l] += fexp(v[j + l] - m);
	float s = lanes_sum(acc);
	for (; j < n; j++) s += fexp(v[j] - m);
	return s;
}

// d = e^(v-m) (d may be v) and their sum.
static inline float lanes_exp_store(float *d, const float *v, size_t n, float m) {
	float acc[LANES] = {0};
	size_t j = 0;
	for (; j + LANES <= n; j += LANES)
		for (int l = 0; l < LANES; l++) {
			float e = fexp(v[j + l] - m);
			d[j + l] = e;
			acc[l] += e;
		}
	float s = lanes_sum(acc);
	for (; j < n; j++) {
		float e = fexp(v[j] - m);
		d[j] = e;
		s += e;
	}
	return s;
}

// sum of a*b over n values.
static inline float lanes_dot(const float *a, const float *b, size_t n) {
	float acc[LANES] = {0};
	size_t j = 0;
	for (; j + LANES <= n; j += LANES)
		for (int l = 0; l < LANES; l++) acc[l] += a[j + l] * b[j + l];
	float s = lanes_sum(acc);
	for (; j < n; j++) s += a[j] * b[j];
	return s;
}

// Softmax cross-entropy of rows of V logits against labels, as torch's
// cross_entropy: for each row the loss log(sum e^(v-max)) + max - v[y]
// is added to *loss (in double), and *correct counts rows whose first
// largest logit is the label's. With d (which may be the logits
// themselves: the gradient overwrites them, saving a buffer the size of
// the logits), d = (softmax - onehot) * scale. exp is taken once per
// logit; its sum is formed in float over 1024 values, then added in
// double.
VEC void k_xent(float *d, const float *logits, const int32_t *labels, size_t rows, size_t V, float scale,
                double *loss, int64_t *correct) {
	for (size_t r = 0; r < rows; r++) {
		const float *v = logits + r * V;
		size_t y = (size_t)labels[r];
		float m = lanes_max(v, V);
		float vy = v[y];
		if (vy == m) {
			size_t first = 0;
			while (v[first] != m) first++;
			*correct += first == y;
		}
		double sum = 0;
		float *dr = d ? d + r * V : NULL;
		// The next row's logits come from memory (the head's output, far
		// larger than the caches) while this row's exps run from L2: ask
		// for them a chunk at a time here, so that its max pass finds
		// them in cache. Only loads move; the arithmetic is unchanged.
		const float *next = r + 1 < rows ? v + V : NULL;
		for (size_t j0 = 0; j0 < V; j0 += 1024) {
			size_t n = j0 + 1024 < V ? 1024 : V - j0;
			if (next)
				for (size_t b = 0; b < n; b += 16) __builtin_prefetch(next + j0 + b, 0, 3);
			sum += dr ? lanes_exp_store(dr + j0, v + j0, n, m) : lanes_exp(v + j0, n, m);
		}
		if (dr) {
			float k = (float)(scale / sum);
			for (size_t j = 0; j < V; j++) dr[j] *= k;
			dr[y] -= scale;
		}
		*loss += log(sum) + (double)m - (double)vy;
	}
}

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)

// y = x/2 (1 + tanh(k (x + 0.044715 x^3))), torch's gelu(approximate="tanh").
VEC void k_gelu(float *y, const float *x, size_t n) {
	for (size_t i = 0; i < n; i++) {
		float u = x[i];
		y[i] = 0.5f * u * (1.0f + ftanh(GELU_K * (u + 0.044715f * u * u * u)));
	}
}

// dx = dy * gelu'(x): (1 + th)/2 + x/2 (1 - th^2) k (1 + 3 0.044715 x^2).
VEC void k_gelu_backward(float *dx, const float *dy, const float *x, size_t n) {
	for (size_t i = 0; i < n; i++) {
		float u = x[i];
		float th = ftanh(GELU_K * (u + 0.044715f * u * u * u));
		float g = 0.5f * (1.0f + th) + 0.5f * u * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
		dx[i] = dy[i] * g;
	}
}

// LayerNorm forward over rows of C: y = (x - mean) rstd w + b, keeping
// each row's mean and rstd = 1/sqrt(var + eps) (biased variance, taken
// about the mean: two passes, float lanes, double totals).
VEC void k_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                     size_t rows, size_t C, float eps) {
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		float acc[LANES] = {0};
		size_t c = 0;
		for (; c + LANES <= C; c += LANES)
			for (int l = 0; l < LANES; l++) acc[l] += xr[c + l];
		float s = lanes_sum(acc);
		for (; c < C; c++) s += xr[c];
		float mu = (float)((double)s / C);
		for (int l = 0; l < LANES; l++) acc[l] = 0;
		for (c = 0; c + LANES <= C; c += LANES)
			for (int l = 0; l < LANES; l++) {
				float dv = xr[c + l] - mu;
				acc[l] += dv * dv;
			}
		float v = lanes_sum(acc);
		for (; c < C; c++) v += (xr[c] - mu) * (xr[c] - mu);
		float rs = (float)(1.0 / sqrt((double)v / C + eps));
		float *yr = y + r * C;
		for (c = 0; c < C; c++) yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
		mean[r] = mu;
		rstd[r] = rs;
	}
}

// ln_param_sums adds row r's dy xhat to dw and dy to db over columns
// [c0, c1): the parameter sums of k_layernorm_backward, one inline
// expression for its row loop and for k_layernorm_sums' columns, so that
// both give the same bits.
static inline __attribute__((always_inline)) void ln_param_sums(float *dw, float *db, const float *dr, const float *xr,
                                                               float mu, float rs, size_t c0, size_t c1) {
	for (size_t c = c0; c < c1; c++) {
		dw[c] += dr[c] * (xr[c] - mu) * rs;
		db[c] += dr[c];
	}
}

// k_layernorm_sums is k_layernorm_backward's dw and db alone, for
// columns [c0, c1): each column's sums over the rows in row order, as
// that loop takes them, so a pass may cut them by columns (par.c).
VEC void k_layernorm_sums(float *dw, float *db, const float *dy, const float *x, const float *mean,
                          const float *rstd, size_t rows, size_t C, size_t c0, size_t c1) {
	for (size_t r = 0; r < rows; r++) ln_param_sums(dw, db, dy + r * C, x + r * C, mean[r], rstd[r], c0, c1);
}

// LayerNorm backward with xhat = (x - mean) rstd, g = dy w:
// dx = rstd (g - mean(g) - xhat mean(g xhat)) (set, or added when add),
// dw += dy xhat, db += dy. dx may be NULL (no input gradient); dw NULL:
// dx alone (db is then not read).
VEC void k_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                              const float *mean, const float *rstd, size_t rows, size_t C, int add) {
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C, *dr = dy + r * C;
		float mu = mean[r], rs = rstd[r];
		float ag[LANES] = {0}, agx[LANES] = {0};
		size_t c = 0;
		for (; c + LANES <= C; c += LANES)
			for (int l = 0; l < LANES; l++) {
				float xh = (xr[c + l] - mu) * rs;
				float g = dr[c + l] * w[c + l];
				ag[l] += g;
				agx[l] += g * xh;
			}
		float mg = lanes_sum(ag), mgx = lanes_sum(agx);
		for (; c < C; c++) {
			float xh = (xr[c] - mu) * rs;
			float g = dr[c] * w[c];
			mg += g;
			mgx += g * xh;
		}
		if (dw) ln_param_sums(dw, db, dr, xr, mu, rs, 0, C);
		mg /= (float)C;
		mgx /= (float)C;
		if (!dx) continue;
		float *o = dx + r * C;
		if (add) {
			for (c = 0; c < C; c++) o[c] += rs * (dr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
		} else {
			for (c = 0; c < C; c++) o[c] = rs * (dr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
		}
	}
}

// Row i of the (T, T) scores becomes the softmax of its first i+1
// entries; the rest are zeroed.
VEC void k_causal_softmax(float *p, size_t T) {
	for (size_t i = 0; i < T; i++) {
		float *row = p + i * T;
		float m = lanes_max(row, i + 1);
		float k = 1.0f / lanes_exp_store(row, row, i + 1, m);
		for (size_t j = 0; j <= i; j++) row[j] *= k;
		for (size_t j = i + 1; j < T; j++) row[j] = 0;
	}
}

// The softmax's backward in place on dp: for row i, dS = P (dP -
// sum_j P dP) scale over j <= i, zeros after.
VEC void k_causal_softmax_backward(float *dp, const float *p, size_t T, float scale) {
	for (size_t i = 0; i < T; i++) {
		const float *pr = p + i * T;
		float *dr = dp + i * T;
		float dot = lanes_dot(pr, dr, i + 1);
		for (size_t j = 0; j <= i; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
		for (size_t j = i + 1; j < T; j++) dr[j] = 0;
	}
}

// db[c] += sum over rows of dy[r][c]: a bias gradient.
VEC void k_colsum(float *db, const float *dy, size_t rows, size_t C) { k_colsum_cols(db, dy, rows, C, 0, C); }

// k_colsum_cols is k_colsum for columns [c0, c1): each column's sum in
// row order, so a pass may cut it by columns (par.c) with the same bits.
VEC void k_colsum_cols(float *db, const float *dy, size_t rows, size_t C, size_t c0, size_t c1) {
	for (size_t r = 0; r < rows; r++) {
		const float *dr = dy + r * C;
		for (size_t c = c0; c < c1; c++) db[c] += dr[c];
	}
}

// y = a + b over n values (a residual join; y may be a or b).
VEC void k_add(float *y, const float *a, const float *b, size_t n) {
	for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

// The embedding's forward over rows [r0, r1) (a part of par.c's pass,
// k_embed_par): y[r] = wte[id_r] + wpe[r mod T] for rows of C, the token
// ids as floats (exact below 2^24).
VEC void k_embed_rows(float *y, const float *ids, const float *wte, const float *wpe, size_t r0, size_t r1, size_t T,
                      size_t C) {
	for (size_t r = r0; r < r1; r++) {
		const float *tok = wte + (size_t)ids[r] * C, *pos = wpe + (r % T) * C;
		float *yr = y + r * C;
		for (size_t c = 0; c < C; c++) yr[c] = tok[c] + pos[c];
	}
}

// Its backward: dy's rows added into the rows of the tokens and positions
// used, in row order (a token used twice gets both, in that order).
VEC void k_embed_backward(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T, size_t C) {
	k_embed_backward_cols(dwte, dwpe, dy, ids, rows, T, C, 0, C);
}

// k_embed_backward_cols is k_embed_backward's columns [c0, c1): each
// column's values still added in row order, so any cut of the columns
// gives the same bits (par.c's pass).
VEC void k_embed_backward_cols(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T,
                               size_t C, size_t c0, size_t c1) {
	for (size_t r = 0; r < rows; r++) {
		float *tok = dwte + (size_t)ids[r] * C, *pos = dwpe + (r % T) * C;
		const float *d = dy + r * C;
		for (size_t c = c0; c < c1; c++) {
			tok[c] += d[c];
			pos[c] += d[c];
		}
	}
}

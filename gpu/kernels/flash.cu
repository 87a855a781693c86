// Causal attention in tiles, heads of up to 64 dimensions (every GPT-2
// size), in fp32 FFMA: flash attention as Dao et al. (2022, 2023) lay it
// out. Compiled after gpt.cu (package gpu, gpt.go); qkv is (T, 3C) per
// sample with head h's q, k and v at columns h*hd, C + h*hd, 2C + h*hd.
//
// A block of 256 threads takes one (sample, head) and 64 rows: query rows
// (forward, dQ) or key rows (dK, dV). It walks the tiles of 64 on the other
// side through shared memory; the probabilities never leave the block.
// Thread (tx, ty) = (t % 16, t / 16) computes rows ty + 16i and columns
// tx + 16j (i, j < 4) of each 64 x 64 product, so one block's 16 threads
// share a row: its maximum and sum are half-warp shuffles.
//
// Tiles in shared memory are 64 rows of 64 values padded to 65: a warp
// reading a column (two rows, 16 columns) or a row hits distinct banks.
// Columns past hd are zero, so a smaller head costs what 64 does.
//
// Backward is two kernels, as the warp-per-row ones in gpt.cu: flash_bwd_q
// (D = rowsum(dO * O), dQ) then flash_bwd_kv (dK, dV), each output summed
// by one block alone: no atomics, the same bits every run.

#define FT 64                                 // tile rows and head dimensions
#define FLD 65                                // a tile row in shared memory
#define FTILE (FT * FLD)                      // floats per tile
#define FMASK -3.0e38f                        // a masked score: below any real one
#define FUNROLL _Pragma("unroll")

#ifndef DYN_SHARED
#define DYN_SHARED(T, name) extern __shared__ T name[]
#endif

extern "C" {

// tile_load: dst = rows [0, 64) of src (row stride ld floats); zero past
// rows (the sequence's end) and past hd.
__device__ void tile_load(float *dst, const float *src, long long ld, int rows, int hd) {
	for (int e = threadIdx.x; e < FT * FT; e += blockDim.x) {
		int r = e >> 6, d = e & 63;
		dst[r * FLD + d] = r < rows && d < hd ? src[r * ld + d] : 0.f;
	}
}

// s[i][j] = A[ty + 16i] . B[tx + 16j] over the 64 columns.
__device__ void tile_abt(float s[4][4], const float *A, const float *B, int tx, int ty) {
	FUNROLL for (int i = 0; i < 4; i++) FUNROLL for (int j = 0; j < 4; j++) s[i][j] = 0;
#pragma unroll 8
	for (int d = 0; d < FT; d++) {
		float a[4], b[4];
		FUNROLL for (int i = 0; i < 4; i++) a[i] = A[(ty + 16 * i) * FLD + d];
		FUNROLL for (int j = 0; j < 4; j++) b[j] = B[(tx + 16 * j) * FLD + d];
		FUNROLL for (int i = 0; i < 4; i++) FUNROLL for (int j = 0; j < 4; j++) s[i][j] += a[i] * b[j];
	}
}

// acc[i][u] += sum_k A[ty + 16i][k] B[k][tx + 16u].
__device__ void tile_ab(float acc[4][4], const float *A, const float *B, int tx, int ty) {
#pragma unroll 8
	for (int k = 0; k < FT; k++) {
		float a[4], b[4];
		FUNROLL for (int i = 0; i < 4; i++) a[i] = A[(ty + 16 * i) * FLD + k];
		FUNROLL for (int u = 0; u < 4; u++) b[u] = B[k * FLD + tx + 16 * u];
		FUNROLL for (int i = 0; i < 4; i++) FUNROLL for (int u = 0; u < 4; u++) acc[i][u] += a[i] * b[u];
	}
}

// acc[i][u] += sum_r A[r][ty + 16i] B[r][tx + 16u].
__device__ void tile_atb(float acc[4][4], const float *A, const float *B, int tx, int ty) {
#pragma unroll 8
	for (int r = 0; r < FT; r++) {
		float a[4], b[4];
		FUNROLL for (int i = 0; i < 4; i++) a[i] = A[r * FLD + ty + 16 * i];
		FUNROLL for (int u = 0; u < 4; u++) b[u] = B[r * FLD + tx + 16 * u];
		FUNROLL for (int i = 0; i < 4; i++) FUNROLL for (int u = 0; u < 4; u++) acc[i][u] += a[i] * b[u];
	}
}

// The 16 threads of a row (one half-warp) combine their values.
__device__ float row_max(float v) {
	for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
	return v;
}
__device__ float row_sum(float v) {
	for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
	return v;
}

// p_ds recomputes a tile's probabilities from the rows' log-sum-exp L,
// zero past the causal mask and the sequence's end, and writes dS = P (dP
// - D) (and P, unless Ps is null) for query rows q0 + ty + 16i and keys
// k0 + tx + 16j: both backward kernels' step between their products.
__device__ void p_ds(float *Ps, float *dSs, const float sc[4][4], const float dp[4][4], const float L[4],
                     const float Dr[4], int q0, int k0, int T, float scale, int tx, int ty) {
	FUNROLL for (int i = 0; i < 4; i++) {
		int r = q0 + ty + 16 * i;
		FUNROLL for (int j = 0; j < 4; j++) {
			int c = k0 + tx + 16 * j;
			float p = c <= r && r < T ? expf(sc[i][j] * scale - L[i]) : 0.f;
			if (Ps) Ps[(ty + 16 * i) * FLD + tx + 16 * j] = p;
			dSs[(ty + 16 * i) * FLD + tx + 16 * j] = p * (dp[i][j] - Dr[i]);
		}
	}
}

// Forward: O and the rows' log-sum-exp (for backward). Grid (tiles,
// n*H), the tile with the most keys first.
__global__ void flash_fwd(float *o, float *lse, const float *qkv, int T, int C, int H, int hd, float scale) {
	DYN_SHARED(float, sm);
	float *Qs = sm, *Ks = sm + FTILE, *Vs = sm + 2 * FTILE, *Ps = sm + 3 * FTILE;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int nt = (T + FT - 1) / FT, qt = nt - 1 - blockIdx.x, s = blockIdx.y / H, h = blockIdx.y - s * H, q0 = qt * FT;
	long long ld = 3LL * C;
	const float *base = qkv + (long long)s * T * ld + h * hd;
	tile_load(Qs, base + q0 * ld, ld, T - q0, hd);
	float m[4], l[4], acc[4][4];
	FUNROLL for (int i = 0; i < 4; i++) {
		m[i] = FMASK, l[i] = 0;
		FUNROLL for (int u = 0; u < 4; u++) acc[i][u] = 0;
	}
	for (int kt = 0; kt <= qt; kt++) {
		int k0 = kt * FT;
		__syncthreads(); // the last tile is read
		tile_load(Ks, base + k0 * ld + C, ld, T - k0, hd);
		tile_load(Vs, base + k0 * ld + 2 * C, ld, T - k0, hd);
		__syncthreads();
		float sc[4][4];
		tile_abt(sc, Qs, Ks, tx, ty);
		FUNROLL for (int i = 0; i < 4; i++) {
			int r = q0 + ty + 16 * i;
			float mx = FMASK;
			FUNROLL for (int j = 0; j < 4; j++) {
				int c = k0 + tx + 16 * j;
				sc[i][j] = c <= r && c < T ? sc[i][j] * scale : FMASK;
				mx = fmaxf(mx, sc[i][j]);
			}
			float mn = fmaxf(m[i], row_max(mx)), corr = expf(m[i] - mn), sum = 0;
			FUNROLL for (int j = 0; j < 4; j++) {
				float p = sc[i][j] > FMASK ? expf(sc[i][j] - mn) : 0.f;
				Ps[(ty + 16 * i) * FLD + tx + 16 * j] = p;
				sum += p;
			}
			l[i] = l[i] * corr + row_sum(sum), m[i] = mn;
			FUNROLL for (int u = 0; u < 4; u++) acc[i][u] *= corr;
		}
		__syncthreads();
		tile_ab(acc, Ps, Vs, tx, ty);
	}
	FUNROLL for (int i = 0; i < 4; i++) {
		int r = q0 + ty + 16 * i;
		if (r >= T) continue;
		float *oi = o + ((long long)s * T + r) * C + h * hd;
		FUNROLL for (int u = 0; u < 4; u++)
			if (tx + 16 * u < hd) oi[tx + 16 * u] = acc[i][u] / l[i];
		if (tx == 0) lse[((long long)s * H + h) * T + r] = m[i] + logf(l[i]);
	}
}

// Backward, first: D_r = dO_r . O_r (the row sum of P dP), kept for
// flash_bwd_kv, and dQ = scale sum_k P (dP - D) K, with P recomputed from
// the log-sum-exp and dP = dO V^T. Grid as flash_fwd's.
__global__ void flash_bwd_q(float *dqkv, float *D, const float *qkv, const float *o, const float *dout,
                            const float *lse, int T, int C, int H, int hd, float scale) {
	DYN_SHARED(float, sm);
	float *Qs = sm, *dOs = sm + FTILE, *Ks = sm + 2 * FTILE, *Vs = sm + 3 * FTILE, *dSs = sm + 4 * FTILE;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int nt = (T + FT - 1) / FT, qt = nt - 1 - blockIdx.x, s = blockIdx.y / H, h = blockIdx.y - s * H, q0 = qt * FT;
	long long ld = 3LL * C, row0 = (long long)s * T;
	const float *base = qkv + row0 * ld + h * hd;
	const float *obase = o + row0 * C + h * hd;
	tile_load(Qs, base + q0 * ld, ld, T - q0, hd);
	tile_load(dOs, dout + row0 * C + h * hd + (long long)q0 * C, C, T - q0, hd);
	__syncthreads();
	float Dr[4], L[4], dq[4][4];
	FUNROLL for (int i = 0; i < 4; i++) {
		int r = q0 + ty + 16 * i;
		float a = 0;
		FUNROLL for (int u = 0; u < 4; u++)
			if (r < T && tx + 16 * u < hd) a += obase[(long long)r * C + tx + 16 * u] * dOs[(ty + 16 * i) * FLD + tx + 16 * u];
		long long li = ((long long)s * H + h) * T + r;
		Dr[i] = row_sum(a), L[i] = r < T ? lse[li] : 0;
		if (tx == 0 && r < T) D[li] = Dr[i];
		FUNROLL for (int u = 0; u < 4; u++) dq[i][u] = 0;
	}
	for (int kt = 0; kt <= qt; kt++) {
		int k0 = kt * FT;
		__syncthreads();
		tile_load(Ks, base + k0 * ld + C, ld, T - k0, hd);
		tile_load(Vs, base + k0 * ld + 2 * C, ld, T - k0, hd);
		__syncthreads();
		float sc[4][4], dp[4][4];
		tile_abt(sc, Qs, Ks, tx, ty);
		tile_abt(dp, dOs, Vs, tx, ty);
		p_ds(nullptr, dSs, sc, dp, L, Dr, q0, k0, T, scale, tx, ty);
		__syncthreads();
		tile_ab(dq, dSs, Ks, tx, ty);
	}
	FUNROLL for (int i = 0; i < 4; i++) {
		int r = q0 + ty + 16 * i;
		if (r >= T) continue;
		float *dqi = dqkv + (row0 + r) * ld + h * hd;
		FUNROLL for (int u = 0; u < 4; u++)
			if (tx + 16 * u < hd) dqi[tx + 16 * u] = dq[i][u] * scale;
	}
}

// Backward, second, a block per key tile: dK = scale sum_r P (dP - D) Q
// and dV = sum_r P dO over the query rows at or after the keys. Grid
// (tiles, n*H), the first keys (the most rows) first.
__global__ void flash_bwd_kv(float *dqkv, const float *D, const float *qkv, const float *dout, const float *lse,
                             int T, int C, int H, int hd, float scale) {
	DYN_SHARED(float, sm);
	float *Ks = sm, *Vs = sm + FTILE, *Qs = sm + 2 * FTILE, *dOs = sm + 3 * FTILE, *Ps = sm + 4 * FTILE,
	      *dSs = sm + 5 * FTILE;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int nt = (T + FT - 1) / FT, kt = blockIdx.x, s = blockIdx.y / H, h = blockIdx.y - s * H, k0 = kt * FT;
	long long ld = 3LL * C, row0 = (long long)s * T, lrow = ((long long)s * H + h) * T;
	const float *base = qkv + row0 * ld + h * hd;
	tile_load(Ks, base + k0 * ld + C, ld, T - k0, hd);
	tile_load(Vs, base + k0 * ld + 2 * C, ld, T - k0, hd);
	float dk[4][4], dv[4][4];
	FUNROLL for (int i = 0; i < 4; i++) FUNROLL for (int u = 0; u < 4; u++) dk[i][u] = 0, dv[i][u] = 0;
	for (int qt = kt; qt < nt; qt++) {
		int q0 = qt * FT;
		__syncthreads();
		tile_load(Qs, base + q0 * ld, ld, T - q0, hd);
		tile_load(dOs, dout + row0 * C + h * hd + (long long)q0 * C, C, T - q0, hd);
		__syncthreads();
		float sc[4][4], dp[4][4];
		tile_abt(sc, Qs, Ks, tx, ty);
		tile_abt(dp, dOs, Vs, tx, ty);
		float L[4], Dr[4];
		FUNROLL for (int i = 0; i < 4; i++) {
			int r = q0 + ty + 16 * i;
			L[i] = r < T ? lse[lrow + r] : 0, Dr[i] = r < T ? D[lrow + r] : 0;
		}
		p_ds(Ps, dSs, sc, dp, L, Dr, q0, k0, T, scale, tx, ty);
		__syncthreads();
		tile_atb(dv, Ps, dOs, tx, ty);
		tile_atb(dk, dSs, Qs, tx, ty);
	}
	FUNROLL for (int i = 0; i < 4; i++) {
		int c = k0 + ty + 16 * i;
		if (c >= T) continue;
		float *dkj = dqkv + (row0 + c) * ld + C + h * hd, *dvj = dkj + C;
		FUNROLL for (int u = 0; u < 4; u++)
			if (tx + 16 * u < hd) dkj[tx + 16 * u] = dk[i][u] * scale, dvj[tx + 16 * u] = dv[i][u];
	}
}

} // extern "C"

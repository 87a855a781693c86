package model

/*
#include "kernels.h"
*/
import "C"

// sgemm computes c = alpha * op(a) * op(b) + beta * c on row-major
// buffers, op(a) being m x k and op(b) k x n. It is the one place the
// model's matrix work goes through: OpenBLAS's cblas_sgemm once the
// openblas package has loaded it (a plain C loop before), cut across the
// rank's threads when big enough (par.c's k_sgemm). It panics on shapes
// the slices cannot hold, before C reads them.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g, ok := gemmArgs(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	if !ok {
		return
	}
	useBLAS()
	C.k_sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
}

// gemm is one product, as sgemm takes it.
type gemm struct {
	transA, transB bool
	m, n, k        int
	alpha          float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	beta           float32
	c              []float32
	ldc            int
}

// sgemmPair computes x and y, two products of which neither writes what
// the other reads, as one pass of the thread pool where their shapes
// allow it (par.c's k_sgemm_pair: the first's uneven end filled with the
// second's work), else one after the other; the bits are sgemm's either
// way.
func sgemmPair(x, y gemm) {
	gx, okx := gemmArgs(x.transA, x.transB, x.m, x.n, x.k, x.alpha, x.a, x.lda, x.b, x.ldb, x.beta, x.c, x.ldc)
	gy, oky := gemmArgs(y.transA, y.transB, y.m, y.n, y.k, y.alpha, y.a, y.lda, y.b, y.ldb, y.beta, y.c, y.ldc)
	if !okx || !oky {
		sgemm(x.transA, x.transB, x.m, x.n, x.k, x.alpha, x.a, x.lda, x.b, x.ldb, x.beta, x.c, x.ldc)
		sgemm(y.transA, y.transB, y.m, y.n, y.k, y.alpha, y.a, y.lda, y.b, y.ldb, y.beta, y.c, y.ldc)
		return
	}
	useBLAS()
	C.k_sgemm_pair(gx, gy)
}

// gemmArgs checks a product's shapes against its slices, panicking on
// one they cannot hold (before C reads them), and returns its arguments
// for C; false: nothing to compute (m or n is 0).
func gemmArgs(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (C.struct_k_gemm, bool) {
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	switch {
	case m < 0 || n < 0 || k < 0:
		panic("model: negative dimension")
	case lda < max(1, colsA) || ldb < max(1, colsB) || ldc < max(1, n):
		panic("model: bad leading dimension")
	case m == 0 || n == 0:
		return C.struct_k_gemm{}, false
	case (k > 0 && (len(a) < (rowsA-1)*lda+colsA || len(b) < (rowsB-1)*ldb+colsB)) || len(c) < (m-1)*ldc+n:
		panic("model: short slice")
	}
	var pa, pb *C.float
	if k > 0 {
		pa, pb = f32(a), f32(b)
	}
	z := func(v int) C.size_t { return C.size_t(v) }
	return C.struct_k_gemm{ta: cbool(transA), tb: cbool(transB), m: z(m), n: z(n), k: z(k), alpha: C.float(alpha),
		a: pa, lda: z(lda), b: pb, ldb: z(ldb), beta: C.float(beta), c: f32(c), ldc: z(ldc)}, true
}

// Sgemm is sgemm, for the benchmarks' yardstick.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

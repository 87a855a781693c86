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
	gemm{transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc}.run()
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

// run computes g (sgemm).
func (g gemm) run() {
	if p, ok := g.args(); ok {
		useBLAS()
		C.k_sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
	}
}

// sgemmPair computes x and y, two products of which neither writes what
// the other reads, as one pass of the thread pool where their shapes
// allow it (par.c's k_sgemm_pair: the first's uneven end filled with the
// second's work), else one after the other; the bits are sgemm's either
// way.
func sgemmPair(x, y gemm) {
	px, okx := x.args()
	py, oky := y.args()
	if !okx || !oky {
		x.run()
		y.run()
		return
	}
	useBLAS()
	C.k_sgemm_pair(px, py)
}

// args checks g's shapes against its slices, panicking on one they
// cannot hold (before C reads them), and returns its arguments for C;
// false: nothing to compute (m or n is 0).
func (g gemm) args() (C.struct_k_gemm, bool) {
	rowsA, colsA := g.m, g.k
	if g.transA {
		rowsA, colsA = g.k, g.m
	}
	rowsB, colsB := g.k, g.n
	if g.transB {
		rowsB, colsB = g.n, g.k
	}
	switch {
	case g.m < 0 || g.n < 0 || g.k < 0:
		panic("model: negative dimension")
	case g.lda < max(1, colsA) || g.ldb < max(1, colsB) || g.ldc < max(1, g.n):
		panic("model: bad leading dimension")
	case g.m == 0 || g.n == 0:
		return C.struct_k_gemm{}, false
	case (g.k > 0 && (len(g.a) < (rowsA-1)*g.lda+colsA || len(g.b) < (rowsB-1)*g.ldb+colsB)) || len(g.c) < (g.m-1)*g.ldc+g.n:
		panic("model: short slice")
	}
	var pa, pb *C.float
	if g.k > 0 {
		pa, pb = f32(g.a), f32(g.b)
	}
	z := func(v int) C.size_t { return C.size_t(v) }
	return C.struct_k_gemm{ta: cbool(g.transA), tb: cbool(g.transB), m: z(g.m), n: z(g.n), k: z(g.k), alpha: C.float(g.alpha),
		a: pa, lda: z(g.lda), b: pb, ldb: z(g.ldb), beta: C.float(g.beta), c: f32(g.c), ldc: z(g.ldc)}, true
}

// Sgemm is sgemm, for the benchmarks' yardstick.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

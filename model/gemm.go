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
		return
	case (k > 0 && (len(a) < (rowsA-1)*lda+colsA || len(b) < (rowsB-1)*ldb+colsB)) || len(c) < (m-1)*ldc+n:
		panic("model: short slice")
	}
	useBLAS()
	var pa, pb *C.float
	if k > 0 {
		pa, pb = f32(a), f32(b)
	}
	z := func(v int) C.size_t { return C.size_t(v) }
	C.k_sgemm(cbool(transA), cbool(transB), z(m), z(n), z(k), C.float(alpha), pa, z(lda), pb, z(ldb), C.float(beta), f32(c), z(ldc))
}

// Sgemm is sgemm, for the benchmarks' yardstick.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

package optim

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "adam.h"
*/
import "C"

import "unsafe"

func fp(v []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(v))) }

// apply updates one run of parameters, with decoupled decay as shrink or
// L2 decay as l2, and returns the sum of g-g (0 unless some g is not
// finite): the C loop of adam.c, for its tests (Step reaches it through
// update.c).
func (k adamStep) apply(params, grads, m, v []float32, shrink, l2 float32) float32 {
	n := len(params)
	if len(grads) < n || len(m) < n || len(v) < n {
		panic("optim: length mismatch")
	}
	if n == 0 {
		return 0
	}
	return float32(C.k_adam(fp(params), fp(grads), fp(m), fp(v), C.size_t(n), C.float(k.b1), C.float(k.b2), C.float(k.c1), C.float(k.c2),
		C.float(k.step), C.float(k.rbc2), C.float(k.eps), C.float(shrink), C.float(l2)))
}

// sumSquares is the sum of the squares of v in float64, by blocks fixed
// by its length, across the pool (update.c).
func sumSquares(v []float32) float64 {
	if len(v) == 0 {
		return 0
	}
	return float64(C.k_sumsq_pool(poolFn(), fp(v), C.size_t(len(v))))
}

// sumSquaresGroup sets the blocks of 64K values one pass of sumSquares
// sums (0: the default, 512), for its tests (cgo is not for _test files).
func sumSquaresGroup(g int) { C.k_sumsq_group(C.size_t(g)) }

// scale multiplies v by c in place, across the pool (update.c).
func scale(v []float32, c float32) {
	if len(v) > 0 {
		C.k_scale_pool(poolFn(), fp(v), C.size_t(len(v)), C.float(c))
	}
}

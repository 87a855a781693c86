package model

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "kernels.h"
*/
import "C"

import "unsafe"

// im2col and the element-wise passes of BatchNorm, ReLU and the residual
// join are C (kernels.c), because Go does not vectorise: with them
// ResNet-20's training step (BenchmarkStep, one thread) went from 250 to
// 194 ms, after chunked im2col had taken it from 314 to 250 (see
// docs/BENCHMARKS.md). Each wrapper checks the lengths the C code relies
// on.

// Zero sets every value of v to +0, across the rank's threads: what a
// step's gradient starts from (a GPT's is 120 MB, about 12 ms a step
// on one thread, which Go's clear left serial at any thread count).
func Zero(v []float32) {
	if len(v) > 0 {
		C.k_zero_par(f32(v), C.size_t(len(v)))
	}
}

// Scale multiplies every value of v by c in place, across the rank's
// threads (a loss gradient that micro-batches share: the GPT's logits'
// gradient is 51M values a step).
func Scale(v []float32, c float32) {
	if len(v) > 0 {
		C.k_scale_par(f32(v), C.size_t(len(v)), C.float(c))
	}
}

func f32(v []float32) *C.float  { return (*C.float)(unsafe.Pointer(unsafe.SliceData(v))) }
func f64(v []float64) *C.double { return (*C.double)(unsafe.Pointer(unsafe.SliceData(v))) }
func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
func need(n int, vs ...[]float32) {
	for _, v := range vs {
		if len(v) < n {
			panic("model: kernel buffer too short")
		}
	}
}

// The wrappers below run their pass across the rank's threads (par.c).

// bnStats adds per-channel sums of x and x*x to s[:C] and s[C:2C], in
// parts of per rows (0: par.c's own cut).
func bnStats(x []float32, rows, c int, s []float64, per int) {
	need(rows*c, x)
	if len(s) < 2*c {
		panic("model: kernel buffer too short")
	}
	C.k_bn_stats_par(f32(x), C.size_t(rows), C.size_t(c), f64(s), C.size_t(per))
}

// bnWide reports whether BatchNorm's sums take their AVX-512 versions
// (the CPU has it and they are allowed), first allowing them (on 1) or
// not (on 0) unless on is negative: for TestBNKernelsWideSameBits.
func bnWide(on int) bool { return C.k_bn_wide(C.int(on)) != 0 }

// affine sets y = (x-mean)*scale + beta per channel over rows of c
// values, then max(y, 0) with relu. (Subtracting the mean first, as
// PyTorch does, keeps a constant channel exactly 0.)
func affine(y, x, mean, scale, beta []float32, rows, c int, relu bool) {
	need(rows*c, y, x)
	need(c, mean, scale, beta)
	C.k_affine_par(f32(y), f32(x), f32(mean), f32(scale), f32(beta), C.size_t(rows), C.size_t(c), cbool(relu))
}

// join sets y = max((x-mean)*scale + beta + z', 0) per channel over rows
// of c values, z' being z, or (z-zmean)*zscale + zbeta when zmean is not
// nil.
func join(y, x, mean, scale, beta, z, zmean, zscale, zbeta []float32, rows, c int) {
	need(rows*c, y, x, z)
	need(c, mean, scale, beta)
	var zm, zs, zb *C.float
	if zmean != nil {
		need(c, zmean, zscale, zbeta)
		zm, zs, zb = f32(zmean), f32(zscale), f32(zbeta)
	}
	C.k_join_par(f32(y), f32(x), f32(mean), f32(scale), f32(beta), f32(z), zm, zs, zb, C.size_t(rows), C.size_t(c))
}

// bnGradSums adds per-channel sums of d and d*xhat to s[:C] and s[C:2C],
// d being dy and xhat (x-mean)*invstd, with the mean given as the float
// pair mhi + mlo. Under relu, d is dy where the forward's output
// (x-mhi)*scale + beta was positive, recomputed from x rather than read.
func bnGradSums(x, dy []float32, rows, c int, mhi, mlo, invstd, scale, beta []float32, relu bool, s []float64) {
	need(rows*c, x, dy)
	need(c, mhi, mlo, invstd)
	if relu {
		need(c, scale, beta)
	}
	if len(s) < 2*c {
		panic("model: kernel buffer too short")
	}
	C.k_bn_grad_sums_par(f32(x), f32(dy), C.size_t(rows), C.size_t(c), f32(mhi), f32(mlo), f32(invstd), f32(scale), f32(beta), cbool(relu), f64(s))
}

// bnDx sets dx = a*d + b*(x-mean) + k per channel, d being dy, or under
// relu dy where the forward's output (x-mean)*scale + beta was positive.
func bnDx(dx, dy, x []float32, rows, c int, mean, a, b, k, scale, beta []float32, relu bool) {
	need(rows*c, dx, dy, x)
	need(c, mean, a, b, k)
	if relu {
		need(c, scale, beta)
	}
	C.k_bn_dx_par(f32(dx), f32(dy), f32(x), C.size_t(rows), C.size_t(c), f32(mean), f32(a), f32(b), f32(k), f32(scale), f32(beta), cbool(relu))
}

// reluMask sets g = dy where y > 0, else 0, over n values.
func reluMask(g, dy, y []float32, n int) {
	need(n, g, dy, y)
	C.k_relu_mask_par(f32(g), f32(dy), f32(y), C.size_t(n))
}

package model

/*
#include "kernels.h"
*/
import "C"

import "errors"

// UseAMX turns the products' AMX path on or off (gemm_amx.c: float32
// products as six bf16 products on the tile unit, to float's accuracy,
// where OpenBLAS's FMA kernels are bounded by the FMA units' peak). It
// fails, leaving OpenBLAS in use, where the CPU has no AMX-BF16 or Linux
// will not give the process the tile state.
func UseAMX(on bool) error {
	switch C.k_amx_enable(cbool(on)) {
	case 1:
		return errors.New("this CPU has no AMX-BF16 (Intel Xeon from Sapphire Rapids on)")
	case 2:
		return errors.New("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: Linux 5.16 or later)")
	}
	return nil
}

// AMX reports whether the products use AMX (UseAMX).
func AMX() bool { return C.k_amx_on() != 0 }

// sgemmOne is the product in one call of k_sgemm1 (on the caller, no
// pool), where the attention's and the convolutions' parts make theirs:
// under UseAMX, k_sgemm_amx on this thread's own buffers.
func sgemmOne(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	z := func(v int) C.size_t { return C.size_t(v) }
	C.k_sgemm1(cbool(transA), cbool(transB), z(m), z(n), z(k), C.float(alpha), f32(a), z(lda), f32(b), z(ldb), C.float(beta), f32(c), z(ldc))
}

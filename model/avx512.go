package model

/*
#include "kernels.h"
*/
import "C"

import "errors"

// UseAVX512 turns the products' own AVX-512 path on or off
// (gemm_avx512.c: float32 products on the FMA units, packed and blocked
// for the GPT's shapes, where OpenBLAS's run at 0.7 to 0.85 of the
// units' peak). It fails, leaving OpenBLAS in use, where the CPU has no
// AVX-512F or the OS does not save its registers.
func UseAVX512(on bool) error {
	if C.k_avx512_enable(cbool(on)) != 0 {
		return errors.New("this CPU has no AVX-512F (or the OS does not save its registers)")
	}
	return nil
}

// AVX512 reports whether the products use the own AVX-512 path.
func AVX512() bool { return C.k_avx512_on() != 0 }

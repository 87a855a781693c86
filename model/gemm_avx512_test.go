package model

import (
	"math"
	"testing"
)

// TestAVX512Sgemm: the own AVX-512 products (gemm_avx512.c) against
// float64 sums (checkSgemmPath), with shapes off every tile and block
// edge (12 rows, 32 columns, 16 of k for B's transposes, k in one block
// up to 1,024 and equal blocks of at most 768 past it, 128 rows of A a
// block where packed, 1 MiB of B a block, 4 MiB chunks of B packed once
// where A is packed). Each element within γ(k+3) = (k+3)u/(1 -
// (k+3)u), u = 2^-24, of its terms' sizes: the textbook bound of a float
// dot product of k terms (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1), three more roundings for alpha and beta. A k block
// left out or a tile stored to the wrong place is off by whole terms and
// fails it. Then the pool's cuts and cuts of the rows and columns at
// any offset, each a call of its own, must give one call's bits. Where
// the CPU has no AVX-512F the test skips, saying so.
func TestAVX512Sgemm(t *testing.T) {
	if err := UseAVX512(true); err != nil {
		t.Skipf("AVX-512 path not testable here: %v", err)
	}
	defer UseAVX512(false)
	shapes := [][3]int{{1, 1, 1}, {13, 33, 5}, {12, 32, 16}, {25, 17, 65}, {100, 300, 384}, {40, 70, 1025}, {30, 40, 1600}, {530, 40, 70}, {40, 600, 50}, {31, 257, 385}, {1100, 45, 20}, {140, 1100, 1024}, {3, 4, 0}}
	gamma := func(k int) float64 {
		ku := float64(k+3) * 0x1p-24
		return ku / (1 - ku)
	}
	cuts := func(m, n int) [][4]int {
		r, q := m/3+1, n/2+1
		if r >= m || q >= n {
			return [][4]int{{0, m, 0, n}}
		}
		return [][4]int{{0, r, 0, q}, {0, r, q, n}, {r, m, 0, n}}
	}
	checkSgemmPath(t, shapes, gamma, cuts)
}

// TestAVX512SgemmNaN: beta 0 does not read C (NaN there goes), a NaN in
// A makes its row of C NaN and no other, and an infinity in B its column.
func TestAVX512SgemmNaN(t *testing.T) {
	if err := UseAVX512(true); err != nil {
		t.Skipf("AVX-512 path not testable here: %v", err)
	}
	defer UseAVX512(false)
	m, n, k := 14, 35, 20
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	for i := range a {
		a[i] = float32(i%7) - 3
	}
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	for i := range c {
		c[i] = float32(math.NaN())
	}
	sgemmOne(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	for i, v := range c {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("beta 0 over a C of NaNs: element %d is %v", i, v)
		}
	}
	a[5*k+3] = float32(math.NaN())
	b[2*n+30] = float32(math.Inf(1))
	sgemmOne(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	for i := range m {
		for j := range n {
			v := float64(c[i*n+j])
			if bad := math.IsNaN(v) || math.IsInf(v, 0); bad != (i == 5 || j == 30) {
				t.Fatalf("NaN in A's row 5, +Inf in B's column 30: C[%d][%d] = %v", i, j, v)
			}
		}
	}
}

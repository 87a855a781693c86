package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAMXSgemm: the AMX path's products against float64 sums, in the
// four transpositions, with shapes off every tile, block and chunk edge
// (gemm_amx.c: 16 and 32 rows, 32 of k, KC = 384, NC = 256, MB = 1024),
// leading dimensions wider than the rows, and alpha and beta other than
// 0 and 1. Each element's error must be within 2^-22 of the sum of the
// terms' sizes: a float32 product's accuracy. bf16 alone (8 bits) is off
// by ~2^-9 a term, and a split that dropped one of the six partial
// products above 2^-24 by ~2^-17: both fail it. Then the same products
// through the pool at 3 threads, rows cut by skewed speeds, must give the
// one-thread bits, and one call of k_sgemm1 on the caller (the
// attention's and convolutions' parts: k_sgemm_amx, the same chunks on
// the thread's own buffers) too. Where the CPU or Linux has no AMX the
// test skips, saying so.
func TestAMXSgemm(t *testing.T) {
	if err := UseAMX(true); err != nil {
		t.Skipf("AMX path not testable here: %v", err)
	}
	defer UseAMX(false)
	shapes := [][3]int{{1, 1, 1}, {17, 33, 5}, {33, 17, 65}, {100, 300, 384}, {64, 70, 800}, {1030, 40, 70}, {40, 600, 50}, {16, 16, 32}, {31, 257, 385}, {5500, 40, 70}, {40, 5500, 40}, {3, 4, 0}}
	checkSgemmPath(t, shapes, func(int) float64 { return 0x1p-22 }, nil)
}

// checkSgemmPath checks the products k_sgemm1 now makes (a --gemm path
// turned on by the caller) against float64 sums, in the four
// transpositions, with leading dimensions wider than the rows and alpha
// and beta other than 0 and 1: each element within rel(k) times the sum
// of its terms' sizes (and beta C's). Then the same products through the
// pool at 3 threads, rows cut by skewed speeds, and in one call of
// k_sgemm1 on the caller, must give the one-thread bits, and so must
// every cut in cuts (rows or columns, any offset) made as separate calls.
// Columns past n must not change.
func checkSgemmPath(t *testing.T, shapes [][3]int, rel func(k int) float64, cuts func(m, n int) [][4]int) {
	t.Helper()
	defer SetThreads(1)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			ra, ca := m, k
			if ta {
				ra, ca = k, m
			}
			rb, cb := k, n
			if tb {
				rb, cb = n, k
			}
			lda, ldb, ldc := ca+3, cb+1, n+5
			a, b := make([]float32, ra*lda), make([]float32, rb*ldb)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64() * 1e-3)
			}
			at, bt := opAt(a, ta, lda), opAt(b, tb, ldb)
			sum, size := make([]float64, m*n), make([]float64, m*n)
			for i := range m {
				for j := range n {
					for p := range k {
						v := at(i, p) * bt(p, j)
						sum[i*n+j] += v
						size[i*n+j] += math.Abs(v)
					}
				}
			}
			for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, -0.25}} {
				alpha, beta := ab[0], ab[1]
				name := fmt.Sprintf("%dx%dx%d ta=%v tb=%v alpha=%v beta=%v", m, n, k, ta, tb, alpha, beta)
				c0 := make([]float32, m*ldc)
				for i := range c0 {
					c0[i] = float32(rng.NormFloat64())
				}
				var one []float32
				for _, threads := range []int{1, 3, 0} {
					SetThreads(max(threads, 1))
					c := append([]float32(nil), c0...)
					run := func() { sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
					switch threads {
					case 0:
						run = func() { sgemmOne(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
						run()
					case 3:
						withGemmSpeeds([]float64{0.3, 1, 2}, run)
					default:
						run()
					}
					if one == nil {
						one = c
						for i := range m {
							for j := range n {
								want := float64(alpha)*sum[i*n+j] + float64(beta)*float64(c0[i*ldc+j])
								bound := rel(k) * (math.Abs(float64(alpha))*size[i*n+j] + math.Abs(float64(beta)*float64(c0[i*ldc+j])))
								got := float64(c[i*ldc+j])
								if !(math.Abs(got-want) <= bound) {
									t.Fatalf("%s: C[%d][%d] = %v, want %v (within %.3g)", name, i, j, got, want, bound)
								}
							}
							for j := n; j < ldc && i*ldc+j < len(c); j++ {
								if math.Float32bits(c[i*ldc+j]) != math.Float32bits(c0[i*ldc+j]) {
									t.Fatalf("%s: C[%d][%d], past the columns, changed", name, i, j)
								}
							}
						}
						continue
					}
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(one[i]) {
							t.Fatalf("%s: %d threads (0: one call of k_sgemm1): element %d is %v, %v at one thread", name, threads, i, c[i], one[i])
						}
					}
				}
				if cuts == nil || k == 0 {
					continue
				}
				// Each cut: rows [r0, r1) and columns [q0, q1) as a call of
				// their own on the caller.
				c := append([]float32(nil), c0...)
				for _, cut := range cuts(m, n) {
					r0, r1, q0, q1 := cut[0], cut[1], cut[2], cut[3]
					ao, bo := r0*lda, q0
					if ta {
						ao = r0
					}
					if tb {
						bo = q0 * ldb
					}
					sgemmOne(ta, tb, r1-r0, q1-q0, k, alpha, a[ao:], lda, b[bo:], ldb, beta, c[r0*ldc+q0:], ldc)
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(one[i]) {
						t.Fatalf("%s: cut into %v: element %d (row %d) is %v, %v in one call", name, cuts(m, n), i, i/ldc, c[i], one[i])
					}
				}
			}
		}
	}
}

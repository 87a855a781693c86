package openblas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"train/internal/near"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

type sgemmer interface {
	Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// implementations is the conformance suite's list: OpenBLAS (which must
// load: scripts/setup.sh installs it) and gonum's pure Go.
func implementations(t testing.TB) map[string]sgemmer {
	if _, err := Load("", 1); err != nil {
		t.Fatalf("%v (install libopenblas0 with scripts/setup.sh)", err)
	}
	return map[string]sgemmer{"openblas": Implementation{}, "gonum": gonum.Implementation{}}
}

// TestSgemmConformance checks Sgemm against a float64 reference for every
// transpose combination, alpha and beta, padded leading dimensions, and
// the shapes convolutions use (tall-skinny, short inner dimension).
func TestSgemmConformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, impl := range implementations(t) {
		for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 16, 33}, {64, 64, 64}, {1000, 16, 144}, {16, 144, 1000}, {500, 144, 16}, {0, 5, 5}, {5, 5, 0}} {
			m, n, k := sh[0], sh[1], sh[2]
			for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
					for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
						checkSgemm(t, name, impl, rng, tA, tB, m, n, k, ab[0], ab[1])
					}
				}
			}
		}
	}
}

func checkSgemm(t *testing.T, name string, impl sgemmer, rng *rand.Rand, tA, tB blas.Transpose, m, n, k int, alpha, beta float32) {
	t.Helper()
	rowsA, colsA := m, k
	if tA == blas.Trans {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB == blas.Trans {
		rowsB, colsB = n, k
	}
	// Leading dimensions padded by 3 to catch stride mistakes.
	lda, ldb, ldc := colsA+3, colsB+3, n+3
	fill := func(rows, ld int) []float32 {
		v := make([]float32, max(rows*ld, 1))
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	a, b, c := fill(rowsA, lda), fill(rowsB, ldb), fill(m, ldc)
	at := func(i, p int) float64 {
		if tA == blas.Trans {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if tB == blas.Trans {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	want := make([]float64, len(c))
	bound := make([]float64, len(c))
	for i := range m {
		for j := range n {
			var s, abs float64
			for p := range k {
				s += at(i, p) * bt(p, j)
				abs += math.Abs(at(i, p) * bt(p, j))
			}
			want[i*ldc+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
			bound[i*ldc+j] = math.Abs(float64(alpha))*abs + math.Abs(float64(beta*c[i*ldc+j]))
		}
	}
	orig := append([]float32(nil), c...)
	impl.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	for i := range m {
		for j := range ldc {
			idx := i*ldc + j
			if j >= n {
				if c[idx] != orig[idx] {
					t.Fatalf("%s %v%v %dx%dx%d: wrote into the padding at (%d,%d)", name, tA, tB, m, n, k, i, j)
				}
				continue
			}
			// float32 accumulation: error below k ulps of the sum of |terms|.
			if !near.Close(want[idx], float64(c[idx]), 0, 1e-6*float64(k+2)*bound[idx]+1e-30) {
				t.Fatalf("%s %v%v %dx%dx%d alpha %v beta %v: c[%d,%d] = %v, want %v", name, tA, tB, m, n, k, alpha, beta, i, j, c[idx], want[idx])
			}
		}
	}
}

// BenchmarkSgemm reports GFLOP/s (as MB/s: 1 "byte" = 1 FLOP / 1e3) of
// square SGEMMs on one thread, OpenBLAS against gonum.
func BenchmarkSgemm(b *testing.B) {
	for name, impl := range implementations(b) {
		for _, n := range []int{256, 1024} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				a := make([]float32, n*n)
				x := make([]float32, n*n)
				c := make([]float32, n*n)
				for i := range a {
					a[i], x[i] = 1e-3, 1e-3
				}
				b.SetBytes(int64(2 * n * n * n / 1000))
				for range b.N {
					impl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, x, n, 0, c, n)
				}
			})
		}
	}
}

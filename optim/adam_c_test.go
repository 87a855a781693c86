package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAdamKernel: the C update, four lanes at a time, gives the scalar
// float32 formula's bits exactly, over lengths that leave every tail, with
// decoupled and L2 decay; and a NaN or Inf gradient anywhere is reported.
func TestAdamKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	k := adamStep{b1: 0.9, b2: 0.95, c1: float32(1 - 0.9), c2: float32(1 - 0.95), step: 1e-3 / 0.1, rbc2: 1 / float32(math.Sqrt(0.05)), eps: 1e-8}
	for _, n := range []int{1, 3, 4, 5, 17, 1000} {
		for _, dec := range [][2]float32{{1 - 1e-4, 0}, {1, 0.01}} {
			p, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range n {
				p[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e-2)
				m[i], v[i] = float32(rng.NormFloat64()*1e-3), float32(rng.Float64()*1e-4)
			}
			wp, wm, wv := append([]float32{}, p...), append([]float32{}, m...), append([]float32{}, v...)
			for i := range n { // the formula, one float32 operation at a time
				gi := g[i]
				pi := wp[i] * dec[0]
				gi += dec[1] * pi
				mi := k.b1*wm[i] + k.c1*gi
				vi := k.b2*wv[i] + k.c2*gi*gi
				wm[i], wv[i] = mi, vi
				wp[i] = pi - k.step*mi/(float32(math.Sqrt(float64(vi)))*k.rbc2+k.eps)
			}
			if bad := k.apply(p, g, m, v, dec[0], dec[1]); bad != 0 {
				t.Errorf("n %d: finite gradients reported as not (%v)", n, bad)
			}
			for i := range n {
				if p[i] != wp[i] || m[i] != wm[i] || v[i] != wv[i] {
					t.Fatalf("n %d decay %v: element %d: p %v m %v v %v, want %v %v %v", n, dec, i, p[i], m[i], v[i], wp[i], wm[i], wv[i])
				}
			}
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
				g[n-1] = bad
				if k.apply(p, g, m, v, dec[0], dec[1]) == 0 {
					t.Errorf("n %d: gradient %v not reported", n, bad)
				}
				g[n-1] = 0
			}
		}
	}
}

package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSGDKernel: the C update, four lanes at a time, gives torch.optim.SGD's
// formula's float32 bits exactly (one operation at a time, as the scalar
// loop did), without momentum, with it and with Nesterov's, over lengths
// that leave every tail; and a NaN or Inf gradient anywhere is reported.
func TestSGDKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const lr, mu = float32(0.1), float32(0.9)
	for _, n := range []int{1, 3, 4, 5, 17, 1000} {
		for _, wd := range []float32{0, 5e-4} {
			for _, mode := range []string{"plain", "momentum", "nesterov"} {
				p, g, buf := make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range n {
					p[i], g[i], buf[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e-2), float32(rng.NormFloat64()*1e-2)
				}
				wp, wb := append([]float32{}, p...), append([]float32{}, buf...)
				for i := range n {
					gi := g[i]
					if mode == "plain" {
						wp[i] = wp[i] - lr*(gi+wd*wp[i])
						continue
					}
					gi = gi + wd*wp[i]
					b := mu*wb[i] + gi
					wb[i] = b
					if mode == "nesterov" {
						b = gi + mu*b
					}
					wp[i] = wp[i] - lr*b
				}
				s := &SGD{Momentum: mu, Nesterov: mode == "nesterov"}
				var sb []float32
				if mode != "plain" {
					sb = buf
				}
				if bad := s.apply(p, g, sb, lr, wd); bad != 0 {
					t.Errorf("n %d %s: finite gradients reported as not (%v)", n, mode, bad)
				}
				for i := range n {
					if p[i] != wp[i] || (sb != nil && buf[i] != wb[i]) {
						t.Fatalf("n %d %s wd %v: element %d: p %v buf %v, want %v %v", n, mode, wd, i, p[i], buf[i], wp[i], wb[i])
					}
				}
				for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
					g[n-1] = v
					if s.apply(p, g, sb, lr, wd) == 0 {
						t.Errorf("n %d %s: gradient %v not reported", n, mode, v)
					}
					g[n-1] = 0
				}
			}
		}
	}
}

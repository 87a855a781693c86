package optim

import "testing"

func BenchmarkAdamW30M(b *testing.B) {
	n := 30_000_000
	o, _ := New(Config{Name: "adamw", Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, n)
	p, g := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(i%13) * 1e-3
	}
	b.ResetTimer()
	for i := range b.N {
		o.Step(p, g, 1e-3, i+1)
	}
}

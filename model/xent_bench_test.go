package model

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkXent times the cross-entropy and its gradient over GPT-2's
// vocabulary for 1024 positions (batch 4 x context 256).
func BenchmarkXent(b *testing.B) {
	const rows, v = 1024, 50257
	logits := make([]float32, rows*v)
	labels := make([]int32, rows)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	for i := range labels {
		labels[i] = int32(rng.IntN(v))
	}
	d := make([]float32, rows*v)
	b.ResetTimer()
	for range b.N {
		xent(d, logits, labels, rows, v, 1.0/rows)
	}
}

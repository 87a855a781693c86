package model

import (
	"math/rand/v2"
	"testing"

	"train/internal/near"
)

// TestBNStats checks bnStats' per-channel sums of x and x*x against the
// definition, summed in Go in float64, on channel counts that take the
// 16-channel register path (16, 48) and the general one (5), an odd
// number of rows, and channels whose mean is far from 0 (where float
// sums would lose the variance). s starts non-zero: the sums are added.
func TestBNStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []int{16, 48, 5} {
		for _, rows := range []int{1, 7, 2049} {
			x := make([]float32, rows*c)
			for i := range x {
				x[i] = float32(100*float64(i%c) + rng.NormFloat64())
			}
			want, got := make([]float64, 2*c), make([]float64, 2*c)
			for i := range want {
				want[i], got[i] = float64(i), float64(i)
			}
			for r := range rows {
				for ch := range c {
					v := float64(x[r*c+ch])
					want[ch] += v
					want[c+ch] += v * v
				}
			}
			bnStats(x, rows, c, got)
			if err := near.Check(want, got, 1e-13); err != nil {
				t.Errorf("%d channels, %d rows: %v", c, rows, err)
			}
		}
	}
}

// BenchmarkBNKernels measures the BatchNorm passes of a ResNet-20 stage-1
// layer (batch 64, 28x28x16) in GB/s moved, against a plain copy.
func BenchmarkBNKernels(b *testing.B) {
	rows, c := 64*784, 16
	x, dy, y, dx := make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c)
	for i := range x {
		x[i], dy[i], y[i] = float32(i%7), float32(i%5)-2, float32(i%3)-1
	}
	m, v, a := make([]float32, c), make([]float32, c), make([]float32, c)
	s := make([]float64, 2*c)
	// bytes is what a pass reads and writes per value (4 per array).
	for _, k := range []struct {
		name  string
		bytes int
		pass  func()
	}{
		{"sums", 12, func() { bnGradSums(x, dy, y, rows, c, m, m, v, true, s) }},
		{"dx", 16, func() { bnDx(dx, dy, x, y, rows, c, m, a, v, m, true) }},
		{"stats", 4, func() { bnStats(x, rows, c, s) }},
		{"affine", 8, func() { affine(dx, x, m, v, a, rows, c, true) }},
		{"join", 12, func() { join(dx, x, m, v, a, y, nil, nil, nil, rows, c) }},
		{"mask", 12, func() { reluMask(dx, dy, y, rows*c) }},
		{"copy", 8, func() { copy(dx, x) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				k.pass()
			}
			b.ReportMetric(float64(b.N*rows*c*k.bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
